"""What the curate and embed stages wrote, loaded together and checked against each other: the processed tables
and one feature matrix per (encoder, item set), rows in table order."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from polarcatalog.io import read_table
from polarcatalog.vectors import frozen, l2_normalise


@dataclass
class Workspace:
    species: pd.DataFrame
    anchors: pd.DataFrame
    queries: pd.DataFrame  # with `split`: dev | test, by species (data/processed/splits.parquet)
    chunks: pd.DataFrame
    manifest: dict
    anchor_f: dict[str, np.ndarray]  # encoder name -> [anchors, dim]: the image's view averaged with its flip's (if embedded)
    query_f: dict[str, np.ndarray]  # encoder name -> [queries, dim]: likewise (a test-time flip)
    native_text: dict[str, np.ndarray | None]  # encoder name -> [chunks, dim] from its own text tower, or None
    bridge_text: np.ndarray | None  # [chunks, dim] of encoders.text, bridged into image-only encoders' spaces
    anchor_local_f: dict[str, np.ndarray] = field(default_factory=dict)  # [anchors, views, dim]; empty = no local views
    # the two views the averages above come from: name -> (view, flipped view or None)
    anchor_views: dict[str, tuple[np.ndarray, np.ndarray | None]] = field(default_factory=dict)
    query_views: dict[str, tuple[np.ndarray, np.ndarray | None]] = field(default_factory=dict)
    anchor_scales: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)  # px -> name -> anchors at that scale (no flip)
    colour_basis: dict[str, np.ndarray] = field(default_factory=dict)  # name -> [d, dim] colour-nuisance directions (features.colour_nuisance)
    # where arrays derived from these features are kept by content (the project's data/cache/features); None: nowhere
    derived: Path | None = None

    @property
    def has_flips(self) -> bool:
        return bool(self.anchor_views) and all(f is not None for _, f in [*self.anchor_views.values(), *self.query_views.values()])

    def with_flips(self, anchors: bool, queries: bool) -> Workspace:
        """The same workspace with anchors and queries each seen as the plain view, or as the mean of the view and its
        mirror image (the default whenever the embed stage encoded flips). The lever table reads every combination."""
        if (anchors or queries) and not self.has_flips:
            raise ValueError("the features have no flipped views; set encoders.flips: true and rerun the embed stage")
        pick = lambda views, on: {n: average_flips(v, f) if on else v for n, (v, f) in views.items()}  # noqa: E731
        return replace(self, anchor_f=pick(self.anchor_views, anchors), query_f=pick(self.query_views, queries))

    def with_anchor_views(self, views: dict[str, tuple[np.ndarray, np.ndarray | None]]) -> Workspace:
        """Anchors seen another way (e.g. at a query folder's scale) for the encoders in `views`; the others keep theirs."""
        anchor_views = {**self.anchor_views, **views}
        return replace(self, anchor_views=anchor_views, anchor_f={**self.anchor_f, **{n: average_flips(*v) for n, v in views.items()}})


def average_flips(view: np.ndarray, flipped: np.ndarray | None) -> np.ndarray:
    """An image's features averaged with its mirror image's (l2-normalised); the view alone when not flipped. The one
    rule for anchors, pipeline queries and the CLI's queries. Read-only (`vectors.frozen`): every later use reads it."""
    return frozen(view if flipped is None else l2_normalise(view + flipped))


def load_workspace(features: Path, processed: Path) -> Workspace:
    mpath = features / "manifest.json"
    if not mpath.is_file():
        raise FileNotFoundError(f"{mpath} is missing: run the embed stage first (`dvc repro embed`)")
    manifest = json.loads(mpath.read_text())
    species = read_table(processed / "species.parquet")
    anchors = read_table(processed / "anchors.parquet")
    splits = processed / "splits.parquet"
    if not splits.is_file():
        raise FileNotFoundError(f"{splits} is missing: run the curate stage (`dvc repro curate`), which writes the dev/test split")
    queries = read_table(processed / "queries.parquet")
    split = queries["species_id"].map(read_table(splits).set_index("species_id")["split"])
    if split.isna().any():
        raise ValueError(f"{splits} has no split for species {sorted(queries.loc[split.isna(), 'species_id'].unique())[:5]}; "
                         "rerun the curate stage")
    queries = queries.assign(split=split.to_numpy())
    chunks = read_table(processed / "chunks.parquet")
    for col, table, ids in (("candidate_id", anchors, "anchor_ids"), ("query_id", queries, "query_ids"), ("chunk_id", chunks, "chunk_ids")):
        if table[col].tolist() != manifest[ids]:
            raise ValueError(f"{features}: {ids} do not match {processed}; rerun the embed stage (`dvc repro embed`)")
    load = lambda f: frozen(np.load(features / f, allow_pickle=False)) if f else None  # noqa: E731
    img = manifest["image"]
    anchor_views = {n: (load(e["anchors"]), load(e.get("anchors_flip"))) for n, e in img.items()}
    query_views = {n: (load(e["queries"]), load(e.get("queries_flip"))) for n, e in img.items()}
    return Workspace(
        species, anchors, queries, chunks, manifest,
        {n: average_flips(*v) for n, v in anchor_views.items()},
        {n: average_flips(*v) for n, v in query_views.items()},
        {n: load(e.get("chunks")) for n, e in img.items()},
        load(manifest["text"]["chunks"]) if manifest.get("text") else None,
        {n: load(e["anchors_local"]) for n, e in img.items() if e.get("anchors_local")},
        anchor_views, query_views,
        {int(px): {n: load(e["anchors_at"][px]) for n, e in img.items()} for px in next(iter(img.values()), {}).get("anchors_at", {})},
        {n: load(e["colour_basis"]) for n, e in img.items() if e.get("colour_basis")},
        features.parent / "cache" / "features",  # data/features -> data/cache/features (paths.FEATURE_CACHE)
    )
