"""Encoder registry: one name in params.yaml -> one encoder with its preprocessing (open_clip's factory shape).

`create_image_encoder(name)` / `create_text_encoder(name)` return objects with `id` (stable, part of every
cache key), `dim` and `encode_images(list[PIL.Image])` / `encode_texts(list[str])` returning l2-normalised
float32 arrays. Torch and the model libraries are imported only when an encoder is created.
"""

from __future__ import annotations

from typing import Any

from polarcatalog.encoders.registry import IMAGE_ENCODERS, IMAGENET_BIRD_CLASSES, TEXT_ENCODERS, check_encoder_name

__all__ = ["IMAGE_ENCODERS", "IMAGENET_BIRD_CLASSES", "TEXT_ENCODERS", "check_encoder_name",
           "create_image_encoder", "create_text_encoder"]


def create_image_encoder(name: str, device: str = "auto") -> Any:
    check_encoder_name(name, "image")
    if name in IMAGE_ENCODERS:
        from polarcatalog.encoders.efficientnet_lite import create_efficientnet

        return create_efficientnet(name, device)
    if name.startswith("open_clip:"):
        from polarcatalog.encoders.open_clip_encoder import OpenClipEncoder

        _, model, pretrained = name.split(":", 2)
        return OpenClipEncoder(model, pretrained, device)
    from polarcatalog.encoders.hf import HFEncoder

    return HFEncoder(name.removeprefix("hf:"), device)


def create_text_encoder(name: str, device: str = "auto") -> Any:
    check_encoder_name(name, "text")
    if name == "minilm":
        from polarcatalog.encoders.minilm import MiniLMEncoder

        return MiniLMEncoder(device)
    return create_image_encoder(name, device)  # open_clip / hf CLIP-like: one object, both towers


def has_text_tower(name: str) -> bool:
    """Does this image encoder embed text into its own space (CLIP-like), or must its text be bridged?"""
    return name.startswith("open_clip:") or (name.startswith("hf:") and _hf_has_text(name.removeprefix("hf:")))


def _hf_has_text(model: str) -> bool:
    from transformers import AutoConfig

    return hasattr(AutoConfig.from_pretrained(model), "text_config")
