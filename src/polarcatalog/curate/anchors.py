"""Anchor filters: which candidate images may represent a species (VR-RAG §3 "Visual Refinement").

The paper asks GPT-4o "Is there a bird present in the Image? Reply only with Yes or No". Three filters
share one interface (`curate.anchor_filter`):
- `prototype`: robust outlier test against the domain prototype of image features (Pokémon: off-domain
  images such as item icons fall far from the artwork cluster);
- `imagenet_bird`: P(bird) = the summed softmax of ImageNet's 59 bird classes (offline "is there a bird?");
- `vlm`: the paper's yes/no question to a Qwen2-VL-class model, P(Yes) normalised over {Yes, No} (GPU profile).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import torch
from PIL import Image
from scipy.stats import median_abs_deviation

from polarcatalog.device import resolve_device
from polarcatalog.encoders.efficientnet_lite import IMAGENET_BIRD_CLASSES, EfficientNetEncoder
from polarcatalog.progress import batches
from polarcatalog.vectors import l2_normalise


@dataclass
class FilterResult:
    scores: np.ndarray  # higher = more likely a valid anchor
    keep: np.ndarray  # bool
    threshold: float


class AnchorFilter(Protocol):
    name: str

    def __call__(self, images: Sequence[Image.Image]) -> FilterResult: ...


def robust_prototype(features: np.ndarray, z: float, iterations: int = 3) -> FilterResult:
    """Cosine to the mean of inliers; inlier = cosine >= median - z * 1.4826 * MAD, refitted `iterations` times.

    Median/MAD rather than mean/std so that a tenth of junk cannot drag the threshold down with it.
    """
    f = l2_normalise(features, axis=1)
    inlier = np.ones(len(f), dtype=bool)
    scores, threshold = np.ones(len(f)), -1.0
    for _ in range(iterations):
        proto = l2_normalise(f[inlier].mean(0))
        scores = f @ proto
        med = np.median(scores[inlier])
        threshold = float(med - z * 1.4826 * median_abs_deviation(scores[inlier]))
        new = scores >= threshold
        if new.sum() == 0 or (new == inlier).all():
            inlier = new if new.any() else inlier
            break
        inlier = new
    return FilterResult(scores, scores >= threshold, threshold)


class PrototypeFilter:
    name = "prototype"

    def __init__(self, encoder: EfficientNetEncoder, z: float = 3.0, batch_size: int = 32):
        self.encoder, self.z, self.batch_size = encoder, z, batch_size

    def __call__(self, images: Sequence[Image.Image]) -> FilterResult:
        feats, _ = self.encoder.forward(images, self.batch_size, desc="anchor features")
        return robust_prototype(feats, self.z)


class ImageNetBirdFilter:
    name = "imagenet_bird"

    def __init__(self, encoder: EfficientNetEncoder, threshold: float = 0.1, batch_size: int = 32):
        self.encoder, self.threshold, self.batch_size = encoder, threshold, batch_size

    def __call__(self, images: Sequence[Image.Image]) -> FilterResult:
        _, probs = self.encoder.forward(images, self.batch_size, desc="P(bird)")
        p_bird = probs[:, list(IMAGENET_BIRD_CLASSES)].sum(1)
        return FilterResult(p_bird, p_bird >= self.threshold, self.threshold)


# VR-RAG §3, verbatim for birds; the subject is swapped per domain.
VLM_PROMPT = "Is there a {subject} present in the Image? Reply only with Yes or No"
SUBJECT = {"birds": "bird", "pokemon": "Pokémon"}


class VLMFilter:
    """P(Yes) from the first answer token's logits, softmax over the Yes/No token pair only."""

    name = "vlm"

    def __init__(self, model: str, domain: str = "pokemon", threshold: float = 0.5, device: str = "auto", batch_size: int = 8):
        from transformers import AutoModelForImageTextToText, AutoProcessor  # heavy: only for the GPU-profile filter

        self.device = resolve_device(device)
        self.processor = AutoProcessor.from_pretrained(model)
        self.processor.tokenizer.padding_side = "left"
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.model = AutoModelForImageTextToText.from_pretrained(model, dtype=dtype).to(self.device).eval()
        tok = self.processor.tokenizer
        self.yes_no = [tok.convert_tokens_to_ids(t) for t in ("Yes", "No")]
        if any(i is None or i == tok.unk_token_id for i in self.yes_no):
            raise ValueError(f"{model}: 'Yes'/'No' are not single tokens of its tokenizer; cannot read P(Yes)")
        self.question = VLM_PROMPT.format(subject=SUBJECT[domain])
        self.threshold, self.batch_size, self.model_name = threshold, batch_size, model

    def p_yes(self, images: Sequence[Image.Image]) -> np.ndarray:
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": self.question}]}]
        text = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        out = []
        for i in batches(len(images), self.batch_size, "VLM yes/no"):
            batch = list(images[i : i + self.batch_size])
            enc = self.processor(text=[text] * len(batch), images=batch, return_tensors="pt", padding=True).to(self.device)
            with torch.inference_mode():
                logits = self.model(**enc).logits[:, -1, :]
            out.append(logits[:, self.yes_no].float().softmax(-1)[:, 0].cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def __call__(self, images: Sequence[Image.Image]) -> FilterResult:
        p = self.p_yes(images)
        return FilterResult(p, p >= self.threshold, self.threshold)


def create_anchor_filter(kind: str, *, encoder: EfficientNetEncoder | None = None, z: float = 3.0, bird_threshold: float = 0.1,
                         vlm_model: str | None = None, vlm_threshold: float = 0.5, domain: str = "pokemon",
                         device: str = "auto", batch_size: int = 32) -> AnchorFilter:
    if kind == "prototype":
        return PrototypeFilter(_need(encoder, kind), z, batch_size)
    if kind == "imagenet_bird":
        return ImageNetBirdFilter(_need(encoder, kind), bird_threshold, batch_size)
    if kind == "vlm":
        if not vlm_model:
            raise ValueError("curate.vlm_model must name a Qwen2-VL-class model for anchor_filter 'vlm'")
        return VLMFilter(vlm_model, domain, vlm_threshold, device, batch_size)
    raise ValueError(f"unknown anchor filter {kind!r}; allowed: prototype, imagenet_bird, vlm")


def _need(encoder: EfficientNetEncoder | None, kind: str) -> EfficientNetEncoder:
    if encoder is None:
        raise ValueError(f"anchor filter {kind!r} needs an image encoder")
    return encoder


def precision_recall(keep: np.ndarray, is_target: np.ndarray) -> dict[str, float | int]:
    """Filter quality on a labelled mix: precision/recall of 'keep' for the target class."""
    keep, is_target = np.asarray(keep, bool), np.asarray(is_target, bool)
    tp = int((keep & is_target).sum())
    fp = int((keep & ~is_target).sum())
    fn = int((~keep & is_target).sum())
    tn = int((~keep & ~is_target).sum())
    return {
        "precision": tp / (tp + fp) if tp + fp else float("nan"),
        "recall": tp / (tp + fn) if tp + fn else float("nan"),
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
    }
