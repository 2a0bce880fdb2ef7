"""Encoders: one name in params.yaml -> one encoder (`create_encoder`), each an `ImageEncoder` and/or a
`TextEncoder`. Importing this package is torch-free; building an encoder imports its model library."""

from polarcatalog.encoders.encoder_types import ImageEncoder, TextEncoder
from polarcatalog.encoders.registry import EncoderSpec, create_encoder, has_text_tower, image_encoder, parse_encoder

__all__ = ["EncoderSpec", "ImageEncoder", "TextEncoder", "create_encoder", "has_text_tower", "image_encoder", "parse_encoder"]
