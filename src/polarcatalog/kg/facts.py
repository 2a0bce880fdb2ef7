"""+KG, the prompt side (§3.1, R_kg): at most eight facts about the final candidates, kept only when their provenance
is already represented among the candidates (a fact about a species not passed on is not evidence for it), in a
deterministic order, serialised as the reader's context. With no reader model, they go to the audit trail."""

from __future__ import annotations

import pandas as pd

MAX_FACTS = 8


def candidate_facts(triples: pd.DataFrame, candidates: list[str], names: dict[str, str], limit: int = MAX_FACTS) -> list[str]:
    """Facts whose head is a candidate species, candidates in the given (retrieval) order, relations then tails
    sorted within one species, at most `limit`: `Pikachu — has type — electric`."""
    rows = triples[triples["head"].isin(candidates)]
    rank = {c: i for i, c in enumerate(candidates)}
    rows = rows.assign(_rank=rows["head"].map(rank)).sort_values(["_rank", "relation", "tail"], kind="stable")
    rows = rows.drop_duplicates(["head", "relation", "tail"]).head(limit)
    label = lambda e: names.get(e, e.partition(":")[2].replace("-", " "))  # noqa: E731
    return [f"{label(h)} — {r.replace('_', ' ')} — {label(t)}" for h, r, t in rows[["head", "relation", "tail"]].itertuples(index=False)]
