"""VR-RAG scoring on toy catalogs: the fused score equals the paper's formulas; switches equal their configurations."""

from __future__ import annotations

import numpy as np
import pytest

from polarcatalog.eval.splits import species_folds
from polarcatalog.retrieval.vrrag import (VRRAG, Catalog, _first_per_species, build_catalog, fit_bridge, prepare_queries,
                                          species_means)
from polarcatalog.vectors import l2_normalise as normalise


def _toy(seed: int = 0, S: int = 6, C_per: int = 2, d: int = 8):
    rng = np.random.default_rng(seed)
    species_ids = np.arange(100, 100 + S)
    chunk_species = np.repeat(np.arange(S), C_per)
    enc = {}
    for name in ("g1", "g2", "h"):
        enc[name] = normalise(rng.normal(size=(S, d)))
    texts = {n: normalise(rng.normal(size=(S * C_per, d))) for n in ("g1", "g2")}
    cat = Catalog(species_ids, chunk_species, enc, texts, {n: np.zeros(d, np.float32) for n in enc})
    queries = {n: normalise(rng.normal(size=(5, d))) for n in enc}
    return cat, queries


def test_fused_score_equals_the_formulas():
    cat, q = _toy()
    lam = 0.3
    vr = VRRAG(cat, ["g1", "g2"], "multimodal", "h", r=12)
    cands = vr.candidates(q)
    # brute force: Eq. 1 chunk vectors, mean over the ensemble, best chunk per species, Eq. 2
    m = {n: normalise((cat.chunk_text[n] + cat.anchor_mean[n][cat.chunk_species]) / 2) for n in ("g1", "g2")}
    s_chunk = (q["g1"] @ m["g1"].T + q["g2"] @ m["g2"].T) / 2
    s_m = np.stack([s_chunk[:, cat.chunk_species == s].max(1) for s in range(6)], 1)
    s_i = q["h"] @ cat.anchor_mean["h"].T
    s = lam * s_m + (1 - lam) * s_i
    ranking = vr.rank(cands, lam, 6)
    for qi in range(5):
        expected = cat.species_ids[np.argsort(-s[qi], kind="stable")]
        assert ranking.species_ids[qi].tolist() == expected.tolist()
        idx = ranking.species_ids[qi] - 100
        np.testing.assert_allclose(ranking.s_m[qi], s_m[qi, idx], atol=1e-5)
        np.testing.assert_allclose(ranking.s_i[qi], s_i[qi, idx], atol=1e-5)
        np.testing.assert_allclose(ranking.s[qi], s[qi, idx], atol=1e-5)


def test_switches_equal_their_configurations():
    cat, q = _toy(1)
    with_rr = VRRAG(cat, ["g1"], "anchors", "h", r=12)
    without = VRRAG(cat, ["g1"], "anchors", None, r=12)
    c1, c0 = with_rr.candidates(q), without.candidates(q)
    # λ = 1: the re-ranker has no say, identical to no re-ranker
    assert np.array_equal(with_rr.rank(c1, 1.0, 6).species_ids, without.rank(c0, 0.3, 6).species_ids)
    # λ = 0: pure visual similarity to the re-ranker's anchors
    pure = with_rr.rank(c1, 0.0, 6).species_ids
    expected = cat.species_ids[np.argsort(-(q["h"] @ cat.anchor_mean["h"].T), axis=1, kind="stable")]
    assert np.array_equal(pure, expected)
    # an "ensemble" of one encoder is that encoder; anchors-only chunks score g(q).mean g(a)
    single = VRRAG(cat, ["g2"], "anchors", None, r=12)
    s = q["g2"] @ cat.anchor_mean["g2"].T
    assert np.array_equal(single.rank(single.candidates(q), 0.7, 6).species_ids,
                          cat.species_ids[np.argsort(-s, axis=1, kind="stable")])
    # ensemble of two: mean of the two encoders' scores
    ens = VRRAG(cat, ["g1", "g2"], "anchors", None, r=12)
    s2 = (q["g1"] @ cat.anchor_mean["g1"].T + q["g2"] @ cat.anchor_mean["g2"].T) / 2
    np.testing.assert_allclose(ens.rank(ens.candidates(q), 0.7, 6).s_m, -np.sort(-s2, axis=1), atol=1e-5)


