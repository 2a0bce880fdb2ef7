"""Adaptive distributional partitioning (PolarMem Eqs. 2-3): per image, an Otsu boundary τ* over the concept
scores plus anchor priors {0, 1}, a margin δ = κ·σ_w, and three states HAS / NOT_HAS / UNCERTAIN.

Exact, not histogram-based (scikit-image's threshold_otsu bins the scores): every split between two
consecutive distinct values is evaluated with cumulative sums, O(n log n) for the sort.
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


def otsu(scores: Sequence[float], priors: Sequence[float] = (0.0, 1.0)) -> tuple[float, float]:
    """(τ*, σ_w) over scores ∪ priors. τ* is the midpoint of the best gap between consecutive distinct values
    (every τ in that gap gives the same split); σ_w = sqrt(ω_rej σ²_rej + ω_val σ²_val)."""
    x = np.sort(np.concatenate([np.asarray(scores, np.float64).ravel(), np.asarray(priors, np.float64)]))
    n = len(x)
    if n == 0 or x[0] == x[-1]:
        return (float(x[0]) if n else 0.5), 0.0
    csum, csq = np.cumsum(x), np.cumsum(x * x)
    cut = np.flatnonzero(np.diff(x) > 0)  # split after index i: rej = x[:i+1], val = x[i+1:]
    n_rej = cut + 1.0
    n_val = n - n_rej
    mu_rej = csum[cut] / n_rej
    mu_val = (csum[-1] - csum[cut]) / n_val
    objective = (n_rej / n) * (n_val / n) * (mu_val - mu_rej) ** 2
    best = int(np.argmax(objective))  # first maximum: ties go to the lowest boundary
    i = cut[best]
    var_rej = csq[i] / n_rej[best] - mu_rej[best] ** 2
    var_val = (csq[-1] - csq[i]) / n_val[best] - mu_val[best] ** 2
    sigma_w = float(np.sqrt(max(0.0, (n_rej[best] * var_rej + n_val[best] * var_val) / n)))
    return float((x[i] + x[i + 1]) / 2.0), sigma_w


def partition(scores: Sequence[float], kappa: float = 0.5, priors: Sequence[float] = (0.0, 1.0)) -> Partition:
    """Eq. 3: HAS if s > τ* + δ, NOT_HAS if s < τ* − δ, UNCERTAIN otherwise (|s − τ*| <= δ).

    Defined for any input: no scores -> no states (τ* from the priors alone); one score or identical scores
    are split against the priors, so a lone confident score can still be HAS and a lone weak one NOT_HAS."""
    s = np.asarray(scores, np.float64).ravel()
    if np.any((s < 0) | (s > 1)) or np.any(~np.isfinite(s)):
        raise ValueError("concept scores must be probabilities in [0, 1]")
    tau, sigma_w = otsu(s, priors)
    delta = kappa * sigma_w
    states = np.full(len(s), UNCERTAIN, np.int8)
    states[s > tau + delta] = HAS
    states[s < tau - delta] = NOT_HAS
    return Partition(tau, float(delta), sigma_w, states)
