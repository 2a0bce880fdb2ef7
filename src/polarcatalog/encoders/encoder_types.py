"""What every encoder is to the rest of the code: an `id` that names its weights (part of every cache key), a
`dim`, and l2-normalised float32 vectors out. CLIP-like encoders (open_clip, CLIP / SigLIP through transformers)
are both an ImageEncoder and a TextEncoder, in one aligned space."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np
from PIL import Image


@runtime_checkable
class Encoder(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def dim(self) -> int: ...


@runtime_checkable
class ImageEncoder(Encoder, Protocol):
    def encode_images(self, images: Sequence[Image.Image], batch_size: int = 64) -> np.ndarray:
        """[n, dim] float32, rows l2-normalised."""
        ...


@runtime_checkable
class TextEncoder(Encoder, Protocol):
    def encode_texts(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """[n, dim] float32, rows l2-normalised."""
        ...


@runtime_checkable
class PreparingEncoder(ImageEncoder, Protocol):
    """An image encoder whose CPU preprocessing can run apart from its forward: the embed path prepares the next
    batch on its decode thread while the forward runs (`encode_images(x) == encode_prepared(prepare(x))`)."""

    def prepare(self, images: Sequence[Image.Image]) -> Any: ...

    def encode_prepared(self, batch: Any) -> np.ndarray:
        """[n, dim] float32, rows l2-normalised."""
        ...