def test_text_only_chunks_use_the_text_vectors():
    cat, q = _toy(2)
    vr = VRRAG(cat, ["g1"], "text", None, r=12)
    top = vr.rank(vr.candidates(q), 0.7, 1).species_ids[:, 0]
    best_chunk = (q["g1"] @ cat.chunk_text["g1"].T).argmax(1)
    assert top.tolist() == cat.species_ids[cat.chunk_species[best_chunk]].tolist()


def test_first_per_species_keeps_the_best_chunk_and_compacts():
    sp = np.array([[2, 2, 0, -1], [1, 0, 1, 0]])
    sc = np.array([[0.9, 0.8, 0.5, -1.0], [0.7, 0.6, 0.4, 0.3]], np.float32)
    species, s = _first_per_species(sp, sc, 3)
    assert species.tolist() == [[2, 0, -1, -1], [1, 0, -1, -1]]
    assert s[0, :2].tolist() == pytest.approx([0.9, 0.5]) and s[1, :2].tolist() == pytest.approx([0.7, 0.6])
    assert np.isneginf(s[0, 2:]).all()


def test_r_smaller_than_catalog_truncates_candidates():
    cat, q = _toy(3)
    vr = VRRAG(cat, ["g1"], "text", None, r=3)  # 3 chunks -> at most 3 species
    ranking = vr.rank(vr.candidates(q), 0.7, 5)
    assert ranking.species_ids.shape == (5, 3)
    top3 = np.argsort(-(q["g1"] @ cat.chunk_text["g1"].T), axis=1)[:, :3]
    for row, chunks in zip(ranking.species_ids, top3):
        expected = list(dict.fromkeys(cat.species_ids[cat.chunk_species[chunks]]))
        assert row.tolist() == expected + [-1] * (3 - len(expected))


def test_species_means_and_centering():
    v = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    m = species_means(v, np.array([0, 0, 1]), 2)
    np.testing.assert_allclose(m, [[np.sqrt(0.5), np.sqrt(0.5)], [np.sqrt(0.5), np.sqrt(0.5)]], atol=1e-6)
    cat = build_catalog(np.array([10, 11, 12]), np.array([10, 11, 12]), np.array([10, 11, 12]),
                        {"g": np.eye(3, dtype=np.float32)}, {"g": np.eye(3, dtype=np.float32)}, None, True, 2, 1.0, 0)
    np.testing.assert_allclose(cat.centre["g"], [1 / 3] * 3, atol=1e-6)
    few = prepare_queries({"g": np.array([[1, 0, 0]], np.float32)}, cat, True, min_center_batch=2)
    np.testing.assert_allclose(few["g"][0], normalise(np.array([[2 / 3, -1 / 3, -1 / 3]]))[0], atol=1e-6)


def test_bridge_is_cross_fitted_by_species():
    rng = np.random.default_rng(0)
    species = np.repeat(np.arange(20), 2)
    text = rng.normal(size=(40, 5))
    target = text @ rng.normal(size=(5, 4))  # a perfectly linear relation: the bridge should find it
    pred, cos = fit_bridge(text, target, species, folds=2, alpha=1e-6, seed=0)
    assert cos > 0.99
    # changing the targets of some species never changes their own predictions (they are held out)
    held = species_folds(species, 2, seed=0) == 0
    poisoned = target.copy()
    poisoned[held] = rng.normal(size=(held.sum(), 4)) * 100
    pred2, _ = fit_bridge(text, poisoned, species, folds=2, alpha=1e-6, seed=0)
    np.testing.assert_allclose(pred2[held], pred[held], atol=1e-5)


