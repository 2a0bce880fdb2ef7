"""Splits by species, never by image: a species' regular and shiny sprites always fall on the same side.

- `species_folds`: the open-vocabulary split behind every cross-fitted model (the text bridge, the concept probes).
  Nothing that scores an item may be fitted on that item's species.
- `dev_test_split`: the evaluation protocol. Choices are made on `dev`, headline numbers reported on `test`.
"""

from __future__ import annotations

import hashlib

import numpy as np


def species_folds(species: np.ndarray, folds: int, seed: int = 0) -> np.ndarray:
    """Fold id per row, constant within a species: the sorted species are dealt round-robin in a seeded random
    order, so fold sizes in species differ by at most one."""
    uniq, inverse = np.unique(species, return_inverse=True)
    return (np.random.default_rng(seed).permutation(len(uniq)) % folds)[inverse.ravel()]


def dev_test_split(species: np.ndarray, dev_fraction: float, seed: int = 0) -> np.ndarray:
    """`dev` or `test` per row, constant within a species: the evaluation protocol's split of the *query* species.

    A species is `dev` when sha256(seed, species id) read as a number in [0, 1) falls below `dev_fraction`, so its
    side never depends on which other species exist: adding species (a larger `species_limit`, a new generation)
    never moves one across. Every choice (best row, λ, any `auto` value) is made on `dev`; headline numbers are
    `test`. A tiny catalog whose hashes all land on one side gets its lowest-hash species on the other side, so both
    sides exist whenever there are two species."""
    species = np.asarray(species)
    uniq, inverse = np.unique(species, return_inverse=True)
    u = np.array([int.from_bytes(hashlib.sha256(f"{seed}:{s}".encode()).digest()[:8], "big") / 2.0**64 for s in uniq])
    dev = u < dev_fraction
    if len(uniq) >= 2 and dev.all():
        dev[np.argmax(u)] = False
    elif len(uniq) >= 2 and not dev.any():
        dev[np.argmin(u)] = True
    return np.where(dev, "dev", "test")[inverse.ravel()]
