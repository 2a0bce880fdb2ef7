"""The bird pipeline's reference data (`birds.reference_dir`): what must be in it, in one place, so that a profile
is refused before any stage runs (`runner.profiles`) and a stage that still meets a gap names the same list."""

from __future__ import annotations

from pathlib import Path

REQUIRED = (
    "cub/descriptors_cub.json",  # CUB's per-class descriptors: the text queries
    "cub/attributes.txt",  # CUB-200-2011's attribute names: the concept vocabulary
    "cub/class_attribute_labels_continuous.txt",  # per-class attribute labels: the ground truth
    "cub/classes.txt",
    "vrrag_splits",  # the five benchmarks' test split lists
    "openclipart_birds",  # clip-art birds for the anchor filter
)


def missing(reference_dir: str | Path) -> list[str]:
    """The entries of `REQUIRED` that `reference_dir` lacks (all of them when it is not a folder)."""
    root = Path(reference_dir)
    return [entry for entry in REQUIRED if not (root / entry).exists()]


def explain(reference_dir: str | Path, absent: list[str]) -> str:
    return (f"birds.reference_dir ({reference_dir}) lacks {', '.join(absent)}: it must hold "
            + ", ".join(REQUIRED) + "; set birds.reference_dir in params.yaml (or the profile's overlay) to the folder "
            "that holds them")
