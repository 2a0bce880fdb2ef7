"""The colour-nuisance projection: a basis learnt from recoloured anchors, projected out of anchors and queries alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.features.colour_nuisance import nuisance_basis, recoloured_views
from polarcatalog.retrieval.query_side import colour_invariant, project_out
from polarcatalog.vectors import l2_normalise


def _recoloured(seed: int = 0, n: int = 50, dim: int = 12):
    """Anchors whose recoloured views move along two fixed directions only (the colour nuisance), by random amounts."""
    rng = np.random.default_rng(seed)
    own = l2_normalise(rng.normal(size=(n, dim)))
    nuisance = np.linalg.qr(rng.normal(size=(dim, 2)))[0].T  # [2, dim], orthonormal
    views = [own + rng.normal(size=(n, 2)) @ nuisance for _ in range(3)]
    return own, views, nuisance


def test_the_basis_spans_the_directions_recolouring_moves_features_along():
    own, views, nuisance = _recoloured()
    basis = nuisance_basis(own, views)
    np.testing.assert_allclose(basis @ basis.T, np.eye(len(basis)), atol=1e-5)  # orthonormal rows, strongest first
    # the top two directions are the nuisance plane: each nuisance vector lies in their span
    top = basis[:2].astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(nuisance @ top.T, axis=1), 1.0, atol=1e-5)


def test_projecting_out_makes_an_anchor_and_its_recoloured_view_one_vector():
    own, views, _ = _recoloured(1)
    basis = nuisance_basis(own, views)
    before = np.sum(l2_normalise(own) * l2_normalise(views[0]), axis=1)
    after = np.sum(project_out(own, basis, 2) * project_out(views[0], basis, 2), axis=1)
    assert before.min() < 0.9  # the recolouring moved them apart
    np.testing.assert_allclose(after, 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(project_out(own, basis, 2), axis=1), 1.0, atol=1e-5)


def test_project_out_asks_for_no_more_directions_than_were_kept():
    own, views, _ = _recoloured(2, n=3, dim=12)
    basis = nuisance_basis(own, views, max_dim=4)
    assert basis.shape == (4, 12)
    with pytest.raises(ValueError, match="colour_invariant_dim is 5"):
        project_out(own, basis, 5)


def test_colour_invariant_touches_the_named_encoders_only_and_names_a_missing_basis():
    own, views, _ = _recoloured(3)
    basis = nuisance_basis(own, views)
    feats = {"g": own, "h": own.copy()}
    out = colour_invariant(feats, {"g": basis}, ["g"], 2)
    np.testing.assert_allclose(out["g"], project_out(own, basis, 2))
    assert out["h"] is feats["h"]
    with pytest.raises(ValueError, match=r"retrieval.colour_invariant names \['h'\].*rerun the embed stage"):
        colour_invariant(feats, {"g": basis}, ["g", "h"], 2)


def test_recoloured_views_change_the_colours_only():
    view = Preprocess(True, 48, flip=True)
    out = recoloured_views(view)
    assert [(v.hue_shift, v.grey, v.flip, v.scale_to) for v in out] == [(120, False, False, 48), (240, False, False, 48),
                                                                          (0, True, False, 48)]
    assert len({v.key() for v in [*out, Preprocess(True, 48)]}) == 4  # each has its own cache key


def test_params_name_a_colour_invariant_encoder_that_is_not_embedded():
    from pydantic import ValidationError

    from polarcatalog.config import Params

    with pytest.raises(ValidationError, match="retrieval.colour_invariant names"):
        Params.model_validate({"encoders": {"image": ["efficientnet_lite0"]},
                               "retrieval": {"ensemble": ["efficientnet_lite0"], "reranker": None,
                                             "colour_invariant": ["efficientnet_lite2"]}})


def test_a_smoke_run_too_small_for_the_colour_basis_fails_before_any_compute():
    from pydantic import ValidationError

    from polarcatalog.config import Params

    base = {"encoders": {"image": ["efficientnet_lite0"]},
            "retrieval": {"ensemble": ["efficientnet_lite0"], "reranker": None, "colour_invariant": ["efficientnet_lite0"],
                          "colour_invariant_dim": 16}}
    with pytest.raises(ValidationError, match="needs at least 6 catalog species.*dataset.species_limit is 3"):
        Params.model_validate({**base, "dataset": {"species_limit": 3}})
    assert Params.model_validate({**base, "dataset": {"species_limit": 6}}).dataset.species_limit == 6


def test_query_side_projects_queries_and_reference_queries_like_the_catalog():
    """The catalog's anchors, the batch and the dev reference queries all lose the same directions, so a folder scored
    alone sees the space the pipeline's batches see."""
    from polarcatalog.retrieval.query_side import catalog_for, query_side
    from polarcatalog.config import Retrieval
    from polarcatalog.features.workspace import Workspace

    own, views, _ = _recoloured(4, n=40)
    basis = nuisance_basis(own, views)
    rng = np.random.default_rng(5)
    queries = (own + 0.3 * rng.normal(size=own.shape)).astype(np.float32)
    ids = np.arange(40)
    ws = Workspace(pd.DataFrame({"species_id": ids}), pd.DataFrame({"species_id": ids}),
                   pd.DataFrame({"split": ["dev"] * 20 + ["test"] * 20}), pd.DataFrame({"species_id": ids}), {},
                   {"g": own.astype(np.float32)}, {"g": queries}, {"g": None}, None, colour_basis={"g": basis})
    rp = Retrieval(ensemble=["g"], reranker=None, chunks="anchors", hubness="none", min_center_batch=8,
                   colour_invariant=["g"], colour_invariant_dim=2)
    cat = catalog_for(ws, rp)
    plain = catalog_for(ws, rp.model_copy(update={"colour_invariant": []}))
    np.testing.assert_allclose(cat.anchor_mean["g"] @ basis[:2].T, 0.0, atol=1e-5)  # centred projected anchors
    assert np.abs(plain.anchor_mean["g"] @ basis[:2].T).max() > 0.01
    side = query_side({"g": queries}, cat, rp, ws)
    np.testing.assert_allclose(side.queries["g"] @ basis[:2].T, 0.0, atol=1e-5)
    alone = query_side({"g": queries[:2]}, cat, rp, ws)  # under min_center_batch: the dev queries' statistics
    assert alone.by == "reference"
    np.testing.assert_allclose(alone.queries["g"] @ basis[:2].T, 0.0, atol=1e-5)
    np.testing.assert_allclose(alone.hubness_ref["g"] @ basis[:2].T, 0.0, atol=1e-5)  # the dev reference queries too
