"""Concept verifiers: s_c = P("Yes" | image, concept), the score the partition splits (PolarMem §3, Eq. 1).

One name in params.yaml (`graph.verifier`) -> one class in `VERIFIERS`, each behind the same `Verifier` protocol:
- `probe` (embedded default): logistic probes on frozen image features, cross-fitted by species folds;
- `zero_shot`: prompts in a CLIP-like encoder's own image-text space, no training;
- `vlm` (GPU profile): a Qwen2-VL-class model's P(Yes), its image prefix reused across concept x template suffixes.
"""

from __future__ import annotations

from typing import Any

from polarcatalog.memory.verifiers.verifier_types import Scores, Verifier, load_scores, save_scores
from polarcatalog.memory.verifiers.probe import ProbeVerifier
from polarcatalog.memory.verifiers.vlm import VLMVerifier
from polarcatalog.memory.verifiers.zero_shot import ZeroShotVerifier

__all__ = ["VERIFIERS", "ProbeVerifier", "Scores", "VLMVerifier", "Verifier", "ZeroShotVerifier", "create_verifier",
           "load_scores", "save_scores"]

VERIFIERS: dict[str, type] = {"probe": ProbeVerifier, "zero_shot": ZeroShotVerifier, "vlm": VLMVerifier}


def create_verifier(name: str, **options: Any) -> Verifier:
    """`create_verifier("probe", folds=2, c=1.0, seed=0, dim=256)`: each verifier takes its own options."""
    if name not in VERIFIERS:
        raise ValueError(f"unknown verifier {name!r}; allowed: {', '.join(VERIFIERS)}")
    return VERIFIERS[name](**options)
