"""The view of an image an encoder sees. Matching views across domains is what makes sprite -> artwork retrieval
work at all (cropping both to the content box and scale-matching moved Lite0's mRR@1 from 0.013 to 0.187):

- content box: crop to the subject's bounding box, then pad to a square on white, so that a 40-px sprite inside a
  68x56 canvas and a 360-px artwork fill the encoder input alike;
- scale matching: shrink the (large) anchor to the query's typical content size before the encoder
  upsamples it, so both carry the same level of detail;
- unblock: pixel art shown enlarged (a nearest-neighbour upscale, also once saved as JPEG or WebP) is first brought
  back to its native pixels, so a sprite at 3x is seen as the sprite it is;
- grey / hue shift: the recoloured views the colour-nuisance basis is learnt from (`features.colour_nuisance`);
- flip: the mirror image. Sprites face either way: the retrieval averages an image's features with its flip's
  (`Workspace.with_flips`), for anchors and, as a test-time flip, for queries;
- cell: one local view (PolarMem's "local slices"): an overlapping grid cell of the content square, then
  preprocessed like the global view it came from (same scale matching), so a probe sees familiar statistics.
All are deterministic functions of the image and the options, so the options are part of the cache key.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Sequence

import numpy as np
from PIL import Image, ImageOps

from polarcatalog.data.regions import content_box, grid_cell, unblock


# 2: lossy copies of upscales are unblocked too (`regions.pixel_block`), from the block centres
UNBLOCK_VERSION = 2
# 2: a uniform coloured backdrop is background too, and turns white (`regions.backdrop`)
CONTENT_BOX_VERSION = 2


@dataclass(frozen=True)
class Preprocess:
    content_box: bool = True
    scale_to: int | None = None  # longest side of the content, in px, before the encoder's resize
    flip: bool = False  # the mirror image
    cell: tuple[int, int, int] | None = None  # (grid, row, col) of a local view; None = the global view
    unblock: bool = False  # first undo a nearest-neighbour upscale (pixel art shown at 2x, 3x, ..., also a JPEG of it)
    grey: bool = False  # luminance only (ITU-R 601), as three equal channels
    hue_shift: int = 0  # degrees added to every pixel's hue (HSV): the same drawing in another palette

    def key(self) -> str:
        d = asdict(self)
        for name, default in (("cell", None), ("flip", False), ("unblock", False), ("grey", False),
                              ("hue_shift", 0)):  # unset options stay out: older keys stay valid
            if d[name] == default:
                del d[name]
        if self.unblock:
            d["unblock"] = UNBLOCK_VERSION  # the cache key names the algorithm: a changed one never reads old vectors
        if self.content_box:
            d["content_box"] = CONTENT_BOX_VERSION
        return json.dumps(d, sort_keys=True)

    def flipped(self) -> Preprocess:
        return replace(self, flip=True)


def local_views(view: Preprocess, grid: int) -> list[Preprocess]:
    """The grid x grid local views of a global view, in raster order (never flipped: the cell's side is the point)."""
    return [replace(view, flip=False, cell=(grid, r, c)) for r in range(grid) for c in range(grid)]


def apply(image: Image.Image, opts: Preprocess) -> Image.Image:
    """The view of one image the encoder sees."""
    return derive(image, [opts])[0]


def derive(image: Image.Image, views: Sequence[Preprocess]) -> list[Image.Image]:
    """Every view of one decoded image, as `apply` gives them one by one, but the subject's box is found once: the
    flood fill behind it is the costly step, and an anchor has up to six views (global, flip, local cells)."""
    bases: dict[tuple[bool, bool], Image.Image] = {}
    scaled: dict[tuple, Image.Image] = {}  # a view and its flip share the crop and the resize
    out = []
    for v in views:
        if (v.unblock, v.content_box) not in bases:
            im = unblock(image) if v.unblock else image
            bases[v.unblock, v.content_box] = content_box(im) if v.content_box else im
        key = (v.unblock, v.content_box, v.cell, v.scale_to)
        if key not in scaled:
            scaled[key] = _cut_and_scale(bases[v.unblock, v.content_box], v)
        im = _recolour(ImageOps.mirror(scaled[key]) if v.flip else scaled[key], v)
        if v.flip and not (v.grey or v.hue_shift % 360):
            im.info[MIRROR_OF] = scaled[key]  # an exact mirror: an encoder may mirror its resize of it (`resize_views`)
        out.append(im)
    return out


MIRROR_OF = "polarcatalog.mirror_of"


def resize_views(images: Sequence[Image.Image], size: int) -> list[np.ndarray]:
    """Each image as RGB pixels resized to size x size (bicubic). A flipped view whose unflipped view is in the same
    list is the mirror of that view's resize, not a resize of its own: the same pixels (bicubic resampling is mirror
    symmetric; a test holds it), one resize fewer per flipped view."""
    done: dict[int, np.ndarray] = {}
    out = []
    for im in images:
        source = im.info.get(MIRROR_OF)
        if source is not None and id(source) in done:
            out.append(done[id(source)][:, ::-1])
            continue
        a = np.asarray((im if im.mode == "RGB" else im.convert("RGB")).resize((size, size), Image.Resampling.BICUBIC))
        done[id(im)] = a
        out.append(a)
    return out


def _recolour(im: Image.Image, opts: Preprocess) -> Image.Image:
    """The colour-robust views (palette swaps keep the drawing and change its colours): hue shifted, then grey."""
    if opts.hue_shift % 360:
        hsv = np.asarray(im.convert("RGB").convert("HSV")).copy()
        hsv[..., 0] = (hsv[..., 0].astype(np.int16) + round(opts.hue_shift % 360 / 360 * 256)) % 256
        im = Image.fromarray(hsv, "HSV").convert("RGB")
    return ImageOps.grayscale(im).convert("RGB") if opts.grey else im


def _cut_and_scale(im: Image.Image, opts: Preprocess) -> Image.Image:
    if opts.cell is not None:
        im = grid_cell(im, *opts.cell)
    if opts.scale_to and max(im.size) > opts.scale_to:
        ratio = opts.scale_to / max(im.size)
        im = im.resize((max(1, round(im.size[0] * ratio)), max(1, round(im.size[1] * ratio))), Image.Resampling.LANCZOS)
    return im
