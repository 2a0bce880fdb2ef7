"""The five bird benchmarks of VR-RAG's Table 3 (CUB, Birdsnap, NABirds, iNat birds, Indian Birds) as labelled query
sets over the AviList catalog. A benchmark is an image root (the user's download) plus the paper's test split: one
`<Class>/<file>.jpg` per line in `<name>_test.txt`, the classes in `<name>_test_classes.txt`.

Each class name is matched to a catalog species (`BirdCatalog.match`); images of unmatched classes are kept out of
the query set and listed, never silently relabelled."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from polarcatalog.data.birds import BirdCatalog

BENCHMARKS = ("cub", "birdsnap", "nabirds", "inat", "indian")


@dataclass
class Benchmark:
    name: str
    classes: pd.DataFrame  # query (class name), species, common, how
    images: pd.DataFrame  # path, class_name, species, species_id (matched classes only)
    unmatched_images: int
    missing_files: list[str]  # with an image root: split entries whose file is not there

    @property
    def misses(self) -> list[str]:
        return self.classes.loc[self.classes["species"].isna(), "query"].tolist()

    def summary(self) -> dict[str, object]:
        c = self.classes
        return {"benchmark": self.name, "classes": len(c), "matched": int(c["species"].notna().sum()),
                **{f"by_{how}": int((c["how"] == how).sum()) for how in ("exact", "compact", "checklist", "table")},
                "images": len(self.images) + self.unmatched_images, "images_matched": len(self.images),
                "shared_species": int(c["species"].dropna().duplicated().sum()), "misses": ", ".join(self.misses)}


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: split list not found; give the folder holding <benchmark>_test.txt and "
                                f"<benchmark>_test_classes.txt (VR-RAG's test splits as text)")
    return [x.strip() for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def load_benchmark(name: str, splits_dir: str | Path, catalog: BirdCatalog, image_root: str | Path | None = None) -> Benchmark:
    """Split list + class list -> matched query images. With `image_root`, paths are absolute and files checked."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown bird benchmark {name!r}; allowed: {', '.join(BENCHMARKS)}")
    splits_dir = Path(splits_dir)
    entries = _lines(splits_dir / f"{name}_test.txt")
    class_names = _lines(splits_dir / f"{name}_test_classes.txt")
    classes = catalog.match_all(class_names)
    matched = classes.dropna(subset=["species"]).set_index("query")
    row_of = dict(zip(catalog.species["scientific"], catalog.species["species_id"]))
    rows, unmatched, missing = [], 0, []
    for entry in entries:
        cls = entry.split("/", 1)[0]
        if cls not in matched.index:
            unmatched += 1
            continue
        path = Path(image_root) / entry if image_root is not None else Path(entry)
        if image_root is not None and not path.is_file():
            missing.append(entry)
            continue
        species = matched.at[cls, "species"]
        rows.append((str(path), cls, species, row_of[species]))
    images = pd.DataFrame(rows, columns=["path", "class_name", "species", "species_id"])
    return Benchmark(name, classes, images, unmatched, missing)
