# Two commands: `make repro` (set up + run the pipeline) and `make test` (set up + run the tests).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
EXTRAS ?= cpu,dev
comma := ,
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt 2>/dev/null | sha256sum | cut -c1-12)-$(subst $(comma),_,$(EXTRAS))
UV_VERSION := 0.13.9

export PATH := $(abspath $(BIN)):$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: help venv system-deps repro select test test-fast ui lab team-db team-server clean-features clean-venv
help:
	@echo "make repro  - create/update .venv, install, run 'dvc repro' (embedded default)"
	@echo "make repro PROFILE=birds-offline | gpu-pokemon | gpu-birds  - a profile (params.<name>.yaml; README)"
	@echo "make select - the selection pipeline (selection/dvc.yaml): the configured values, chosen on dev"
	@echo "make test   - create/update .venv, install, run the test suite"
	@echo "make test-fast - the tests not marked slow (no real pipeline runs)"
	@echo "make ui     - MLflow UI on http://127.0.0.1:5000, opened on the runs list (the URL is printed)"
	@echo "make lab    - JupyterLab on http://127.0.0.1:8888"

PLOTS_TEMPLATE := .dvc/plots_template.html
venv: $(STAMP) $(PLOTS_TEMPLATE)
# `dvc plots show/diff` pages that work offline: vega inlined (polarcatalog_tools/plots_page.py; .dvc/config names it)
$(PLOTS_TEMPLATE): | $(STAMP)
	$(BIN)/polarcatalog-tools plots-template --dest $@

# uv installs from PyPI in parallel into the venv (pip would fetch one wheel at a time); constraints.txt pins every
# package the tested environment has, so a fresh machine gets the same versions, not the newest ones of the day.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"
	$(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode --constraint constraints.txt -e ".[$(EXTRAS)]"
	@# Every Python process of this venv puts the venv's bin/ first on PATH, as activation does: `.venv/bin/dvc exp run`
	@# from any shell then finds `polarcatalog` for the stage commands and `dvc` for `dvc queue start`'s workers.
	@printf '%s\n' 'import os, sys; b = os.path.join(sys.prefix, "bin"); p = os.environ.get("PATH", ""); sys.prefix != sys.base_prefix and b not in p.split(os.pathsep) and os.environ.__setitem__("PATH", b + os.pathsep + p)' \
	  > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/polarcatalog_venv_path.pth"
	@# This venv's JupyterLab saves the stage notebooks without outputs or kernel noise (polarcatalog_tools/lab.py).
	@mkdir -p $(VENV)/etc/jupyter
	@printf '%s\n' '# written by `make venv`: the stage notebooks are saved without outputs or kernel noise (polarcatalog_tools/lab.py)' \
	  'c.ContentsManager.pre_save_hook = "polarcatalog_tools.lab.pre_save"' > $(VENV)/etc/jupyter/jupyter_server_config.py
	@rm -f $(VENV)/.installed-*
	@touch $@

repro: venv
	@git rev-parse --git-dir >/dev/null 2>&1 || (git init -q && git add -A && git -c user.name=polarcatalog -c user.email=polarcatalog@localhost commit -qm "initial snapshot")
	@test -d .dvc || $(BIN)/dvc init -q
ifeq ($(strip $(PROFILE)),)
	$(BIN)/dvc repro
else
	$(BIN)/polarcatalog profile $(PROFILE)
endif

# The selection pipeline: the dev-only searches behind the configured values (after `make repro`: it reads the features).
select: venv
	$(BIN)/dvc repro selection/dvc.yaml

# OS packages some tests start for real: PostgreSQL (team mode) and a headless Chromium (the MLflow UI check).
# Installed with apt-get when missing (as root, or through sudo); elsewhere, install them the way your OS does.
SYSTEM_DEPS := postgresql chromium
system-deps:
	@missing=""; { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null; } || missing="postgresql"; \
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing="$$missing chromium"; \
	command -v qemu-x86_64 >/dev/null || missing="$$missing qemu-user"; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
	  echo "installing OS packages:$$missing"; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null; \
	fi

test: venv system-deps
	@# Two workers, one test file each at a time; the real pipeline builds start first and the tests that copy a built
	@# pipeline run last (tests/conftest.py orders them). The slowest tests are listed: keep the suite well under 10 minutes.
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=12 tests

# The developer's loop: every test that starts no notebook kernel, pipeline or browser (those are marked `slow`).
test-fast: venv
	$(BIN)/python -m pytest -q -n 2 -m "not slow" tests

ui: venv
	$(BIN)/polarcatalog ui --port 5000

lab: venv
	$(BIN)/jupyter lab --ip 127.0.0.1 --no-browser $(if $(filter 0,$(shell id -u)),--allow-root,)

# Team mode (README, "Team mode"): one tracking server on PostgreSQL with artifacts on a shared path.
TEAM_DIR ?= /srv/polarcatalog
TEAM_DB_PORT ?= 5432
TEAM_DB ?= postgresql://mlflow@127.0.0.1:$(TEAM_DB_PORT)/mlflow
TEAM_ARTIFACTS ?= $(TEAM_DIR)/mlflow-artifacts
TEAM_HOST ?= 127.0.0.1
TEAM_PORT ?= 5000
team-db: venv  # a local PostgreSQL cluster for the server (skip it with a managed PostgreSQL: set TEAM_DB)
	$(BIN)/polarcatalog-tools team-db --dir $(TEAM_DIR)/postgres --port $(TEAM_DB_PORT)

TEAM_PGPASS ?= $(TEAM_DIR)/postgres-secrets/mlflow.pgpass  # written by team-db (mode 0600); a managed database: your own
team-server: venv
	$(BIN)/polarcatalog-tools team-server --backend $(TEAM_DB) --artifacts $(TEAM_ARTIFACTS) --host $(TEAM_HOST) --port $(TEAM_PORT) \
	  $(if $(wildcard $(TEAM_PGPASS)),--pgpass $(TEAM_PGPASS),) $(if $(TEAM_ALLOWED_HOSTS),--allowed-hosts $(TEAM_ALLOWED_HOSTS),)

clean-features:  # the content-addressed feature cache: the next `dvc repro -f -s embed` recomputes every vector
	rm -rf data/cache/features

clean-venv:
	rm -rf $(VENV)
