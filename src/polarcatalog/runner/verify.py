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
    what: str  # "missing", "changed", "text only"
    numbers: int = 0  # numeric values that differ
    largest: float = 0.0  # the largest absolute difference among them
    largest_vs_ci: float | None = None  # the largest |difference| / CI width, over the values that carry a CI

    def text(self) -> str:
        if self.what != "changed":
            return f"{self.path}: {self.what}"
        ci = (f"; largest |Δ| / CI width {self.largest_vs_ci:.3g}" if self.largest_vs_ci is not None else "")
        return f"{self.path}: {self.numbers} number(s) differ, largest |Δ| {self.largest:.3g}{ci}"


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


def _compare(pairs: list[tuple[float, float, float | None]], path: str) -> Difference:
    diffs = [(abs(a - b), w) for a, b, w in pairs if not (a == b or (math.isnan(a) and math.isnan(b)))]
    if not diffs:
        return Difference(path, "text only")
    vs_ci = [d / w for d, w in diffs if w and w > 0]
    return Difference(path, "changed", len(diffs), max(d for d, _ in diffs), max(vs_ci) if vs_ci else None)


def _json_pairs(old: bytes, new: bytes) -> list[tuple[float, float, float | None]]:
    a, b = dict((k, (x, w)) for k, x, w in _numbers(json.loads(old))), dict((k, (x, w)) for k, x, w in _numbers(json.loads(new)))
    return [(a[k][0], b[k][0], a[k][1]) for k in a.keys() & b.keys()] + [(0.0, math.inf, None)] * len(a.keys() ^ b.keys())


def _csv_pairs(old: bytes, new: bytes) -> list[tuple[float, float, float | None]]:
    a, b = pd.read_csv(io.BytesIO(old)), pd.read_csv(io.BytesIO(new))
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return [(0.0, math.inf, None)]
    low = next((c for c in a.columns if c == "ci_low" or c.endswith(f" {CI_LOW}")), None)
    high = next((c for c in a.columns if c == "ci_high" or c.endswith(f" {CI_HIGH}")), None)
    width = (a[high] - a[low]).to_numpy() if low and high else None
    out = []
    for col in a.select_dtypes("number").columns:
        for i, (x, y) in enumerate(zip(a[col].to_numpy(float), b[col].to_numpy(float))):
            out.append((x, y, None if width is None else float(width[i])))
    return out


def verify(root: Path) -> list[Difference]:
    """Every committed result that is not the commit's bytes, with what differs in it."""
    out = []
    for rel in committed_results(root):
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
        except (ValueError, pd.errors.ParserError):
            pairs = None
        out.append(_compare(pairs, rel) if pairs is not None else Difference(rel, "text only"))
    return out


def report(root: Path) -> tuple[bool, str]:
    """(reproduced, what to print)."""
    results = committed_results(root)
    diffs = verify(root)
    if not diffs:
        return True, f"reproduced: all {len(results)} committed results (reports, metrics, plot data, dvc.lock) are the commit's bytes"
    worst = max((d.largest_vs_ci for d in diffs if d.largest_vs_ci is not None), default=None)
    head = (f"not reproduced: {len(diffs)} of {len(results)} committed results differ from the commit"
            + (f"; the largest difference is {worst:.3g} of its 95 % CI's width" if worst is not None else ""))
    return False, "\n".join([head, *(f"  {d.text()}" for d in diffs)])
