"""The retrieve stage (notebook 04): the configurations of the comparison table (VR-RAG Table 5 analog), the
robustness levers, and the stage's headline numbers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from polarcatalog.config import Retrieval
from polarcatalog.eval.protocol import headline_value, headline_with_ci
from polarcatalog.features.workspace import Workspace


def configured_label(rp: Retrieval) -> str:
    rerank = f" + re-rank {rp.reranker} λ={rp.lam}" if rp.reranker else ""
    return f"{'+'.join(rp.ensemble)} · {rp.chunks}{rerank} (configured)"


# The query-side protocols (`retrieval.query_centre`), as the comparison table names them.
QUERY_PROTOCOLS = {"reference": "dev-query statistics, each query alone",
                   "catalog": "catalog-mean centring, each query alone (VR-RAG's protocol)",
                   "batch": "query-batch statistics (transductive)"}


def query_protocols(rp: Retrieval) -> dict[str, tuple[str, Retrieval]]:
    """The configured pipeline under each query-side protocol, by `query_centre` value: the configured one under its
    configured label, the others as rows beside it. Without centring there is no query-side protocol to compare."""
    if not rp.center:
        return {}
    base = configured_label(rp).removesuffix(" (configured)")
    return {mode: (configured_label(rp), rp) if mode == rp.query_centre else
            (f"{base} · {what}", rp.model_copy(update={"query_centre": mode})) for mode, what in QUERY_PROTOCOLS.items()}


def table5_configurations(rp: Retrieval, image_encoders: list[str]) -> list[tuple[str, Retrieval]]:
    """VR-RAG's Table 5 as configurations: chunk type (text / multimodal Eq. 1 / anchors), the re-ranker, single
    encoders and the score ensemble of every embedded image encoder, and the configured pipeline under each other
    query-side protocol (`query_protocols`). Components that hurt stay in. The configured row is always present."""
    ens = list(rp.ensemble)
    name = "+".join(ens)
    rows: list[tuple[str, Retrieval]] = []
    for mode in ("text", "multimodal", "anchors"):
        rows.append((f"{name} · {mode}", rp.model_copy(update={"chunks": mode, "reranker": None})))
    if rp.reranker:
        rows.append((configured_label(rp), rp))
    for enc in image_encoders:
        if [enc] != ens:
            rows.append((f"{enc} · anchors", rp.model_copy(update={"ensemble": [enc], "chunks": "anchors", "reranker": None})))
    if len(image_encoders) > 1 and list(image_encoders) != ens:
        everyone = "+".join(image_encoders)
        for mode in ("multimodal", "anchors"):
            rows.append((f"ensemble {everyone} · {mode}", rp.model_copy(update={"ensemble": list(image_encoders), "chunks": mode, "reranker": None})))
        if rp.reranker:
            rows.append((f"ensemble {everyone} · anchors + re-rank {rp.reranker} λ={rp.lam}",
                         rp.model_copy(update={"ensemble": list(image_encoders), "chunks": "anchors"})))
    rows = [(configured_label(rp) if cfg == rp else label, cfg) for label, cfg in rows]
    if not any(cfg == rp for _, cfg in rows):
        rows.insert(0, (configured_label(rp), rp))
    rows += [row for mode, row in query_protocols(rp).items() if mode != rp.query_centre]
    return rows


@dataclass(frozen=True)
class Lever:
    """One row of the lever table: the configured pipeline with one robustness lever changed."""

    label: str
    retrieval: Retrieval
    anchor_mirror: bool = True
    query_flip: bool = True
    anchor_scale: int | None = None  # px of anchors encoded for comparison (embed's compare_scale_ratios); None = configured

    def workspace(self, ws: Workspace) -> Workspace:
        out = ws.with_flips(self.anchor_mirror and ws.has_flips, self.query_flip and ws.has_flips)
        if self.anchor_scale is not None:
            out = out.with_anchor_views({n: (a, None) for n, a in ws.anchor_scales[self.anchor_scale].items()})
        return out


def lever_configurations(rp: Retrieval, ws: Workspace) -> list[Lever]:
    """The configured pipeline with one robustness lever taken out at a time. Each lever was kept because it helped
    on dev; these rows show its effect on test, with a CI. Anchors at another scale are compared without the anchor
    mirror (the embed stage encodes them as one view), so their row pairs with the `no anchor mirror` row."""
    base = configured_label(rp).removesuffix(" (configured)")
    rows: list[Lever] = []
    if ws.has_flips:
        rows += [Lever(f"{base} · no test-time query flip", rp, query_flip=False),
                 Lever(f"{base} · no anchor mirror", rp, anchor_mirror=False),
                 Lever(f"{base} · no flips at all", rp, anchor_mirror=False, query_flip=False)]
    for px in sorted(ws.anchor_scales):
        rows.append(Lever(f"{base} · anchors at {px} px (configured {ws.manifest['anchor_scale']} px), no anchor mirror", rp,
                          anchor_mirror=False, anchor_scale=px))
    if rp.hubness != "none":
        rows.append(Lever(f"{base} · no hubness correction", rp.model_copy(update={"hubness": "none"})))
    if rp.colour_invariant:
        rows.append(Lever(f"{base} · no colour-nuisance projection", rp.model_copy(update={"colour_invariant": []})))
    return rows


def headline(d: dict[str, Any]) -> dict[str, Any]:
    c = d["configured"]
    groups = {g: headline_value(c[g]["mRR@1"]) for g in c if g != "all"}
    return {**headline_with_ci("test mRR@1", c["all"]["mRR@1"]), **{f"test {g} mRR@1": v for g, v in groups.items()},
            "dev mRR@1": d["configured_dev_mRR@1"],
            **{f"test {mode} protocol mRR@1": headline_value(p["mRR@1"]) for mode, p in d["query_protocols"].items()
               if mode != d["query_centre"]}}
