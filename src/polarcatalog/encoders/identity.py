"""The id that names an encoder's weights and numerics in every feature-cache key, written once per family and
computable without building the model, so that a caller who finds every vector in the cache never builds one
(`registry.image_encoder`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


# How an ONNX Runtime encoder's model file is made: exported with the checkpoint's own weights, batch norm unfolded
# (`onnx_runtime.WEIGHTS_AS_TRAINED`). Part of each ONNX id, so vectors from a differently folded export, which differ
# in the last bits, are never read from the cache as this one's.
ONNX_EXPORT = "ort-as-trained"
EFFICIENTNET_INPUT_PX = {"efficientnet_lite0": 224, "efficientnet_lite1": 240, "efficientnet_lite2": 260}  # each model's own


def efficientnet_id(name: str, input_size: int, onnx: bool) -> str:
    # The weights are fixed by the pinned package version: the name identifies them. The runtime is part of the id:
    # ONNX Runtime and torch channels_last agree to ~1e-5, not bit for bit, so their vectors are cached apart.
    return f"{name}@pypi:{input_size}px:{ONNX_EXPORT if onnx else 'cl'}"


def open_clip_weights(pretrained: str | None) -> str | None:
    """An open_clip spec's pretrained part as open_clip takes it: a tag or checkpoint file, or None for random weights."""
    return None if pretrained in (None, "", "none", "random") else pretrained


def _file_id(path: Path) -> str:
    st = os.stat(path)
    return f"{path.name}:{st.st_size}:{int(st.st_mtime)}"


def open_clip_id(model: str, pretrained: str | None) -> str:
    """A local checkpoint is named by its file name, size and mtime: replacing the file is a new id. A `local-dir:`
    folder by its weight files so, and its open_clip_config.json by content (the preprocessing lives there)."""
    if model.startswith("local-dir:"):
        folder = Path(model.removeprefix("local-dir:"))
        config = folder / "open_clip_config.json"
        digest = hashlib.sha256(config.read_bytes()).hexdigest()[:12] if config.is_file() else "no-config"
        weights = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin", ".pth", ".pt")) if folder.is_dir() else []
        return f"open_clip:{model}:config-{digest}:" + ",".join(_file_id(p) for p in weights)
    if model.startswith("hf-hub:"):
        return f"open_clip:{model}"
    weights = open_clip_weights(pretrained)
    if weights and Path(weights).is_file():
        return f"open_clip:{model}:{_file_id(Path(weights))}"
    return f"open_clip:{model}:{weights or 'random'}"
