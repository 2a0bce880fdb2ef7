"""The stage's experiment, as the graph-RAG paper's Tables 3, 4 and 8 lay it out, on species recognition.

- **Evidence set**: the base retriever's top-k species (VR-RAG's first stage, ensemble similarity s_m, Eq. 1): the
  paper's R_text, the passages a generator reads.
- **Answerer**: VR-RAG's visual re-ranker (Eq. 2, the configured λ) choosing one species from the evidence set: the
  stand-in for the reader model the embedded default does not have (the GPU profile's MLLM reader replaces it).
- **Systems**: baseline (top-k); budget-matched (top-(k+B)), the control for a longer list; +KG (the baseline's set
  plus at most eight facts, which without a reader change nothing the answerer reads: its row equals the baseline's
  by construction and the facts go to the audit trail); +KGret (top-k plus up to B bridged species).
- **Strata**: the evidence deficit (the base top-k lacks the gold species: the paper's bridge questions) and its
  control (it holds it: the comparison questions).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy import sparse

from polarcatalog.eval.protocol import Protocol, long_rows
from polarcatalog.kg.bridge import Bridged, budget_matched, kgret, top_by_score
from polarcatalog.kg.completeness import deficit, evidence_values

SYSTEMS = ("baseline", "budget-matched", "+KG", "+KGret")
SETS = ("all queries", "evidence deficit", "no deficit", "without catalog copies")


def bridge_rows(base: np.ndarray, answer: np.ndarray, gold: np.ndarray, links: sparse.csr_matrix, k: int,
                budgets: Sequence[int], hops: int, protocol: Protocol, leaked: np.ndarray | None = None,
                splits: Sequence[str] = ("test",), systems: Sequence[str] = SYSTEMS, prefix: str = ""
                ) -> tuple[pd.DataFrame, dict[int, Bridged]]:
    """Tidy rows (system, B, set, split, queries, metric, value, CI) for every budget, and +KGret's result per budget
    (candidates and provenance, for the audit trail). `base` / `answer` [Q, S]: every species' base-retriever and answerer score;
    `gold` [Q] catalog index (-1: not in the catalog); `leaked` [Q]: queries whose label can be had by lookup (a copy
    of a catalog image), reported with and without. `prefix` names the systems of a second base (`re-ranked: ` when
    `base` is the answerer's own scores: +KGret bridging from the re-ranked top-k)."""
    # the base ranked once, as deep as the largest budget-matched list: every top-(k+B) is a prefix of it (a stable
    # order), so each budget slices it instead of ranking the base again
    ranked = top_by_score(base, k + max(budgets, default=0))
    top = ranked[:, :k]
    short = deficit(top, gold)
    strata = {"all queries": np.arange(len(gold)), "evidence deficit": np.flatnonzero(short),
              "no deficit": np.flatnonzero(~short)}
    if leaked is not None and leaked.any():
        strata["without catalog copies"] = np.flatnonzero(~leaked)
    rows, lists = [], {}
    for b in budgets:
        bridged = kgret(base, k, links, b, hops, top=top)
        lists[b] = bridged
        finals = {"baseline": top, "budget-matched": ranked[:, :k + b], "+KG": top, "+KGret": bridged.candidates}
        for name in systems:
            final = finals[name]
            values = evidence_values(final, answer, gold, k)
            values["species added"] = np.where(bridged.candidates[:, k:] >= 0, 1.0, 0.0).sum(1) if name == "+KGret" else \
                np.zeros(len(gold)) if name != "budget-matched" else np.full(len(gold), float(b))
            for set_name, idx in strata.items():
                if len(idx):
                    rows += long_rows(protocol.take(idx), {m: v[idx] for m, v in values.items()}, splits=splits,
                                      system=prefix + name, B=b, set=set_name)
    return pd.DataFrame(rows), lists


def paired_gain(base: np.ndarray, answer: np.ndarray, gold: np.ndarray, links: sparse.csr_matrix, k: int, budget: int,
                hops: int, protocol: Protocol, metric: str = "completeness") -> dict[str, dict[str, float]]:
    """+KGret minus the budget-matched control, per stratum, with the paired species-bootstrap CI: the number that says
    whether the graph recovers evidence a longer list would not. Reported whichever way it goes, in the two strata
    where it can differ: all queries and the evidence deficit. Where the base top-k holds the gold (no deficit) both
    sets keep the top-k, so their completeness is equal by construction and no difference is computed."""
    top = top_by_score(base, k)
    short = deficit(top, gold)
    ours = evidence_values(kgret(base, k, links, budget, hops, top=top).candidates, answer, gold, k)[metric]
    ctrl = evidence_values(budget_matched(base, k, budget), answer, gold, k)[metric]
    out = {}
    for set_name, mask in (("all queries", np.ones(len(gold), bool)), ("evidence deficit", short)):
        idx = np.flatnonzero(mask)
        if len(idx):
            iv = protocol.take(idx).difference(ours[idx], ctrl[idx])
            out[set_name] = {"value": iv.value, "ci_low": iv.ci_low, "ci_high": iv.ci_high, "n": iv.n}
    return out
