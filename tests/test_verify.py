"""`polarcatalog verify`: a committed result that a rerun did not reproduce is named, with how many of its numbers
moved and by how much against their CI's width."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from polarcatalog.runner import verify

DVC_YAML = """stages:
  s:
    cmd: python make.py
    outs:
    - reports/r.json:
        cache: false
    - reports/p.csv:
        cache: false
    - reports/r.md:
        cache: false
"""


def _repo(tmp_path: Path) -> Path:
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports/r.json").write_text(json.dumps({"test": {"value": 0.30, "ci_low": 0.28, "ci_high": 0.32, "n": 100},
                                                         "edges": 3303}))
    (tmp_path / "reports/p.csv").write_text("lam,value,ci_low,ci_high\n0.5,0.31,0.29,0.33\n")
    (tmp_path / "reports/r.md").write_text("# Results\n")
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results")
    return tmp_path


def test_a_reproduced_run_says_so_and_a_drift_is_measured_against_the_ci(tmp_path):
    root = _repo(tmp_path)
    assert verify.committed_results(root) == ["reports/p.csv", "reports/r.json", "reports/r.md"]
    ok, text = verify.report(root)
    assert ok and text.startswith("reproduced: all 3 committed results")
    (root / "reports/r.json").write_text(json.dumps({"test": {"value": 0.301, "ci_low": 0.28, "ci_high": 0.32, "n": 100},
                                                     "edges": 3299}))
    (root / "reports/r.md").write_text("# Results (rerun)\n")
    (root / "reports/p.csv").unlink()
    ok, text = verify.report(root)
    assert not ok and "3 of 3 committed results differ" in text
    diffs = {d.path: d for d in verify.verify(root)}
    assert diffs["reports/p.csv"].what == "missing" and diffs["reports/r.md"].what == "text only"
    r = diffs["reports/r.json"]
    assert (r.what, r.numbers, r.largest) == ("changed", 2, 4.0)
    assert abs(r.largest_vs_ci - 0.001 / 0.04) < 1e-9  # only the interval's value has a CI: 0.001 of a 0.04-wide CI
    cli = str(Path(sys.executable).parent / "polarcatalog")
    proc = subprocess.run([cli, "verify"], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "reports/r.json: 2 number(s) differ" in proc.stdout


def test_a_count_beside_a_ci_is_not_read_against_it_and_added_keys_or_rows_are_named(tmp_path):
    """The plot files hold counts beside each value and its CI: a count that moved by 2 is not "100 CI widths";
    a key on one side only is counted, not an infinite difference; a table that gained a row says so."""
    root = _repo(tmp_path)
    (root / "reports/p.csv").write_text("lam,value,ci_low,ci_high,n\n0.5,0.31,0.29,0.33,10\n")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "n"], cwd=root, check=True)
    (root / "reports/p.csv").write_text("lam,value,ci_low,ci_high,n\n0.5,0.312,0.29,0.33,12\n")
    (root / "reports/r.json").write_text(json.dumps({"test": {"value": 0.30, "ci_low": 0.28, "ci_high": 0.32, "n": 100}}))
    diffs = {d.path: d for d in verify.verify(root)}
    p = diffs["reports/p.csv"]
    assert (p.numbers, p.largest) == (2, 2.0) and abs(p.largest_vs_ci - 0.002 / 0.04) < 1e-9
    r = diffs["reports/r.json"]
    assert (r.what, r.unmatched) == ("text only", 1) and "1 number(s) on one side only" in r.text()
    (root / "reports/p.csv").write_text("lam,value,ci_low,ci_high,n\n0.5,0.31,0.29,0.33,10\n0.7,0.3,0.28,0.32,10\n")
    assert {d.path: d.what for d in verify.verify(root)}["reports/p.csv"] == "reshaped"


def test_verify_runs_on_the_whole_checkout_from_a_subfolder_and_refuses_where_there_is_nothing(tmp_path):
    """From `reports/` it found no pipeline and printed "reproduced: all 0 committed results" (exit 0); outside git it
    ended in a traceback."""
    (tmp_path / "repo").mkdir()
    root = _repo(tmp_path / "repo")
    (root / "reports/r.md").write_text("# Results (rerun)\n")
    cli = str(Path(sys.executable).parent / "polarcatalog")
    proc = subprocess.run([cli, "verify"], cwd=root / "reports", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "1 of 3 committed results differ" in proc.stdout and "reports/r.md" in proc.stdout
    outside = tmp_path / "outside"
    outside.mkdir()
    proc = subprocess.run([cli, "verify"], cwd=outside, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not inside a git checkout" in proc.stderr and "Traceback" not in proc.stderr
    subprocess.run(["git", "init", "-q"], cwd=outside, check=True)
    ok, text = verify.report(outside)
    assert not ok and text.startswith("nothing to verify")


def test_a_difference_in_text_alone_says_every_number_is_the_commits(tmp_path):
    """After code changed and the results were not recommitted, verify said "r.md: text only" and no more: whether a
    number moved was left to the reader."""
    root = _repo(tmp_path)
    (root / "reports/r.md").write_text("# Results (at another code commit)\n")
    ok, text = verify.report(root)
    assert not ok and "every number is the commit's; only text differs" in text
    (root / "reports/r.json").write_text(json.dumps({"test": {"value": 0.31, "ci_low": 0.28, "ci_high": 0.32, "n": 100},
                                                     "edges": 3303}))
    assert "every number is the commit's" not in verify.report(root)[1]
