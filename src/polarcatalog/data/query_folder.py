"""A user's own query folder: images plus labels (a CSV `image,species_id`, or one sub-folder per species).

Nothing in the folder is dropped without a word: files that are not images, labels naming no image, and repeated
label rows are counted and listed in the result (the CLI prints them and writes them to metrics.json); a labels CSV
that gives one image two different species is refused, naming the image."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from polarcatalog.data.names import name_key

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff"}


def _species_lookup(species: pd.DataFrame) -> dict[str, int]:
    """Label -> species id: the id itself (`25`, `025`), or the name in any spelling `name_key` folds together."""
    out: dict[str, int] = {}
    for sid, name in zip(species["species_id"], species["name"]):
        out[str(int(sid))] = int(sid)
        out.setdefault(name_key(name), int(sid))
    return out


def _label_key(label: str) -> str:
    text = str(label).strip()
    return str(int(float(text))) if re.fullmatch(r"\d+(\.0*)?", text) else name_key(text)  # `25`, `025`, `25.0`


@dataclass
class QueryFolder:
    """`rows`: one per image (path, query_id = path relative to the folder, label text, species_id or NA)."""

    rows: pd.DataFrame
    not_images: list[str] = field(default_factory=list)  # files skipped for their suffix (hidden files aside)
    labels_without_image: list[str] = field(default_factory=list)  # CSV rows naming a file the folder lacks
    repeated_label_rows: int = 0  # CSV rows repeating an (image, species) pair already given: counted once
    links_skipped: list[str] = field(default_factory=list)  # symlinks leading out of the folder, dangling or looping

    def notes(self) -> list[str]:
        """What the CLI prints about the folder beyond the predictions: nothing when nothing was left out."""
        out = []
        if self.not_images:
            out.append(f"{len(self.not_images)} file(s) skipped, not images by their suffix "
                       f"({', '.join(sorted(IMAGE_SUFFIXES))}): {listed(self.not_images)}")
        if self.labels_without_image:
            out.append(f"{len(self.labels_without_image)} label row(s) name no image in the folder (paths are relative "
                       f"to --queries): {listed(self.labels_without_image)}")
        if self.repeated_label_rows:
            out.append(f"{self.repeated_label_rows} repeated label row(s) counted once")
        if self.links_skipped:
            out.append(f"{len(self.links_skipped)} symlink(s) skipped, leading out of the folder, dangling or looping "
                       f"(a link is followed only to a file inside --queries): {listed(self.links_skipped)}")
        return out

    def report(self) -> dict[str, object]:
        return {"not_images": self.not_images, "labels_without_image": self.labels_without_image,
                "repeated_label_rows": self.repeated_label_rows, "links_skipped": self.links_skipped}


def listed(items: list[str], shown: int = 5) -> str:
    return ", ".join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")


LABEL_DELIMITERS = (",", ";", "\t")


def _delimiter(path: Path) -> str:
    """The delimiter that splits the header into image and species_id: Excel saves CSV with semicolons in many
    locales, spreadsheets export tabs. A comma when none does (the column check then names what the header holds)."""
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        header = f.readline()
    for sep in LABEL_DELIMITERS:
        if {"image", "species_id"} <= {c.strip() for c in header.split(sep)}:
            return sep
    return ","


def _read_labels(path: Path) -> tuple[pd.DataFrame, int]:
    """(one row per image: image, species_id as written; rows repeating an image's label, counted). Two spellings of
    one species (`4` and `4.0`, `Mr. Mime` and `mr-mime`) are one label; two species for one image are an error."""
    try:
        labels = pd.read_csv(path, sep=_delimiter(path), dtype=str, keep_default_na=False, encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"--labels {path}: no such file") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"--labels {path}: empty; it needs a header `image,species_id` and one row per image") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"--labels {path}: not UTF-8 text (byte {err.start}); save it as UTF-8 CSV") from None
    except pd.errors.ParserError as err:
        raise ValueError(f"--labels {path}: not a CSV ({str(err).strip()})") from None
    missing = {"image", "species_id"} - set(labels.columns)
    if missing:
        raise ValueError(f"--labels {path}: needs columns image,species_id (missing {sorted(missing)}; the header reads "
                         f"{', '.join(map(repr, labels.columns[:5]))}), separated by commas, semicolons or tabs")
    labels = labels[["image", "species_id"]].apply(lambda c: c.str.strip())
    labels["species_id"] = labels["species_id"].replace("", None)
    labels["key"] = labels["species_id"].map(_label_key, na_action="ignore")
    conflicting = labels.dropna().groupby("image")["key"].nunique()
    conflicting = conflicting[conflicting > 1]
    if len(conflicting):
        shown = ", ".join(f"{im!r} ({' / '.join(sorted(set(labels.loc[labels['image'] == im, 'species_id'].dropna())))})"
                          for im in conflicting.index[:5])
        raise ValueError(f"--labels {path}: {len(conflicting)} image(s) given two or more species: {shown}; keep one row "
                         "per image")
    unique = labels.sort_values("key", na_position="last", kind="stable").drop_duplicates("image").sort_index()
    return unique[["image", "species_id"]], len(labels) - len(unique)


def _files(folder: Path) -> tuple[list[Path], list[str]]:
    """The folder's files (hidden ones aside), walked without following directory links; a file link is kept only when
    it resolves to a file inside the folder, so nothing outside it is read, copied to quarantine or reported."""
    inside, files, skipped = folder.resolve(), [], []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        base = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for d in dirnames:
            if (base / d).is_symlink():
                skipped.append((base / d).relative_to(folder).as_posix() + "/")
        for name in sorted(filenames):
            path = base / name
            rel = path.relative_to(folder)
            if any(part.startswith(".") for part in rel.parts):
                continue
            if path.is_symlink():
                try:
                    target = path.resolve(strict=True)
                except (OSError, RuntimeError):  # dangling, or a loop
                    skipped.append(rel.as_posix())
                    continue
                if inside not in target.parents or not target.is_file():
                    skipped.append(rel.as_posix())
                    continue
            if path.is_file():
                files.append(path)
    return sorted(files), sorted(skipped)


def read_query_folder(folder: Path, species: pd.DataFrame, labels_csv: Path | None = None) -> QueryFolder:
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"--queries {folder}: not a folder")
    files, links_skipped = _files(folder)
    paths = [p for p in files if p.suffix.lower() in IMAGE_SUFFIXES]
    not_images = [p.relative_to(folder).as_posix() for p in files if p.suffix.lower() not in IMAGE_SUFFIXES]
    if not paths:
        raise ValueError(f"--queries {folder}: no image files ({', '.join(sorted(IMAGE_SUFFIXES))})")
    df = pd.DataFrame({"path": [str(p) for p in paths], "query_id": [p.relative_to(folder).as_posix() for p in paths]})
    result = QueryFolder(df, not_images, links_skipped=links_skipped)
    if labels_csv is not None:
        unique, result.repeated_label_rows = _read_labels(Path(labels_csv))
        result.labels_without_image = sorted(set(unique["image"]) - set(df["query_id"]))
        df = df.merge(unique.rename(columns={"image": "query_id", "species_id": "label"}), on="query_id", how="left")
    else:
        df["label"] = [Path(q).parent.name if "/" in q else None for q in df["query_id"]]
    lookup = _species_lookup(species)
    df["species_id"] = pd.array([lookup.get(_label_key(lab)) if isinstance(lab, str) else None for lab in df["label"]],
                                dtype="Int64")
    result.rows = df
    return result
