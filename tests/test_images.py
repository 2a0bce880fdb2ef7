"""Each kind of bad or odd image: odd ones become RGB on white, broken ones raise with a reason."""

import io

import numpy as np
import pytest
from PIL import Image

from polarcatalog.data.images import BadImageError, Quarantine, load_many, load_rgb


def _save(path, im, **kw):
    im.save(path, **kw)
    return path


def test_rgba_is_composited_on_white(tmp_path):
    a = np.zeros((20, 20, 4), np.uint8)
    a[5:15, 5:15] = (255, 0, 0, 255)  # opaque red square, transparent elsewhere
    im = load_rgb(_save(tmp_path / "a.png", Image.fromarray(a, "RGBA")))
    px = np.asarray(im)
    assert im.mode == "RGB"
    assert tuple(px[0, 0]) == (255, 255, 255) and tuple(px[10, 10]) == (255, 0, 0)


def test_palette_with_transparency(tmp_path):
    im = Image.new("P", (16, 16), 0)
    im.putpalette([0, 0, 0, 0, 0, 255] + [0] * 762)
    im.paste(1, (4, 4, 12, 12))
    im.info["transparency"] = 0
    out = np.asarray(load_rgb(_save(tmp_path / "p.png", im, transparency=0)))
    assert tuple(out[0, 0]) == (255, 255, 255) and tuple(out[8, 8]) == (0, 0, 255)


