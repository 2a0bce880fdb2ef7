"""Anchor filters on labelled mixes: synthetic features, and real images with the real embedded encoder."""

import numpy as np
import pytest
from PIL import Image

from polarcatalog.curate.anchors import ImageNetBirdFilter, PrototypeFilter, precision_recall, robust_prototype
from polarcatalog.data.images import load_rgb
from polarcatalog.data.samples import non_bird_images
from tests.conftest import shared


def test_robust_prototype_rejects_off_cluster_points():
    rng = np.random.default_rng(0)
    centre = rng.normal(size=64)
    inliers = centre + 0.3 * rng.normal(size=(90, 64))
    outliers = rng.normal(size=(10, 64)) * 1.5
    res = robust_prototype(np.vstack([inliers, outliers]), z=3.0)
    truth = np.r_[np.ones(90, bool), np.zeros(10, bool)]
    pr = precision_recall(res.keep, truth)
    assert pr["precision"] == 1.0 and pr["recall"] >= 0.95
    assert res.scores[:90].min() > res.scores[90:].max()  # the score itself separates the two groups


def test_precision_recall_hand_computed():
    keep = np.array([1, 1, 0, 0, 1], bool)
    truth = np.array([1, 0, 1, 0, 1], bool)
    assert precision_recall(keep, truth) == {"precision": 2 / 3, "recall": 2 / 3, "tp": 2, "fp": 1, "fn": 1, "tn": 1}
    assert np.isnan(precision_recall(np.zeros(2, bool), np.zeros(2, bool))["precision"])


@pytest.fixture(scope="module")
def lite0():
    import torch

    from polarcatalog.encoders import create_encoder

    torch.set_num_threads(2)
    return create_encoder("efficientnet_lite0", "image", "cpu")


def test_imagenet_bird_filter_on_clipart_birds_vs_photos(lite0):
    birds = [load_rgb(p) for p in sorted(shared("openclipart_birds").glob("*.png"))]
    others = list(non_bird_images().values())
    res = ImageNetBirdFilter(lite0, threshold=0.1)(birds + others)
    truth = np.r_[np.ones(len(birds), bool), np.zeros(len(others), bool)]
    pr = precision_recall(res.keep, truth)
    # measured: precision 1.0, recall ~0.33 (clip art is hard for an ImageNet photo classifier)
    assert pr["precision"] >= 0.9 and pr["recall"] >= 0.2
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(truth, res.scores) >= 0.8


def test_prototype_filter_keeps_artwork_rejects_photos(lite0):
    from polarcatalog.data.packages import pokemon_package_dir

    art = [load_rgb(pokemon_package_dir() / "images" / f"{i}.jpg") for i in range(1, 61)]
    junk = list(non_bird_images().values())[:6]
    res = PrototypeFilter(lite0, z=3.0)(art + junk)
    pr = precision_recall(res.keep, np.r_[np.ones(len(art), bool), np.zeros(len(junk), bool)])
    assert pr["precision"] == 1.0 and pr["recall"] >= 0.9, pr


def test_efficientnet_weights_load_with_shape_check(lite0):
    x = Image.new("RGB", (50, 70), (255, 0, 0))
    feats, probs = lite0.forward([x, x])
    assert feats.shape == (2, 1280) and probs.shape == (2, 1000)
    assert np.allclose(np.linalg.norm(feats, axis=1), 1, atol=1e-5)
    assert np.allclose(probs.sum(1), 1, atol=1e-4)
    assert np.allclose(feats[0], feats[1], atol=1e-6)  # inference is deterministic


def test_filter_anchors_quarantines_broken_candidates_and_keeps_every_species(lite0, tmp_path):
    import pandas as pd

    from polarcatalog.curate.pipeline import filter_anchors
    from polarcatalog.data.packages import pokemon_package_dir
    from polarcatalog.data.images import Quarantine

    art = pokemon_package_dir() / "images"
    empty, truncated = tmp_path / "empty.jpg", tmp_path / "trunc.jpg"
    empty.write_bytes(b"")
    truncated.write_bytes((art / "4.jpg").read_bytes()[:300])
    rows = [(i, str(art / f"{i}.jpg"), "artwork", True) for i in range(1, 31)]
    rows += [(31, str(empty), "crawl", True), (31, str(truncated), "crawl", True)]  # species 31: only broken files...
    rows += [(32, str(art / "32.jpg"), "artwork", True)]
    cand = pd.DataFrame(rows, columns=["species_id", "path", "source", "is_target"])
    q = Quarantine(tmp_path / "q")
    out = filter_anchors(cand, PrototypeFilter(lite0, z=3.0), q)
    assert sorted(r["reason"].split(":")[0] for r in q.rows) == ["empty file (0 bytes)", "truncated"]
    assert out["loaded"].sum() == 31 and not out.loc[out["species_id"] == 31, "keep"].any()
    assert set(out.loc[out["keep"], "species_id"]) == set(range(1, 31)) | {32}  # ...so only it has no anchor
    # each loaded image's bytes and near-duplicate hash, for the kg stage's leakage check; none for a broken file
    from polarcatalog.data.images import load_rgb
    from polarcatalog.data.near_duplicates import dhash_hex
    from polarcatalog.io import sha256_file

    loaded = out[out["loaded"]]
    assert loaded["sha256"].tolist() == [sha256_file(p) for p in loaded["path"]]
    assert loaded["dhash"].tolist() == [dhash_hex(load_rgb(p)) for p in loaded["path"]]
    assert out.loc[~out["loaded"], ["sha256", "dhash"]].isna().all().all()
