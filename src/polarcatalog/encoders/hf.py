"""transformers image models: DINOv2 (the paper's re-ranker h), CLIP / SigLIP (image + text)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from PIL import Image
from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

from polarcatalog.device import resolve_device
from polarcatalog.progress import batches


def _pooled(out: Any) -> torch.Tensor:
    # transformers 5 returns output objects from get_*_features; older versions a tensor
    return out if isinstance(out, torch.Tensor) else out.pooler_output


class HFEncoder:
    def __init__(self, model: str, device: str = "auto"):
        self.device = resolve_device(device)
        self.model = AutoModel.from_pretrained(model).to(self.device).eval()
        self.processor = AutoImageProcessor.from_pretrained(model)
        self.tokenizer = None
        if hasattr(self.model, "get_text_features"):
            self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.id = f"hf:{model}:{getattr(self.model.config, '_commit_hash', None) or 'local'}"
        self.dim = int(self.encode_images([Image.new("RGB", (32, 32))]).shape[-1])

    @torch.inference_mode()
    def encode_images(self, images: Sequence[Image.Image], batch_size: int = 64) -> np.ndarray:
        out = []
        for i in batches(len(images), batch_size, self.id):
            px = self.processor(images=list(images[i : i + batch_size]), return_tensors="pt")["pixel_values"].to(self.device)
            if hasattr(self.model, "get_image_features"):
                f = _pooled(self.model.get_image_features(pixel_values=px))
            else:
                f = self.model(pixel_values=px).pooler_output
            out.append(torch.nn.functional.normalize(f.float(), dim=-1).cpu().numpy())
        return np.concatenate(out)

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if self.tokenizer is None:
            raise ValueError(f"{self.id} has no text tower; its chunks are bridged from encoders.text")
        out = []
        for i in range(0, len(texts), batch_size):
            tok = self.tokenizer(list(texts[i : i + batch_size]), padding="max_length", truncation=True, return_tensors="pt").to(self.device)
            out.append(torch.nn.functional.normalize(_pooled(self.model.get_text_features(**tok)).float(), dim=-1).cpu().numpy())
        return np.concatenate(out)
