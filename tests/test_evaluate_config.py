"""What `polarcatalog evaluate` says it used: each shown value with its source, including a params.yaml value that
differs from the commit (what a `dvc exp run` leaves in the workspace); and its interval over the folder's species."""

import shutil
import subprocess
from pathlib import Path

import numpy as np

from polarcatalog.config import load_params
from polarcatalog import folder_eval
from polarcatalog.folder_eval import configuration, configuration_text, folder_intervals

ROOT = Path(__file__).resolve().parents[1]


def test_configuration_names_the_source_of_each_value(tmp_path):
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "empty")
    git("add", "params.yaml")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "params")
    committed = load_params(tmp_path / "params.yaml").retrieval.lam
    new = 0.25 if committed != 0.25 else 0.35
    text = (tmp_path / "params.yaml").read_text().replace(f"  lam: {committed}", f"  lam: {new}", 1)
    assert text != (tmp_path / "params.yaml").read_text()
    (tmp_path / "params.yaml").write_text(text)  # an experiment's leftover value
    overrides = {"retrieval.k": 3}
    params = load_params(tmp_path / "params.yaml", overrides)
    config = configuration(params, tmp_path / "params.yaml", overrides)
    assert config["retrieval.lam"] == {"value": new, "source": f"params.yaml, uncommitted (HEAD has {committed!r})"}
    assert config["retrieval.k"] == {"value": 3, "source": "--set"}
    assert config["retrieval.reranker"]["source"] == "params.yaml"
    line = configuration_text(config)
    assert f"retrieval.lam = {new} (params.yaml, uncommitted" in line and "retrieval.k = 3 (--set)" in line
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(tmp_path / "params.yaml", outside / "params.yaml")
    assert configuration(params, outside / "params.yaml", {})["retrieval.lam"]["source"] == "params.yaml"  # no git: no claim


def test_folder_interval_is_a_species_bootstrap_around_the_point_value():
    params = load_params(ROOT / "params.yaml")
    ranks = np.array([1, 1, 2, 5, 11, 1])
    gold = np.array([1, 1, 2, 3, 4, 5])  # species 1's two images move together
    ci = folder_intervals(ranks, gold, params)
    assert ci["species"] == 5 and ci["level"] == params.eval.confidence
    m = ci["metrics"]
    assert m["mRR@1"]["value"] == round(3 / 6, 6) and m["R@10"]["value"] == round(5 / 6, 6)
    assert m["mRR@10"]["value"] == round((1 + 1 + 0.5 + 0.2 + 0 + 1) / 6, 6)
    assert all(r["ci_low"] <= r["value"] <= r["ci_high"] and r["ci_low"] < r["ci_high"] for r in m.values())
    same = folder_intervals(np.ones(4), np.arange(4), params)["metrics"]["mRR@1"]
    assert same["ci_low"] == same["ci_high"] == 1.0  # every query right: no spread to resample


def test_a_set_key_of_a_switched_off_part_is_marked_as_changing_nothing():
    """`--set retrieval.ivf_nlist=64` under `index: flat` (and the like) changed no score, yet the line marked it
    `(--set)` like a value that did: a sweep over it read as a null result of the knob."""
    params = load_params(ROOT / "params.yaml")
    assert params.retrieval.index == "flat" and params.retrieval.chunks == "anchors"  # the committed configuration
    overrides = {"retrieval.ivf_nlist": 64, "retrieval.bridge_alpha": 10.0, "retrieval.k": 3}
    p = load_params(ROOT / "params.yaml", overrides)
    line = configuration_text(configuration(p, ROOT / "params.yaml", overrides))
    assert "retrieval.ivf_nlist = 64 (--set; changes nothing here: retrieval.index is flat)" in line
    assert "retrieval.bridge_alpha = 10.0 (--set; changes nothing here: retrieval.chunks is anchors)" in line
    assert "retrieval.k = 3 (--set)" in line
    ivf = {**overrides, "retrieval.index": "ivf", "retrieval.reranker": None, "retrieval.lam": 0.2}
    config = configuration(load_params(ROOT / "params.yaml", ivf), ROOT / "params.yaml", ivf)
    assert config["retrieval.ivf_nlist"]["source"] == "--set"  # an IVF index reads it
    assert config["retrieval.lam"]["source"] == "--set; changes nothing here: retrieval.reranker is null"
    # a fifth attack round: predictions byte-identical, yet marked as set
    more = {"retrieval.seed": 7, "retrieval.query_centre": "catalog", "retrieval.hubness": "csls",
            "retrieval.hubness_k": 50, "encoders.anchor_scale_ratio": 3.0}
    config = configuration(load_params(ROOT / "params.yaml", more), ROOT / "params.yaml", more, anchor_scale="catalog")
    assert config["retrieval.seed"]["source"].endswith("retrieval.index is flat and retrieval.chunks is anchors")
    assert config["retrieval.hubness_k"]["source"].endswith("CSLS needs query statistics, and retrieval.query_centre "
                                                            "is catalog")
    assert config["retrieval.hubness"]["source"] == config["retrieval.hubness_k"]["source"]
    assert config["encoders.anchor_scale_ratio"]["source"] == "--set; changes nothing here: --anchor-scale is catalog, not auto"
    assert config["retrieval.query_centre"]["source"] == "--set"


