"""Which torch device a model runs on. Torch is imported only when a device is resolved (so importing this
module, e.g. to validate params, stays instant)."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# The `gpu` extra's CUDA stack: torch's PyPI wheel is a CUDA 13.0 build, faiss-gpu carries CUDA 12 runtime libraries;
# both load on an NVIDIA driver of the R580 branch or newer (README, "GPU profiles").
MIN_DRIVER = 580


def _driver() -> str | None:
    """The NVIDIA driver's version as nvidia-smi reports it, or None without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def cuda_problem() -> str | None:
    """Why `encoders.device: cuda` cannot run here (None when torch sees a GPU), with advice that keeps the GPU
    profile's 7B models off the CPU."""
    import torch  # heavy: only asked when cuda is requested

    if torch.cuda.is_available():
        return None
    driver = _driver()
    seen = (f"the NVIDIA driver is {driver}" + (f", older than the {MIN_DRIVER} branch this torch needs"
                                                if driver.split(".")[0].isdigit() and int(driver.split(".")[0]) < MIN_DRIVER else "")
            if driver else "nvidia-smi finds no driver or GPU")
    return (f"encoders.device is 'cuda' but torch {torch.__version__} (CUDA {torch.version.cuda or 'none: a CPU build'}) "
            f"sees no GPU; {seen}. Run on a machine with an NVIDIA driver >= {MIN_DRIVER}, or install a torch built for "
            "your driver's CUDA. Do not switch this run to 'auto' or 'cpu': its 7B models would run on the CPU for days "
            "(the CPU default, `make repro`, is the run for a machine without a GPU)")


def resolve_device(device: str = "auto") -> "torch.device":
    """`auto` takes CUDA when visible; an explicit `cuda` without a GPU fails here, before any model loads."""
    import torch  # heavy: only when a model is about to be built

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda":
        problem = cuda_problem()
        if problem:
            raise RuntimeError(problem)
    return torch.device(device)
