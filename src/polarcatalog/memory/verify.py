"""Concept verifiers: s_c = P("Yes" | image, concept), the score the partition splits (PolarMem §3, Eq. 1).

- `ProbeVerifier` (embedded default): frozen image features + one logistic probe per concept, cross-fitted by
  species folds, so the probe that scores an image never saw that image's species. Not zero-shot: it learns
  from other species' ground-truth labels; reports say so.
- `ZeroShotVerifier` (where an aligned image-text space exists: open_clip / CLIP-like `hf:` encoders): no training;
  P(Yes) = softmax over the pair (prompt with the concept, the same prompt without it) of the scaled cosines.
- `VLMVerifier` (GPU profile): mean over templates of P(Yes) from the first answer token's logits, softmax over
  the Yes/No pair; the image prefix is run once per image and its KV cache reused for every concept x template
  suffix (one batch), the paper's 5.53 s/episode being the number to beat.
"""

from __future__ import annotations

import copy
from typing import Sequence

import numpy as np
from tqdm.auto import tqdm

TEMPLATES = (
    "Does this image show {concept}? Answer Yes or No.",
    "Is the following true of the Pokémon in the image: it has {concept}? Answer Yes or No.",
    "Look at the image. Can you see {concept}? Answer Yes or No.",
)


def species_folds(species_ids: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Fold id per row, constant within a species (the open-vocabulary split)."""
    uniq = np.unique(species_ids)
    perm = np.random.default_rng(seed).permutation(len(uniq)) % folds
    lookup = dict(zip(uniq, perm))
    return np.array([lookup[s] for s in species_ids])


class ProbeVerifier:
    """Per-concept logistic probes on frozen features, cross-fitted over species folds."""

    def __init__(self, folds: int = 2, c: float = 1.0, seed: int = 0, dim: int | None = 256):
        self.folds, self.c, self.seed, self.dim = folds, c, seed, dim

    def cross_fit(self, train_x: np.ndarray, train_y: np.ndarray, train_species: np.ndarray,
                  score_x: np.ndarray, score_species: np.ndarray) -> np.ndarray:
        """Scores [n_score, C] in [0, 1]: rows of a species in fold f are scored by probes fit on the other folds.
        A concept that is constant in a training fold gets that constant as its probability."""
        from sklearn.linear_model import LogisticRegression

        all_species = np.concatenate([train_species, score_species])
        fold = species_folds(all_species, self.folds, self.seed)
        f_train, f_score = fold[: len(train_species)], fold[len(train_species):]
        out = np.zeros((len(score_x), train_y.shape[1]), np.float64)
        for f in range(self.folds):
            tr, te = f_train != f, f_score == f
            if not te.any():
                continue
            # standardise + PCA fitted on the training fold only (the held-out species never shape the probe)
            mu, sd = train_x[tr].mean(0), train_x[tr].std(0) + 1e-6
            xt, xs = (train_x[tr] - mu) / sd, (score_x[te] - mu) / sd
            if self.dim and self.dim < min(xt.shape):
                from sklearn.decomposition import PCA

                pca = PCA(self.dim, random_state=self.seed).fit(xt)
                xt, xs = pca.transform(xt), pca.transform(xs)
            for j in tqdm(range(train_y.shape[1]), desc=f"probes fold {f}", disable=train_y.shape[1] < 20):
                y = train_y[tr, j]
                if y.min() == y.max():
                    out[te, j] = float(y[0]) if len(y) else 0.0
                    continue
                clf = LogisticRegression(C=self.c, max_iter=2000)
                clf.fit(xt, y)
                out[te, j] = clf.predict_proba(xs)[:, 1]
        return out


ZERO_SHOT_TEMPLATES = (  # (with the concept, the neutral "No" side: the same sentence without it)
    ("a picture of a {concept} Pokémon.", "a picture of a Pokémon."),
    ("an illustration of a {concept} creature.", "an illustration of a creature."),
    ("a {concept} Pokémon, official artwork.", "a Pokémon, official artwork."),
)


class ZeroShotVerifier:
    """Zero-shot concept scores in a CLIP-like space. A prompt's "Yes" is "a picture of a red Pokémon", its "No" the
    same sentence without the concept; s_c = mean over templates of softmax(scale·[cos(x, yes), cos(x, no)])[0] =
    sigmoid(scale·(cos(x, yes) − cos(x, no))), the Yes/No normalisation of the VLM verifier in an embedding space.
    `scale` is CLIP's learned logit scale (100). A negated prompt ("without red") is not used as the No side:
    CLIP-like text towers largely ignore negation."""

    def __init__(self, encode_texts, templates: Sequence[tuple[str, str]] = ZERO_SHOT_TEMPLATES, scale: float = 100.0):
        self.encode_texts, self.templates, self.scale = encode_texts, tuple(templates), scale

    def scores(self, x: np.ndarray, concepts: Sequence[str]) -> np.ndarray:
        """[n, C] for l2-normalised image features x [n, d] (any leading shape: [..., d] -> [..., C])."""
        yes = self.encode_texts([t.format(concept=c) for t, _ in self.templates for c in concepts])
        no = self.encode_texts([n for _, n in self.templates])
        yes = yes.reshape(len(self.templates), len(concepts), -1)  # [T, C, d]
        cos_yes = np.einsum("...d,tcd->...tc", x, yes)
        cos_no = np.einsum("...d,td->...t", x, no)[..., None]
        return (1.0 / (1.0 + np.exp(-self.scale * (cos_yes - cos_no)))).mean(-2)


class VLMVerifier:
    """Qwen2-VL-class verifier with image-prefix KV reuse (see ../shared/TESTING-MODELS.md for the mechanics)."""

    def __init__(self, model: str, device: str = "auto", templates: Sequence[str] = TEMPLATES):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        from polarcatalog.encoders.efficientnet_lite import resolve_device

        self.device = resolve_device(device)
        self.processor = AutoProcessor.from_pretrained(model)
        tok = self.processor.tokenizer
        tok.padding_side = "left"
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.model = AutoModelForImageTextToText.from_pretrained(model, dtype=dtype).to(self.device).eval()
        self.yes_no = [tok.convert_tokens_to_ids(t) for t in ("Yes", "No")]
        self.templates = tuple(templates)
        self.calls = 0

    def _prompt(self, question: str | None) -> str:
        content = [{"type": "image"}] + ([{"type": "text", "text": question}] if question else [])
        return self.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)

    def p_yes_one(self, image, question: str) -> float:
        """Reference path: the whole prompt in one forward (used to test the reuse path)."""
        import torch

        enc = self.processor(text=[self._prompt(question)], images=[image], return_tensors="pt").to(self.device)
        with torch.inference_mode():
            logits = self.model(**enc).logits[0, -1, self.yes_no].float()
        self.calls += 1
        return float(logits.softmax(-1)[0])

    def scores(self, image, concepts: Sequence[str]) -> np.ndarray:
        """s_c for every concept: mean over templates of P(Yes), all suffixes in one batch on a shared prefix."""
        import torch

        questions = [t.format(concept=c) for c in concepts for t in self.templates]
        full = [self._prompt(q) for q in questions]
        marker = "<|vision_end|>"
        prefix_text = full[0][: full[0].index(marker) + len(marker)]
        if any(not f.startswith(prefix_text) for f in full):
            raise ValueError("chat template does not put the image first; cannot reuse the image prefix")
        enc = self.processor(text=[prefix_text], images=[image], return_tensors="pt").to(self.device)
        with torch.inference_mode():
            out = self.model(**enc, use_cache=True)
            self.calls += 1
            cache = getattr(out, "cache", None) or out.past_key_values
            tok = self.processor.tokenizer
            suffixes = [f[len(prefix_text):] for f in full]
            s_enc = tok(suffixes, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
            n, L = s_enc["input_ids"].shape
            P = enc["input_ids"].shape[1]
            # 3-D rope positions continue after the prefix: text positions = prefix max + 1 + offset (Qwen mrope)
            pos_ids, deltas = self.model.model.get_rope_index(
                input_ids=enc["input_ids"], image_grid_thw=enc.get("image_grid_thw"), attention_mask=enc["attention_mask"],
                mm_token_type_ids=enc.get("mm_token_type_ids")) if _accepts_mm(self.model) else self.model.model.get_rope_index(
                input_ids=enc["input_ids"], image_grid_thw=enc.get("image_grid_thw"), attention_mask=enc["attention_mask"])
            start = int(pos_ids.max()) + 1
            mask_s = s_enc["attention_mask"]
            offsets = (mask_s.cumsum(-1) - 1).clamp(min=0)  # left padding: real tokens count from 0
            text_pos = (start + offsets).unsqueeze(0).expand(3, n, L)
            big = copy.deepcopy(cache)
            big.batch_repeat_interleave(n)
            attn = torch.cat([enc["attention_mask"].expand(n, P), mask_s], dim=1)
            logits = self.model(input_ids=s_enc["input_ids"], attention_mask=attn, cache=big,
                                position_ids=text_pos, use_cache=True).logits[:, -1, self.yes_no].float()
            self.calls += 1
        p = logits.softmax(-1)[:, 0].cpu().numpy().reshape(len(concepts), len(self.templates))
        return p.mean(1)


def _accepts_mm(model) -> bool:
    import inspect

    return "mm_token_type_ids" in inspect.signature(model.model.get_rope_index).parameters