def test_bridge_kept_by_content_is_the_fitted_bits_and_a_changed_input_refits(tmp_path, monkeypatch):
    """Every stage builds the catalog, and a λ experiment rebuilt it with the same inputs: the bridges are kept by
    content. Read back they are the fit's bytes; another alpha or one changed text value is a new fit."""
    from polarcatalog.retrieval import vrrag

    rng = np.random.default_rng(2)
    species = np.repeat(np.arange(10), 2)
    text, target = rng.normal(size=(20, 6)).astype(np.float32), rng.normal(size=(20, 4)).astype(np.float32)
    fresh, cos = fit_bridge(text, target, species, folds=2, alpha=0.5, seed=0)
    fits: list[int] = []
    real = vrrag.ridge_cross_fit
    monkeypatch.setattr(vrrag, "ridge_cross_fit", lambda *a: fits.append(1) or real(*a))
    first, _ = fit_bridge(text, target, species, folds=2, alpha=0.5, seed=0, cache=tmp_path)
    kept, kept_cos = fit_bridge(text, target, species, folds=2, alpha=0.5, seed=0, cache=tmp_path)
    assert fresh.tobytes() == first.tobytes() == kept.tobytes() and kept_cos == cos and len(fits) == 1
    fit_bridge(text, target, species, folds=2, alpha=2.0, seed=0, cache=tmp_path)
    moved = text.copy()
    moved[3, 1] += 1e-3
    fit_bridge(moved, target, species, folds=2, alpha=0.5, seed=0, cache=tmp_path)
    assert len(fits) == 3 and len(list(tmp_path.glob("*.npz"))) == 3


def test_bridge_equals_the_closed_form_ridge_per_fold():
    """sklearn's Ridge on [text, 1] (the bias penalised like every weight) is the textbook solution per held-out fold."""
    rng = np.random.default_rng(1)
    species = np.repeat(np.arange(12), 3)
    text, target = rng.normal(size=(36, 6)), rng.normal(size=(36, 5))
    pred, _ = fit_bridge(text, target, species, folds=3, alpha=0.5, seed=4)
    fold = species_folds(species, 3, seed=4)
    X = np.hstack([text, np.ones((36, 1))])
    for f in range(3):
        tr, te = fold != f, fold == f
        W = np.linalg.solve(X[tr].T @ X[tr] + 0.5 * np.eye(7), X[tr].T @ target[tr])
        np.testing.assert_allclose(pred[te], normalise(X[te] @ W), atol=1e-6)


def test_hubness_correction_equals_csls_and_demotes_a_hub():
    """CSLS (Conneau et al. 2018, §2.3): 2 q·a − r_Q(a) − r_A(q). Folded into the FAISS search as one more column, the
    scores must equal the formula (on q·a's scale: q·a − r_Q(a)/2), and an item close to every query loses the
    queries it does not own."""
    rng = np.random.default_rng(3)
    S, d, k = 40, 16, 5
    anchors = normalise(rng.normal(size=(S, d)))
    hub = normalise(anchors[1:].mean(0, keepdims=True) * 3 + 0.2 * anchors[:1])  # species 0: near the centre of everything
    anchors[0] = hub[0]
    owners = rng.integers(1, S, 60)
    queries = normalise(anchors[owners] + 0.9 * rng.normal(size=(60, d)) / np.sqrt(d) + 0.9 * hub)
    cat = Catalog(np.arange(S), np.arange(S), {"g": anchors, "h": anchors}, {}, {n: np.zeros(d, np.float32) for n in "gh"})
    q = {"g": queries, "h": queries}
    plain = VRRAG(cat, ["g"], "anchors", "h", r=S).candidates(q)
    corrected = VRRAG(cat, ["g"], "anchors", "h", r=S).candidates(q, hubness_k=k)
    sims = queries @ anchors.T
    r_q = np.sort(sims, axis=0)[-k:].mean(0)
    r_a = np.sort(sims, axis=1)[:, -k:].mean(1, keepdims=True)
    csls = 2 * sims - r_q - r_a
    for qi in range(60):
        order = corrected.species_idx[qi]
        assert order.tolist() == np.argsort(-csls[qi], kind="stable").tolist()
        np.testing.assert_allclose(corrected.s_m[qi], sims[qi, order] - r_q[order] / 2, atol=1e-5)
        np.testing.assert_allclose(corrected.s_i[qi], corrected.s_m[qi], atol=1e-5)  # the re-ranker is corrected alike
    won = lambda c: int((c.species_idx[:, 0] == 0).sum())  # noqa: E731
    assert won(plain) >= 10 and won(corrected) <= won(plain) / 2  # the hub stops winning queries it does not own
    top1 = lambda c: float((c.species_idx[:, 0] == owners).mean())  # noqa: E731
    assert top1(corrected) > top1(plain)


