"""What people do with a built pipeline besides reading its reports, on a copy of the tiny pipeline
(tests/tiny_pipeline.py): the knowledge-graph experiment on a user's folder, queued DVC experiments from an unactivated
shell, `dvc plots diff` and the MLflow UI in a real headless Chromium, team mode against PostgreSQL and a tracking
server, and a DVC remote that carries every output to another checkout. (Apart from tests/test_pipeline.py so that
the two halves run on the two test workers.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient

from tests import tiny_pipeline as tiny
from tests.conftest import ROOT, run_ok

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def repo(tiny_pipeline, tmp_path_factory):
    return tiny.checkout(tiny_pipeline, tmp_path_factory.mktemp("pipeline_tools") / "tiny")


def test_cli_evaluate_runs_the_kg_experiment_on_a_users_folder(repo, tmp_path):
    root, env = repo
    cli = str(Path(sys.executable).parent / "polarcatalog")
    sprites = root / "data/raw/pokesprite/package/pokemon-gen8/shiny"
    q = tmp_path / "q"
    for slug in ("ivysaur", "charmeleon", "wartortle"):
        (q / slug).mkdir(parents=True)
        shutil.copy(sprites / f"{slug}.png", q / slug / "a.png")
    out = run_ok([cli, "evaluate", "--queries", str(q), "--kgret", "2", "--out", str(tmp_path / "o")], root, env).stdout
    assert "+KGret (B = 2)" in out and "budget-matched top-7 completeness" in out, out
    m = json.loads((tmp_path / "o/metrics.json").read_text())["kgret"]
    assert m["B"] == 2 and m["labelled"] == 3 and 0 <= m["completeness (labelled)"] <= 1
    # the lists are the evidence sets (k + B), and the @10 metrics say so rather than pass for a plain run's top 10
    assert m["evidence set"] == 7 and "(+KGret: each list is the evidence set, k + B = 7 species" in out
    pred = pd.read_csv(tmp_path / "o/predictions.csv")
    import ast

    for listed, added in zip(pred["predicted_names"].map(ast.literal_eval), pred["bridged_names"].map(ast.literal_eval)):
        assert len(listed) <= 5 + 2 and len(added) <= 2 and set(added) <= set(listed)
    printed = {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in out.splitlines() if line.startswith(tuple(pred["query_id"]))}
    for qid, added in zip(pred["query_id"], pred["bridged_names"].map(ast.literal_eval)):
        assert printed[qid].count(" [kg]") == len(added), printed[qid]  # the graph's species are marked, all shown
    # k + B above ten: each list still holds the whole evidence set its numbers were computed on (it was cut at 10)
    run_ok([cli, "evaluate", "--queries", str(q), "--kgret", "8", "--out", str(tmp_path / "b8")], root, env)
    wide = pd.read_csv(tmp_path / "b8/predictions.csv")
    for listed, added in zip(wide["predicted_names"].map(ast.literal_eval), wide["bridged_names"].map(ast.literal_eval)):
        assert len(listed) == 5 + len(added) and set(added) <= set(listed), (listed, added)
    # composed with a constraint: the same evidence sets, re-ordered by the polarized memory (hard: no conflict first)
    run_ok([cli, "evaluate", "--queries", str(q), "--kgret", "2", "--where", "a green Pokémon that is not a fire type",
         "--strength", "hard", "--out", str(tmp_path / "w")], root, env)
    both = pd.read_csv(tmp_path / "w/predictions.csv")
    for states, listed, before in zip(both["states"].map(json.loads), both["predicted_names"].map(ast.literal_eval),
                                      pred["predicted_names"].map(ast.literal_eval)):
        assert states == sorted(states, reverse=True) and sorted(listed) == sorted(before)


def _readme_command(prefix: str) -> list[str]:
    """The README's own line, so the test fails when the documented command stops fitting, not a copy of it."""
    import shlex

    line = next(line for line in (ROOT / "README.md").read_text().splitlines() if f".venv/bin/{prefix}" in line)
    return shlex.split(line, comments=True)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_queued_experiments_from_an_unactivated_shell_reach_the_project_store(repo):
    """Two experiments over the λ grid through `dvc exp run --queue` and `dvc queue start -j 2`, with the venv's dvc by
    path, the venv's bin/ not on PATH and no tracking variable: each runs only the stages that read `ablations.lam`
    (the λ sweep and the report; a `retrieval` change reruns six stages, and costs the suite a minute more), its
    MLflow runs land in the project's store tagged with its name, and `dvc exp show` has its headline metrics."""
    root, env = repo
    dvc = str(Path(sys.executable).parent / "dvc")
    bare = {k: v for k, v in env.items() if k != "MLFLOW_TRACKING_URI"}
    bare["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if Path(p) != Path(sys.executable).parent)
    # as on a fresh clone after `make repro`: results committed (a queued copy gets git's files and DVC's cache)
    run_ok(["git", "add", "-A"], root, env)
    run_ok(["git", "commit", "-qm", "results of the tiny run"], root, env)
    grids = {"lam-low": "[0.0,0.2,0.4]", "lam-high": "[0.6,0.8,1.0]"}
    for name, grid in grids.items():
        run_ok([dvc, "exp", "run", "--queue", "-S", f"ablations.lam={grid}", "--name", name], root, bare)
    run_ok([dvc, "queue", "start", "-j", "2"], root, bare)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        status = run_ok([dvc, "queue", "status"], root, bare).stdout
        if not any(word in status for word in ("Queued", "Running")):
            break
        time.sleep(5)
    assert "Success" in status and "Failed" not in status, status
    shown = json.loads(run_ok([dvc, "exp", "show", "--json"], root, bare).stdout)
    names = {e["name"] for rev in shown for e in rev.get("experiments") or []}
    assert set(grids) <= names, shown
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])  # the store at the repo root, which nothing passed to DVC
    runs = mlflow.search_runs(experiment_names=["polarcatalog"], output_format="list",
                              filter_string="tags.dvc_experiment LIKE 'lam-%'")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    for name in grids:
        stages = sorted(r.data.tags["dvc_stage"] for r in parents if r.data.tags["dvc_experiment"] == name)
        assert stages == ["ablate@lam", "report"], (name, stages)  # nothing upstream of the sweep
    sweeps = {r.data.tags["dvc_experiment"]: r for r in parents if r.data.tags["dvc_stage"] == "ablate@lam"}
    assert yaml.safe_load(sweeps["lam-low"].data.params["ablations.lam"]) == [0.0, 0.2, 0.4]
    chosen = {name: r.data.metrics for name, r in sweeps.items()}
    assert all(m for m in chosen.values()), chosen
    show = run_ok([dvc, "exp", "show", "--no-pager", "--only-changed", "--md"], root, {**bare, "COLUMNS": "250"}).stdout
    assert "lam-low" in show and "chosen lam (dev)" in show and "ablations.lam" in show
    narrow = _readme_command("dvc exp show --only-changed --drop")
    shown = run_ok([dvc, *narrow[1:], "--no-pager"], root, {**bare, "COLUMNS": "160"}).stdout
    lines = shown.splitlines()
    assert "…" not in shown and all(len(line) <= 160 for line in lines), shown
    header = next(line for line in lines if "Experiment" in line).split()
    assert "ablations.lam" in header and header.count("mRR@1") == 3, shown  # the headline, its lo and hi
    assert all(any(name in line for line in lines) for name in grids), shown
    table = run_ok([str(Path(sys.executable).parent / "polarcatalog"), "experiments"], root, bare).stdout.splitlines()
    assert all(len(line) <= 160 for line in table) and "test mRR@1 [95% CI]" in table[0]
    for name, grid in grids.items():
        (row,) = [line for line in table if line.strip().startswith(name)]
        assert f"ablations.lam={grid.replace(',', ', ')}" in row and "[" in row.split(name)[1], row


