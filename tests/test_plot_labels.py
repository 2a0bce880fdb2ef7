"""`dvc plots diff` compares two revisions: a row keeps its name when only a value changes, and a curve's metric is the
solid line (DVC dashes a plot's fields in name order)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from polarcatalog.config import load_params
from polarcatalog.retrieval.retrieval_report import plot_name
from polarcatalog.stages import ablate
from polarcatalog.stages.retrieve import table5_configurations

ROOT = Path(__file__).resolve().parents[1]
ENCODERS = ["efficientnet_lite0@192", "efficientnet_lite1@192", "efficientnet_lite2@192"]


def _names(lam: float) -> list[str]:
    rp = load_params(ROOT / "params.yaml").retrieval.model_copy(update={"lam": lam})
    return [plot_name(cfg.model_dump(), rp.model_dump()) for _, cfg in table5_configurations(rp, ENCODERS)]


def test_a_rows_plot_name_does_not_carry_the_values_it_ran_with():
    old, new = _names(0.7), _names(0.5)
    assert old == new  # the same bar in both revisions
    assert len(set(old)) == len(old) and old.count("configured") == 1
    assert not any("λ" in n or "0.7" in n or "0.5" in n for n in old)
    assert "3-encoder ensemble · anchors + re-rank" in old and "configured · batch protocol" in old


def test_a_curves_metric_sorts_before_its_ci_columns_and_matches_dvc_yaml():
    plots = {name: spec for entry in yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"] for name, spec in entry.items()}
    for name, axis in (("lambda", ablate.AXES["lam"]), ("top_k", ablate.AXES["top_k"])):
        rows = [{axis.key: v, "split": "test", "queries": "all", "metric": axis.metric, "value": 0.3 + v,
                 "ci_low": 0.2 + v, "ci_high": 0.4 + v, "n": 10} for v in (1, 3)]
        curve = ablate.curve(pd.DataFrame(rows), axis)
        fields = list(plots[name]["y"].values())[0]
        assert list(curve.columns) == [axis.key, *fields]
        assert sorted(fields)[0] == f"test {axis.metric}"  # DVC's first (solid) stroke is the metric
        assert (curve[fields[1]] < curve[fields[0]]).all() and (curve[fields[0]] < curve[fields[2]]).all()