def _shifted_queries(seed: int, species: slice, rng: np.random.Generator | None = None):
    """(rng, a centred catalog of 40 species in two encoders g and h, queries of `species`: their anchors plus noise,
    all shifted off the catalog's mean, as a query domain is). With `rng`, the catalog is drawn anew from `seed` and
    the queries from `rng`, so a second call adds a disjoint draw of queries to the same catalog."""
    base = np.random.default_rng(seed)
    anchors = {n: base.normal(size=(40, 16)).astype(np.float32) for n in ("g", "h")}
    ids = np.arange(40)
    cat = build_catalog(ids, ids, ids, anchors, {n: None for n in anchors}, None, True, 2, 1.0, 0)
    rng = rng or base
    queries = {n: (a[species] + 0.8 * rng.normal(size=a[species].shape) + 1.5).astype(np.float32) for n, a in anchors.items()}
    return rng, cat, queries


def test_reference_statistics_score_each_query_on_its_own():
    """`query_centre: reference`: queries are centred by a fixed reference set's mean and CSLS reads the reference's
    neighbourhoods, so a query's candidates do not depend on the other queries of its batch (as they do with `batch`)."""
    rng, cat, queries = _shifted_queries(3, slice(0, 12))
    _, _, reference = _shifted_queries(3, slice(20, 40), rng)
    with pytest.raises(ValueError, match="reference queries"):
        prepare_queries(queries, cat, True, 2, "reference")
    prep = lambda q, by: prepare_queries(q, cat, True, 2, by, reference)  # noqa: E731
    np.testing.assert_allclose(prep(queries, "reference")["g"], normalise(queries["g"] - reference["g"].mean(0)), atol=1e-6)
    vr = VRRAG(cat, ["g"], "anchors", "h", r=10)
    ref = prep(reference, "reference")
    every = vr.candidates(prep(queries, "reference"), hubness_k=5, hubness_ref=ref)
    alone = vr.candidates(prep({n: q[:3] for n, q in queries.items()}, "reference"), hubness_k=5, hubness_ref=ref)
    np.testing.assert_array_equal(alone.species_idx, every.species_idx[:3])
    np.testing.assert_allclose(alone.s_i, every.s_i[:3], atol=1e-6)
    batch_all = vr.candidates(prep(queries, "batch"), hubness_k=5)
    batch_few = vr.candidates(prep({n: q[:3] for n, q in queries.items()}, "batch"), hubness_k=5)
    assert not np.allclose(batch_few.s_m, batch_all.s_m[:3])  # the batch's own statistics move every score


