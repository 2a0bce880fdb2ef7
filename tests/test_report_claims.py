"""The report's PolarMem verdicts follow the numbers: a claim reproduces only when its paired CI says so."""

from __future__ import annotations

import pandas as pd

from polarcatalog.stages.report import polarmem_claims


def _conf(acc_gain: tuple[float, float, float], conflict_gain: tuple[float, float, float]) -> pd.DataFrame:
    rows = []
    for memory in ("configured (critical completion)", "oracle (ground truth)"):
        for strength, acc in (("none", 0.30), ("soft (p=0.01)", 0.31), ("hard", 0.30 + acc_gain[0])):
            rows.append({"memory": memory, "strength": strength, "split": "test", "queries": "all", "metric": "target mRR@1",
                         "value": acc, "ci_low": acc - 0.03, "ci_high": acc + 0.03, "n": 500})
        for metric, (v, lo, hi) in (("Δ target mRR@1 vs none", acc_gain), ("Δ Conflict@3 (ground truth) vs none", conflict_gain),
                                    ("Δ Filter rate (ground truth) vs none", (0.1, 0.05, 0.15))):
            rows.append({"memory": memory, "strength": "hard", "split": "test", "queries": "all", "metric": metric,
                         "value": v, "ci_low": lo, "ci_high": hi, "n": 500})
    return pd.DataFrame(rows)


def _coverage(scores: dict[str, tuple[float, float, float]], recall: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"Proposal Recall@K": recall,
                         "score": {k: {"value": v, "ci_low": lo, "ci_high": hi} for k, (v, lo, hi) in scores.items()}})


def test_each_verdict_reads_its_paired_ci():
    mq = {"break_even": {"both": None}}
    flat = _coverage({"random_n:6": (0.10, 0.08, 0.12), "top_n:3": (0.16, 0.14, 0.18), "all": (0.16, 0.14, 0.19)},
                     {"random_n:6": 0.17, "top_n:3": 0.30, "all": 1.0})
    lines = polarmem_claims(_conf((-0.15, -0.18, -0.12), (-0.14, -0.16, -0.12)), flat, mq, 3)
    assert "**reproduces**" in lines[0]  # Conflict@3 down, filter rate up, both beyond noise
    assert "**does not reproduce**" in lines[1] and "soft (p=0.01) > none > hard" in lines[1]  # hard costs accuracy
    assert "**does not reproduce**" in lines[2] and "top_n:3" in lines[2]  # the random control does not carry the claim
    assert "at no point" in lines[3]
    rising = _coverage({"top_n:3": (0.10, 0.08, 0.12), "all": (0.20, 0.17, 0.23)}, {"top_n:3": 0.3, "all": 1.0})
    lines = polarmem_claims(_conf((0.05, 0.01, 0.09), (-0.01, -0.03, 0.01)), rising, {"break_even": {"both": {
        "t": 0.4, "not_has_recall": 0.95, "not_has_precision": 0.9, "has_precision": 0.86}}}, 3)
    assert "**does not reproduce**" in lines[0]  # the Conflict@3 change touches 0
    assert "**reproduces**" in lines[1] and "**reproduces**" in lines[2] and "t = 0.4" in lines[3]
