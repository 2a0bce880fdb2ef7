"""Encoder registry: one name in params.yaml -> one encoder with its preprocessing (open_clip's factory shape).

Only the embedded ImageNet encoders live here so far; open_clip / transformers encoders join the same
registry with the retrieval work.
"""

from polarcatalog.encoders.efficientnet_lite import IMAGE_ENCODERS, ImageEncoder, create_image_encoder

__all__ = ["IMAGE_ENCODERS", "ImageEncoder", "create_image_encoder"]