def test_a_batch_too_small_for_its_own_statistics_falls_back_to_small_batch_centre():
    """The configured batch centring needs `min_center_batch` queries. A smaller batch (a user's small folder) is scored
    one query at a time: by default with the dev queries' mean and CSLS neighbourhoods (`reference`), on request by the
    catalog mean with no CSLS (`catalog`). A large enough batch keeps its own statistics."""
    import pandas as pd

    from polarcatalog.retrieval.query_side import query_side
    from polarcatalog.config import Retrieval
    from polarcatalog.features.workspace import Workspace

    _, cat, pool = _shifted_queries(5, slice(0, 30))
    split = np.array(["dev"] * 20 + ["test"] * 10)  # the workspace's own queries: 20 dev ones are the reference
    ws = Workspace(None, None, pd.DataFrame({"split": split}), None, {}, {}, pool, {}, None)
    rp = Retrieval(ensemble=["g"], reranker="h", center=True, query_centre="batch", min_center_batch=8, hubness="csls",
                   hubness_k=5)
    few = {n: q[20:24] for n, q in pool.items()}  # 4 < 8
    side = query_side(few, cat, rp, ws)
    assert side.by == "reference" and side.hubness_k == 5 and side.hubness_ref is not None
    np.testing.assert_allclose(side.queries["g"], normalise(few["g"] - pool["g"][:20].mean(0)), atol=1e-6)
    alone = query_side({n: q[:1] for n, q in few.items()}, cat, rp, ws)  # each query's vector is its own business
    np.testing.assert_allclose(alone.queries["g"][0], side.queries["g"][0], atol=1e-6)
    cat_side = query_side(few, cat, rp.model_copy(update={"small_batch_centre": "catalog"}), ws)
    assert cat_side.by == "catalog" and cat_side.hubness_k is None
    big = query_side({n: q[:10] for n, q in pool.items()}, cat, rp, ws)
    assert big.by == "batch" and big.hubness_ref is None


@pytest.mark.parametrize("centre", ["reference", "batch", "catalog"])
def test_no_test_query_enters_a_statistic_that_scores_a_dev_query(centre):
    """The workspace's queries are scored by the protocol's groups (`statistics_groups`): replacing every test query by
    noise, or deleting the test queries, leaves every dev query's candidates and scores exactly as they were."""
    import pandas as pd

    from polarcatalog.config import Retrieval
    from polarcatalog.features.workspace import Workspace
    from polarcatalog.retrieval.query_side import Retriever, statistics_groups

    _, cat, pool = _shifted_queries(7, slice(0, 40))
    species = np.arange(40)
    split = np.where(species % 3 == 0, "dev", "test")
    rp = Retrieval(ensemble=["g"], reranker="h", center=True, query_centre=centre, min_center_batch=4, hubness="csls",
                   hubness_k=3, reference_folds=3, r=10, k=5)

    def dev_candidates(queries: pd.DataFrame, features: dict[str, np.ndarray]):
        ws = Workspace(None, None, queries, None, {}, {}, features, {}, None)
        c = Retriever(ws, rp, cat, VRRAG(cat, ["g"], "anchors", "h", r=10)).candidates()
        dev = queries["split"].to_numpy() == "dev"
        return c.species_idx[dev], c.s_m[dev], c.s_i[dev]

    queries = pd.DataFrame({"species_id": species, "split": split})
    before = dev_candidates(queries, pool)
    test = split == "test"
    noisy = {n: np.where(test[:, None], np.random.default_rng(1).normal(size=f.shape).astype(np.float32), f) for n, f in pool.items()}
    for after in (dev_candidates(queries, noisy),
                  dev_candidates(queries[~test].reset_index(drop=True), {n: f[~test] for n, f in pool.items()})):
        for b, a in zip(before, after):
            np.testing.assert_array_equal(a, b)
    groups = statistics_groups(Workspace(None, None, queries, None, {}, {}, pool, {}, None), rp)
    for rows, reference in groups:  # and dev is never its own reference
        assert reference is None or not set(rows) & set(reference)
        assert reference is None or set(split[reference]) == {"dev"}


