"""Numbers that do not depend on the machine: the same inputs give the same bits on any x86-64 machine with AVX2,
whatever its core count or vector width, so a fresh clone elsewhere reproduces the committed `dvc.lock`.

Three things change floating-point results between machines of one kind, measured on 2-core AVX-512 and AVX2 ones:
- **Summation order follows the thread count.** OpenBLAS (numpy, scikit-learn's PCA and logistic probes) and the
  OpenMP loops of faiss split reductions across threads: 1 and 2 threads give different low bits, and on a near-tie
  a different ranking. Their reductions run on one thread (`REDUCTION_THREADS`); they are a small part of any stage
  here (the EfficientNets run in ONNX Runtime, whose features were bit-identical at 1 and 2 threads).
- **OpenBLAS picks its kernel by CPU** (SkylakeX on AVX-512, Haswell or Zen on AVX2), and the kernels round
  differently. `OPENBLAS_CORETYPE=Haswell` (AVX2, present on every x86-64 server since 2013) is the same everywhere.
- **numpy picks its loops by CPU** at import (AVX2 or AVX-512 variants of its elementwise maths, reductions and
  sorts). `NPY_DISABLE_CPU_FEATURES` switches the AVX-512 groups off, so every machine runs the AVX2 loops
  (`NUMPY_AVX512`: numpy 2.x's dispatch groups; numpy ignores a name the CPU lacks). faiss does the same for its
  distance kernels (a search of fewer than 20 queries, such as `polarcatalog evaluate`'s one query at a time, skips
  BLAS): `FAISS_SIMD_LEVEL=AVX2`.

torch picks its CPU kernels by CPU the same way (ATen's AVX2 or AVX-512 build of each vectorised op):
its softmax, which turns the ImageNet logits into the bird filter's P(bird), gave other low bits under AVX-512, and the
bird pipeline's filter figure another PNG. `ATEN_CPU_CAPABILITY=avx2` makes every machine run the AVX2 kernels, which
are what an AVX2 CPU runs anyway.

ONNX Runtime picks its kernels by CPU as well, with no switch to pin them: its softmax sums 8 lanes at a time under
AVX2 and 16 under AVX-512, and it has an AVX-512 GELU of its own. MiniLM, whose chunk vectors differed between an
AVX2 AMD and an AVX-512 Intel run, therefore runs in numpy on the CPU (`encoders.minilm_numpy`). The EfficientNets stay
in ONNX Runtime: their convolutions accumulate in the same order whatever the vector width, and the curate stage's
prototype threshold, computed from their features to 16 digits, was the same on both machines. Their export is kept
free of the CPU too: torch's ONNX exporter, left to fold batch norm into each convolution, computes the new weights
through MKL, whose code path follows the CPU, so the packaged models are exported as trained and ONNX Runtime folds
them at load (`encoders.onnx_runtime.WEIGHTS_AS_TRAINED`; tests/test_cpu_independence.py).

The pins are environment variables read when the libraries load: `polarcatalog run-notebook` sets them for every
stage's kernel (`stage_env`, always), and the `polarcatalog` command sets any that are unset (`pin_process`, in
`cli.main()`), which covers the CLI; the tests and benchmarks call `pin_process` first too. GPU runs are not covered:
CUDA kernels have their own nondeterminism, and the GPU profile's reports say so.
"""

from __future__ import annotations

import os
import platform
from typing import Any, Mapping, MutableMapping

REDUCTION_THREADS = 1
NUMPY_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR"


def pins() -> dict[str, str]:
    out = {"OPENBLAS_NUM_THREADS": str(REDUCTION_THREADS)}
    if platform.machine().lower() in ("x86_64", "amd64"):  # an x86 core name means nothing to an ARM OpenBLAS
        out["OPENBLAS_CORETYPE"] = "Haswell"
        out["NPY_DISABLE_CPU_FEATURES"] = NUMPY_AVX512
        out["FAISS_SIMD_LEVEL"] = "AVX2"
        out["ATEN_CPU_CAPABILITY"] = "avx2"  # torch's CPU kernels
    return out


def in_effect() -> dict[str, str | None]:
    """The pins' variables as this process has them: they choose kernels, and so the low bits of what is computed (a
    result kept by content names them in its key)."""
    return {key: os.environ.get(key) for key in pins()}


def stage_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the pins forced: what a stage's kernel runs under, whatever the shell had set."""
    return {**env, **pins()}


def pin_process(env: MutableMapping[str, str] = os.environ) -> None:
    """Set the pins this process's environment lacks (a user's explicit setting wins outside the stages). Effective
    only before numpy is first imported, which is why each entry point calls it first."""
    for key, value in pins().items():
        env.setdefault(key, value)


def single_threaded_faiss(faiss: Any) -> None:
    """faiss reads its OpenMP thread count per call, not from the environment at load: set it before a CPU search."""
    faiss.omp_set_num_threads(REDUCTION_THREADS)
