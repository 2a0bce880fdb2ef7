"""The curate stage (notebook 01): the catalog (species, summaries, chunks, filtered anchors), the query set and the
dev / test split are built by `polarcatalog.curate`; this module holds the stage's headline numbers."""

from __future__ import annotations

from typing import Any


def headline(d: dict[str, Any]) -> dict[str, Any]:
    out = {k: d[k] for k in ("species", "anchors", "queries", "quarantined")}
    return out | {f"filter {k}": round(float(d["anchor_filter"][k]), 4) for k in ("precision", "recall")
                  if d["anchor_filter"].get(k) is not None}
