"""Real encoder classes (tiny, random, offline) through the one encode-and-cache path; FAISS vs brute force."""

from __future__ import annotations

import contextlib
import os
import warnings

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from polarcatalog.encoders import ImageEncoder, TextEncoder, create_encoder, has_text_tower, image_encoder
from polarcatalog.encoders.registry import DeferredImageEncoder, parse_encoder
from polarcatalog.data.regions import content_box
from polarcatalog.encoders.preprocess import Preprocess, apply, derive, local_views
from polarcatalog.features.cache import CacheError, FeatureCache
from polarcatalog.features.encode import encode_image_files, encode_image_views, encode_texts



@pytest.fixture(autouse=True)
def _threads():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def images(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(5):
        a = np.full((50, 60, 3), 255, np.uint8)
        a[10:40, 15:45] = rng.integers(0, 255, (30, 30, 3))
        p = tmp_path / f"im{i}.png"
        Image.fromarray(a).save(p)
        paths.append(str(p))
    return paths


def test_open_clip_through_the_cache(tiny_clip_name, images, tmp_path):
    torch.manual_seed(0)
    enc = create_encoder(f"open_clip:{tiny_clip_name}:random", "image", "cpu")
    assert enc.dim == 16 and has_text_tower(f"open_clip:{tiny_clip_name}:random")
    assert isinstance(enc, ImageEncoder) and isinstance(enc, TextEncoder)  # one object, both towers
    views = Preprocess(content_box=True, scale_to=None, flip=True)
    stats: dict[str, int] = {}
    first, ok = encode_image_files(enc, images, tmp_path / "cache", views, stats=stats)
    assert ok.all() and first.shape == (5, 16) and np.allclose(np.linalg.norm(first, axis=1), 1, atol=1e-5)
    assert stats == {"hits": 0, "misses": 5}
    second, _ = encode_image_files(enc, images, tmp_path / "cache", views, stats=stats)
    assert stats == {"hits": 5, "misses": 5}  # cache hit: nothing re-encoded
    np.testing.assert_array_equal(first, second)
    # other views are other features: new keys, encoded once
    plain, _ = encode_image_files(enc, images, tmp_path / "cache", Preprocess(True, None, False), stats=stats)
    assert stats["misses"] == 10 and not np.allclose(plain, first)
    # the flipped view is the encoder's view of the content box's mirror image
    mirror = ImageOps.mirror(content_box(Image.open(images[0]).convert("RGB")))
    np.testing.assert_allclose(first[0], enc.encode_images([mirror])[0], atol=1e-5)
    texts = encode_texts(enc, ["a red bird", "a blue fish"], tmp_path / "cache", stats=stats)
    assert texts.shape == (2, 16) and stats["misses"] == 12


@pytest.mark.parametrize("name", ["efficientnet_lite0@64", "open_clip:{tiny}:random"])
def test_a_rerun_that_finds_every_vector_in_the_cache_never_builds_the_model(name, tiny_clip_name, images, tmp_path):
    """`image_encoder` knows the id without the model: the first run builds it on its first miss; a second run over the
    same images finds every vector and never builds it (no model library imported, no weights read)."""
    name = name.format(tiny=tiny_clip_name)
    views = Preprocess(content_box=True, scale_to=None, flip=False)
    first = image_encoder(name, "cpu")
    assert isinstance(first, DeferredImageEncoder) and first._built is None
    a, _ = encode_image_files(first, images, tmp_path / "cache", views)
    assert first._built is not None and first._built.id == first.id  # built on the misses, under the id it announced
    again = image_encoder(name, "cpu")
    stats: dict[str, int] = {}
    b, ok = encode_image_files(again, images, tmp_path / "cache", views, stats=stats)
    assert again._built is None and stats == {"hits": len(images), "misses": 0} and ok.all()
    np.testing.assert_array_equal(a, b)
    # an id that is not the built encoder's would file its vectors under another model's keys: refused when built
    with pytest.raises(RuntimeError, match="differs from the built encoder"):
        DeferredImageEncoder("efficientnet_lite0@pypi:99px:ort-as-trained", lambda: create_encoder(name, "image", "cpu")).dim


def test_open_clip_local_checkpoint_file_reproduces_embeddings(tiny_clip_name, images, tmp_path):
    from safetensors.torch import save_file

    torch.manual_seed(1)
    enc = create_encoder(f"open_clip:{tiny_clip_name}:random", "image", "cpu")
    ckpt = tmp_path / "tiny.safetensors"
    save_file({k: v.contiguous() for k, v in enc.model.state_dict().items()}, str(ckpt))
    loaded = create_encoder(f"open_clip:{tiny_clip_name}:{ckpt}", "image", "cpu")
    ims = [Image.open(p).convert("RGB") for p in images]
    np.testing.assert_allclose(enc.encode_images(ims), loaded.encode_images(ims), atol=1e-6)
    assert "tiny.safetensors" in loaded.id
    with pytest.raises(ValueError, match="checkpoint file .* not found"):
        create_encoder(f"open_clip:{tiny_clip_name}:{tmp_path / 'nope.safetensors'}", "image", "cpu")


def test_open_clip_local_dir_keeps_its_release_preprocessing(tiny_clip_name, images, tmp_path):
    """A `local-dir:` folder (open_clip's release layout) carries the architecture, the weights *and* the
    preprocessing: SigLIP-style mean/std of 0.5 reach the encoder, where a bare checkpoint file would get the
    architecture's default (OpenAI's) statistics. Replacing the weights is a new cache id."""
    import json

    from safetensors.torch import save_file

    from tests.conftest import TINY_CLIP

    torch.manual_seed(2)
    enc = create_encoder(f"open_clip:{tiny_clip_name}:random", "image", "cpu")
    folder = tmp_path / "release"
    folder.mkdir()
    (folder / "open_clip_config.json").write_text(json.dumps(
        {"model_cfg": TINY_CLIP, "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "resize_mode": "squash"}}))
    save_file({k: v.contiguous() for k, v in enc.model.state_dict().items()}, str(folder / "open_clip_model.safetensors"))
    name = f"open_clip:local-dir:{folder}"
    assert parse_encoder(name).name == name and parse_encoder(name).pretrained is None and has_text_tower(name)
    loaded = create_encoder(name, "image", "cpu")
    normalize = loaded.preprocess.transforms[-1]
    assert list(normalize.mean) == [0.5, 0.5, 0.5] and list(normalize.std) == [0.5, 0.5, 0.5]
    ims = [Image.open(p).convert("RGB") for p in images]
    assert not np.allclose(enc.encode_images(ims), loaded.encode_images(ims), atol=1e-4)  # same weights, other inputs
    np.testing.assert_allclose(enc.encode_texts(["a red bird"]), loaded.encode_texts(["a red bird"]), atol=1e-6)
    before = image_encoder(name, "cpu").id
    save_file({k: v.contiguous() + 1 for k, v in enc.model.state_dict().items()}, str(folder / "open_clip_model.safetensors"))
    os.utime(folder / "open_clip_model.safetensors", (1, 1))
    assert image_encoder(name, "cpu").id != before
    (folder / "open_clip_config.json").unlink()
    with pytest.raises(ValueError, match="open_clip_config.json not found"):
        parse_encoder(name)


def test_an_architecture_in_the_projects_config_folder_builds_in_any_process(tmp_path, monkeypatch):
    """`models/open_clip_configs/<name>.json` defines an architecture for every process of the project: the name
    resolves without a test's or a user's own `add_model_config` call."""
    import json
    import subprocess
    import sys

    from tests.conftest import TINY_CLIP

    (tmp_path / "models" / "open_clip_configs").mkdir(parents=True)
    (tmp_path / "models" / "open_clip_configs" / "pc-project-clip.json").write_text(json.dumps(TINY_CLIP))
    code = ("from polarcatalog.encoders import create_encoder; "
            "print(create_encoder('open_clip:pc-project-clip:random', 'image', 'cpu').dim)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "POLARCATALOG_ROOT": str(tmp_path)},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "16"


def test_dinov2_hf_through_the_same_path(images, tmp_path):
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    torch.manual_seed(0)
    folder = tmp_path / "dinov2"
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, image_size=56)).save_pretrained(folder)
    BitImageProcessor(size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56},
                      image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]).save_pretrained(folder)
    name = f"hf:{folder}"
    assert not has_text_tower(name)
    enc = create_encoder(name, "image", "cpu")
    stats: dict[str, int] = {}
    v, ok = encode_image_files(enc, images + [str(tmp_path / "missing.png")], tmp_path / "cache", Preprocess(), stats=stats)
    assert enc.dim == 32 and v.shape == (6, 32) and ok.tolist() == [True] * 5 + [False]
    assert np.allclose(np.linalg.norm(v[:5], axis=1), 1, atol=1e-5) and not v[5].any()
    assert len(FeatureCache(tmp_path / "cache", enc.id).index) == 5  # the unreadable file is not cached
    with pytest.raises(ValueError, match="no text tower"):
        enc.encode_texts(["x"])


def test_embedded_text_encoder_is_offline_and_normalised(tmp_path):
    enc = create_encoder("minilm", "text", "cpu")
    assert isinstance(enc, TextEncoder) and not isinstance(enc, ImageEncoder)
    v = encode_texts(enc, ["A small green Pokémon with a bulb.", "A yellow mouse."], tmp_path / "c")
    assert v.shape == (2, 384) and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    assert float(v[0] @ v[1]) < 0.99


def test_faiss_flat_equals_brute_force_and_ivf_finds_clusters():
    from polarcatalog.index import build_index, search

    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 24)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[:20] + 0.01 * rng.normal(size=(20, 24)).astype(np.float32)
    scores, ids = search(build_index(x, "flat", use_gpu=False), q, 5)
    brute = q @ x.T
    np.testing.assert_array_equal(ids, np.argsort(-brute, axis=1)[:, :5])
    np.testing.assert_allclose(scores, -np.sort(-brute, axis=1)[:, :5], atol=1e-5)
    _, ivf_ids = search(build_index(x, "ivf", nlist=8, use_gpu=False), q, 1)
    assert (ivf_ids[:, 0] == np.arange(20)).mean() >= 0.9


