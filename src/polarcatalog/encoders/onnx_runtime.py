"""ONNX Runtime for the packaged CPU models (EfficientNet-Lite; MiniLM when asked, `encoders.minilm`): the `cpu` extra.

A torch module is exported (under a second) and loaded with as many intra-op threads as torch uses. On 2 CPU cores
ONNX Runtime runs the EfficientNets about 3x and a single MiniLM text about 2x faster than torch, with the same
vectors to float error (tests/test_encoders_cache.py holds both). The vectors are close, not bit-identical, so each
encoder's id names its runtime and the feature cache keeps them apart.
"""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

OPSET = 17
# The exporter's own folding (batch norm into the convolution, constant subgraphs) computes new weights with torch on
# this CPU, and torch's elementwise maths goes through MKL, whose code path follows the CPU: the same model exported on
# an AVX2 AMD and an AVX-512 Intel machine differed in the last bit of 92 of EfficientNet-Lite0's 100 weight tensors,
# and so did every feature downstream. Exported as trained (the module is in eval mode, so batch norm uses its running
# statistics), the file holds the checkpoint's bytes; ONNX Runtime folds at load with its own fixed-ISA arithmetic,
# and its kernels gave the same bits on both machines (checked under an AVX2 AMD CPU model in QEMU).
WEIGHTS_AS_TRAINED: dict[str, Any] = {"training": torch.onnx.TrainingMode.PRESERVE, "do_constant_folding": False}
RUNTIMES = ("auto", "onnxruntime", "torch")
# ONNX Runtime's CPU arena keeps every activation buffer it ever allocated: the three EfficientNets at a batch of 32
# hold about 0.8 GB more with it than without, and run about 25 % faster. The pipeline encodes thousands of images and
# keeps it; `polarcatalog evaluate` encodes a user's folder, where memory matters more (`lean_memory`). The arena
# changes where buffers live, not the arithmetic: the vectors are the same bits either way. A process-wide setting, not
# a context variable: the encode path builds an encoder lazily, possibly on its decoding thread.
_ARENA = {"on": True}


def available() -> bool:
    """Whether the `cpu` extra is installed: torch's exporter needs `onnx`, the session needs `onnxruntime`."""
    try:
        import onnx  # noqa: F401  # optional: the `cpu` extra (torch's exporter needs it)
        import onnxruntime  # noqa: F401  # optional: the `cpu` extra
    except ImportError:
        return False
    return True


def use_onnx(runtime: str, device: torch.device, model: str) -> bool:
    """auto = ONNX Runtime on CPU when installed, else torch; `onnxruntime` insists (CPU only here)."""
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}; allowed: {', '.join(RUNTIMES)}")
    chosen = runtime == "onnxruntime" or (runtime == "auto" and device.type == "cpu" and available())
    if chosen and device.type != "cpu":
        raise ValueError(f"{model}: runtime onnxruntime runs on the CPU here; use runtime torch for device {device.type}")
    return chosen


def export(module: torch.nn.Module, example: tuple[torch.Tensor, ...], inputs: list[str], outputs: list[str],
           dynamic_axes: dict[str, dict[int, str]], path: Path | None = None) -> bytes:
    """`module` (put in eval mode) as ONNX bytes; with `path`, also written there atomically (a reader never sees half)."""
    buffer = BytesIO()
    with warnings.catch_warnings():  # the tracer's notes on Python branches it fixes (shapes stay dynamic): noise in a stage
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), example, buffer, input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic_axes, dynamo=False, opset_version=OPSET, **WEIGHTS_AS_TRAINED)
    data = buffer.getvalue()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return data


@contextmanager
def lean_memory() -> Iterator[None]:
    """Sessions created inside free their buffers after each run (no CPU arena): less memory, slower."""
    before, _ARENA["on"] = _ARENA["on"], False
    try:
        yield
    finally:
        _ARENA["on"] = before


def session(model: bytes | Path) -> Any:
    """An ONNX Runtime CPU session on `model` (bytes, or a file)."""
    import onnxruntime as ort  # optional: the `cpu` extra

    options = ort.SessionOptions()
    options.enable_cpu_mem_arena = _ARENA["on"]
    options.intra_op_num_threads = torch.get_num_threads()
    # no spin-waiting between runs: the embed path decodes the next batch on another thread meanwhile
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    source = str(model) if isinstance(model, Path) else model
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def cached_session(path: Path, export_to: Callable[[Path], None]) -> Any:
    """A session on the model file at `path`, exported there first by `export_to(path)` when absent or unreadable
    (a file cut short by a crash fails to load and is exported again). The file name must change with whatever the
    export depends on: the caller names it by model and exporter versions."""
    if path.is_file():
        try:
            return session(path)
        except Exception:  # noqa: BLE001  # onnxruntime raises its own exception types for a damaged file
            path.unlink(missing_ok=True)
    export_to(path)
    return session(path)
