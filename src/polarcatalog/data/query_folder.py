"""A user's own query folder: images plus labels (a CSV `image,species_id`, or one sub-folder per species).

Nothing in the folder is dropped without a word: files that are not images, labels naming no image, and repeated
label rows are counted and listed in the result (the CLI prints them and writes them to metrics.json); a labels CSV
that gives one image two different species is refused, naming the image."""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from polarcatalog.data.names import name_key
from polarcatalog.io import sha256_file

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".jpe", ".jfif", ".gif", ".bmp", ".webp", ".tif", ".tiff", ".ico"}


def _species_lookup(species: pd.DataFrame) -> dict[str, int]:
    """Label -> species id: the id itself (`25`, `025`), or the name in any spelling `name_key` folds together; and
    the name with no separator at all (`~mrmime`, `~hooh`, `~nidoranf`: Showdown's ids, `Mr.Mime`), where no two
    species share it."""
    out: dict[str, int] = {}
    compact: dict[str, set[int]] = {}
    for sid, name in zip(species["species_id"], species["name"]):
        out[str(int(sid))] = int(sid)
        out.setdefault(name_key(name), int(sid))
        compact.setdefault("~" + name_key(name).replace("-", ""), set()).add(int(sid))
    out.update({k: next(iter(ids)) for k, ids in compact.items() if len(ids) == 1 and k not in out})
    return out


def species_of(label: str, lookup: dict[str, int]) -> int | None:
    """The species a label names (`_species_lookup`), or None. A name after a dataset's number (`001_bulbasaur`,
    `025 Pikachu`, CUB's `001.Black_footed_Albatross`) is read by its name: the number is often the dataset's own
    class index, not the catalog's species id, so it is never read alone."""
    found = _named(label, lookup)
    if found is None and (m := NUMBERED.fullmatch(str(label).strip())):
        found = _named(m.group(1), lookup)
    return found


NUMBERED = re.compile(r"#?\d+[ ._-]+(\D.*)")


def _named(label: str, lookup: dict[str, int]) -> int | None:
    key = _label_key(label)
    found = lookup.get(key)
    return found if found is not None or key.startswith("#") else lookup.get("~" + key.replace("-", ""))


NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _label_key(label: str) -> str:
    """`25`, `025`, `25.0` are species 25. Any other number (`-1`, `2.5`, `1e3`) names no species: folded as a name,
    `2.5` would become `25` and score the image against Pikachu."""
    text = str(label).strip()
    text = text[1:] if re.fullmatch(r"#\d+", text) else text  # `#025`, as a Pokédex number is written
    if re.fullmatch(r"\d+(\.0*)?", text):
        return str(int(float(text)))
    return f"#{text}" if NUMBER.fullmatch(text) else name_key(text)


@dataclass
class QueryFolder:
    """`rows`: one per image (path, query_id = path relative to the folder, sha256 of its bytes, label text,
    species_id or NA)."""

    rows: pd.DataFrame
    not_images: list[str] = field(default_factory=list)  # files skipped for their suffix (hidden files aside)
    labels_without_image: list[str] = field(default_factory=list)  # CSV rows naming a file the folder lacks
    repeated_label_rows: int = 0  # CSV rows repeating an (image, species) pair already given: counted once
    links_skipped: list[str] = field(default_factory=list)  # symlinks leading out of the folder, dangling or looping
    hidden_skipped: list[str] = field(default_factory=list)  # names starting with `.` (.DS_Store, ._x.jpg, .git/)
    copies: list[list[str]] = field(default_factory=list)  # images with the same bytes, each scored: one group per list
    undecodable_names: list[str] = field(default_factory=list)  # names that are not UTF-8 (shown with U+FFFD): skipped

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
        if self.hidden_skipped:
            out.append(f"{len(self.hidden_skipped)} hidden file(s) or folder(s) skipped (names starting with `.`, such as "
                       f"macOS's .DS_Store and ._ files; rename one to use it): {listed(self.hidden_skipped)}")
        if self.undecodable_names:
            out.append(f"{len(self.undecodable_names)} file(s) skipped, their names not UTF-8 (shown with \ufffd; rename "
                       f"them, e.g. `convmv -f latin1 -t utf-8 -r --notest <folder>`): {listed(self.undecodable_names)}")
        if self.copies:
            images = sum(len(group) for group in self.copies)
            out.append(f"{images} images in {len(self.copies)} group(s) of byte-identical copies (each copy scored as "
                       f"its own query): {listed([' = '.join(group) for group in self.copies], 3)}")
        labelled, unlabelled = self.rows["label"].notna().sum(), self.rows["label"].isna().sum()
        if unlabelled and labelled:
            out.append(f"{unlabelled} image(s) without a label (outside a species sub-folder, or no row in --labels): "
                       f"ranked, not scored: {listed(self.rows.loc[self.rows['label'].isna(), 'query_id'].tolist())}")
        elif unlabelled:
            out.append("no image is labelled (put each species' images in a sub-folder named by it, or give --labels): "
                       "ranked, not scored")
        return out

    def report(self) -> dict[str, object]:
        return {"not_images": self.not_images, "labels_without_image": self.labels_without_image,
                "repeated_label_rows": self.repeated_label_rows, "links_skipped": self.links_skipped,
                "hidden_skipped": self.hidden_skipped, "copies": self.copies, "undecodable_names": self.undecodable_names}


