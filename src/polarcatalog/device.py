"""Which torch device a model runs on. Torch is imported only when a device is resolved (so importing this
module, e.g. to validate params, stays instant)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def resolve_device(device: str = "auto") -> "torch.device":
    """`auto` takes CUDA when visible; an explicit `cuda` without a GPU fails here, before any model loads."""
    import torch  # heavy: only when a model is about to be built

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("encoders.device is 'cuda' but no CUDA device is visible; use 'auto' or 'cpu'")
    return torch.device(device)
