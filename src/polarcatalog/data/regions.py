"""Where the subject is in an image: its foreground, its bounding box, overlapping grid cells of it.

Shared by colour naming (curate), the encoders' views (content box, local cells) and the VLM verifier's local
views, so they all agree on what "the subject" is: every pixel except the near-white background connected to
the image border (a white Pokémon's body is kept). A user's image may sit on a uniform backdrop of another colour (a
sprite pasted on a grey or green canvas, saved as JPEG): when most of the border is one colour that is not white, that
colour, connected to the border, is the background instead, and the content box shows the subject on white, as the
catalog's artwork is seen. A busy border (a photo) keeps the white rule: nothing is removed from it.
"""

from __future__ import annotations

import numpy as np
from PIL import Image
from scipy import ndimage


WHITE_LEVEL = 235  # every channel at least this: near-white
BACKDROP_TOLERANCE = 24  # a pixel within this (max over channels) of the backdrop's colour is backdrop (JPEG noise)
BACKDROP_SHARE = 0.6  # a side is backdrop when this share of its pixels is within tolerance of the border's median


def backdrop(rgb: np.ndarray) -> np.ndarray | None:
    """The colour of a uniform, not near-white backdrop (the median border pixel), or None: a white or busy border.
    A backdrop surrounds the subject, so each of the four sides must be mostly that colour (a subject that fills the
    frame and touches a side keeps its pixels)."""
    sides = [np.asarray(s, np.int16) for s in (rgb[0], rgb[-1], rgb[:, 0], rgb[:, -1])]
    colour = np.median(np.concatenate(sides), axis=0).astype(np.int16)
    if (colour >= WHITE_LEVEL).all():
        return None
    close = [(np.abs(side - colour).max(axis=-1) <= BACKDROP_TOLERANCE).mean() for side in sides]
    return colour if min(close) >= BACKDROP_SHARE else None


def background_mask(rgb: np.ndarray) -> np.ndarray:
    """True on the background: the regions touching the border that are near-white, or near the backdrop colour
    when the image has a uniform non-white one (`backdrop`)."""
    rgb = np.asarray(rgb)
    return _background(rgb, backdrop(rgb))


def _background(rgb: np.ndarray, colour: np.ndarray | None) -> np.ndarray:
    # per channel, not a reduction over the last axis of 3: several times faster on a whole image
    if colour is None:
        similar = (rgb[..., 0] >= WHITE_LEVEL) & (rgb[..., 1] >= WHITE_LEVEL) & (rgb[..., 2] >= WHITE_LEVEL)
    else:
        similar = np.ones(rgb.shape[:2], bool)
        for c in range(3):
            similar &= np.abs(rgb[..., c].astype(np.int16) - colour[c]) <= BACKDROP_TOLERANCE
    labels, n = ndimage.label(similar)
    touching = np.zeros(n + 1, bool)  # a lookup per region: faster than np.isin on every pixel
    touching[np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]])] = True
    touching[0] = False
    return touching[labels]


def foreground_mask(rgb: np.ndarray) -> np.ndarray:
    """True on the subject: every pixel that is not background (`background_mask`)."""
    return ~background_mask(rgb)