def test_workspace_candidates_kept_by_content_are_the_searched_bits_and_any_input_change_searches_again(tmp_path, monkeypatch):
    """Every stage that reads the configured retrieval searched the same queries against the same catalog again, and a
    λ experiment searched everything anew for a re-sort. Kept by content: read back they are the search's bytes; λ
    and k (a re-sort) read them back; r, a CSLS knob or one query value is a new search; a damaged file is searched
    again, never read."""
    import pandas as pd

    from polarcatalog.config import Retrieval
    from polarcatalog.features.workspace import Workspace
    from polarcatalog.retrieval.query_side import Retriever

    _, cat, pool = _shifted_queries(7, slice(0, 40))
    species = np.arange(40)
    queries = pd.DataFrame({"species_id": species, "split": np.where(species % 3 == 0, "dev", "test")})
    rp = Retrieval(ensemble=["g"], reranker="h", hubness="csls", hubness_k=3, reference_folds=3, r=10, k=5,
                   min_center_batch=4)
    searches: list[int] = []
    real = Retriever._search_workspace
    monkeypatch.setattr(Retriever, "_search_workspace", lambda self: searches.append(1) or real(self))

    def candidates(rp, features=pool, derived=tmp_path):
        ws = Workspace(None, None, queries, None, {}, {}, features, {}, None, derived=derived)
        return vars(Retriever(ws, rp, cat, VRRAG(cat, ["g"], "anchors", "h", r=rp.r)).candidates())

    fresh = candidates(rp, derived=None)
    kept = candidates(rp)
    resorted = candidates(rp.model_copy(update={"lam": 0.1, "k": 2}))
    assert len(searches) == 2  # the uncached one and the first kept one; λ and k read it back
    for name in fresh:
        assert fresh[name].dtype == resorted[name].dtype and fresh[name].tobytes() == kept[name].tobytes() == resorted[name].tobytes()
    candidates(rp.model_copy(update={"r": 8}))
    candidates(rp.model_copy(update={"hubness_k": 4}))
    moved = {n: f.copy() for n, f in pool.items()}
    moved["h"][0, 0] += 1e-3  # one value of one query's re-ranker vector
    candidates(rp, moved)
    assert len(searches) == 5
    files = sorted((tmp_path / "candidates").glob("*.npz"))
    assert len(files) == 4
    for f in files:
        f.write_bytes(b"damaged")
    assert candidates(rp)["s_i"].tobytes() == fresh["s_i"].tobytes() and len(searches) == 6


def test_the_catalog_kept_by_content_is_the_built_catalogs_bits_and_any_input_change_builds_it_again(tmp_path, monkeypatch):
    """Every stage of a λ experiment built the same catalog (colour projection, species means, bridges). Kept by
    content: read back, it is the build's bytes, in the build's order; λ reads it back; a colour-projection knob, the
    centring or one anchor value is a new build; a damaged file is built again, never read."""
    import pandas as pd

    from polarcatalog.config import Retrieval
    from polarcatalog.features.workspace import Workspace
    from polarcatalog.retrieval import query_side

    rng = np.random.default_rng(11)
    species, owner, chunk_owner = np.arange(30), np.repeat(np.arange(30), 2), np.repeat(np.arange(30), 3)
    anchors = {n: rng.normal(size=(60, 12)).astype(np.float32) for n in ("g", "h")}
    text = rng.normal(size=(90, 8)).astype(np.float32)  # the text encoder, bridged into h; g has its own text tower
    basis = normalise(rng.normal(size=(4, 12))).astype(np.float32)
    native = {"g": normalise(rng.normal(size=(90, 12))).astype(np.float32), "h": None}
    builds: list[int] = []
    real = query_side.build_catalog
    monkeypatch.setattr(query_side, "build_catalog", lambda *a, **k: builds.append(1) or real(*a, **k))

    def catalog(rp, features=anchors, derived=tmp_path / "cache"):
        ws = Workspace(pd.DataFrame({"species_id": species}), pd.DataFrame({"species_id": owner}), None,
                       pd.DataFrame({"species_id": chunk_owner}), {}, features, {}, native, text,
                       colour_basis={"g": basis, "h": basis}, derived=derived)
        return query_side.catalog_for(ws, rp)

    rp = Retrieval(ensemble=["g", "h"], reranker=None, chunks="anchors", colour_invariant=["g"], colour_invariant_dim=2,
                   bridge_folds=2)
    fresh = catalog(rp, derived=None)
    kept, again, other_lam = catalog(rp), catalog(rp), catalog(rp.model_copy(update={"lam": 0.1}))
    assert len(builds) == 2  # the uncached one and the first kept one
    for got in (kept, again, other_lam):
        arrays, want = query_side.catalog_arrays(got), query_side.catalog_arrays(fresh)
        assert list(arrays) == list(want) and got.bridge_cosine == fresh.bridge_cosine and "bridge_cosine/h" in want
        assert all(arrays[k].dtype == want[k].dtype and arrays[k].tobytes() == want[k].tobytes() for k in want)
        assert not got.anchor_mean["g"].flags.writeable and not got.chunk_text["h"].flags.writeable
    catalog(rp.model_copy(update={"colour_invariant_dim": 3}))
    catalog(rp.model_copy(update={"center": False}))
    moved = {n: a.copy() for n, a in anchors.items()}
    moved["h"][0, 0] += 1e-3
    catalog(rp, moved)
    assert len(builds) == 5
    files = sorted((tmp_path / "cache" / "catalogs").glob("*.npz"))
    assert len(files) == 4
    for f in files:
        f.write_bytes(b"damaged")
    assert catalog(rp).anchor_mean["h"].tobytes() == fresh.anchor_mean["h"].tobytes() and len(builds) == 6