def test_dvc_plots_diff_renders_without_network(repo, tmp_path):
    """`dvc plots diff` of the committed results against this run, rendered in Chromium with every request outside
    the page refused: the page (`.dvc/config` names the template `make venv` writes) carries its own vega."""
    from playwright.sync_api import sync_playwright

    root, env = repo
    tools = str(Path(sys.executable).parent / "polarcatalog-tools")
    run_ok([tools, "plots-template", "--cache", str(ROOT / "data/cache/npm")], root, env)
    run_ok(["dvc", "plots", "diff", "HEAD", "-o", str(tmp_path / "plots")], root, env)
    page_file = tmp_path / "plots" / "index.html"
    assert "cdn.jsdelivr" not in page_file.read_text()
    plots = yaml.safe_load((root / "dvc.yaml").read_text())["plots"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or shutil.which("chromium-browser"),
                                    args=["--no-sandbox"])
        page = browser.new_page()
        requested = []
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                   else (requested.append(route.request.url), route.abort()))
        page.goto(page_file.as_uri())
        drawn = page.locator(".vega-embed canvas, .vega-embed svg.marks")
        drawn.nth(len(plots) - 1).wait_for(timeout=60_000)
        assert drawn.count() == len(plots) and not requested
        browser.close()


def test_mlflow_ui_lands_on_the_runs_and_shows_the_executed_notebook_as_html(repo, tmp_path):
    """`make ui` (`polarcatalog ui`) in a real headless Chromium: the URL it prints opens the runs list, and a stage
    run's executed notebook renders as a page in MLflow's artifact view."""
    import re
    import signal

    from playwright.sync_api import sync_playwright

    from polarcatalog_tools import team

    root, env = repo
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "no Chromium: `make system-deps` installs it (Debian package chromium)"
    port, log = _free_port(), tmp_path / "ui.log"
    with log.open("w") as err:
        server = subprocess.Popen([str(Path(sys.executable).parent / "polarcatalog"), "ui", "--port", str(port)], cwd=root,
                                  env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        team.wait_for_server(f"http://127.0.0.1:{port}", process=server)
        url = re.search(r"http://\S+/runs", log.read_text()).group(0)
        client = MlflowClient(env["MLFLOW_TRACKING_URI"])
        experiment = client.get_experiment_by_name("polarcatalog").experiment_id
        assert url == f"http://127.0.0.1:{port}/#/experiments/{experiment}/runs"
        retrieve = client.search_runs([experiment], "attributes.run_name = 'retrieve'")[0]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url)
            page.get_by_text("Training runs").first.wait_for(timeout=60_000)
            every = client.search_runs([experiment], max_results=1000)
            page.get_by_text("matching runs").first.wait_for(timeout=30_000)  # the list has loaded (it pages by 100)
            newest = max(every, key=lambda r: r.info.start_time).info.run_name
            page.get_by_text(newest, exact=True).first.wait_for(timeout=30_000)
            page.goto(f"http://127.0.0.1:{port}/#/experiments/{experiment}/runs/{retrieve.info.run_id}"
                      "/artifacts/notebook/04_retrieve.html")
            notebook = page.frame_locator("iframe.mlflow-html-iframe")
            notebook.get_by_text("the VR-RAG comparison table").first.wait_for(timeout=60_000)
            browser.close()
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def test_team_mode_a_stage_runs_against_postgresql_and_a_tracking_server(repo, tmp_path):
    """A real PostgreSQL (the OS's) behind a real `mlflow server` with proxied artifacts on a shared path, as
    `make team-db` and `make team-server` start them; one stage reruns against it from the project checkout. Then
    the database stops under a running stage."""
    import signal
    import tempfile

    from polarcatalog_tools import team

    root, env = repo
    data = Path(tempfile.mkdtemp(prefix="polarcatalog-pg-"))  # outside root's 0700 pytest folder: postgres must reach it
    artifacts, port = tmp_path / "shared-artifacts", _free_port()
    backend = team.start_postgres(data, _free_port())
    url = f"http://127.0.0.1:{port}"
    mlflow_bin = str(Path(sys.executable).parent / "mlflow")
    pgpass = {"PGPASSFILE": str(team.pgpass_file(data))}  # the password team-db wrote, never on a command line
    server = subprocess.Popen(team.mlflow_server_command(mlflow_bin, backend, artifacts, port=port), start_new_session=True,
                              env={**os.environ, **team.SERVER_ENV, **pgpass}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        team.wait_for_server(url, process=server)
        run_ok(["dvc", "repro", "--force", "--single-item", "ablate@top_k"], root, {**env, "MLFLOW_TRACKING_URI": url})
        client = MlflowClient(url)
        runs = client.search_runs([client.get_experiment_by_name("polarcatalog").experiment_id])
        (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
        assert parent.info.run_name == "ablate@top_k" and parent.info.status == "FINISHED"
        assert parent.data.tags["run_kind"] == "pipeline" and parent.data.params["retrieval.k"] == "5"
        top_k = yaml.safe_load((root / "params.yaml").read_text())["ablations"]["top_k"]
        assert sorted(int(c.data.params["retrieval.k"]) for c in children) == sorted(top_k)
        logged = {a.path for a in client.list_artifacts(parent.info.run_id, "notebook")}
        assert logged == {"notebook/05_ablate_top_k.html", "notebook/05_ablate_top_k.ipynb"}
        # proxied: the files sit on the server's shared path, the rows in PostgreSQL
        assert {p.name for p in artifacts.rglob("05_ablate_top_k.*")} == {"05_ablate_top_k.html", "05_ablate_top_k.ipynb"}
        count = subprocess.run([team.postgres_bin("psql"), backend, "-tAc", "SELECT count(*) FROM runs"],
                               capture_output=True, text=True, check=True, env={**os.environ, **pgpass}).stdout.strip()
        assert int(count) == 1 + len(top_k)

        # the database goes down mid-stage, the server stays up (and answers 503): the stage must stop within a
        # minute or so and say so, where MLflow's default retries keep it silent for about ten minutes (the companion
        # logs in the background: the failure reaches the stage at its next wait, `finish()` at the latest)
        code = ("from polarcatalog.config import load_params\nfrom polarcatalog.runner.tracking import start_stage\n"
                "run = start_stage('05_ablate.ipynb', load_params('params.yaml'), item='top_k')\n"
                "print('started', flush=True)\ninput()\nrun.log_metrics({'answer': 1.0})\nrun.finish()\n")
        stage_env = {k: v for k, v in env.items() if not k.startswith("MLFLOW_HTTP_")} | {"MLFLOW_TRACKING_URI": url}
        stage = subprocess.Popen([sys.executable, "-c", code], cwd=root, env=stage_env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert stage.stdout.readline().strip() == "started"
        team.stop_postgres(data)
        try:
            _, err = stage.communicate("\n", timeout=110)
        except subprocess.TimeoutExpired:
            stage.kill()
            raise AssertionError("a stage kept waiting on a tracking server whose database is down") from None
        # MLflow's own error names the request and the server's answers ("too many 503 error responses")
        assert stage.returncode != 0 and f"tracking: {url}" in err and "error responses" in err, err[-2000:]
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:  # its workers may still be waiting on the stopped database
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=60)
        team.stop_postgres(data)
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(team.secrets_dir(data), ignore_errors=True)


def test_a_dvc_remote_carries_data_features_and_figures_to_another_checkout(repo, tmp_path):
    """Team mode's data side: `dvc push` to a remote (a shared folder here), then a second checkout of the same
    commit and lock `dvc pull`s every output and has nothing to recompute."""
    root, env = repo
    remote, other = tmp_path / "remote", tmp_path / "other"
    run_ok(["dvc", "remote", "add", "--local", "--default", "team", str(remote)], root, env)
    try:
        run_ok(["dvc", "push"], root, env)
    finally:
        run_ok(["dvc", "remote", "remove", "--local", "team"], root, env)
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True).stdout
    for rel in [*filter(None, tracked.split("\0")), "dvc.lock"]:
        (other / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, other / rel)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "clone"],
                ["dvc", "remote", "add", "--local", "--default", "team", str(remote)], ["dvc", "pull"]):
        run_ok(cmd, other, env)
    for rel in ("data/features/manifest.json", "data/processed/graph/scores.npz", "reports/figures/retrieval_table.png"):
        assert (other / rel).read_bytes() == (root / rel).read_bytes(), rel
    assert "up to date" in run_ok(["dvc", "status", "dvc.yaml"], other, env).stdout
