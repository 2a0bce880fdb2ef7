"""Paired cluster bootstrap: the uncertainty of every headline number and of every difference between two rows.

Queries are not independent: a species' regular and shiny sprites share the species, and two configurations are
scored on the same queries. So the unit resampled is the *species* (all its queries move together), and a
difference between two rows is bootstrapped as the per-query difference on the same resamples (paired), which is
why a constant shift gets a zero-width interval. Every metric here is a mean of per-query values (mRR@k, Recall@k,
Conflict@k, per-query filter rate); a NaN value (e.g. a filter rate with nothing to filter) is left out of that
metric's mean, as it is out of the point estimate.

Percentile intervals from B resamples drawn once (multinomial cluster weights), so all metrics and all rows of a
table share the same resamples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interval:
    value: float
    ci_low: float
    ci_high: float
    n: int  # queries with a defined value

    def excludes_zero(self) -> bool:
        return bool(self.ci_low > 0 or self.ci_high < 0)

    def record(self, split: str) -> dict[str, float | int | str]:
        """The metrics-file form of a headline number: the value, its CI, how many queries, and which split."""
        return {"value": round(self.value, 6), "ci_low": round(self.ci_low, 6), "ci_high": round(self.ci_high, 6),
                "n": self.n, "split": split}


@dataclass(frozen=True)
class Bootstrap:
    """B resamples of the clusters (species), fixed once: `weights[b, c]` = how often cluster c is drawn in b."""

    clusters: np.ndarray  # [Q] cluster index of each query (0..C-1)
    weights: np.ndarray  # [B, C]
    level: float = 0.95

    @classmethod
    def over(cls, cluster_ids: np.ndarray, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> "Bootstrap":
        _, inverse = np.unique(np.asarray(cluster_ids), return_inverse=True)
        n = int(inverse.max()) + 1 if len(inverse) else 0
        rng = np.random.default_rng(seed)
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=resamples) if n else np.zeros((resamples, 0), int)
        return cls(inverse.ravel(), weights, level)

    def _float_weights(self) -> np.ndarray:
        cached = self.__dict__.get("_weights_f64")
        if cached is None:
            cached = np.ascontiguousarray(self.weights, np.float64)
            object.__setattr__(self, "_weights_f64", cached)  # a frozen dataclass: a cache, not a field
        return cached

    def _resampled_counts(self, counts: np.ndarray) -> np.ndarray:
        """`weights @ counts`: how many defined values each resample draws. Every metric of a table with the same
        queries defined (one split, one query group) has the same counts, so the product is kept by the counts' bytes
        and computed once per pattern (the same expression, so the same bits), not once per metric."""
        cache = self.__dict__.get("_counts_cache")
        if cache is None:
            cache = {}
            object.__setattr__(self, "_counts_cache", cache)
        key = (counts.dtype.str, counts.shape, counts.tobytes())
        if key not in cache:
            if len(cache) >= 1024:  # a long sweep's patterns: at most ~16 MB kept
                cache.clear()
            cache[key] = self._float_weights() @ counts
        return cache[key]

    def subset(self, mask: np.ndarray) -> "Bootstrap":
        """The same resamples restricted to some queries (a split, a query group): clusters keep their weights."""
        return self._sharing(np.where(mask, self.clusters, -1))

    def take(self, rows: np.ndarray) -> "Bootstrap":
        """The same resamples over some of the queries, in `rows`' order (e.g. the constrained ones)."""
        return self._sharing(self.clusters[rows])

    def _sharing(self, clusters: np.ndarray) -> "Bootstrap":
        """Another query set on the same resamples: one float copy of the weights and one count cache for all."""
        other = Bootstrap(clusters, self.weights, self.level)
        object.__setattr__(other, "_weights_f64", self._float_weights())
        object.__setattr__(other, "_counts_cache", self.__dict__.setdefault("_counts_cache", {}))
        return other

    def means(self, values: np.ndarray) -> np.ndarray:
        """[B, M] resampled means of `values` [Q, M] (or [Q] -> [B]); queries outside this bootstrap's subset and
        NaN values are left out."""
        v = np.asarray(values, np.float64)
        flat = v.ndim == 1
        v = v[:, None] if flat else v
        keep = (self.clusters >= 0)[:, None] & np.isfinite(v)
        C = self.weights.shape[1]
        cl = np.maximum(self.clusters, 0)
        # per-cluster sums in query order, column by column (bincount adds in input order, as np.add.at does: the
        # same bits, several times faster); the weights as float64 once, not cast again on every call
        held = np.where(keep, v, 0.0)
        sums = np.stack([np.bincount(cl, held[:, m], minlength=C) for m in range(v.shape[1])], axis=1)
        counts = np.stack([np.bincount(cl, keep[:, m], minlength=C) for m in range(v.shape[1])], axis=1)
        num, den = self._float_weights() @ sums, self._resampled_counts(counts)
        out = np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)
        return out[:, 0] if flat else out

    def interval(self, values: np.ndarray) -> Interval:
        """Point estimate (mean of the defined values in the subset) and percentile CI of one per-query metric."""
        v = np.asarray(values, np.float64)
        keep = (self.clusters >= 0) & np.isfinite(v)
        if not keep.any():
            return Interval(float("nan"), float("nan"), float("nan"), 0)
        boot = self.means(v)
        boot = boot[np.isfinite(boot)]
        alpha = (1.0 - self.level) / 2.0
        low, high = np.quantile(boot, [alpha, 1.0 - alpha]) if len(boot) else (np.nan, np.nan)
        return Interval(float(v[keep].mean()), float(low), float(high), int(keep.sum()))

    def difference(self, a: np.ndarray, b: np.ndarray) -> Interval:
        """a − b on the same queries and the same resamples (paired)."""
        return self.interval(np.asarray(a, np.float64) - np.asarray(b, np.float64))