def test_ivf_nlist_beyond_what_the_vectors_train_is_said_and_capped():
    """500 vectors train at most 12 lists: asking for 256 used 12 without a word, while the run's configuration line
    named 256."""
    from polarcatalog.index import build_index

    x = np.random.default_rng(0).normal(size=(500, 8)).astype(np.float32)
    with pytest.warns(UserWarning, match=r"retrieval.ivf_nlist = 256: 500 vectors train at most 12 IVF lists"):
        index = build_index(x, "ivf", nlist=256, use_gpu=False)
    assert index.nlist == 12
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a value within reach is used as given, silently
        assert build_index(x, "ivf", nlist=12, use_gpu=False).nlist == 12


def test_cache_returns_repeated_keys_in_request_order(tmp_path):
    cache = FeatureCache(tmp_path, "enc@test")
    cache.put(["a", "b"], np.array([[1, 0], [0, 1]], np.float32))
    cache.put(["c"], np.array([[2, 2]], np.float32))
    found, vecs = FeatureCache(tmp_path, "enc@test").get(["c", "x", "a", "c", "b"])  # a fresh instance reads the disk
    assert found.tolist() == [True, False, True, True, True]
    np.testing.assert_array_equal(vecs, [[2, 2], [1, 0], [2, 2], [0, 1]])