def printable(text: str) -> str:
    """A file name as the terminal can show it on one line: control and bidirectional-format characters (a newline, a
    right-to-left override) escaped as `\\u….`, so a name cannot split or reverse the lines around it."""
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in ("Cc", "Cf") else c for c in str(text))


def listed(items: list[str], shown: int = 5) -> str:
    return ", ".join(map(printable, items[:shown])) + (f" and {len(items) - shown} more" if len(items) > shown else "")


LABEL_DELIMITERS = (",", ";", "\t")


def _delimiter(path: Path) -> str:
    """The delimiter that splits the header into image and species_id: Excel saves CSV with semicolons in many
    locales, spreadsheets export tabs. A comma when none does (the column check then names what the header holds)."""
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        header = f.readline()
    for sep in LABEL_DELIMITERS:
        if {"image", "species_id"} <= {c.strip().strip('"').strip() for c in header.split(sep)}:  # `"image";"species_id"`
            return sep
    return ","


def _read_labels(path: Path, folder: Path, lookup: dict[str, int]) -> tuple[pd.DataFrame, int]:
    """(one row per image: image, species_id as written; rows repeating an image's label, counted). Two spellings of
    one species (`4` and `4.0`, `Mr. Mime` and `mr-mime`) are one label; two species for one image are an error."""
    try:
        labels = pd.read_csv(path, sep=_delimiter(path), dtype=str, keep_default_na=False, encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"--labels {path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"--labels {path}: a folder; give the CSV file (columns image,species_id)") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"--labels {path}: empty; it needs a header `image,species_id` and one row per image") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"--labels {path}: not UTF-8 text (byte {err.start}); save it as UTF-8 CSV") from None
    except pd.errors.ParserError as err:
        raise ValueError(f"--labels {path}: not a CSV ({str(err).strip()})") from None
    labels.columns = [str(c).strip() for c in labels.columns]  # `image, species_id`: the spaces a person types
    missing = {"image", "species_id"} - set(labels.columns)
    if missing:
        raise ValueError(f"--labels {path}: needs columns image,species_id (missing {sorted(missing)}; the header reads "
                         f"{', '.join(map(repr, labels.columns[:5]))}), separated by commas, semicolons or tabs")
    if labels.empty:
        raise ValueError(f"--labels {path}: a header and no rows; add one row per image (image,species_id)")
    labels = labels[["image", "species_id"]].apply(lambda c: c.str.strip())
    labels["image"] = [_relative(im, folder) for im in labels["image"]]
    labels["species_id"] = labels["species_id"].replace("", None)
    labels["image"] = labels["image"].map(lambda t: unicodedata.normalize("NFC", t))  # `é` typed or decomposed
    # the species a row names (`29` and `Nidoran♀` are one); a label naming none is compared as written
    labels["key"] = labels["species_id"].map(lambda t: f"id:{sid}" if (sid := species_of(t, lookup)) is not None
                                             else _label_key(t), na_action="ignore")
    conflicting = labels.dropna().groupby("image")["key"].nunique()
    conflicting = conflicting[conflicting > 1]
    if len(conflicting):
        shown = ", ".join(f"{im!r} ({' / '.join(sorted(set(labels.loc[labels['image'] == im, 'species_id'].dropna())))})"
                          for im in conflicting.index[:5])
        raise ValueError(f"--labels {path}: {len(conflicting)} image(s) given two or more species: {shown}; keep one row "
                         "per image")
    unique = labels.sort_values("key", na_position="last", kind="stable").drop_duplicates("image").sort_index()
    return unique[["image", "species_id"]], len(labels) - len(unique)


def _files(folder: Path) -> tuple[list[Path], list[str], list[str]]:
    """(the folder's files, the links skipped, the hidden names skipped), walked without following directory links; a
    file link is kept only when it resolves to a file inside the folder, so nothing outside it is read, copied to
    quarantine or reported. Hidden names are skipped (macOS writes `._x.jpg` beside every `x.jpg` on some drives) and
    listed."""
    inside, files, skipped, hidden = folder.resolve(), [], [], []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        base = Path(dirpath)
        hidden += [(base / d).relative_to(folder).as_posix() + "/" for d in dirnames if d.startswith(".")]
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for d in dirnames:
            if (base / d).is_symlink():
                skipped.append((base / d).relative_to(folder).as_posix() + "/")
        for name in sorted(filenames):
            path = base / name
            rel = path.relative_to(folder)
            if name.startswith("."):
                hidden.append(rel.as_posix())
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
    return sorted(files), sorted(skipped), sorted(hidden)


def _relative(image: str, folder: Path) -> str:
    """A labels CSV's image as the query id it names: `./x.png`, `sub\\x.png` (Windows) and an absolute path inside
    the folder are the folder's `x.png` and `sub/x.png`."""
    text = image.replace("\\", "/")
    if Path(text).is_absolute():
        try:
            return Path(os.path.normpath(text)).relative_to(folder.resolve()).as_posix()
        except ValueError:
            try:
                return Path(os.path.normpath(text)).relative_to(Path(os.path.abspath(folder))).as_posix()
            except ValueError:
                return text
    return Path(os.path.normpath(text)).as_posix() if text else text


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()  # empty files are quarantined, not copies of each other


def _copies(rows: pd.DataFrame) -> list[list[str]]:
    """Groups of images with the same bytes (a folder assembled by hand often holds one twice, under two names)."""
    groups = rows[rows["sha256"] != EMPTY_SHA256].groupby("sha256", sort=False)["query_id"]
    return [list(g) for _, g in groups if len(g) > 1]


def _decodable(name: str) -> bool:
    """A name the file system gave as bytes that are not UTF-8 (a Latin-1 `Flab\\xe9b\\xe9.gif` from an old archive)
    reaches Python with surrogates, which no CSV, JSON or terminal can write."""
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _shown(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def read_query_folder(folder: Path, species: pd.DataFrame, labels_csv: Path | None = None) -> QueryFolder:
    """Labels from the CSV, or from the first folder under --queries (`pikachu/shiny/a.png` is Pikachu's image)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"--queries {folder}: not a folder")
    files, links_skipped, hidden = _files(folder)
    readable = [_decodable(str(p.relative_to(folder))) for p in files]
    undecodable = [_shown(p.relative_to(folder).as_posix()) for p, ok in zip(files, readable) if not ok]
    files = [p for p, ok in zip(files, readable) if ok]
    paths = [p for p in files if p.suffix.lower() in IMAGE_SUFFIXES]
    not_images = [p.relative_to(folder).as_posix() for p in files if p.suffix.lower() not in IMAGE_SUFFIXES]
    if not paths:
        hint = f"; {len(hidden)} hidden name(s) skipped: {listed(hidden)}" if hidden else ""
        raise ValueError(f"--queries {folder}: no image files ({', '.join(sorted(IMAGE_SUFFIXES))}){hint}")
    # each file hashed once: the copies below, and the feature cache's key (`encode_image_views(shas=...)`)
    df = pd.DataFrame({"path": [str(p) for p in paths], "query_id": [p.relative_to(folder).as_posix() for p in paths],
                       "sha256": [sha256_file(p) for p in paths]})
    result = QueryFolder(df, not_images, links_skipped=links_skipped, hidden_skipped=hidden, copies=_copies(df),
                         undecodable_names=undecodable)
    lookup = _species_lookup(species)
    if labels_csv is not None:
        unique, result.repeated_label_rows = _read_labels(Path(labels_csv), folder, lookup)
        df["image"] = df["query_id"].map(lambda t: unicodedata.normalize("NFC", t))  # macOS names files decomposed
        result.labels_without_image = sorted(set(unique["image"]) - set(df["image"]))
        df = df.merge(unique.rename(columns={"species_id": "label"}), on="image", how="left").drop(columns="image")
    else:
        df["label"] = [q.split("/", 1)[0] if "/" in q else None for q in df["query_id"]]
    df["species_id"] = pd.array([species_of(lab, lookup) if isinstance(lab, str) else None for lab in df["label"]],
                                dtype="Int64")
    result.rows = df
    return result