def test_evaluates_default_output_folder_is_ignored_by_git():
    """`reports/evaluate/<folder>/` (a user's predictions, metrics and quarantined copies) showed as untracked in
    `git status` after the first `evaluate`."""
    from polarcatalog.cli.main import evaluate  # noqa: F401  (the default below is the option's)

    for path in ("reports/evaluate/my_folder/metrics.json", "reports/evaluate/my_folder/quarantine/a.png"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, path
    assert "reports\" / \"evaluate\"" in (ROOT / "src/polarcatalog/cli/main.py").read_text()


def test_a_warning_prints_as_one_line_like_the_commands_other_messages(tmp_path):
    """`evaluate --set retrieval.index=ivf` printed Python's warning: the library's file path, line number and the
    source line, before the configuration line."""
    import sys

    code = ("import sys, warnings\nsys.argv = ['polarcatalog', 'version']\nfrom polarcatalog import cli\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            "warnings.warn('retrieval.ivf_nlist = 256: 500 vectors train at most 12 IVF lists')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr == "warning: retrieval.ivf_nlist = 256: 500 vectors train at most 12 IVF lists\n"


def test_ui_with_a_missing_or_invalid_params_file_says_so_in_one_line(tmp_path):
    """`polarcatalog ui --params nonexist.yaml` ended in a rich traceback (exit 1); every other command prints one
    `error:` line and exits 2."""
    from typer.testing import CliRunner

    from polarcatalog.cli.main import app

    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "params.yaml").read_text().replace("  lam: ", "  lam: 7 #", 1))
    for params, said in ((tmp_path / "nonexist.yaml", "params file not found"), (bad, "retrieval.lam")):
        res = CliRunner().invoke(app, ["ui", "--params", str(params)])
        assert res.exit_code == 2 and said in res.output and "Traceback" not in res.output, res.output


def test_a_set_key_whose_value_comes_from_a_stage_output_is_refused_not_shown_as_applied():
    """`--set graph.probe_dim=16` with --where and `--set kg.bridge=5` with --kgret were marked "(--set)" while the
    predictions were byte-identical: the memory's scores and the triples are the graph and kg stages' outputs."""
    for key in ("graph.probe_dim", "graph.probe_c", "graph.templates", "graph.verifier"):
        assert "graph stage's" in folder_eval.unread_override(key, constraint=True, kg=False)
    assert "--kgret" in folder_eval.unread_override("kg.bridge", constraint=False, kg=True)
    assert "kg stage's" in folder_eval.unread_override("kg.llm_model", constraint=False, kg=True)
    for key in ("graph.kappa", "graph.constraint", "graph.proposer"):  # read: the memory is rebuilt from the scores
        assert folder_eval.unread_override(key, constraint=True, kg=False) is None
    assert folder_eval.unread_override("kg.hops", constraint=False, kg=True) is None


def test_a_repeated_set_key_is_refused_not_decided_by_option_order(tmp_path):
    """`--set retrieval.lam=0.3 --set retrieval.lam=0.9` scored with 0.9 and said nothing: the last one won. A key
    inside a section also set whole, and --strength beside --set graph.constraint, are the same clash."""
    from typer.testing import CliRunner

    from polarcatalog.cli.main import app
    from polarcatalog.config import ParamsError, parse_overrides

    assert parse_overrides(["retrieval.lam=0.3", "retrieval.k=10"]) == {"retrieval.lam": 0.3, "retrieval.k": 10}
    for sets, said in ((["retrieval.lam=0.3", "retrieval.lam=0.9"], "--set retrieval.lam is set twice"),
                       (["retrieval.lam=0.3", " retrieval.lam =0.3"], "--set retrieval.lam is set twice"),
                       (["retrieval={lam: 0.3}", "retrieval.lam=0.9"], "--set retrieval.lam overlaps --set retrieval")):
        try:
            parse_overrides(sets)
        except ParamsError as err:
            assert said in str(err), err
        else:
            raise AssertionError(f"{sets} accepted")
    empty = tmp_path / "q"
    empty.mkdir()
    for args, said in ((["--set", "retrieval.lam=0.3", "--set", "retrieval.lam=0.9"], "set twice"),
                       (["--where", "yellow", "--strength", "hard", "--set", "graph.constraint=none"], "give one")):
        res = CliRunner().invoke(app, ["evaluate", "--queries", str(empty), "--params", str(ROOT / "params.yaml"), *args])
        assert res.exit_code == 2 and said in res.output and "Traceback" not in res.output, res.output


def test_the_code_commit_names_uncommitted_changes_to_the_package(tmp_path):
    """Two runs of one configuration on different code are different experiments: the commit is recorded, with a
    mark when src/ departs from it."""
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, capture_output=True, text=True, check=True)  # noqa: E731
    assert folder_eval.code_state(tmp_path) == "unknown (not a git checkout)"
    git("init", "-q")
    (tmp_path / "src").mkdir()
    (tmp_path / "src/m.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    head = git("rev-parse", "HEAD").stdout.strip()
    assert folder_eval.code_state(tmp_path) == head
    (tmp_path / "notes.txt").write_text("not code")
    assert folder_eval.code_state(tmp_path) == head
    (tmp_path / "src/m.py").write_text("x = 2\n")
    assert folder_eval.code_state(tmp_path) == head + " + uncommitted changes to src/"
