"""The results protocol every stage reports through: dev species choose, test species report, with species-level
paired bootstrap CIs, per query group (regular / shiny sprites) and overall."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from polarcatalog.eval.bootstrap import Bootstrap, Interval
from polarcatalog.eval.metrics import group_masks


@dataclass
class Protocol:
    split: np.ndarray  # [Q] dev | test
    groups: np.ndarray  # [Q] query group (variant)
    boot: Bootstrap  # resamples over species, shared by every metric and every row

    @classmethod
    def of(cls, species: Sequence[int], split: Sequence[str], groups: Sequence[str], resamples: int = 1000, seed: int = 0,
           level: float = 0.95) -> "Protocol":
        return cls(np.asarray(split), np.asarray(groups), Bootstrap.over(np.asarray(species), resamples, seed, level))

    def take(self, rows: np.ndarray) -> "Protocol":
        """The protocol of a subset of the queries (e.g. the constrained ones), same resamples."""
        return Protocol(self.split[rows], self.groups[rows], self.boot.take(rows))

    def mask(self, split: str, group: str = "all") -> np.ndarray:
        m = self.split == split
        return m if group == "all" else m & (self.groups == group)

    @property
    def group_names(self) -> list[str]:
        return list(group_masks(self.groups))

    def interval(self, values: np.ndarray, split: str = "test", group: str = "all") -> Interval:
        return self.boot.subset(self.mask(split, group)).interval(values)

    def difference(self, a: np.ndarray, b: np.ndarray, split: str = "test", group: str = "all") -> Interval:
        return self.boot.subset(self.mask(split, group)).difference(a, b)

    def mean(self, values: np.ndarray, split: str = "dev", group: str = "all") -> float:
        """Point estimate only: what a choice on `dev` reads."""
        v = np.asarray(values, np.float64)[self.mask(split, group)]
        v = v[np.isfinite(v)]
        return float(v.mean()) if len(v) else float("nan")

    def describe(self) -> dict[str, Any]:
        """What a metrics file records about the protocol itself."""
        species = lambda s: int(len(np.unique(self.boot.clusters[self.split == s])))  # noqa: E731
        return {"dev_species": species("dev"), "test_species": species("test"), "dev_queries": int((self.split == "dev").sum()),
                "test_queries": int((self.split == "test").sum()), "bootstrap": int(len(self.boot.weights)),
                "confidence": self.boot.level, "resampled_unit": "species (a species' queries move together; rows are paired)"}


def long_rows(protocol: Protocol, values: dict[str, np.ndarray], splits: Sequence[str] = ("dev", "test"),
              **ids: Any) -> list[dict[str, Any]]:
    """The tidy form every sweep writes (and every figure and table reads): one row per split × query group × metric,
    with the point value, its CI and the number of queries it averages."""
    rows = []
    for split in splits:
        for group in protocol.group_names:
            for metric, v in values.items():
                iv = protocol.interval(v, split, group)
                rows.append({**ids, "split": split, "queries": group, "metric": metric, "value": iv.value,
                             "ci_low": iv.ci_low, "ci_high": iv.ci_high, "n": iv.n})
    return rows


def difference_rows(protocol: Protocol, a: np.ndarray, b: np.ndarray, metric: str, split: str = "test",
                    groups: Sequence[str] | None = None, **ids: Any) -> list[dict[str, Any]]:
    """The tidy rows of a paired difference a - b (same queries, same resamples), one per query group of `split`."""
    rows = []
    for group in groups or protocol.group_names:
        iv = protocol.difference(a, b, split, group)
        rows.append({**ids, "split": split, "queries": group, "metric": metric, "value": iv.value,
                     "ci_low": iv.ci_low, "ci_high": iv.ci_high, "n": iv.n})
    return rows


def fixed_rows(values: dict[str, float], n: int, **ids: Any) -> list[dict[str, Any]]:
    """Rows for numbers that are not means over queries (a catalog property: proposal recall, edge precision):
    split `catalog`, no interval (ci = value)."""
    return [{**ids, "split": "catalog", "queries": "all", "metric": m, "value": v, "ci_low": v, "ci_high": v, "n": n}
            for m, v in values.items()]


# A plot file's CI columns: the metric's column name, then one of these (`stages.ablate.curve`).
CI_LOW, CI_HIGH = "CI low", "CI high"


def ci_text(iv: Interval, scale: float = 100.0, digits: int = 1) -> str:
    """`20.0 [17.9, 22.1]` for a table cell."""
    return f"{scale * iv.value:.{digits}f} [{scale * iv.ci_low:.{digits}f}, {scale * iv.ci_high:.{digits}f}]"


def diff_text(iv: Interval, scale: float = 100.0, digits: int = 1) -> str:
    """`+1.3 [0.2, 2.4] *`: the star only where the CI excludes 0 (otherwise the difference is noise at this level)."""
    return (f"{scale * iv.value:+.{digits}f} [{scale * iv.ci_low:+.{digits}f}, {scale * iv.ci_high:+.{digits}f}]"
            + (" *" if iv.excludes_zero() else ""))


def headline_value(record: dict[str, Any]) -> float:
    """A detail record's value as a stage's headline metric (`dvc exp show`): flat and rounded to 4 decimals."""
    return round(float(record["value"]), 4)


def headline_with_ci(name: str, record: dict[str, Any]) -> dict[str, float]:
    """`name`, `name lo`, `name hi`: a headline metric with its CI bounds."""
    return {name: headline_value(record), f"{name} lo": round(float(record["ci_low"]), 4),
            f"{name} hi": round(float(record["ci_high"]), 4)}