def test_a_cache_verifies_each_shard_once_however_many_views_ask(tmp_path, monkeypatch):
    """A stage reads the same shards once per view: hashing them again each time made a cached embed stage slow."""
    FeatureCache(tmp_path, "enc@once").put(["a", "b"], np.array([[1, 0], [0, 1]], np.float32))
    cache = FeatureCache(tmp_path, "enc@once")
    cache.put(["c"], np.array([[2, 2]], np.float32))
    loads = []
    real = FeatureCache._load_shard
    monkeypatch.setattr(FeatureCache, "_load_shard", lambda self, shard, sha: loads.append(shard) or real(self, shard, sha))
    for _ in range(3):
        found, vecs = cache.get(["b", "c", "a"])
        assert found.all()
        np.testing.assert_array_equal(vecs, [[0, 1], [2, 2], [1, 0]])
    assert sorted(loads) == sorted(set(loads)) and len(loads) == 2  # two shards, each read and hashed once
    cache.put(["d"], np.array([[3, 3]], np.float32))  # a put refreshes the key lookup
    assert cache.get(["d", "a"])[0].all() and len(loads) == 3


def test_local_views_are_overlapping_cells_with_their_own_cache_keys(tiny_clip_name, images, tmp_path):
    from polarcatalog.data.regions import grid_cell

    im = Image.new("RGB", (100, 60))
    cells = [grid_cell(im, 2, r, c) for r in range(2) for c in range(2)]
    assert [c.size for c in cells] == [(75, 45)] * 4  # (1 + 0.5) / 2 of each side
    assert grid_cell(im, 3, 2, 2).size == (50, 30) and grid_cell(im, 1, 0, 0).size == (100, 60)
    with pytest.raises(ValueError, match="outside a 2x2 grid"):
        grid_cell(im, 2, 2, 0)
    # the bottom-right cell ends at the image corner
    marked = Image.new("RGB", (100, 60), (255, 255, 255))
    marked.putpixel((99, 59), (255, 0, 0))
    assert grid_cell(marked, 2, 1, 1).getpixel((74, 44)) == (255, 0, 0)
    glob = Preprocess(True, 27, True)
    views = local_views(glob, 2)
    assert [v.cell for v in views] == [(2, 0, 0), (2, 0, 1), (2, 1, 0), (2, 1, 1)] and not any(v.flip for v in views)
    assert all(v.scale_to == 27 for v in views) and len({v.key() for v in [glob, *views]}) == 5
    assert Preprocess().key() == '{"content_box": 2, "scale_to": null}'  # unset options stay out; content_box names its version
    assert Preprocess(False).key() == '{"content_box": false, "scale_to": null}'
    torch.manual_seed(0)
    enc = create_encoder(f"open_clip:{tiny_clip_name}:random", "image", "cpu")
    stats: dict[str, int] = {}
    whole, _ = encode_image_files(enc, images, tmp_path / "cache", Preprocess(True, None, False), stats=stats)
    part, _ = encode_image_files(enc, images, tmp_path / "cache", Preprocess(True, None, False, (2, 0, 0)), stats=stats)
    assert stats == {"hits": 0, "misses": 10} and not np.allclose(whole, part)


