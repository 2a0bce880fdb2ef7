# Two commands: `make repro` (set up + run the pipeline) and `make test` (set up + run the tests).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
EXTRAS ?= cpu,dev
comma := ,
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml 2>/dev/null | sha256sum | cut -c1-12)-$(subst $(comma),_,$(EXTRAS))

export PATH := $(abspath $(BIN)):$(PATH)
export PYTHONUNBUFFERED := 1
# MLflow store next to the repo, absolute (a relative URI loses runs under `dvc exp run --temp`).
export MLFLOW_TRACKING_URI ?= sqlite:///$(CURDIR)/mlflow.db

.PHONY: help venv repro test ui lab clean-venv
help:
	@echo "make repro  - create/update .venv, install, run 'dvc repro' (embedded default)"
	@echo "make test   - create/update .venv, install, run the test suite"
	@echo "make ui     - MLflow UI on http://127.0.0.1:5000"
	@echo "make lab    - JupyterLab on http://127.0.0.1:8888"

venv: $(STAMP)
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	@rm -f $(VENV)/.installed-*
	@touch $@

repro: venv
	@git rev-parse --git-dir >/dev/null 2>&1 || (git init -q && git add -A && git -c user.name=polarcatalog -c user.email=polarcatalog@localhost commit -qm "initial snapshot")
	@test -d .dvc || $(BIN)/dvc init -q
	$(BIN)/dvc repro

test: venv
	$(BIN)/python -m pytest -q

ui: venv
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(BIN)/mlflow ui --backend-store-uri $(MLFLOW_TRACKING_URI) --host 127.0.0.1 --port 5000 --workers 1

lab: venv
	$(BIN)/jupyter lab --ip 127.0.0.1 --no-browser $(if $(filter 0,$(shell id -u)),--allow-root,)

clean-venv:
	rm -rf $(VENV)
