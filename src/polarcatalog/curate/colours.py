"""Dominant colour names measured from the species' artwork (the appearance facts an article lacks).

Foreground = every pixel except the near-white background connected to the image border, so a white
Pokémon's body is kept. Each foreground pixel takes the nearest name in CIELAB from a fixed table of the
basic colour terms (spelled like PokeAPI's Pokédex colours, plus orange).
"""

from __future__ import annotations

import numpy as np
from PIL import Image
from scipy import ndimage
from skimage.color import rgb2lab

COLOUR_TABLE: dict[str, tuple[int, int, int]] = {
    "black": (20, 20, 20),
    "gray": (128, 128, 128),
    "white": (245, 245, 245),
    "red": (205, 35, 35),
    "orange": (245, 140, 30),
    "yellow": (250, 215, 40),
    "green": (60, 160, 70),
    "blue": (45, 95, 200),
    "purple": (125, 65, 165),
    "pink": (245, 150, 190),
    "brown": (135, 85, 45),
}
_NAMES = np.array(list(COLOUR_TABLE))
_LAB = rgb2lab(np.array(list(COLOUR_TABLE.values()), dtype=np.float64)[None] / 255.0)[0]


def foreground_mask(rgb: np.ndarray, white_level: int = 235) -> np.ndarray:
    """True on the subject: pixels that are not near-white regions touching the border."""
    near_white = (rgb >= white_level).all(axis=-1)
    labels, _ = ndimage.label(near_white)
    border = np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    background = np.isin(labels, border[border > 0])
    return ~background


def colour_fractions(image: Image.Image, max_side: int = 128) -> dict[str, float]:
    """Share of foreground pixels nearest to each colour name (sums to 1; empty if no foreground)."""
    im = image.convert("RGB")
    im.thumbnail((max_side, max_side), Image.Resampling.BILINEAR)
    rgb = np.asarray(im)
    fg = rgb[foreground_mask(rgb)]
    if len(fg) == 0:
        return {}
    lab = rgb2lab(fg[None].astype(np.float64) / 255.0)[0]
    nearest = ((lab[:, None, :] - _LAB[None]) ** 2).sum(-1).argmin(1)
    counts = np.bincount(nearest, minlength=len(_NAMES)) / len(fg)
    return {str(n): float(c) for n, c in zip(_NAMES, counts) if c > 0}


def dominant_colours(image: Image.Image, min_fraction: float = 0.12, max_names: int = 3) -> list[str]:
    """Colour names covering at least `min_fraction` of the subject, largest first (always >= 1 if any)."""
    fr = sorted(colour_fractions(image).items(), key=lambda kv: -kv[1])
    names = [n for n, f in fr if f >= min_fraction][:max_names]
    return names or [n for n, _ in fr[:1]]
