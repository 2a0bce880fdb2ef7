"""The same inputs give the same bits on another machine of this kind (`polarcatalog.numerics`). A "machine" here is
what differs between two cloud VMs of one type: the cores the process may use (`taskset`) and the BLAS kernel its CPU
selects (`OPENBLAS_CORETYPE`, which OpenBLAS otherwise picks from the CPU's vector width). Unpinned, 1 vs 2 cores
and the SkylakeX vs Zen kernels change the low bits of the probes and the faiss scores; a near-tie then changes a
ranking and the committed `dvc.lock` no longer matches a fresh clone elsewhere."""

import os
import shutil
import subprocess
import sys

import pytest

from polarcatalog.numerics import pins, stage_env

# The graph stage's probe verifier, the retrieval stage's faiss search on fixed random features, and the embed stage's
# MiniLM (numpy, one text per thread: 1 or 2 at once).
SCRIPT = """
import hashlib
import numpy as np
from polarcatalog.encoders.minilm import MiniLMEncoder
from polarcatalog.index import build_index, search
from polarcatalog.memory.verifiers.probe import ProbeVerifier

texts = MiniLMEncoder("cpu").encode_texts(["A yellow mouse with red cheeks.", "fins and a shell " * 30, "Tiny."], 1)

rng = np.random.default_rng(0)
x = rng.standard_normal((600, 384)).astype(np.float32)
y = (x[:, :6] + 0.5 * rng.standard_normal((600, 6)) > 0.4).astype(int)
species = np.arange(600) % 60
probes = ProbeVerifier(folds=2, dim=64).cross_fit(x, y, species, x[:200], species[:200])
unit = x / np.linalg.norm(x, axis=1, keepdims=True)
scores, ids = search(build_index(unit, use_gpu=False), unit[:300], 50)
one, _ = search(build_index(unit, use_gpu=False), unit[7:8], 50)  # under 20 queries faiss skips BLAS: its own kernels
print(hashlib.sha256(probes.tobytes() + scores.tobytes() + ids.tobytes() + texts.tobytes() + one.tobytes()).hexdigest())
"""


def _machine(cpus: str, coretype: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in pins() and k != "OMP_NUM_THREADS"}
    env["OPENBLAS_CORETYPE"] = coretype  # what this machine's CPU would select
    proc = subprocess.run(["taskset", "-c", cpus, sys.executable, "-c", SCRIPT], env=stage_env(env),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.skipif(shutil.which("taskset") is None or (os.cpu_count() or 1) < 2, reason="needs taskset and 2 cores")
def test_a_stage_computes_the_same_bits_on_one_core_or_two_and_on_either_blas_kernel():
    assert _machine("0", "SkylakeX") == _machine("0,1", "Zen") == _machine("0,1", "SkylakeX")


def test_the_pins_are_forced_for_a_stage_and_only_defaulted_for_a_user():
    assert stage_env({"OPENBLAS_NUM_THREADS": "8", "HOME": "/h"})["OPENBLAS_NUM_THREADS"] == "1"
    user = {"OPENBLAS_NUM_THREADS": "8"}
    from polarcatalog.numerics import pin_process

    pin_process(user)
    assert user["OPENBLAS_NUM_THREADS"] == "8" and set(user) == set(pins())


def test_every_avx512_loop_group_of_numpy_and_faiss_is_switched_off_in_a_stage():
    """numpy chooses AVX2 or AVX-512 loops at import; a stage must get the AVX2 ones on every CPU. A numpy upgrade that
    adds an AVX-512 dispatch group fails here until `NUMPY_AVX512` names it."""
    from numpy._core._multiarray_umath import __cpu_dispatch__

    from polarcatalog.numerics import NUMPY_AVX512

    avx512 = {g for g in __cpu_dispatch__ if "AVX512" in g or g == "X86_V4"}
    assert avx512 and avx512 <= set(NUMPY_AVX512.split())
    probe = ("import json, faiss; from numpy._core._multiarray_umath import __cpu_features__ as f; "
             f"print(json.dumps([f[g] for g in {sorted(avx512)!r}] + [faiss.SIMDConfig.get_level_name()]))")
    out = subprocess.run([sys.executable, "-c", probe], env=stage_env(dict(os.environ)), capture_output=True, text=True,
                         check=True).stdout
    assert "true" not in out and out.strip().endswith('"AVX2"]')  # faiss's distance kernels: AVX2 too