def content_box(image: Image.Image, pad_frac: float = 0.04) -> Image.Image:
    """Crop to the subject's bounding box and pad to a white square (an image with no subject is returned as is). On
    a coloured backdrop the backdrop's pixels turn white first, so the subject is seen as on the catalog's white."""
    rgb = np.asarray(image)
    colour = backdrop(rgb)
    background = _background(rgb, colour)
    mask = ~background
    if not mask.any():
        return image
    if colour is not None:
        rgb = rgb.copy()
        rgb[background] = 255
        image = Image.fromarray(rgb)
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    crop = image.crop((cols[0], rows[0], cols[-1] + 1, rows[-1] + 1))
    side = int(round(max(crop.size) * (1 + 2 * pad_frac)))
    canvas = Image.new("RGB", (side, side), (255, 255, 255))
    canvas.paste(crop, ((side - crop.size[0]) // 2, (side - crop.size[1]) // 2))
    return canvas


def pixel_block(image: Image.Image, max_factor: int = 16) -> tuple[int, int, int]:
    """(f, x0, y0): the factor and grid offset of a nearest-neighbour upscale (pixel art shown at 3x gives f 3), f 1
    for any other image. Exact first: every colour change of an f-times upscale lies on one grid of pitch f, so f is
    the gcd of the gaps between the columns (and rows) where the colour changes. A lossy copy (a JPEG or WebP of a
    screenshot) smears the changes, so then the grid is found from where the edge energy concentrates
    (`_lossy_block`)."""
    a = np.asarray(image)
    cols = np.flatnonzero((a[:, 1:] != a[:, :-1]).any(axis=(0, 2))) + 1  # first column of each new colour run
    rows = np.flatnonzero((a[1:] != a[:-1]).any(axis=(1, 2))) + 1
    if len(cols) < 4 or len(rows) < 4:  # too few edges to tell a grid from chance
        return 1, 0, 0
    f = int(np.gcd.reduce(np.concatenate([np.diff(cols), np.diff(rows)])))
    if 2 <= f <= max_factor:
        return f, int(cols[0] % f), int(rows[0] % f)
    return _lossy_block(a, max_factor)


# A grid's "excess share" of the edge energy: (share on the grid - 1/f) / (1 - 1/f), 0 for edges spread evenly, 1 when
# every edge is on the grid. Measured on 900 box sprites, native and as JPEG q75: at most 0.17 at any pitch; upscaled
# 3x and 5x and saved as JPEG q40: at least 0.43.
LOSSY_MIN_EXCESS = 0.3


def _lossy_block(a: np.ndarray, max_factor: int) -> tuple[int, int, int]:
    """The pitch whose grid holds an excess share of the edge energy (LOSSY_MIN_EXCESS) along both axes. A grid of
    pitch f also holds every edge of pitch f/2, and half of those of pitch 2f: the largest pitch within 80 % of the
    best excess share is the upscale's."""
    v = a.astype(np.int16)
    energy = (np.abs(np.diff(v, axis=1)).sum(axis=(0, 2)), np.abs(np.diff(v, axis=0)).sum(axis=(1, 2)))
    if min(e.sum() for e in energy) == 0:
        return 1, 0, 0
    found: dict[int, tuple[float, int, int]] = {}
    for f in range(2, max_factor + 1):
        fits = []
        for e in energy:
            phase = np.arange(1, len(e) + 1) % f  # the edge before pixel i + 1 starts a block when (i + 1) % f == offset
            sums = np.bincount(phase, weights=e, minlength=f)
            offset = int(sums.argmax())
            lines = int((e[phase == offset] > 0.01 * e.sum()).sum())
            fits.append(((sums[offset] / e.sum() - 1 / f) / (1 - 1 / f), offset, lines))
        if all(lines >= 4 for *_, lines in fits):
            found[f] = (min(fits[0][0], fits[1][0]), fits[0][1], fits[1][1])
    best = max((x for x, *_ in found.values()), default=0.0)
    if best < LOSSY_MIN_EXCESS:
        return 1, 0, 0
    f = max(f for f, (x, *_) in found.items() if x >= 0.8 * best)
    return f, found[f][1], found[f][2]


def unblock(image: Image.Image) -> Image.Image:
    """A nearest-neighbour upscale back at its native pixels (one pixel per block: the block's centre, which a lossy
    copy keeps closest to the true colour); any other image as is."""
    f, x0, y0 = pixel_block(image)
    return image if f == 1 else Image.fromarray(np.ascontiguousarray(np.asarray(image)[y0 + f // 2 :: f, x0 + f // 2 :: f]))


def content_side(image: Image.Image) -> int:
    """The subject's longest side in native pixels (after undoing a pixel-art upscale): the scale of detail the
    encoder will see, which anchors are matched to."""
    return max(content_box(unblock(image), pad_frac=0.0).size)


def grid_cell(image: Image.Image, grid: int, row: int, col: int, overlap: float = 0.5) -> Image.Image:
    """Cell (row, col) of a grid x grid split whose cells are (1 + overlap) / grid of each side, evenly spaced
    from edge to edge: with grid 2 four quadrants of 3/4 side, so a part cut by the midline is whole in some cell."""
    if not (grid >= 1 and 0 <= row < grid and 0 <= col < grid):
        raise ValueError(f"cell ({row}, {col}) is outside a {grid}x{grid} grid")
    w, h = image.size
    cw, ch = max(1, round(w * min(1.0, (1 + overlap) / grid))), max(1, round(h * min(1.0, (1 + overlap) / grid)))
    x0 = round(col * (w - cw) / (grid - 1)) if grid > 1 else 0
    y0 = round(row * (h - ch) / (grid - 1)) if grid > 1 else 0
    return image.crop((x0, y0, x0 + cw, y0 + ch))
