"""Robust image loading: every odd image becomes plain 8-bit RGB on white, every broken one a reason.

A crawl of species images always holds a few zero-byte, truncated, CMYK or 16-bit files; a run must
count and quarantine them, never crash on image 7,413 of 11,000.
"""

from __future__ import annotations

import io
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageOps, UnidentifiedImageError

from polarcatalog.io import read_table

WHITE = (255, 255, 255)
MIN_SIDE = 8  # px; smaller is not an image of a species
# Longest side kept after decoding. The subject analysis (`regions`: background, pixel blocks, content box) runs at
# full resolution for every view: an 8000 x 10000 photo cost 5.9 GB and a minute, for views of a few hundred px.
# No catalog image comes near it (the largest, a reference bird photo, is 1123 px).
MAX_SIDE = 2048
MAX_ASPECT = 32  # longest side / shortest side; an 8x40000 strip is no species image, and squaring it needs 40000² px


class BadImageError(ValueError):
    """An image that cannot be used; `reason` is short and human-readable."""

    def __init__(self, path: Path | str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


def _to_rgb(im: Image.Image, background: tuple[int, int, int]) -> Image.Image:
    """Any Pillow mode -> RGB; transparency composited on `background`."""
    if im.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        a = np.nan_to_num(np.asarray(im, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
        # the range a file's values use: 16-bit, 8-bit, or (a float TIFF from a scientific tool) 0..1
        top = a.max(initial=0.0)
        hi = 65535.0 if im.mode.startswith("I;16") or top > 255 else 1.0 if im.mode == "F" and top <= 1.0 else 255.0
        im = Image.fromarray(np.clip(a / hi * 255.0 + 0.5, 0, 255).astype(np.uint8), "L")
    if im.mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
    if im.mode in ("RGBA", "LA", "PA", "RGBa", "La") or (im.mode in ("RGB", "L") and "transparency" in im.info):
        rgba = im.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, (*background, 255))
        return Image.alpha_composite(canvas, rgba).convert("RGB")
    return im.convert("RGB")  # L, 1, CMYK, YCbCr, LAB, HSV


def load_rgb(path: str | Path, background: tuple[int, int, int] = WHITE, at_least: int | None = None) -> Image.Image:
    """Decode fully and normalise to RGB, or raise BadImageError with the reason. `at_least`: a JPEG may be decoded
    at 1/2, 1/4 or 1/8 scale (its DCT's own reduction, several times faster) as long as both sides stay >= at_least
    px; for a view that is shrunk to a small size anyway."""
    path = Path(path)
    if not path.is_file():
        raise BadImageError(path, "missing file")
    if path.stat().st_size == 0:
        raise BadImageError(path, "empty file (0 bytes)")
    return _decode(path, path, background, at_least)


def decode_rgb(data: bytes, name: str | Path, background: tuple[int, int, int] = WHITE) -> Image.Image:
    """`load_rgb` of a file's bytes (an image pack's, `read_image_pack`): the same decoder, so the same pixels; `name`
    names the image in an error."""
    if not data:
        raise BadImageError(name, "empty file (0 bytes)")
    return _decode(io.BytesIO(data), name, background, None)


def _decode(source: Path | io.BytesIO, name: str | Path, background: tuple[int, int, int],
            at_least: int | None) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(source) as im:
                w, h = im.size  # from the header, before any pixel is decoded
                if min(w, h) >= 1 and max(w, h) > MAX_ASPECT * min(w, h):
                    raise BadImageError(name, f"extreme aspect ratio {w}x{h} px (over {MAX_ASPECT}:1); crop it to the "
                                              "subject")
                if at_least and im.format == "JPEG":
                    im.draft("RGB", (at_least, at_least))
                im.load()  # decode now: truncation shows up here, not later inside a batch
                rgb = _to_rgb(ImageOps.exif_transpose(im) or im, background)
                # an animation that fades in (a blank first frame) shows its subject later: the first frame that is
                # not one colour, among the first FRAMES_LOOKED_AT
                for frame in range(1, min(getattr(im, "n_frames", 1), FRAMES_LOOKED_AT)):
                    if blank_reason(rgb) is None:
                        break
                    im.seek(frame)
                    rgb = _to_rgb(ImageOps.exif_transpose(im) or im, background)
    except UnidentifiedImageError:
        raise BadImageError(name, "undecodable: not a recognised image format") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise BadImageError(name, f"too large to decode safely: {exc}") from None
    except OSError as exc:
        msg = str(exc)
        kind = "truncated" if "truncated" in msg or "broken data stream" in msg else "undecodable"
        raise BadImageError(name, f"{kind}: {msg}") from None
    except BadImageError:
        raise
    except MemoryError:
        raise BadImageError(name, "too large to decode in the memory available") from None
    except (ValueError, SyntaxError, EOFError) as exc:
        raise BadImageError(name, f"undecodable: {exc}") from None
    if max(rgb.size) > MAX_SIDE:  # box-averaged by a whole factor: the encoders see 192-448 px anyway
        rgb = rgb.reduce(-(-max(rgb.size) // MAX_SIDE))
    if min(rgb.size) < MIN_SIDE:
        raise BadImageError(name, f"too small: {rgb.size[0]}x{rgb.size[1]} px (< {MIN_SIDE})")
    return rgb


def image_pack(*tables: pd.DataFrame) -> pd.DataFrame:
    """The bytes of the images the tables list (`path`, with the `sha256` curate recorded as it loaded them), as the
    files hold them (no re-encoding), one row per distinct content: `sha256`, `bytes`. The curate stage packs the
    catalog's anchor and query images into one table, so that a later stage which shows a few of them (the report's
    failure cases) depends on one file, found by the sha256 its tables record, rather than on the image folders,
    which DVC would hash file by file each time it checks that stage. Each file is read once; a row without a
    sha256 (an image that did not load) is left out."""
    rows: dict[str, str] = {}
    for table in tables:
        for sha, path in zip(table["sha256"], table["path"]):
            if isinstance(sha, str):
                rows.setdefault(sha, str(path))
    return pd.DataFrame({"sha256": list(rows), "bytes": [Path(path).read_bytes() for path in rows.values()]})


def read_image_pack(path: str | Path) -> dict[str, bytes]:
    """An `image_pack` table as sha256 -> bytes (`decode_rgb` decodes them)."""
    pack = read_table(path)
    return dict(zip(pack["sha256"], pack["bytes"]))


FRAMES_LOOKED_AT = 32  # of an animated GIF/APNG/WebP whose first frame is blank
BLANK_SPREAD = 2  # max - min per channel at or under which an image is one colour (JPEG noise aside)


def blank_reason(im: Image.Image) -> str | None:
    """Why an image holds nothing to recognise (one colour everywhere), or None. Asked of a user's query images, where
    a blank frame or an all-transparent sprite would otherwise get a confident but meaningless ranking."""
    extrema = im.getextrema()
    if all(hi - lo <= BLANK_SPREAD for lo, hi in extrema):
        return f"blank: one colour (RGB {tuple(lo for lo, _ in extrema)}) everywhere, nothing to recognise"
    return None


class Quarantine:
    """Collects rejected files (copied aside, never deleted) with their reasons for the curation report."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.rows: list[dict[str, str]] = []

    def add(self, path: str | Path, reason: str, role: str) -> None:
        path = Path(path)
        self.folder.mkdir(parents=True, exist_ok=True)
        dest = self.folder / f"{len(self.rows):05d}_{path.name}"
        if path.is_file():
            shutil.copy2(path, dest)
        self.rows.append({"path": str(path), "role": role, "reason": reason, "copy": str(dest)})


def load_many(paths: list[str | Path], quarantine: Quarantine, role: str) -> tuple[list[int], list[Image.Image]]:
    """Load what loads; quarantine the rest. Returns (indices of loaded paths, images)."""
    ok, images = [], []
    for i, p in enumerate(paths):
        try:
            images.append(load_rgb(p))
            ok.append(i)
        except BadImageError as err:
            quarantine.add(p, err.reason, role)
    return ok, images
