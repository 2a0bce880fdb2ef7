"""Species folds: the open-vocabulary split behind every cross-fitted model (the text bridge, the concept
probes). Nothing that scores an item may be fitted on that item's species, so folds are drawn per species."""

from __future__ import annotations

import numpy as np


def species_folds(species: np.ndarray, folds: int, seed: int = 0) -> np.ndarray:
    """Fold id per row, constant within a species: the sorted species are dealt round-robin in a seeded random
    order, so fold sizes in species differ by at most one."""
    uniq, inverse = np.unique(species, return_inverse=True)
    return (np.random.default_rng(seed).permutation(len(uniq)) % folds)[inverse.ravel()]
