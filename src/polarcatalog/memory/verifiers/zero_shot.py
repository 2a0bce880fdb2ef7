"""Zero-shot concept scores where an aligned image-text space exists (open_clip, CLIP-like `hf:` encoders).

A prompt's "Yes" is "a picture of a red Pokémon", its "No" the same sentence without the concept;
s_c = mean over templates of softmax(scale·[cos(x, yes), cos(x, no)])[0] = sigmoid(scale·(cos(x, yes) − cos(x, no))),
the Yes/No normalisation of the VLM verifier in an embedding space. `scale` is CLIP's learned logit scale (100).
A negated prompt ("without red") is not used as the No side: CLIP-like text towers largely ignore negation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence, TYPE_CHECKING

import numpy as np

from polarcatalog.encoders import EncoderSpec, create_encoder, has_text_tower, parse_encoder
from polarcatalog.features.encode import encode_texts
from polarcatalog.memory.verifiers.verifier_types import Scores
from polarcatalog.paths import FEATURE_CACHE

if TYPE_CHECKING:  # annotations only: the inputs module pulls in the data layer (scikit-image)
    from polarcatalog.memory.inputs import GraphInputs

ZERO_SHOT_TEMPLATES = (  # (with the concept, the neutral "No" side: the same sentence without it)
    ("a picture of a {concept} Pokémon.", "a picture of a Pokémon."),
    ("an illustration of a {concept} creature.", "an illustration of a creature."),
    ("a {concept} Pokémon, official artwork.", "a Pokémon, official artwork."),
)


def prompt_scores(x: np.ndarray, concepts: Sequence[str], encode_texts: Callable[[list[str]], np.ndarray],
                  templates: Sequence[tuple[str, str]] = ZERO_SHOT_TEMPLATES, scale: float = 100.0) -> np.ndarray:
    """[..., C] for l2-normalised image features x [..., d] (global [n, d] or local views [n, views, d])."""
    yes = encode_texts([t.format(concept=c) for t, _ in templates for c in concepts])
    no = encode_texts([n for _, n in templates])
    yes = yes.reshape(len(templates), len(concepts), -1)  # [T, C, d]
    cos_yes = np.einsum("...d,tcd->...tc", x, yes)
    cos_no = np.einsum("...d,td->...t", x, no)[..., None]
    return (1.0 / (1.0 + np.exp(-scale * (cos_yes - cos_no)))).mean(-2)


class ZeroShotVerifier:
    """Scores the embed stage's features of one CLIP-like encoder (global and local views) against its own text
    tower's prompt vectors, encoded once through the feature cache."""

    def __init__(self, encoder: str | EncoderSpec, device: str = "auto", cache_root: Path = FEATURE_CACHE,
                 templates: Sequence[tuple[str, str]] = ZERO_SHOT_TEMPLATES, scale: float = 100.0):
        self.encoder, self.device, self.cache_root = parse_encoder(encoder), device, cache_root
        self.templates, self.scale = tuple(templates), scale

    def score(self, inputs: GraphInputs) -> Scores:
        ws, name = inputs.workspace, self.encoder.name
        if ws is None or name not in ws.anchor_f:
            raise ValueError(f"graph.zero_shot_encoder {name!r} has no features in data/features; add it to encoders.image "
                             "and rerun the embed stage")
        if not has_text_tower(self.encoder):
            raise ValueError(f"graph.zero_shot_encoder {name!r} has no text tower (no aligned space); use graph.verifier probe")
        enc = create_encoder(self.encoder, "text", self.device)
        concepts = [c.name for c in inputs.vocab]

        def score(x: np.ndarray) -> np.ndarray:
            return prompt_scores(x, concepts, lambda texts: encode_texts(enc, texts, self.cache_root), self.templates, self.scale)

        local = ws.anchor_local_f.get(name)
        return Scores(score(ws.anchor_f[name]), score(ws.query_f[name]), score(local) if local is not None else None)

    def describe(self, inputs: GraphInputs) -> str:
        return f"zero-shot in `{self.encoder.name}`'s image-text space (prompt with vs without the concept), no training."

    def calls_per_image(self, n_concepts: int) -> float:
        return 2.0  # the image's features and its cosines to every prompt vector (the prompts are shared)
