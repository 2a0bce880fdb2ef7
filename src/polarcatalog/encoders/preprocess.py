"""The view of an image an encoder sees. Matching views across domains is what makes sprite -> artwork retrieval
work at all (cropping both to the content box and scale-matching moved Lite0's mRR@1 from 0.013 to 0.187):

- content box: crop to the subject's bounding box, then pad to a square on white, so that a 40-px sprite inside a
  68x56 canvas and a 360-px artwork fill the encoder input alike;
- scale matching: shrink the (large) anchor to the query's typical content size before the encoder
  upsamples it, so both carry the same level of detail;
- mirror: sprites face either way; an anchor's feature can be the mean of the image and its mirror;
- cell: one local view (PolarMem's "local slices"): an overlapping grid cell of the content square, then
  preprocessed like the global view it came from (same scale matching), so a probe sees familiar statistics.
All are deterministic functions of the image and the options, so the options are part of the cache key.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from PIL import Image, ImageOps

from polarcatalog.data.regions import content_box, grid_cell


@dataclass(frozen=True)
class Preprocess:
    content_box: bool = True
    scale_to: int | None = None  # longest side of the content, in px, before the encoder's resize
    mirror: bool = False
    cell: tuple[int, int, int] | None = None  # (grid, row, col) of a local view; None = the global view

    def key(self) -> str:
        d = asdict(self)
        if d["cell"] is None:  # global views keep the key they had before cells existed (the cache stays valid)
            del d["cell"]
        return json.dumps(d, sort_keys=True)


def local_views(view: Preprocess, grid: int) -> list[Preprocess]:
    """The grid x grid local views of a global view, in raster order (no mirror: the cell's side is the point)."""
    return [Preprocess(view.content_box, view.scale_to, False, (grid, r, c)) for r in range(grid) for c in range(grid)]


def apply(image: Image.Image, opts: Preprocess) -> list[Image.Image]:
    """The view(s) of one image the encoder sees; more than one when mirrored (features are averaged)."""
    im = content_box(image) if opts.content_box else image
    if opts.cell is not None:
        im = grid_cell(im, *opts.cell)
    if opts.scale_to and max(im.size) > opts.scale_to:
        ratio = opts.scale_to / max(im.size)
        im = im.resize((max(1, round(im.size[0] * ratio)), max(1, round(im.size[1] * ratio))), Image.Resampling.LANCZOS)
    return [im, ImageOps.mirror(im)] if opts.mirror else [im]
