"""The query-domain scale: a subject's size in native pixels, measured without labels, and the anchor scale a query
folder gets from it."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from polarcatalog.data.regions import backdrop, content_box, content_side, foreground_mask, pixel_block, unblock
from polarcatalog.features.embedding import choose_anchor_scale, query_content_scale, snap_scale


def sprite(w: int, h: int, seed: int = 0) -> Image.Image:
    """A pixel-art-like subject of exactly w x h px (random palette blocks, no white) on a white 68x56-style canvas."""
    rng = np.random.default_rng(seed)
    a = np.full((h + 20, w + 30, 3), 255, np.uint8)
    a[10 : 10 + h, 15 : 15 + w] = rng.integers(0, 200, (h, w, 3))
    return Image.fromarray(a)


def enlarged(im: Image.Image, f: int, canvas: tuple[int, int], at: tuple[int, int]) -> Image.Image:
    big = Image.new("RGB", canvas, (255, 255, 255))
    big.paste(im.resize((im.width * f, im.height * f), Image.Resampling.NEAREST), at)
    return big


@pytest.mark.parametrize("w,h", [(25, 18), (40, 40), (14, 30)])
def test_content_side_is_the_subjects_longest_side(w, h):
    assert content_side(sprite(w, h)) == max(w, h)


@pytest.mark.parametrize("f", [3, 4])
def test_a_nearest_neighbour_enlargement_is_measured_at_its_native_pixels(f):
    im = sprite(25, 20, seed=f)
    big = enlarged(im, f, (400, 330), (17, 5))  # an offset that is not a multiple of f
    assert pixel_block(big)[0] == f and pixel_block(im)[0] == 1
    assert content_side(big) == 25
    back = np.asarray(unblock(big))
    target = np.asarray(im)[10:30, 15:40]  # the subject comes back pixel for pixel
    assert any(np.array_equal(back[y : y + 20, x : x + 25], target) for y in range(back.shape[0] - 19) for x in range(back.shape[1] - 24))


@pytest.mark.parametrize("colour", [(236, 240, 228), (120, 160, 90), (30, 30, 40)])
def test_a_subject_on_a_uniform_coloured_backdrop_is_found_and_shown_on_white(colour):
    """A sprite pasted on a grey, green or dark canvas and saved as JPEG: the backdrop (most of the border, one colour) is
    the background, so the subject's size is measured as on white, and its content box shows it on white."""
    im = sprite(25, 20, seed=7)
    a = np.asarray(im).copy()
    a[(a == 255).all(-1)] = colour  # the white canvas becomes the backdrop
    buf = io.BytesIO()
    Image.fromarray(a).resize((a.shape[1] * 3, a.shape[0] * 3), Image.Resampling.NEAREST).save(buf, "JPEG", quality=80)
    lossy = Image.open(buf).convert("RGB")
    assert backdrop(np.asarray(lossy)) is not None and backdrop(np.asarray(im)) is None
    assert 25 <= content_side(lossy) <= 27  # native pixels, as on white (was the whole canvas: 35)
    box = np.asarray(content_box(lossy)).astype(int)
    on_white = np.asarray(content_box(im.resize((im.width * 3, im.height * 3), Image.Resampling.NEAREST))).astype(int)
    assert abs(box.shape[0] - on_white.shape[0]) <= 3 * 2
    corners = np.concatenate([box[:3, :3].reshape(-1, 3), box[-3:, -3:].reshape(-1, 3)])
    assert (corners == 255).all()  # the padding and the removed backdrop are white