def test_views_cut_from_one_decode_equal_the_per_view_path(tiny_clip_name, images, tmp_path):
    """The embed stage decodes an image once and cuts every view from it (`derive`, `encode_image_views`); each view
    must be exactly what the one-view path (`apply`, `encode_image_files`) gives, image for image and vector for vector."""
    views = [Preprocess(True, 20), Preprocess(True, 20, flip=True), *local_views(Preprocess(True, 20), 2), Preprocess(False, None, True),
             Preprocess(True, 20, flip=True, grey=True), Preprocess(True, 20, hue_shift=120)]
    im = Image.open(images[1]).convert("RGB")
    for one, each in zip(derive(im, views), views):
        assert np.array_equal(np.asarray(one), np.asarray(apply(im, each)))
    torch.manual_seed(0)
    enc = create_encoder(f"open_clip:{tiny_clip_name}:random", "image", "cpu")
    together, ok = encode_image_views(enc, images, tmp_path / "together", views, batch_size=4)
    assert ok.all() and len(together) == len(views)
    for j, v in enumerate(views):
        alone, _ = encode_image_files(enc, images, tmp_path / f"alone{j}", v, batch_size=3)
        np.testing.assert_allclose(together[j], alone, atol=1e-6)
    stats: dict[str, int] = {}
    again, _ = encode_image_views(enc, images, tmp_path / "together", views, stats=stats)
    assert stats == {"hits": len(views) * len(images), "misses": 0}  # a second run decodes and encodes nothing
    np.testing.assert_array_equal(np.stack(again), np.stack(together))


