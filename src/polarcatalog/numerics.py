"""Numbers that do not depend on the machine: the same inputs give the same bits on any x86-64 machine with AVX2,
whatever its core count or vector width, so a fresh clone elsewhere reproduces the committed `dvc.lock`.

Two things change floating-point results between machines of one kind, both measured on a 2-core AVX-512 EPYC:
- **Summation order follows the thread count.** OpenBLAS (numpy, scikit-learn's PCA and logistic probes) and the
  OpenMP loops of faiss split reductions across threads: 1 and 2 threads give different low bits, and on a near-tie
  a different ranking. Their reductions run on one thread (`REDUCTION_THREADS`); they are a small part of any stage
  here (encoding runs in ONNX Runtime / torch, whose features were bit-identical at 1 and 2 threads).
- **OpenBLAS picks its kernel by CPU** (SkylakeX on AVX-512, Haswell or Zen on AVX2), and the kernels round
  differently. `OPENBLAS_CORETYPE=Haswell` (AVX2, present on every x86-64 server since 2013) is the same everywhere.

A third source sits in the encoders and is removed at its root rather than pinned: torch's ONNX exporter, left to
fold batch norm into each convolution, computes the new weights with torch's arithmetic, which goes through MKL, whose
code path follows the CPU (weights exported on AVX2 and AVX-512 machines differ in the last bit). The packaged models
are therefore exported as trained and ONNX Runtime folds them at load (`encoders.onnx_runtime.WEIGHTS_AS_TRAINED`);
its kernels give the same bits under every CPU model tried (tests/test_cpu_independence.py).

The two pins are environment variables read when the libraries load: `polarcatalog run-notebook` sets them for every stage's
kernel (`stage_env`, always), and the `polarcatalog` command sets any that are unset (`pin_process`, in `cli.main()`),
which covers the CLI; the tests and benchmarks call `pin_process` first too. GPU runs are not covered: CUDA kernels
have their own nondeterminism, and the GPU profile's reports say so.
"""

from __future__ import annotations

import os
import platform
from typing import Any, Mapping, MutableMapping

REDUCTION_THREADS = 1


def pins() -> dict[str, str]:
    out = {"OPENBLAS_NUM_THREADS": str(REDUCTION_THREADS)}
    if platform.machine().lower() in ("x86_64", "amd64"):  # an x86 core name means nothing to an ARM OpenBLAS
        out["OPENBLAS_CORETYPE"] = "Haswell"
    return out


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
