"""Encoder registry: one name in params.yaml -> one encoder with its preprocessing (open_clip's factory shape).

Only the embedded ImageNet encoders live here so far; open_clip / transformers encoders join the same
registry with the retrieval work. Torch is imported only when an encoder is created.
"""

from __future__ import annotations

from typing import Any

from polarcatalog.encoders.registry import IMAGE_ENCODERS, IMAGENET_BIRD_CLASSES

__all__ = ["IMAGE_ENCODERS", "IMAGENET_BIRD_CLASSES", "ImageEncoder", "create_image_encoder"]


def __getattr__(name: str) -> Any:
    if name in ("ImageEncoder", "create_image_encoder"):
        from polarcatalog.encoders import efficientnet_lite

        return getattr(efficientnet_lite, name)
    raise AttributeError(name)