def test_what_a_request_returns_does_not_depend_on_what_the_cache_held(tiny_clip_name, tmp_path):
    """A large JPEG is decoded at a reduced size when every view of a request shrinks it (`decode_size`), so a 20-px
    view cut from the decode a 100-px view needs is another vector than the 20-px view asked alone. The cache key names
    the decode: asked in either order, each request returns what it returns on an empty cache."""
    rng = np.random.default_rng(4)
    paths = []
    for i in range(3):
        a = np.full((900, 900, 3), 255, np.uint8)
        a[100:800, 150:750] = np.kron(rng.integers(0, 230, (70, 60, 3)), np.ones((10, 10, 1))).astype(np.uint8)
        paths.append(str(tmp_path / f"art{i}.jpg"))
        Image.fromarray(a).save(paths[-1], quality=90)
    torch.manual_seed(0)
    enc = create_encoder(f"open_clip:{tiny_clip_name}:random", "image", "cpu")
    small, large = Preprocess(True, 20), Preprocess(True, 100)
    fresh_pair, _ = encode_image_views(enc, paths, tmp_path / "pair", [large, small])
    fresh_alone, _ = encode_image_views(enc, paths, tmp_path / "alone", [small])
    assert np.abs(fresh_pair[1] - fresh_alone[0]).max() > 1e-4  # two decodes, two vectors
    for first, second in (([small], [large, small]), ([large, small], [small])):
        cache = tmp_path / f"order{len(first)}"
        a, _ = encode_image_views(enc, paths, cache, first)
        b, _ = encode_image_views(enc, paths, cache, second)
        got = {len(first): a, len(second): b}
        np.testing.assert_allclose(got[2][1], fresh_pair[1], atol=1e-6)
        np.testing.assert_allclose(got[1][0], fresh_alone[0], atol=1e-6)


@pytest.mark.parametrize("size", [192, 224, 260])
def test_a_flipped_views_resize_is_the_mirror_of_its_unflipped_views(size):
    """`resize_views` mirrors the unflipped view's resize for its flip instead of resizing again: bicubic resampling
    is mirror symmetric, so the pixels are the same as resizing each view on its own (odd and even sizes, up and down)."""
    from polarcatalog.encoders.preprocess import resize_views

    rng = np.random.default_rng(size)
    for w, h in [(23, 17), (25, 31), (48, 48), (331, 402), (7, 60)]:
        a = np.full((h + 8, w + 6, 3), 255, np.uint8)
        a[4 : 4 + h, 3 : 3 + w] = rng.integers(0, 230, (h, w, 3))
        views = [Preprocess(True, 20), Preprocess(True, 20, flip=True), Preprocess(True, None, flip=True),
                 Preprocess(True, 20, flip=True, grey=True), Preprocess(True, None)]
        derived = derive(Image.fromarray(a), views)
        each = [np.asarray(im.convert("RGB").resize((size, size), Image.Resampling.BICUBIC)) for im in derived]
        for got, want in zip(resize_views(derived, size), each):
            assert np.array_equal(got, want)


