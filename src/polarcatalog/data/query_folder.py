"""A user's own query folder: images plus labels (a CSV `image,species_id`, or one sub-folder per species)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff"}


def _species_lookup(species: pd.DataFrame) -> dict[str, int]:
    """Folder name -> species id: the id itself, the name, or a slug of the name (case-insensitive)."""
    out: dict[str, int] = {}
    for sid, name in zip(species["species_id"], species["name"]):
        for key in (str(sid), name.lower(), name.lower().replace(" ", "-"), name.lower().replace(" ", "_")):
            out[key] = int(sid)
    return out


def read_query_folder(folder: Path, species: pd.DataFrame, labels_csv: Path | None = None) -> pd.DataFrame:
    """One row per image: path, query_id (relative path), species_id (NA when unlabelled or unknown), label text."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"--queries {folder}: not a folder")
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not paths:
        raise ValueError(f"--queries {folder}: no image files ({', '.join(sorted(IMAGE_SUFFIXES))})")
    df = pd.DataFrame({"path": [str(p) for p in paths], "query_id": [p.relative_to(folder).as_posix() for p in paths]})
    lookup = _species_lookup(species)
    if labels_csv is not None:
        labels = pd.read_csv(labels_csv)
        missing = {"image", "species_id"} - set(labels.columns)
        if missing:
            raise ValueError(f"--labels {labels_csv}: needs columns image,species_id (missing {sorted(missing)})")
        labels["image"] = labels["image"].astype(str)
        # ids as text ("25", not "25.0" once a missing value made the column float)
        ids = pd.to_numeric(labels["species_id"], errors="coerce").astype("Int64")
        labels["species_id"] = [str(i) if i is not pd.NA else str(raw) for i, raw in zip(ids, labels["species_id"])]
        df = df.merge(labels[["image", "species_id"]].rename(columns={"image": "query_id", "species_id": "label"}), on="query_id", how="left")
    else:
        df["label"] = [Path(q).parent.name if "/" in q else None for q in df["query_id"]]
    df["species_id"] = [lookup.get(str(l).strip().lower()) if isinstance(l, str) else None for l in df["label"]]
    df["species_id"] = df["species_id"].astype("Int64")
    return df
