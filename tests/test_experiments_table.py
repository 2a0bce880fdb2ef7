"""`polarcatalog experiments`: the experiments, what each changed, and the test headline, within 160 columns."""

from __future__ import annotations

from polarcatalog.runner import experiments


def _data(lam: float, model: str | None, mrr: float) -> dict:
    params = {"retrieval": {"lam": lam, "ensemble": ["a", "b"], "chunks": "anchors"}, "reader": {"model": model},
              "encoders": {"flips": lam == 0.7}}
    metrics = {"reports/metrics/retrieval.json": {"data": {"test mRR@1": mrr, "test mRR@1 lo": mrr - 0.03, "test mRR@1 hi": mrr + 0.03}}}
    if model:
        metrics["reports/metrics/ablate_top_k.json"] = {"data": {"test reader accuracy (5)": 0.5, "test reader accuracy (5) lo": 0.4,
                                                                 "test reader accuracy (5) hi": 0.6, "test reader accuracy (1)": 0.3}}
    return {"params": {"params.yaml": {"data": params}}, "metrics": metrics}


def test_the_table_names_each_experiment_its_changes_and_its_headline_within_the_width():
    shown = [{"rev": "workspace", "name": None, "data": _data(0.7, None, 0.3165), "experiments": None},
             {"rev": "7ad3dd066c3a93fed5e57e7b54d8353d66b17a58", "name": "main", "data": _data(0.7, None, 0.3165),
              "experiments": [{"name": "lam-low", "revs": [{"rev": "1" * 40, "name": "lam-low", "data": _data(0.5, None, 0.30)}]},
                              {"name": "gpu-pokemon", "revs": [{"rev": "2" * 40, "name": "gpu-pokemon",
                                                                "data": _data(0.7, "Qwen/Qwen2.5-VL-7B-Instruct" + "-x" * 60, 0.55)}]}]}]
    text = experiments.table(shown, width=160)
    lines = text.splitlines()
    assert all(len(line) <= 160 for line in lines), [len(line) for line in lines]
    assert lines[0].startswith("experiment") and "test mRR@1 [95% CI]" in lines[0] and "reader acc." in lines[0]
    assert "main (7ad3dd0)" in lines[1] and "31.65 [28.65, 34.65]" in lines[1] and lines[1].endswith("baseline")
    assert "lam-low" in lines[2] and "30.00 [27.00, 33.00]" in lines[2]
    assert "encoders.flips=false" in lines[2] and "retrieval.lam=0.5" in lines[2]
    assert "gpu-pokemon" in lines[3] and "50.00 [40.00, 60.00]" in lines[3] and "reader.model=" in lines[3]
    assert lines[3].endswith("…")  # one value wider than its column is cut, not the table
    assert "workspace" not in text  # its params are HEAD's
