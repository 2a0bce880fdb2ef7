"""all-MiniLM-L6-v2's forward pass (a 6-layer BERT, mean pooling) in numpy: text vectors with the same bits on every
x86-64 CPU of this machine kind, which ONNX Runtime's do not have.

ONNX Runtime chooses its kernels by instruction set, and some of them round differently under AVX2 and AVX-512: its
softmax sums the exponentials eight lanes at a time under AVX2 and sixteen under AVX-512, and it has an AVX-512 GELU of
its own. A fresh clone on an AVX2 AMD machine reproduced every committed report of the AVX-512 Intel run but not the
chunk features' bytes (nor the graph built on them), so `dvc.lock` changed. Here every operation runs a code path that
`polarcatalog.numerics` pins: matrix products in OpenBLAS's Haswell kernels on one thread, elementwise maths and
reductions in numpy's AVX2 loops (its AVX-512 loops disabled), erf in scipy's scalar code. The vectors agree with
sentence-transformers' (torch) to about 1e-7 (tests/test_encoders_cache.py).

Texts are independent: each is encoded alone (no padding, so no batch-mate changes its bits), and a thread pool runs
as many texts at once as there are cores; numpy and scipy release the GIL inside their loops.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np
from safetensors.numpy import load_file
from scipy.special import erf


class NumpyBert:
    """A sentence-transformers BERT folder (config.json, model.safetensors; mean pooling) as a numpy function of token
    ids. The weights are read with safetensors: nothing is unpickled."""

    def __init__(self, model_dir: Path):
        config = json.loads((model_dir / "config.json").read_text())
        if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{model_dir}: NumpyBert implements BERT with erf GELU and absolute positions; "
                             f"this config has {config.get('hidden_act')!r}, {config.get('position_embedding_type')!r}")
        weights = load_file(str(model_dir / "model.safetensors"))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = np.float32(config["layer_norm_eps"])
        # linear layers as (in, out) C-contiguous matrices: x @ W is one sgemm without a transposed operand
        self.w = {k: (np.ascontiguousarray(v.T) if v.ndim == 2 and "embeddings" not in k else v)
                  for k, v in weights.items() if k.startswith(("embeddings.", "encoder."))}

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        d = x - mean
        return d / np.sqrt((d * d).mean(-1, keepdims=True) + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"] + self.w[name + ".bias"]

    def __call__(self, ids: np.ndarray, type_ids: np.ndarray) -> np.ndarray:
        """One text's token ids -> its mean-pooled hidden state (not normalised), float32."""
        n, w, h = len(ids), self.w, self.heads
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][type_ids])
        x = self._norm(x, "embeddings.LayerNorm")
        d = x.shape[1] // h
        scale = np.float32(1.0 / np.sqrt(d))
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = self._linear(x, p + "attention.self.query").reshape(n, h, d).transpose(1, 0, 2)
            k = self._linear(x, p + "attention.self.key").reshape(n, h, d).transpose(1, 2, 0)
            v = self._linear(x, p + "attention.self.value").reshape(n, h, d).transpose(1, 0, 2)
            s = (q @ k) * scale
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            context = (s @ v).transpose(1, 0, 2).reshape(n, h * d)
            x = self._norm(x + self._linear(context, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            g = self._linear(x, p + "intermediate.dense")
            g = (np.float32(0.5) * g * (np.float32(1.0) + erf(g * np.float32(1.0 / np.sqrt(2.0))))).astype(np.float32)
            x = self._norm(x + self._linear(g, p + "output.dense"), p + "output.LayerNorm")
        return x.mean(0)

    def encode(self, encodings: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """(ids, type_ids) per text -> (n, hidden) pooled states; texts run in parallel, each on one thread."""
        if not encodings:
            return np.zeros((0, self.w["embeddings.word_embeddings.weight"].shape[1]), np.float32)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        workers = min(len(encodings), cores)
        if workers == 1:
            return np.stack([self(*e) for e in encodings])
        with ThreadPoolExecutor(workers) as pool:
            return np.stack(list(pool.map(lambda e: self(*e), encodings)))
