"""open_clip models (the paper's CLIP / OpenCLIP / SigLIP ViT-L/14): image and text towers in one space."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from PIL import Image

from polarcatalog.device import resolve_device
from polarcatalog.encoders.identity import open_clip_id, open_clip_weights
from polarcatalog.encoders.open_clip_configs import open_clip_library
from polarcatalog.progress import batches


class OpenClipEncoder:
    def __init__(self, model: str, pretrained: str | None, device: str = "auto"):
        """`model` is an architecture name (open_clip's or the project's `models/open_clip_configs/`) with `pretrained`
        a tag, a checkpoint file or `random`; or a `local-dir:` / `hf-hub:` name, which carries its own weights."""
        open_clip = open_clip_library()
        self.device = resolve_device(device)
        weights = open_clip_weights(pretrained)  # a missing checkpoint fails in parse_encoder
        self.model, _, self.preprocess = open_clip.create_model_and_transforms(model, pretrained=weights, device=self.device)
        self.model.eval()
        self.tokenizer = open_clip.get_tokenizer(model)
        self.id = open_clip_id(model, pretrained)
        with torch.inference_mode():
            self.dim = int(self.model.encode_text(self.tokenizer(["x"]).to(self.device)).shape[-1])

    @torch.inference_mode()
    def encode_images(self, images: Sequence[Image.Image], batch_size: int = 64) -> np.ndarray:
        out = []
        for i in batches(len(images), batch_size, self.id):
            x = torch.stack([self.preprocess(im) for im in images[i : i + batch_size]]).to(self.device)
            out.append(torch.nn.functional.normalize(self.model.encode_image(x).float(), dim=-1).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, self.dim), np.float32)

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        out = []
        for i in range(0, len(texts), batch_size):
            tok = self.tokenizer(list(texts[i : i + batch_size])).to(self.device)
            out.append(torch.nn.functional.normalize(self.model.encode_text(tok).float(), dim=-1).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, self.dim), np.float32)
