"""Vector helpers shared by every layer that compares features by cosine."""

from __future__ import annotations

import numpy as np


def l2_normalise(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Unit rows along `axis` as float32 (inner product = cosine); an all-zero row stays zero instead of NaN. The
    quotient is a new array already: float32 input is returned as it is, not copied once more."""
    return (x / np.linalg.norm(x, axis=axis, keepdims=True).clip(1e-12)).astype(np.float32, copy=False)