def test_a_busy_border_keeps_the_white_rule():
    """A photo-like border (no single colour) is not a backdrop: nothing but near-white is removed."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (60, 80, 3)).astype(np.uint8)
    assert backdrop(a) is None
    assert foreground_mask(a).mean() > 0.99


@pytest.mark.parametrize("f,fmt,quality", [(3, "JPEG", 60), (5, "JPEG", 40), (2, "WEBP", 80), (4, "WEBP", 60)])
def test_a_lossy_copy_of_an_enlargement_is_still_measured_at_its_native_pixels(f, fmt, quality):
    """A screenshot of a sprite at 3x saved as JPEG: no colour change is exactly on the grid any more, but the edge
    energy is, so the block pitch is still found and the block centres give the sprite back, to within the codec."""
    rng = np.random.default_rng(f)  # a sprite's flat colour regions (patches of 2-5 px, on no grid), on white
    rows, cols = (np.repeat(np.arange(n), rng.integers(2, 6, n))[:size] for n, size in ((10, 20), (12, 25)))
    a = np.full((40, 55, 3), 255, np.uint8)
    a[10:30, 15:40] = rng.integers(0, 200, (10, 12, 3))[rows[:, None], cols[None, :]]
    im = Image.fromarray(a)
    buf = io.BytesIO()
    enlarged(im, f, (300, 260), (13, 7)).save(buf, fmt, quality=quality)
    lossy = Image.open(buf).convert("RGB")
    codec = np.abs(np.asarray(lossy).astype(int) - np.asarray(enlarged(im, f, (300, 260), (13, 7))).astype(int))
    assert pixel_block(lossy)[0] == f
    assert 25 <= content_side(lossy) <= 27  # the codec's ringing may tint a block or two of the white around it
    back = np.asarray(unblock(lossy)).astype(int)
    target = np.asarray(im)[10:30, 15:40].astype(int)
    best = min(np.abs(back[y : y + 20, x : x + 25] - target).mean() for y in range(back.shape[0] - 19) for x in range(back.shape[1] - 24))
    subject = codec[7 + 10 * f : 7 + 30 * f, 13 + 15 * f : 13 + 40 * f]
    assert best <= subject.mean()  # no worse than the codec's own error on the subject's pixels (block centres)


def test_a_lossy_copy_of_a_native_image_is_not_taken_for_pixel_art():
    buf = io.BytesIO()
    sprite(40, 33).save(buf, "JPEG", quality=40)  # JPEG's own 8-px blocks must not read as an 8x upscale
    assert pixel_block(Image.open(buf).convert("RGB"))[0] == 1


def test_a_smooth_image_is_not_taken_for_pixel_art():
    rng = np.random.default_rng(1)
    photo = Image.fromarray(rng.integers(0, 255, (60, 80, 3), dtype=np.uint8)).resize((240, 180), Image.Resampling.BICUBIC)
    assert pixel_block(photo)[0] == 1 and unblock(photo) is photo
    assert pixel_block(Image.new("RGB", (50, 50), (9, 9, 9)))[0] == 1  # no edges at all


def test_the_folder_scale_is_the_median_subject_and_snaps_to_the_ladder(tmp_path):
    paths = []
    for i, side in enumerate([20, 24, 25, 26, 60]):
        p = tmp_path / f"q{i}.png"
        enlarged(sprite(side, side - 3, seed=i), 3, (260, 260), (4, 4)).save(p)  # all shown at 3x
        paths.append(str(p))
    assert query_content_scale(paths) == 25  # native pixels, robust to the one large subject
    assert [snap_scale(x) for x in (25, 27, 30, 75, 96, 200)] == [27, 27, 32, 76, 91, 215]
    near = choose_anchor_scale("auto", paths, catalog=26)
    assert near.measured == 25 and near.used == 26 and not near.adapted  # within 10 %: the embed stage's anchors
    far = choose_anchor_scale("auto", paths, catalog=40)
    assert far.used == 27 and far.adapted and "encoded once at this scale" in far.describe()
    # auto reads the whole folder (a fifth attack round: sprites scored 13.0 vs 26.1 mRR@1 against the catalog's scale)
    assert "may score better with --anchor-scale catalog" in far.describe()
    assert "--anchor-scale catalog" not in near.describe() + choose_anchor_scale(64, paths, 40).describe()
    assert choose_anchor_scale("catalog", paths, 40).used == 40 and choose_anchor_scale(64, paths, 40).used == 64


def test_a_scale_above_every_anchor_is_capped_to_one_encoding_of_the_same_views(tmp_path):
    """Official artwork as queries measured 724 px: the whole catalog (anchors of 360-400 px) was encoded again at
    724 px, and at each other large scale, into the feature cache, for views equal to one another (a scale only
    shrinks an anchor)."""
    from polarcatalog.encoders.preprocess import Preprocess, apply

    paths = []
    for i in range(3):
        p = tmp_path / f"q{i}.png"
        art = Image.new("RGB", (800, 800), "white")  # smooth artwork (not pixel art) of about 700 px
        noise = np.random.default_rng(i).integers(0, 255, (70, 60, 3), dtype=np.uint8)
        art.paste(Image.fromarray(noise).resize((600, 700), Image.Resampling.BICUBIC), (100, 50))
        art.save(p)
        paths.append(str(p))
    free = choose_anchor_scale("auto", paths, catalog=48)
    assert free.used >= 609 and free.capped_from is None
    capped = choose_anchor_scale("auto", paths, catalog=48, largest_anchor=400)
    assert (capped.used, capped.capped_from) == (431, free.used) and capped.adapted
    assert "no anchor image is larger than 431 px" in capped.describe()
    assert choose_anchor_scale(2000, paths, 48, largest_anchor=400).used == 431  # a size typed in px too
    assert choose_anchor_scale(300, paths, 48, largest_anchor=400).used == 300  # a scale that shrinks: as asked
    # a catalog at full size, or at a scale above every anchor, already holds those views: no new encoding
    assert not choose_anchor_scale("auto", paths, catalog=None, largest_anchor=400).adapted
    assert choose_anchor_scale("auto", paths, catalog=512, largest_anchor=400).used == 512
    anchor = Image.fromarray(np.random.default_rng(0).integers(0, 255, (400, 300, 3), dtype=np.uint8))
    same = [np.asarray(apply(anchor, Preprocess(False, s))) for s in (431, free.used)]
    assert same[0].tobytes() == same[1].tobytes()