def test_colour_views_keep_the_drawing_and_change_only_its_colours():
    """Grey: three equal channels at the image's luminance; a hue shift moves a pure red to green (120°) and to blue
    (240°), keeps white and grey, and 360° is the image itself. Both are cut from the same decode as the plain view,
    and their cache keys differ from it (the plain view's key is unchanged, so old caches stay valid)."""
    a = np.full((20, 30, 3), 255, np.uint8)
    a[5:15, 5:15] = (255, 0, 0)
    a[5:15, 15:25] = (128, 128, 128)
    im = Image.fromarray(a)
    plain, grey, green, blue, full = derive(im, [Preprocess(False), Preprocess(False, grey=True), Preprocess(False, hue_shift=120),
                                                 Preprocess(False, hue_shift=240), Preprocess(False, hue_shift=360)])
    g = np.asarray(grey).astype(int)
    assert (g[..., 0] == g[..., 1]).all() and (g[..., 1] == g[..., 2]).all()
    assert g[10, 10, 0] == 76 and g[0, 0, 0] == 255  # ITU-R 601 luma of pure red: 0.299 * 255
    assert np.asarray(green)[10, 10].argmax() == 1 and np.asarray(blue)[10, 10].argmax() == 2
    for shifted in (green, blue):
        assert (np.asarray(shifted)[0, 0] == 255).all() and (np.abs(np.asarray(shifted)[10, 20].astype(int) - 128) <= 1).all()
    assert np.array_equal(np.asarray(full), np.asarray(plain))
    keys = {Preprocess(True, 48).key(), Preprocess(True, 48, grey=True).key(), Preprocess(True, 48, hue_shift=120).key()}
    assert len(keys) == 3 and Preprocess(True, 48).key() == '{"content_box": 2, "scale_to": 48}'
    assert '"unblock": 2' in Preprocess(True, None, unblock=True).key()  # the unblock algorithm's version (lossy copies)


def test_onnx_runtime_gives_the_torch_features_of_the_packaged_efficientnet():
    """The embed stage's default runtime on CPU: the same packaged weights exported to ONNX in memory must give torch's
    features and ImageNet probabilities (to float error), under an id of their own so the cache never mixes them."""
    from polarcatalog.encoders.efficientnet_lite import create_efficientnet

    rng = np.random.default_rng(0)
    ims = [Image.fromarray(rng.integers(0, 255, (40 + 7 * i, 50, 3), dtype=np.uint8)) for i in range(6)]
    ort_enc = create_efficientnet("efficientnet_lite0", "cpu", 160, "onnxruntime")
    torch_enc = create_efficientnet("efficientnet_lite0", "cpu", 160, "torch")
    (fo, po), (ft, pt) = ort_enc.forward(ims, batch_size=4), torch_enc.forward(ims, batch_size=4)
    np.testing.assert_allclose(fo, ft, atol=1e-4)
    np.testing.assert_allclose(po, pt, atol=1e-5)
    assert ort_enc.runtime == "onnxruntime" and ort_enc.id != torch_enc.id and "160px" in ort_enc.id
    with pytest.raises(ValueError, match="unknown runtime"):
        create_efficientnet("efficientnet_lite0", "cpu", None, "tensorrt")


