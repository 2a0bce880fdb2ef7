"""PolarMem's read path (Algorithm 1, lexicographic logic-aware retrieval), composed with VR-RAG: the species
candidates VR-RAG returns are re-ordered by the logic state of their catalog nodes against the query's Q+ / Q−
(and, optionally, the query image's own verified concepts), with the constraint strength of PolarMem §3:

    s_log = −1 (conflict)    if Q+ ∩ C−(v) ≠ ∅ or Q− ∩ C+(v) ≠ ∅
            +1 (entailment)  else if Q+ ∩ C+(v) ≠ ∅
             0 (neutral)     otherwise                                    (Algorithm 1, lines 6-14)

- `none`: VR-RAG order (s);
- `hard`: lexicographic ⟨s_log, s⟩ — a conflicting species never precedes a compatible one;
- `soft:p`: s + p · s_log — conflicts demoted by p, not excluded;
- `adaptive`: soft with a per-query penalty p_q = p_max · H_q, H_q the normalised entropy of softmax(s / T)
  over the top-10 candidates. Rule (ours; the paper only says "according to retrieval confidence and query
  ambiguity"): a confident visual ranking (low entropy) keeps its order, an ambiguous one leans on the graph.

The states (lines 6-14) come from `memory.memories.states`, which reads any memory's HAS / NOT_HAS edges for each
(query, candidate, concept) with gathers; this module orders by them. Together they are the only implementation of
Algorithm 1 the pipeline, the CLI and the benchmark run; `tests/reference_algorithm1.py` walks the graph line by
line as the paper writes it, and the tests hold the two against each other. No per-candidate Python loop.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

CONFLICT, NEUTRAL, ENTAILMENT = -1, 0, 1


def ambiguity(s: np.ndarray, temperature: float = 0.02, top: int = 10) -> np.ndarray:
    """Normalised entropy in [0, 1] of softmax(s / T) over each row's top candidates (NaN/-inf padding ignored).
    A row with no finite score computes -inf - -inf (NaN) here; it has fewer than two candidates, so the last line
    gives it 0, and the NaN is expected rather than warned about."""
    x = np.where(np.isfinite(s), s, -np.inf)[:, :top] / temperature
    with np.errstate(invalid="ignore"):
        x = x - np.max(x, axis=1, keepdims=True)
        p = np.exp(x)
        p /= p.sum(1, keepdims=True)
    n = np.isfinite(s[:, :top]).sum(1)
    h = -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0)).sum(1)
    return np.where(n > 1, h / np.log(np.maximum(n, 2)), 0.0)


ADAPTIVE_MAX = 1.0  # p_max of a bare `adaptive`


@dataclass(frozen=True)
class Strength:
    """A constraint strength, parsed once from its spec: `none`, `hard`, `soft:<p>` (p >= 0) or `adaptive:<p_max>`
    (p_max > 0; a bare `adaptive` is `adaptive:1`, the largest penalty the ambiguity can scale to)."""

    mode: Literal["none", "soft", "adaptive", "hard"]
    penalty: float | None = None  # soft: p; adaptive: p_max

    def __post_init__(self) -> None:
        if (self.mode in ("soft", "adaptive")) != (self.penalty is not None):
            raise ValueError(f"constraint strength {self.mode!r} {'needs' if self.penalty is None else 'takes no'} a penalty "
                             "(soft: p, adaptive: p_max)")

    @classmethod
    def parse(cls, spec: "str | Strength") -> "Strength":
        if isinstance(spec, Strength):
            return spec
        if spec in ("none", "hard"):
            return cls(spec)
        if spec == "adaptive":
            return cls("adaptive", ADAPTIVE_MAX)
        mode, colon, value = spec.partition(":") if isinstance(spec, str) else ("", "", "")
        if colon and mode in ("soft", "adaptive"):
            try:
                p = float(value)
            except ValueError:
                p = math.nan
            if math.isfinite(p) and (p >= 0 if mode == "soft" else p > 0):
                return cls(mode, p)  # type: ignore[arg-type]
        raise ValueError(f"constraint strength {spec!r}; allowed: none, hard, adaptive:<p_max > 0>, soft:<penalty >= 0> "
                         "(e.g. soft:0.05)")

    def __str__(self) -> str:
        return f"{self.mode}:{self.penalty:g}" if self.mode in ("soft", "adaptive") else self.mode

    def label(self) -> str:
        """How tables name it: `soft (p=0.03)`, `adaptive (p_max=1)`, `hard`."""
        if self.penalty is None or self.mode not in ("soft", "adaptive"):
            return self.mode
        return f"soft (p={self.penalty:g})" if self.mode == "soft" else f"adaptive (p_max={self.penalty:g})"

    @classmethod
    def from_label(cls, label: str) -> "Strength":
        """The inverse of `label`: an ablation row names its strength as tables do, and its MLflow child run must log
        the spec a user can put back into params (`soft (p=0.03)` → `soft:0.03`)."""
        m = re.fullmatch(r"(soft|adaptive) \((?:p|p_max)=([^)]+)\)", label)
        if m:
            return cls(m[1], float(m[2]))  # type: ignore[arg-type]
        return cls.parse(label)


def sort_keys(states: np.ndarray, s: np.ndarray, strength: Strength, temperature: float = 0.02) -> tuple[np.ndarray, ...]:
    """The order's keys, most significant first, larger first: ⟨s_log, s⟩ for hard, one fused key otherwise. Padding
    (-inf s) is below everything in every mode. Ranks read these keys for pessimistic ties."""
    pad = ~np.isfinite(s)
    base = np.where(pad, -np.inf, s)
    if strength.mode == "hard":  # lexicographic ⟨s_log, s⟩, exact; padding below every state
        return (np.where(pad, -2, states).astype(np.float64), base)
    if strength.mode == "none":
        return (base,)
    if strength.mode == "soft":
        return (np.where(pad, -np.inf, base + strength.penalty * states),)
    if strength.mode == "adaptive":
        p = strength.penalty * ambiguity(s, temperature)[:, None]
        return (np.where(pad, -np.inf, base + p * states),)
    raise ValueError(strength.mode)


BLOCK = 1 << 19  # (query, candidate) cells ordered at a time: a block's keys stay in cache between the passes


def reorder(states: np.ndarray, s: np.ndarray, strength: Strength, temperature: float = 0.02,
            k: int | None = None) -> np.ndarray:
    """Column order per row by `sort_keys`; equal keys keep their VR-RAG position. With `k`, the first k columns of
    that same order, found by selection (k passes over each row) instead of a full sort: what a long candidate
    list (a whole memory) costs when only the top of it is read."""
    L = s.shape[1]
    top = L if k is None else min(k, L)
    select = 4 * top < L and top <= 16  # a few argmax passes beat a sort of the row
    step = max(1, BLOCK // max(L, 1))
    out = np.empty((len(s), top), np.int64)
    for lo in range(0, len(s), step):
        keys = sort_keys(states[lo: lo + step], s[lo: lo + step], strength, temperature)
        out[lo: lo + step] = _top_by_selection(keys, top) if select else _sorted(keys)[:, :top]
    return out


def _sorted(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    ties = np.broadcast_to(np.arange(keys[0].shape[1]), keys[0].shape)
    return np.lexsort((ties, *(-key for key in reversed(keys))), axis=1)


def _top_by_selection(keys: tuple[np.ndarray, ...], k: int) -> np.ndarray:
    """The first k columns of `_sorted(keys)`. With two keys (hard: ⟨s_log, s⟩, s_log taking a few values), each row's
    k-th item lies on one s_log level: items above it all make the top (+inf), items below none (-inf), and the level
    itself competes on s. Then k argmax passes, each taking the first (lowest column) maximum, as the full order breaks
    ties, and an exact sort of the k taken. A row with fewer than k items above -inf (padding ties) is sorted in full."""
    if len(keys) == 1:
        lead, key = None, keys[0].copy()
    else:
        lead, value = keys
        levels = np.arange(lead.max(), lead.min() - 1, -1)  # s_log and padding are integers; an absent level is harmless
        at_or_above = np.stack([(lead >= level).sum(1) for level in levels], 1)
        kth = levels[np.argmax(at_or_above >= k, axis=1)][:, None]
        key = np.where(lead > kth, np.inf, np.where(lead == kth, value, -np.inf))
    exact = (key > -np.inf).sum(1) < k
    rows = np.arange(len(key))
    taken = np.empty((len(key), k), np.int64)
    for i in range(k):
        taken[:, i] = key.argmax(1)
        key[rows, taken[:, i]] = -np.inf
    picked = tuple(np.take_along_axis(x, taken, 1) for x in keys)
    out = np.take_along_axis(taken, np.lexsort((taken, *(-x for x in reversed(picked))), axis=1), 1)
    if exact.any():
        out[exact] = _sorted(tuple(x[exact] for x in keys))[:, :k]
    return out


def conflict_at_k(conflicting: np.ndarray, order: np.ndarray, valid: np.ndarray, k: int = 3) -> float:
    """Conflict@k (PolarMem Fig. 3): mean over queries of the share of contradictory items in the top-k context."""
    top_c = np.take_along_axis(conflicting, order, 1)[:, :k]
    top_v = np.take_along_axis(valid, order, 1)[:, :k]
    n = top_v.sum(1)
    share = np.divide((top_c & top_v).sum(1), n, out=np.zeros(len(n)), where=n > 0)
    return float(share.mean()) if len(share) else float("nan")  # no query: undefined, not 0
