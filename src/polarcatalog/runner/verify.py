"""`polarcatalog verify`: after `make repro`, was every committed result reproduced? Each git-tracked output of a
pipeline stage (reports, metrics, plot data) and each dvc.lock is compared with the commit's bytes; where a file
differs, the numbers in it are compared too, each difference set against the width of its 95 % CI where the result
carries one, so a reader can tell float noise from a different result."""

from __future__ import annotations

import io
import json
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from polarcatalog.eval.protocol import CI_HIGH, CI_LOW
from polarcatalog.runner.pipelines import PIPELINES, stage_names, stage_outputs


@dataclass
class Difference:
    path: str
    what: str  # "missing", "changed", "text only", "reshaped" (a table's rows or columns changed)
    numbers: int = 0  # numeric values that differ
    largest: float = 0.0  # the largest absolute difference among them
    largest_vs_ci: float | None = None  # the largest |difference| / CI width, over the values that carry a CI
    unmatched: int = 0  # numbers present on one side only (a JSON key added or removed)

    def text(self) -> str:
        if self.what not in ("changed", "text only") or (self.what == "text only" and not self.unmatched):
            return f"{self.path}: {self.what}"
        only = f"{self.unmatched} number(s) on one side only" if self.unmatched else ""
        if self.what == "text only":
            return f"{self.path}: {only}"
        ci = (f"; largest |Δ| / CI width {self.largest_vs_ci:.3g}" if self.largest_vs_ci is not None else "")
        return f"{self.path}: {self.numbers} number(s) differ, largest |Δ| {self.largest:.3g}{ci}" + (f"; {only}" if only else "")


def committed_results(root: Path) -> list[str]:
    """Git-tracked stage outputs of every pipeline, and the pipelines' lock files (repository-relative paths)."""
    tracked = set(subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True).stdout.split("\0"))
    found = []
    for pipeline in PIPELINES:
        if not (root / pipeline).is_file():
            continue
        base = (root / pipeline).parent
        lock = (base / "dvc.lock").relative_to(root).as_posix()
        found += [lock] if lock in tracked else []
        for stage in stage_names(root, (pipeline,)):
            for out in stage_outputs(root, stage):
                rel = Path(*(base / out).resolve().relative_to(root.resolve()).parts).as_posix()
                found += [f for f in tracked if f == rel or f.startswith(rel.rstrip("/") + "/")]
    return sorted(dict.fromkeys(found))


def _numbers(value: Any, path: str = "") -> Iterator[tuple[str, float, float | None]]:
    """(key path, number, CI width of the interval it belongs to or None) for every number in a JSON value."""
    if isinstance(value, dict):
        width = None
        if all(isinstance(value.get(k), (int, float)) for k in ("ci_low", "ci_high")):
            width = float(value["ci_high"]) - float(value["ci_low"])
        for k, v in value.items():
            for key, x, w in _numbers(v, f"{path}/{k}"):
                yield key, x, w if w is not None else width
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}/{i}")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, float(value), None


Pairs = list[tuple[float, float, float | None]]  # (committed, rerun, CI width of the interval it belongs to or None)


def _compare(pairs: Pairs, path: str, unmatched: int = 0) -> Difference:
    diffs = [(abs(a - b), w) for a, b, w in pairs if not (a == b or (math.isnan(a) and math.isnan(b)))]
    if not diffs:
        return Difference(path, "text only", unmatched=unmatched)
    vs_ci = [d / w for d, w in diffs if w and w > 0]
    return Difference(path, "changed", len(diffs), max(d for d, _ in diffs), max(vs_ci) if vs_ci else None, unmatched)


def _json_pairs(old: bytes, new: bytes) -> tuple[Pairs, int]:
    """Numbers under the same key path on both sides, and how many sit on one side only."""
    a, b = dict((k, (x, w)) for k, x, w in _numbers(json.loads(old))), dict((k, (x, w)) for k, x, w in _numbers(json.loads(new)))
    return [(a[k][0], b[k][0], a[k][1]) for k in sorted(a.keys() & b.keys())], len(a.keys() ^ b.keys())


