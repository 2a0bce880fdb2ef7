"""Hubness correction: in a cross-domain search a few catalog items ("hubs") sit near almost every query, and
win many queries they should not. CSLS (cross-domain similarity local scaling; Conneau et al., "Word translation
without parallel data", ICLR 2018, §2.3) scores

    CSLS(q, a) = 2 q·a − r_Q(a) − r_A(q),   r_Q(a) = mean similarity of a to its k nearest queries.

r_A(q) is the same for every item of one query, so ranking by q·a − r_Q(a) / 2 gives CSLS's order on q·a's scale
(what the λ mix of VR-RAG's Eq. 2 needs). r_Q(a) reads the whole query batch: like batch centring, it is
transductive (label-free), and the pipeline applies it only where queries are centred by their batch."""

from __future__ import annotations

import numpy as np

from polarcatalog.index import build_index, search


def csls_penalty(queries: np.ndarray, items: np.ndarray, k: int) -> np.ndarray:
    """[items] r_Q(a) / 2 over the query batch: one k-NN search of the items among the queries."""
    sims, _ = search(build_index(queries, "flat", use_gpu=False), items, min(k, len(queries)))
    return sims.mean(1).astype(np.float32) / 2.0