def test_a_lean_session_frees_its_buffers_and_gives_the_same_bits_through_the_lazy_encode_path(tmp_path):
    """`polarcatalog evaluate` builds its encoders inside `lean_memory` (no ONNX Runtime arena): the setting must reach a
    session built lazily on the encode path's decoding thread, and must not move a single bit of the vectors (the
    feature cache is shared with the pipeline, which keeps the arena)."""
    from polarcatalog.encoders import onnx_runtime

    rng = np.random.default_rng(0)
    paths = []
    for i in range(5):
        Image.fromarray(rng.integers(0, 255, (48, 40 + 5 * i, 3), dtype=np.uint8)).save(tmp_path / f"q{i}.png")
        paths.append(str(tmp_path / f"q{i}.png"))
    vecs, arena = {}, {}
    for lean in (False, True):
        enc = image_encoder("efficientnet_lite0@128", "cpu", "onnxruntime")
        assert isinstance(enc, DeferredImageEncoder)  # built on first use, inside the encode path
        with onnx_runtime.lean_memory() if lean else contextlib.nullcontext():
            vecs[lean] = encode_image_files(enc, paths, tmp_path / f"cache{lean}", Preprocess(), batch_size=2)[0]
        arena[lean] = enc.built.session.get_session_options().enable_cpu_mem_arena
    assert arena == {False: True, True: False}
    np.testing.assert_array_equal(vecs[True], vecs[False])
    assert onnx_runtime._ARENA["on"]  # restored on leaving


def test_every_minilm_runtime_gives_the_torch_vectors_for_any_text_length():
    """Texts are encoded one per forward. On the CPU, `auto` runs MiniLM in numpy (the same bits on AVX2 and AVX-512
    CPUs) and `onnxruntime` in ONNX Runtime; short, long and truncated texts must all get torch's vector."""
    torch_enc = create_encoder("minilm", "text", "cpu", "torch")
    texts = ["Tiny.", "A small green Pokémon with a bulb on its back.", "fins and a shell " * 200]  # the last: > 256 tokens
    reference = torch_enc.encode_texts(texts, 1)
    ids = {torch_enc.id}
    for runtime, expected in (("auto", "numpy"), ("onnxruntime", "onnxruntime")):
        enc = create_encoder("minilm", "text", "cpu", runtime)
        got = np.vstack([enc.encode_texts([t], 1) for t in texts])
        np.testing.assert_allclose(got, reference, atol=1e-6)
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
        assert enc.runtime == expected and enc.id not in ids
        ids.add(enc.id)
    with pytest.raises(ValueError, match="unknown runtime 'tensorrt'"):
        create_encoder("minilm", "text", "cpu", "tensorrt")


def test_minilm_in_numpy_encodes_texts_side_by_side_to_the_bits_of_one_at_a_time():
    """The numpy path runs a block of texts on a thread pool; each text's vector must not depend on that."""
    enc = create_encoder("minilm", "text", "cpu")
    texts = ["A yellow mouse.", "fins and a shell " * 40, "Tiny.", "A small green Pokémon with a bulb on its back."]
    together = enc.encode_texts(texts, 1)
    alone = np.vstack([enc.encode_texts([t], 1) for t in texts])
    assert together.tobytes() == alone.tobytes() and enc.encode_texts([], 1).shape == (0, 384)