def test_the_bridge_cross_fit_is_scikit_learns_ridge_to_the_bit():
    """`ridge_cross_fit` does scikit-learn's arithmetic without importing it into every stage's kernel: it must give
    `cross_val_predict(Ridge(cholesky, no intercept), cv=PredefinedSplit)`'s values bit for bit, which every
    committed bridged catalog was computed with."""
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import PredefinedSplit, cross_val_predict

    from polarcatalog.eval.splits import species_folds
    from polarcatalog.retrieval.vrrag import ridge_cross_fit

    rng = np.random.default_rng(0)
    for rows, width, targets, folds, alpha in ((600, 49, 80, 2, 1.0), (300, 17, 5, 3, 0.37), (90, 120, 7, 2, 10.0)):
        species = rng.integers(0, rows // 5, rows)
        X = np.hstack([rng.normal(size=(rows, width - 1)), np.ones((rows, 1))])
        Y = rng.normal(size=(rows, targets))
        fold = species_folds(species, folds, 0)
        expected = cross_val_predict(Ridge(alpha, fit_intercept=False, solver="cholesky"), X, Y, cv=PredefinedSplit(fold))
        assert ridge_cross_fit(X, Y, fold, alpha).tobytes() == expected.tobytes(), (rows, width, targets)


def test_species_means_sum_each_species_rows_in_row_order_to_the_bit():
    """The per-species sums (a 0/1 sparse product) must be np.add.at's, bit for bit (every committed catalog used them)."""
    from polarcatalog.retrieval.vrrag import species_means
    from polarcatalog.vectors import l2_normalise

    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(500, 33)).astype(np.float32)
    owner = rng.integers(0, 60, 500)
    sums = np.zeros((70, 33), np.float64)
    np.add.at(sums, owner, vectors)
    expected = l2_normalise(sums / np.maximum(np.bincount(owner, minlength=70), 1)[:, None])
    assert species_means(vectors, owner, 70).tobytes() == expected.tobytes()


def test_group_sums_are_np_add_at_to_the_bit_for_any_dtype_and_empty_groups():
    """`vectors.group_sums` (species means, the catalog look-alikes) must add in np.add.at's order."""
    from polarcatalog.vectors import group_sums

    rng = np.random.default_rng(2)
    for dtype in (np.float32, np.float64):
        x = (rng.normal(size=(400, 17)) * 10.0 ** rng.integers(-3, 4, (400, 1))).astype(dtype)
        group = rng.integers(0, 50, 400)  # groups 50..59 stay empty
        expected = np.zeros((60, 17))
        np.add.at(expected, group, x)
        assert group_sums(x, group, 60).tobytes() == expected.tobytes()
    assert group_sums(np.zeros((3, 0)), np.array([0, 1, 1]), 2).shape == (2, 0)
