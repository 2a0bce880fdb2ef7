"""The embedded verifier: one logistic probe per concept on frozen image features, cross-fitted by species folds,
so the probe that scores an image never saw that image's species. Not zero-shot: it learns from other species'
ground-truth labels, and the reports say so."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from polarcatalog.content_cache import ContentCache
from polarcatalog.eval import splits
from polarcatalog.eval.splits import species_folds
from polarcatalog.memory.verifiers.verifier_types import Scores
from polarcatalog.progress import progress

if TYPE_CHECKING:  # annotations only: the inputs module pulls in the data layer (scikit-image)
    from polarcatalog.memory.inputs import GraphInputs


class ProbeVerifier:
    """`cache`: a folder where the scores of each probe fit are kept by the content of everything they depend on (the
    arrays, the knobs, this file's code, scikit-learn's version, the numerics pins; `ContentCache`), so a stage rerun for a param the
    probes do not read (a retrieval λ) reads them back instead of refitting hundreds of probes; None computes every
    time."""

    def __init__(self, folds: int = 2, c: float = 1.0, seed: int = 0, dim: int | None = 256, cache: Path | None = None):
        self.folds, self.c, self.seed, self.dim, self.cache = folds, c, seed, dim, cache

    def cross_fit(self, train_x: np.ndarray, train_y: np.ndarray, train_species: np.ndarray,
                  score_x: np.ndarray, score_species: np.ndarray) -> np.ndarray:
        """Scores [n_score, C] in [0, 1]: rows of a species in fold f are scored by probes fit on the other folds.
        A concept that is constant in a training fold gets that constant as its probability."""
        arrays = (train_x, train_y, train_species, score_x, score_species)
        shape = (len(score_x), train_y.shape[1])
        # the code: this file and the species folds it draws (`eval.splits`)
        cache = ContentCache(self.cache, [Path(__file__), splits], sklearn=version("scikit-learn"))
        return cache.get({"folds": self.folds, "c": self.c, "seed": self.seed, "dim": self.dim}, arrays,
                         lambda: {"scores": self._fit(*arrays)},
                         lambda kept: kept["scores"].shape == shape and bool(np.isfinite(kept["scores"]).all()))["scores"]

    def _fit(self, train_x: np.ndarray, train_y: np.ndarray, train_species: np.ndarray,
             score_x: np.ndarray, score_species: np.ndarray) -> np.ndarray:
        from sklearn.decomposition import PCA  # heavy: sklearn costs every stage ~0.7 s of import
        from sklearn.linear_model import LogisticRegression

        fold = species_folds(np.concatenate([train_species, score_species]), self.folds, self.seed)
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
                pca = PCA(self.dim, random_state=self.seed).fit(xt)
                xt, xs = pca.transform(xt), pca.transform(xs)
            for j in progress(range(train_y.shape[1]), train_y.shape[1], f"probes fold {f}", unit="concept",
                              disable=train_y.shape[1] < 20):
                y = train_y[tr, j]
                if y.min() == y.max():
                    out[te, j] = float(y[0]) if len(y) else 0.0
                    continue
                clf = LogisticRegression(C=self.c, max_iter=2000)
                clf.fit(xt, y)
                out[te, j] = clf.predict_proba(xs)[:, 1]
        return out

    def score(self, inputs: GraphInputs) -> Scores:
        """Every anchor (catalog node), every query image and every local view of an anchor. Probes are trained on
        global views only; a local view is scored by the probes of its image's fold."""
        y = inputs.truth_rows(inputs.anchor_species)
        a, q = len(inputs.anchor_x), len(inputs.query_x)
        xs, ss = [inputs.anchor_x, inputs.query_x], [inputs.anchor_species, inputs.query_species]
        if inputs.anchor_local_x is not None:
            views = inputs.anchor_local_x.shape[1]
            xs.append(inputs.anchor_local_x.reshape(a * views, -1))
            ss.append(np.repeat(inputs.anchor_species, views))
        scores = self.cross_fit(inputs.anchor_x, y, inputs.anchor_species, np.vstack(xs), np.concatenate(ss))
        local = scores[a + q:].reshape(a, -1, scores.shape[1]) if inputs.anchor_local_x is not None else None
        return Scores(scores[:a], scores[a: a + q], local)

    def describe(self, inputs: GraphInputs) -> str:
        encoders = ", ".join(sorted(inputs.workspace.anchor_f)) if inputs.workspace else "the embedded encoders"
        return (f"linear probes on frozen image features ({encoders}), cross-fitted over {self.folds} species folds — "
                "learned from other species' labels, not zero-shot.")

    def calls_per_image(self, n_concepts: int) -> float:
        return float(n_concepts)  # one probe per concept