def test_minilm_onnx_export_is_kept_and_a_damaged_copy_is_rebuilt(tmp_path):
    """The export happens once: a later process loads the kept file with `tokenizers` and ONNX Runtime alone (no
    sentence-transformers import, ~4 s saved per stage), and a file cut short by a crash is exported again."""
    import json
    import subprocess
    import sys

    from polarcatalog.encoders.minilm import MiniLMEncoder

    first = MiniLMEncoder("cpu", "onnxruntime", tmp_path)
    (kept,) = list(tmp_path.glob("*.onnx"))
    probe = ("import json, sys; from pathlib import Path; from polarcatalog.encoders.minilm import MiniLMEncoder; "
             f"e = MiniLMEncoder('cpu', 'onnxruntime', Path({str(tmp_path)!r})); "
             "print(json.dumps(e.encode_texts(['A yellow mouse.'])[0, :4].tolist())); "
             "print('sentence_transformers' in sys.modules or 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-1] == "False"
    np.testing.assert_allclose(json.loads(out[-2]), first.encode_texts(["A yellow mouse."])[0, :4], atol=1e-7)
    kept.write_bytes(kept.read_bytes()[:1000])  # a crash mid-write (the writer is atomic; a disk can still fail)
    again = MiniLMEncoder("cpu", "onnxruntime", tmp_path)
    assert kept.stat().st_size > 1_000_000
    np.testing.assert_array_equal(again.encode_texts(["A yellow mouse."]), first.encode_texts(["A yellow mouse."]))


def _writer(root: str, worker: int, batches: int) -> None:
    """One process of the concurrency test: its own keys, several puts."""
    cache = FeatureCache(root, "enc@concurrent")
    for b in range(batches):
        keys = [f"w{worker}-b{b}-{i}" for i in range(7)]
        cache.put(keys, np.full((7, 4), worker * 100 + b, np.float32))


def test_concurrent_writer_processes_lose_no_entry_and_mix_no_vectors(tmp_path):
    """Four processes writing the same encoder's cache at once (as two `polarcatalog evaluate` runs or two queue
    workers do): every key is there afterwards, with its own writer's vectors."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 6)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    cache = FeatureCache(tmp_path, "enc@concurrent")
    keys = [f"w{w}-b{b}-{i}" for w in range(4) for b in range(6) for i in range(7)]
    found, vectors = cache.get(keys)
    assert found.all(), f"{(~found).sum()} of {len(keys)} entries lost"
    expected = np.repeat([w * 100 + b for w in range(4) for b in range(6)], 7)
    assert (vectors == expected[:, None]).all()
    assert not list(cache.folder.glob(".*.tmp"))  # no temporary file left behind


@pytest.mark.parametrize("damage", ["zeros", "nan", "truncated", "empty"])
def test_a_damaged_shard_is_refused_naming_the_file_and_the_fix(tmp_path, damage):
    cache = FeatureCache(tmp_path, "enc@damaged")
    cache.put(["a", "b"], np.array([[1, 0], [0, 1]], np.float32))
    (shard,) = cache.folder.glob("shard_*.npy")
    raw = shard.read_bytes()
    header = len(raw) - 2 * 2 * 4  # the float32 payload is the file's tail
    if damage == "zeros":
        shard.write_bytes(raw[:header] + bytes(len(raw) - header))
    elif damage == "nan":
        shard.write_bytes(raw[:header] + np.full(4, np.nan, np.float32).tobytes())
    elif damage == "truncated":
        shard.write_bytes(raw[: header + 5])
    else:
        shard.write_bytes(b"")
    with pytest.raises(CacheError, match=rf"{shard.name}.*make clean-features"):
        FeatureCache(tmp_path, "enc@damaged").get(["a"])


def test_non_finite_vectors_are_never_cached(tmp_path):
    with pytest.raises(ValueError, match="non-finite"):
        FeatureCache(tmp_path, "enc@nan").put(["a"], np.array([[np.nan, 1]], np.float32))
    assert not (FeatureCache(tmp_path, "enc@nan").folder / "index.parquet").exists()


def test_a_text_vector_depends_on_its_text_alone_not_on_the_batch_or_the_cache(tmp_path):
    """A padded batch changed a text's low bits with its batch-mates, and the cache decides the batch-mates: a warm
    workspace and a fresh clone then wrote different node embeddings. Each text is now encoded on its own."""
    from polarcatalog.encoders import create_encoder
    from polarcatalog.features.encode import encode_texts

    enc = create_encoder("minilm", "text", "cpu")
    target = "Pikachu is an Electric-type Pokémon. In its official artwork its body is mostly yellow, with brown markings."
    mates = ["Tiny.", "A much longer sentence about a large blue Pokémon with fins, a shell and a long curled tail " * 3]
    warm = encode_texts(enc, [mates[0], target], tmp_path / "warm", batch_size=64)[1]
    fresh = encode_texts(enc, [target, mates[1], mates[0]], tmp_path / "fresh", batch_size=64)[0]
    assert warm.tobytes() == fresh.tobytes()
