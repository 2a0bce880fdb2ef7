"""Non-bird photographs that ship inside scikit-image: negatives for the "is there a bird?" filter.

These are bundled with the wheel (no download): a cat, coffee, an astronaut, a rocket, coins, a horse
silhouette, textures, micrographs. None contains a bird.
"""

from __future__ import annotations

import numpy as np
import skimage.data
from PIL import Image

NON_BIRD_SAMPLES = ("chelsea", "coffee", "astronaut", "rocket", "camera", "coins", "horse", "clock", "moon", "page",
                    "text", "brick", "grass", "gravel", "colorwheel", "logo", "hubble_deep_field",
                    "immunohistochemistry", "retina", "checkerboard", "microaneurysms")


def non_bird_images() -> dict[str, Image.Image]:
    out = {}
    for name in NON_BIRD_SAMPLES:
        a = np.asarray(getattr(skimage.data, name)())
        if a.dtype != np.uint8:
            a = (a.astype(np.float64) / max(a.max(), 1) * 255).astype(np.uint8)
        out[name] = Image.fromarray(a).convert("RGB")
    return out
