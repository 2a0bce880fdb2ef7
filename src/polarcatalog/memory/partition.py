"""Adaptive distributional partitioning (PolarMem Eqs. 2-3): per image, an Otsu boundary τ* over the concept
scores plus anchor priors {0, 1}, a margin δ = κ·σ_w, and three states HAS / NOT_HAS / UNCERTAIN.

Exact, not histogram-based (scikit-image's threshold_otsu bins the scores): every split between two
consecutive distinct values is evaluated with cumulative sums, O(n log n) for the sort, for many images at once
(`partition_rows`: one row per image, NaN where a concept is outside that image's proposal set).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

HAS, UNCERTAIN, NOT_HAS = 1, 0, -1


@dataclass(frozen=True)
class Partition:
    tau_star: float
    delta: float
    sigma_w: float
    states: np.ndarray  # int8 per input score: HAS / UNCERTAIN / NOT_HAS


def between_class_variance(values: np.ndarray, tau: float) -> float:
    """ω_val ω_rej (μ_val − μ_rej)², val = {s > τ}, rej = {s <= τ} (Eq. 2's objective); 0 if a class is empty."""
    val, rej = values[values > tau], values[values <= tau]
    if len(val) == 0 or len(rej) == 0:
        return 0.0
    w_val, w_rej = len(val) / len(values), len(rej) / len(values)
    return float(w_val * w_rej * (val.mean() - rej.mean()) ** 2)


def otsu_rows(values: np.ndarray, priors: Sequence[float] = (0.0, 1.0)) -> tuple[np.ndarray, np.ndarray]:
    """(τ*, σ_w) per row of `values` [R, n] (NaN = not part of that row's set), each row ∪ priors. τ* is the midpoint
    of the best gap between consecutive distinct values (every τ in that gap gives the same split);
    σ_w = sqrt(ω_rej σ²_rej + ω_val σ²_val). Vectorised over rows: one sort, cumulative sums, one argmax."""
    v = np.asarray(values, np.float64)
    v = v.reshape(len(v), -1)
    R = len(v)
    x = np.sort(np.hstack([v, np.broadcast_to(np.asarray(priors, np.float64), (R, len(priors)))]), axis=1)  # NaN last
    finite = np.isfinite(x)
    m = finite.sum(1)
    xf = np.where(finite, x, 0.0)
    csum, csq = np.cumsum(xf, 1), np.cumsum(xf * xf, 1)
    rows = np.arange(R)
    if x.shape[1] < 2:  # no priors and at most one score: nothing to split
        return (xf[:, 0] if x.shape[1] else np.full(R, 0.5)), np.zeros(R)
    n_rej = np.arange(1, x.shape[1], dtype=np.float64)[None, :]  # split after index i: rej = x[:i+1], val = x[i+1:]
    n_val = m[:, None] - n_rej
    with np.errstate(invalid="ignore", divide="ignore"):
        cut = (n_val > 0) & (x[:, 1:] > x[:, :-1])
        total, total_sq = csum[rows, np.maximum(m - 1, 0)][:, None], csq[rows, np.maximum(m - 1, 0)][:, None]
        mu_rej = csum[:, :-1] / n_rej
        mu_val = (total - csum[:, :-1]) / n_val
        objective = np.where(cut, (n_rej / m[:, None]) * (n_val / m[:, None]) * (mu_val - mu_rej) ** 2, -np.inf)
        best = np.argmax(objective, axis=1)  # first maximum: ties go to the lowest boundary
        nr, nv = n_rej[0, best], n_val[rows, best]
        var_rej = csq[rows, best] / nr - mu_rej[rows, best] ** 2
        var_val = (total_sq[:, 0] - csq[rows, best]) / nv - mu_val[rows, best] ** 2
        sigma_w = np.sqrt(np.maximum(0.0, (nr * var_rej + nv * var_val) / m))
    has_cut = cut.any(1)
    tau = np.where(has_cut, (xf[rows, best] + xf[rows, np.minimum(best + 1, x.shape[1] - 1)]) / 2.0, np.where(m > 0, xf[:, 0], 0.5))
    return tau, np.where(has_cut, sigma_w, 0.0)


def otsu(scores: Sequence[float], priors: Sequence[float] = (0.0, 1.0)) -> tuple[float, float]:
    """`otsu_rows` of one set of scores."""
    tau, sigma_w = otsu_rows(np.asarray(scores, np.float64).reshape(1, -1), priors)
    return float(tau[0]), float(sigma_w[0])


def partition_rows(scores: np.ndarray, kappa: float = 0.5, priors: Sequence[float] = (0.0, 1.0)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. 3 for many images at once: `scores` [R, n], NaN where a concept is not in that image's proposal set.
    Returns (states [R, n] int8, UNCERTAIN at NaN; τ* [R]; δ [R])."""
    s = np.asarray(scores, np.float64)
    present = np.isfinite(s)
    if np.any((s[present] < 0) | (s[present] > 1)):
        raise ValueError("concept scores must be probabilities in [0, 1]")
    tau, sigma_w = otsu_rows(s, priors)
    delta = kappa * sigma_w
    states = np.full(s.shape, UNCERTAIN, np.int8)
    with np.errstate(invalid="ignore"):
        states[present & (s > (tau + delta)[:, None])] = HAS
        states[present & (s < (tau - delta)[:, None])] = NOT_HAS
    return states, tau, delta


def partition(scores: Sequence[float], kappa: float = 0.5, priors: Sequence[float] = (0.0, 1.0)) -> Partition:
    """Eq. 3: HAS if s > τ* + δ, NOT_HAS if s < τ* − δ, UNCERTAIN otherwise (|s − τ*| <= δ).

    Defined for any input: no scores -> no states (τ* from the priors alone); one score or identical scores
    are split against the priors, so a lone confident score can still be HAS and a lone weak one NOT_HAS."""
    s = np.asarray(scores, np.float64).ravel()
    if np.any((s < 0) | (s > 1)) or np.any(~np.isfinite(s)):
        raise ValueError("concept scores must be probabilities in [0, 1]")
    states, tau, delta = partition_rows(s.reshape(1, -1), kappa, priors)
    return Partition(float(tau[0]), float(delta[0]), otsu(s, priors)[1], states[0])