def _csv_pairs(old: bytes, new: bytes) -> tuple[Pairs, int] | None:
    """Cell by cell; None when the table's shape or columns changed. A CI's width is set against the value it belongs
    to (the column right before the CI's low bound, as every plot file writes them) and its bounds, not against a
    count in the same row."""
    a, b = pd.read_csv(io.BytesIO(old)), pd.read_csv(io.BytesIO(new))
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return None
    cols = list(a.columns)
    low = next((c for c in cols if c == "ci_low" or c.endswith(f" {CI_LOW}")), None)
    high = next((c for c in cols if c == "ci_high" or c.endswith(f" {CI_HIGH}")), None)
    with_ci = {low, high, cols[cols.index(low) - 1]} if low and high and cols.index(low) > 0 else set()
    width = (a[high] - a[low]).to_numpy(float) if with_ci else None
    out = []
    for col in a.select_dtypes("number").columns:
        for i, (x, y) in enumerate(zip(a[col].to_numpy(float), b[col].to_numpy(float))):
            out.append((x, y, float(width[i]) if width is not None and col in with_ci else None))
    return out, 0


def verify(root: Path, results: list[str] | None = None) -> list[Difference]:
    """Every committed result (`results`, default `committed_results`) that is not the commit's bytes, with what
    differs in it."""
    out = []
    for rel in committed_results(root) if results is None else results:
        path = root / rel
        if not path.is_file():
            out.append(Difference(rel, "missing"))
            continue
        old = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=root, capture_output=True, check=True).stdout
        new = path.read_bytes()
        if old == new:
            continue
        try:
            pairs = _json_pairs(old, new) if rel.endswith(".json") else _csv_pairs(old, new) if rel.endswith(".csv") else None
            what = "reshaped" if rel.endswith(".csv") else "text only"
        except (ValueError, pd.errors.ParserError):
            pairs, what = None, "text only"
        if pairs is None:
            out.append(Difference(rel, what))
        else:
            out.append(_compare(pairs[0], rel, pairs[1]))
    return out


def checkout_root(folder: Path) -> Path:
    """The git checkout holding `folder`: verify compares against HEAD, so it runs from the top of the checkout
    whichever subfolder it was started in (from `reports/` it found no pipeline and called that "reproduced")."""
    proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=folder, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{folder.resolve()} is not inside a git checkout: run `polarcatalog verify` in the clone "
                           "where `make repro` ran")
    return Path(proc.stdout.strip())


def report(folder: Path) -> tuple[bool, str]:
    """(reproduced, what to print) for the checkout holding `folder`. A checkout with no committed result is not
    "reproduced": there was nothing to compare."""
    root = checkout_root(folder)
    results = committed_results(root)
    if not results:
        return False, (f"nothing to verify: {root} has no pipeline ({', '.join(PIPELINES)}) with git-tracked results; "
                       "run it in a PolarCatalog checkout")
    diffs = verify(root, results)
    if not diffs:
        return True, f"reproduced: all {len(results)} committed results (reports, metrics, plot data, dvc.lock) are the commit's bytes"
    worst = max((d.largest_vs_ci for d in diffs if d.largest_vs_ci is not None), default=None)
    head = (f"not reproduced: {len(diffs)} of {len(results)} committed results differ from the commit"
            + (f"; the largest difference is {worst:.3g} of its 95 % CI's width" if worst is not None else ""))
    tail = []
    if all(d.what == "text only" and not d.unmatched for d in diffs):
        tail = ["every number is the commit's; only text differs (a lock file's code hashes, the code commit a report "
                "names): code changed after these results were committed; commit the rerun's files to record it"]
    return False, "\n".join([head, *(f"  {d.text()}" for d in diffs), *tail])
