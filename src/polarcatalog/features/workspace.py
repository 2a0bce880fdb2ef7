"""What the curate and embed stages wrote, loaded together and checked against each other: the processed tables
and one feature matrix per (encoder, item set), rows in table order."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from polarcatalog.io import read_table


@dataclass
class Workspace:
    species: pd.DataFrame
    anchors: pd.DataFrame
    queries: pd.DataFrame  # with `split`: dev | test, by species (data/processed/splits.parquet)
    chunks: pd.DataFrame
    manifest: dict
    anchor_f: dict[str, np.ndarray]  # encoder name -> [anchors, dim]
    query_f: dict[str, np.ndarray]  # encoder name -> [queries, dim]
    native_text: dict[str, np.ndarray | None]  # encoder name -> [chunks, dim] from its own text tower, or None
    bridge_text: np.ndarray | None  # [chunks, dim] of encoders.text, bridged into image-only encoders' spaces
    anchor_local_f: dict[str, np.ndarray] = field(default_factory=dict)  # [anchors, views, dim]; empty = no local views


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
    load = lambda f: np.load(features / f, allow_pickle=False)  # noqa: E731
    img = manifest["image"]
    return Workspace(
        species, anchors, queries, chunks, manifest,
        {n: load(e["anchors"]) for n, e in img.items()},
        {n: load(e["queries"]) for n, e in img.items()},
        {n: load(e["chunks"]) if e.get("chunks") else None for n, e in img.items()},
        load(manifest["text"]["chunks"]) if manifest.get("text") else None,
        {n: load(e["anchors_local"]) for n, e in img.items() if e.get("anchors_local")},
    )
