"""The colour-nuisance subspace: directions along which an image feature moves when only the colours change.

A shiny sprite is the same drawing in another palette, and the catalog's artwork shows the regular palette only, so an
ImageNet feature that moves with colour pulls a palette swap away from its species. Each anchor is also encoded in
colours it never had (hue turned by 120 and by 240 degrees, and in grey); the differences to its own view span the
directions a recolouring moves a feature along. Their top right singular vectors, learnt from the catalog's artwork
alone (no query is seen), are projected out of every anchor and query feature of the configured encoders
(`retrieval.colour_invariant`, `retrieval.colour_invariant_dim`; the projection is retrieval's query side,
`retrieval.query_side.colour_invariant`): what is left is the drawing.

Chosen on dev together with the ensemble members, re-ranker and λ (the select_retrieval stage, reports/selection/
retrieval.md). On its own it is a trade: it lifts the shiny sprites and costs the regular ones some points (the lever
table's `no colour-nuisance projection` row in reports/retrieval.md).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

from polarcatalog.data.images import BadImageError
from polarcatalog.encoders.encoder_types import ImageEncoder
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.features.encode import encode_image_views

HUE_SHIFTS = (120, 240)  # degrees: the two other thirds of the hue circle
MAX_DIM = 256  # basis vectors kept by the embed stage: `retrieval.colour_invariant_dim` may be up to this


def recoloured_views(view: Preprocess) -> list[Preprocess]:
    """The anchor's own view in other colours: each hue shift, then grey (never flipped: colour is the only change)."""
    plain = replace(view, flip=False)
    return [*(replace(plain, hue_shift=h) for h in HUE_SHIFTS), replace(plain, grey=True)]


def nuisance_basis(own: np.ndarray, recoloured: Sequence[np.ndarray], max_dim: int = MAX_DIM) -> np.ndarray:
    """[d, dim], orthonormal rows: the top right singular vectors of every recoloured view minus the anchor's own view
    (rows of `own` and of each array in `recoloured` are the same anchors), strongest first."""
    changes = np.concatenate([np.asarray(r, np.float64) - np.asarray(own, np.float64) for r in recoloured])
    vt = np.linalg.svd(changes, full_matrices=False)[2]
    return vt[: min(max_dim, len(vt))].astype(np.float32)


def learn_basis(encoder: ImageEncoder, anchor_paths: Sequence[str], cache_root: Path, view: Preprocess,
                batch_size: int = 64) -> np.ndarray:
    """`nuisance_basis` of one encoder's anchors seen at `view` and recoloured, through the feature cache: for an
    encoder the embed stage kept no basis for (the benchmarks try the projection on every encoder)."""
    (own, *recoloured), ok = encode_image_views(encoder, anchor_paths, cache_root, [view, *recoloured_views(view)],
                                                batch_size=batch_size, role="anchor")
    if not ok.all():
        raise BadImageError(anchor_paths[int(np.argmin(ok))], "a catalog image no longer loads; rerun the curate stage")
    return nuisance_basis(own, recoloured)
