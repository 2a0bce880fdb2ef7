"""Dominant colour names measured from the species' artwork (the appearance facts an article lacks).

Foreground = `polarcatalog.data.regions.foreground_mask` (a white Pokémon's body is kept). Each foreground
pixel takes the nearest name in CIELAB from a fixed table of the basic colour terms (spelled like PokeAPI's
Pokédex colours, plus orange).
"""

from __future__ import annotations

import numpy as np
from PIL import Image
from skimage.color import rgb2lab

from polarcatalog.data.regions import foreground_mask

# A pixel with CIELAB chroma below ACHROMATIC_C is black / gray / white by lightness alone; any other pixel
# takes the nearest chromatic prototype in CIELAB. Several prototypes per name (saturated, typical, pastel
# and dark shades) so that a single centroid's position does not decide (pure blue sits closer to a lone
# "purple" centroid than to a lone mid-blue one; Bulbasaur's pastel teal would otherwise read as gray).
ACHROMATIC_C = 12.0
ACHROMATIC_L = (("black", 0.0, 25.0), ("gray", 25.0, 88.0), ("white", 88.0, 101.0))
COLOUR_TABLE: dict[str, tuple[tuple[int, int, int], ...]] = {
    "black": ((20, 20, 20), (0, 0, 0)),
    "gray": ((128, 128, 128), (169, 169, 169), (90, 90, 90), (200, 200, 200)),
    "white": ((245, 245, 245), (255, 255, 255)),
    "red": ((205, 35, 35), (255, 0, 0), (150, 20, 30), (230, 70, 60)),
    "orange": ((245, 140, 30), (255, 165, 0), (255, 120, 40), (236, 174, 132)),
    "yellow": ((250, 215, 40), (255, 255, 0), (240, 230, 140), (230, 190, 60)),
    "green": ((60, 160, 70), (0, 128, 0), (0, 255, 0), (120, 200, 80), (40, 90, 50), (118, 173, 151), (160, 210, 160)),
    "blue": ((45, 95, 200), (0, 0, 255), (30, 144, 255), (100, 180, 230), (20, 40, 120), (131, 178, 186), (170, 200, 230)),
    "purple": ((125, 65, 165), (128, 0, 128), (180, 130, 220), (80, 40, 110), (190, 160, 200)),
    "pink": ((245, 150, 190), (255, 192, 203), (255, 105, 180), (220, 120, 160)),
    "brown": ((135, 85, 45), (139, 69, 19), (160, 110, 70), (90, 60, 40), (180, 150, 120)),
}
_ACHROMATIC = {n for n, _, _ in ACHROMATIC_L}
_NAME_INDEX = {n: i for i, n in enumerate(COLOUR_TABLE)}
_CHROMA_NAMES = [n for n, protos in COLOUR_TABLE.items() if n not in _ACHROMATIC for _ in protos]
_CHROMA_LAB = rgb2lab(np.array([p for n, protos in COLOUR_TABLE.items() if n not in _ACHROMATIC for p in protos],
                               dtype=np.float64)[None] / 255.0)[0]
_CHROMA_TO_NAME = np.array([_NAME_INDEX[n] for n in _CHROMA_NAMES])


def name_pixels(lab: np.ndarray) -> np.ndarray:
    """Index into COLOUR_TABLE for each CIELAB pixel [n, 3]."""
    chroma = np.hypot(lab[:, 1], lab[:, 2])
    # squared distances to every prototype, summed channel by channel: the same additions in the same order as
    # `((lab[:, None] - protos) ** 2).sum(-1)`, so the same bits, without numpy's slow reduction over a length-3 axis
    d = sum((lab[:, c, None] - _CHROMA_LAB[None, :, c]) ** 2 for c in range(3))
    out = _CHROMA_TO_NAME[d.argmin(1)]
    for name, lo, hi in ACHROMATIC_L:
        out[(chroma < ACHROMATIC_C) & (lab[:, 0] >= lo) & (lab[:, 0] < hi)] = _NAME_INDEX[name]
    return out


def colour_fractions(image: Image.Image, max_side: int = 128) -> dict[str, float]:
    """Share of foreground pixels nearest to each colour name (sums to 1; empty if no foreground)."""
    im = image.convert("RGB")
    im.thumbnail((max_side, max_side), Image.Resampling.BILINEAR)
    rgb = np.asarray(im)
    fg = rgb[foreground_mask(rgb)]
    if len(fg) == 0:
        return {}
    lab = rgb2lab(fg[None].astype(np.float64) / 255.0)[0]
    nearest = name_pixels(lab)
    counts = np.bincount(nearest, minlength=len(COLOUR_TABLE)) / len(fg)
    return {name: float(c) for name, c in zip(COLOUR_TABLE, counts) if c > 0}


def dominant_colours(image: Image.Image, min_fraction: float = 0.12, max_names: int = 3) -> list[str]:
    """Colour names covering at least `min_fraction` of the subject, largest first (always >= 1 if any)."""
    fr = sorted(colour_fractions(image).items(), key=lambda kv: -kv[1])
    names = [n for n, f in fr if f >= min_fraction][:max_names]
    return names or [n for n, _ in fr[:1]]