def test_cmyk_greyscale_and_16bit(tmp_path):
    cmyk = Image.new("CMYK", (16, 16), (0, 255, 255, 0))  # pure red in CMYK
    assert tuple(np.asarray(load_rgb(_save(tmp_path / "c.jpg", cmyk, quality=100)))[8, 8]) == pytest.approx((255, 0, 0), abs=3)
    grey = Image.new("L", (16, 16), 100)
    assert tuple(np.asarray(load_rgb(_save(tmp_path / "g.png", grey)))[0, 0]) == (100, 100, 100)
    sixteen = Image.fromarray(np.full((16, 16), 65535 // 2, np.uint16))  # mode I;16, mid grey
    out = load_rgb(_save(tmp_path / "s.png", sixteen))
    assert out.mode == "RGB" and abs(int(np.asarray(out)[0, 0, 0]) - 128) <= 1
    # a 32-bit float TIFF in 0..1 (as scientific tools write them) keeps its contrast: read as 0..255 it was all black
    # and quarantined as blank
    ramp = np.tile(np.linspace(0.0, 1.0, 16, dtype=np.float32), (16, 1))
    out = np.asarray(load_rgb(_save(tmp_path / "f.tif", Image.fromarray(ramp, "F"))))
    assert out[0, 0, 0] == 0 and out[0, -1, 0] == 255 and abs(int(out[0, 8, 0]) - round(8 / 15 * 255)) <= 1
    la = Image.new("LA", (16, 16), (0, 0))  # fully transparent black -> white
    assert tuple(np.asarray(load_rgb(_save(tmp_path / "la.png", la)))[0, 0]) == (255, 255, 255)


@pytest.mark.parametrize("kind", ["empty", "truncated", "undecodable", "missing", "tiny"])
def test_broken_files_raise_with_reason(tmp_path, kind):
    path = tmp_path / f"{kind}.png"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        buf = io.BytesIO()
        Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(buf, "PNG")
        path.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    elif kind == "undecodable":
        path.write_bytes(b"<html>404 not found</html>")
    elif kind == "tiny":
        Image.new("RGB", (3, 3)).save(path)
    with pytest.raises(BadImageError) as err:
        load_rgb(path)
    expected = {"empty": "empty file", "truncated": "truncated", "undecodable": "undecodable",
                "missing": "missing file", "tiny": "too small"}[kind]
    assert err.value.reason.startswith(expected), err.value.reason
    assert str(path) in str(err.value)


def test_load_many_quarantines_and_keeps_going(tmp_path):
    good = _save(tmp_path / "good.png", Image.new("RGB", (16, 16), (0, 255, 0)))
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"GIF89a-not-really")
    q = Quarantine(tmp_path / "quarantine")
    ok, images = load_many([empty, good, junk], q, role="query")
    assert ok == [1] and len(images) == 1
    assert [r["reason"].split(":")[0] for r in q.rows] == ["empty file (0 bytes)", "undecodable"]
    assert all((tmp_path / "quarantine").joinpath(r["copy"].split("/")[-1]).exists() for r in q.rows)
    assert empty.exists() and junk.exists()  # quarantine copies, never deletes


def test_a_thin_strip_is_refused_from_its_header_not_padded_to_a_huge_square(tmp_path):
    """8x40000 px (under 1 MB as PNG) once asked for a 43200² canvas and ended the run with a MemoryError."""
    path = tmp_path / "strip.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (40000, 8, 3), dtype=np.uint8)).save(path)
    with pytest.raises(BadImageError, match=r"extreme aspect ratio 8x40000"):
        load_rgb(path)
    quarantine = Quarantine(tmp_path / "q")
    kept, images = load_many([path], quarantine, "query")
    assert kept == [] and images == [] and "aspect" in quarantine.rows[0]["reason"]



@pytest.mark.parametrize("fmt, suffix", [("GIF", "gif"), ("PNG", "png")])
def test_an_animation_whose_first_frame_is_blank_is_read_at_its_first_frame_with_a_subject(tmp_path, fmt, suffix):
    """A fade-in GIF or APNG (first frame white) was quarantined as 'blank: one colour' though later frames show the
    subject; a still image and an animation that starts with its subject are read at frame 0 as before."""
    from polarcatalog.data.images import blank_reason

    blank = Image.new("RGB", (32, 32), "white")
    subject = Image.new("RGB", (32, 32), "white")
    subject.paste((200, 30, 30), (8, 8, 24, 24))
    other = Image.new("RGB", (32, 32), (20, 20, 220))
    path = tmp_path / f"fade.{suffix}"
    blank.save(path, fmt, save_all=True, append_images=[subject, other], duration=100, loop=0)
    rgb = load_rgb(path)
    assert blank_reason(rgb) is None and rgb.getpixel((16, 16)) == (200, 30, 30)
    starts = tmp_path / f"starts.{suffix}"
    subject.save(starts, fmt, save_all=True, append_images=[other], duration=100, loop=0)
    assert load_rgb(starts).getpixel((16, 16)) == (200, 30, 30)  # frame 0, not a later one


def test_a_huge_image_is_reduced_after_decoding_not_analysed_at_full_size(tmp_path):
    """An 8000 x 10015 PNG cost 5.9 GB of memory and 54 s in `evaluate`: the subject analysis ran at full resolution
    for every view. It is box-averaged by a whole factor to at most MAX_SIDE; an image within it is untouched."""
    from polarcatalog.data.images import MAX_SIDE

    big = Image.new("RGB", (5000, 4100), "white")
    big.paste((200, 30, 30), (1000, 1000, 4000, 3000))
    big.save(tmp_path / "big.png")
    im = load_rgb(tmp_path / "big.png")
    assert im.size == (1667, 1367) and max(im.size) <= MAX_SIDE  # reduced by 3
    assert im.getpixel((800, 700)) == (200, 30, 30) and im.getpixel((10, 10)) == (255, 255, 255)
    Image.new("RGB", (2048, 300), "red").save(tmp_path / "edge.png")
    assert load_rgb(tmp_path / "edge.png").size == (2048, 300)


def test_an_image_packs_bytes_decode_to_the_files_pixels_and_a_broken_one_says_which(tmp_path):
    """The report draws the catalog's images from the curate stage's pack (`image_pack`), not from the files: each
    distinct content once, the file's own bytes, decoded by the same code as the file."""
    from polarcatalog.data.images import decode_rgb, image_pack, read_image_pack
    from polarcatalog.io import sha256_file

    rgba = Image.new("RGBA", (20, 12), (0, 0, 0, 0))
    rgba.paste((200, 30, 30, 255), (4, 2, 14, 10))
    rgba.save(tmp_path / "sprite.png")
    Image.fromarray(np.arange(16 * 24 * 3, dtype=np.uint8).reshape(16, 24, 3)).save(tmp_path / "art.jpg", quality=80)
    (tmp_path / "again.png").write_bytes((tmp_path / "sprite.png").read_bytes())  # same content, another name
    import pandas as pd

    paths = [tmp_path / "sprite.png", tmp_path / "art.jpg", tmp_path / "again.png", tmp_path / "art.jpg"]
    anchors = pd.DataFrame({"path": [str(p) for p in paths[:2]] + [str(tmp_path / "broken.png")],
                            "sha256": [sha256_file(p) for p in paths[:2]] + [None]})  # an image that did not load
    queries = pd.DataFrame({"path": [str(p) for p in paths[2:]], "sha256": [sha256_file(p) for p in paths[2:]]})
    pack = image_pack(anchors, queries)
    assert pack["sha256"].tolist() == [sha256_file(paths[0]), sha256_file(paths[1])]
    pack.to_parquet(tmp_path / "images.parquet", index=False)
    images = read_image_pack(tmp_path / "images.parquet")
    for path in paths[:2]:
        assert images[sha256_file(path)] == path.read_bytes()
        assert np.array_equal(np.asarray(decode_rgb(images[sha256_file(path)], path)), np.asarray(load_rgb(path)))
    assert np.asarray(decode_rgb(images[sha256_file(paths[0])], "sprite.png"))[0, 0].tolist() == [255, 255, 255]
    with pytest.raises(BadImageError, match="art.jpg: undecodable: Truncated File Read"):
        decode_rgb(images[sha256_file(paths[1])][:200], "art.jpg")
    with pytest.raises(BadImageError, match="x.png: empty file"):
        decode_rgb(b"", "x.png")
