"""ONNX Runtime for the packaged CPU models (EfficientNet-Lite, MiniLM): the `cpu` extra.

The torch module is exported in memory (under a second; nothing written to disk) and loaded with as many intra-op
threads as torch uses. On 2 CPU cores ONNX Runtime runs the EfficientNets about 3x and a single MiniLM text about
2.5x faster than torch, with the same vectors to float error (tests/test_encoders_cache.py holds both). The vectors
are close, not bit-identical, so each encoder's id names its runtime and the feature cache keeps them apart.
"""

from __future__ import annotations

import warnings
from io import BytesIO
from typing import Any

import torch


def available() -> bool:
    """Whether the `cpu` extra is installed: torch's exporter needs `onnx`, the session needs `onnxruntime`."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
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


RUNTIMES = ("auto", "onnxruntime", "torch")


def session(module: torch.nn.Module, example: tuple[torch.Tensor, ...], inputs: list[str], outputs: list[str],
            dynamic_axes: dict[str, dict[int, str]]) -> Any:
    """`module` (in eval mode) exported with `example` inputs and loaded in an ONNX Runtime CPU session."""
    import onnxruntime as ort  # optional: the `cpu` extra

    buffer = BytesIO()
    with warnings.catch_warnings():  # the tracer's notes on Python branches it fixes (shapes stay dynamic): noise in a stage
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), example, buffer, input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic_axes, dynamo=False, opset_version=17)
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    # no spin-waiting between runs: the embed path decodes the next batch on another thread meanwhile
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return ort.InferenceSession(buffer.getvalue(), options, providers=["CPUExecutionProvider"])
