"""The embed stage: every configured encoder encodes anchors, queries and chunks once (through the cache),
and the stage writes one matrix per (encoder, item set) in the row order of the processed tables. With
`Views.local_grid` > 0 the anchors (catalog images, the memory's visual nodes) are also encoded as local
views, [anchors, grid², dim], for PolarMem's global + local proposer; queries are not (a 4x cost per query)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np

from polarcatalog.data.images import BadImageError, load_rgb
from polarcatalog.data.regions import content_side
from polarcatalog.encoders import EncoderSpec, ImageEncoder, create_encoder, has_text_tower
from polarcatalog.encoders.preprocess import Preprocess, local_views
from polarcatalog.features.colour_nuisance import nuisance_basis, recoloured_views
from polarcatalog.features.encode import encode_image_views, encode_texts
from polarcatalog.io import read_table, safe_name
from polarcatalog.progress import say


@dataclass(frozen=True)
class Views:
    """What the encoders see: anchors (content box, scale-matched to the queries), queries (content box), with
    `flips` also their mirror images (averaged at retrieval), and `local_grid`² local cells of every anchor (0 = none)."""

    anchor: Preprocess
    query: Preprocess
    local_grid: int = 0
    flips: bool = False
    compare: tuple[Preprocess, ...] = ()  # anchors at other scales (one view each, no flip): the scale lever's rows


def query_content_scale(paths: list[str], sample: int = 400, seed: int = 0) -> int:
    """Median longest side (native px, `content_side`) of the queries' subjects: the scale anchors are shrunk to.
    Label-free; it reads the query set as a whole (a sample of up to `sample` images)."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(paths), size=min(sample, len(paths)), replace=False) if paths else []
    sides = []
    for i in pick:
        try:
            sides.append(content_side(load_rgb(paths[i])))
        except BadImageError:
            continue
    if not sides:
        raise ValueError("no readable query image to measure the query scale from; set encoders.anchor_scale to a number")
    return int(np.median(sides))


def resolve_anchor_scale(setting: Literal["auto"] | int | None, measured: int | None, ratio: float = 1.0) -> int | None:
    """`auto`: `ratio` times the queries' measured subject size (`query_content_scale`); a number is taken as is;
    None: anchors at full size. Why a ratio: a sprite's pixels are drawn, an artwork shrunk to the same size is blurred
    by the resampling, so the anchor that carries the query's level of detail is larger than the query (the ratio is
    chosen on dev)."""
    if setting is None:
        return None
    if setting != "auto":
        return int(setting)
    if measured is None:
        raise ValueError("encoders.anchor_scale auto needs the queries' measured subject size")
    return round(ratio * measured)


SCALE_TOLERANCE = 0.1  # a measured scale within 10 % of the catalog's keeps the catalog's anchors


def snap_scale(px: float) -> int:
    """The nearest step of a quarter-octave ladder (..., 19, 23, 27, 32, 38, 45, 54, 64, 76, 91, 108, 128, ...), so
    that folders a few pixels apart share one encoding of the catalog in the cache."""
    return int(round(2 ** (round(4 * np.log2(max(px, 1.0))) / 4)))


@dataclass(frozen=True)
class AnchorScale:
    """Which scale the anchors are seen at for a query set: `used`, against the embed stage's `catalog` scale."""

    setting: str  # auto (measured on the query set) | catalog | <pixels>
    catalog: int | None  # what the embed stage encoded (None: anchors at full size)
    used: int | None
    measured: int | None = None  # the query set's median subject size in native px (auto only)
    ratio: float = 1.0  # auto: anchors at ratio x measured (encoders.anchor_scale_ratio)
    capped_from: int | None = None  # the scale asked for, when it was above every anchor (scaling only shrinks)

    @property
    def adapted(self) -> bool:
        return self.used != self.catalog

    def describe(self) -> str:
        source = {"auto": f"{self.ratio:g} x the median subject of these queries, {self.measured} px",
                  "catalog": "the catalog's"}.get(
            self.setting, "set by --anchor-scale")
        size = lambda px: "full size" if px is None else f"{px} px"  # noqa: E731
        state = (f"not the catalog's {size(self.catalog)}: encoded once at this scale, then read from the feature cache"
                 if self.adapted else "the embed stage's features")
        capped = (f"; {self.capped_from} px asked for, but no anchor image is larger than {self.used} px, so they are "
                  "the same views" if self.capped_from is not None else "")
        # auto reads the whole folder: another folder holding the same image can score it at another scale
        hint = ("; the scale follows this folder's images, so a folder of catalog-style sprites may score better with "
                "--anchor-scale catalog" if self.setting == "auto" and self.adapted else "")
        return f"anchors at {size(self.used)} ({source}{capped}; {state}{hint})"


def ladder_at_least(px: int) -> int:
    """The smallest step of `snap_scale`'s ladder that is at least `px`."""
    step = int(np.ceil(4 * np.log2(max(px, 1))))
    while int(round(2 ** (step / 4))) < px:
        step += 1
    return int(round(2 ** (step / 4)))


def choose_anchor_scale(setting: str | int, query_paths: list[str], catalog: int | None, seed: int = 0,
                        ratio: float = 1.0, largest_anchor: int | None = None) -> AnchorScale:
    """`auto`: `ratio` times the query set's own subject size (label-free, but read from the whole set: transductive),
    snapped to the ladder, or the catalog's scale when within SCALE_TOLERANCE of it; `catalog`: the embed stage's;
    a number. `largest_anchor`: the longest side of the largest anchor image. A scale only shrinks an anchor
    (`Preprocess.scale_to`), so every scale at or above it gives the same views: it is capped to the ladder step at
    or above it, one encoding in the feature cache instead of one per large scale (official artwork as queries
    measured 724 px and re-encoded the whole catalog into the cache for views equal to the 431 px ones)."""
    if setting == "catalog":
        return AnchorScale("catalog", catalog, catalog)
    if setting != "auto":
        return _capped(AnchorScale(str(setting), catalog, int(setting)), largest_anchor)
    measured = query_content_scale(query_paths, seed=seed)
    wanted = ratio * measured
    close = catalog is not None and abs(wanted - catalog) <= SCALE_TOLERANCE * catalog
    return _capped(AnchorScale("auto", catalog, catalog if close else snap_scale(wanted), measured, ratio), largest_anchor)


def _capped(scale: AnchorScale, largest_anchor: int | None) -> AnchorScale:
    if largest_anchor is None or scale.used is None or scale.used == scale.catalog:
        return scale
    if scale.used < largest_anchor:
        return scale
    if scale.catalog is None or scale.catalog >= largest_anchor:  # the catalog's own anchors are those same views
        return replace(scale, used=scale.catalog, capped_from=scale.used)
    cap = ladder_at_least(largest_anchor)
    return replace(scale, used=cap, capped_from=scale.used) if scale.used > cap else scale


def encode_anchor_views(encoders: dict[str, ImageEncoder], paths: list[str], cache_root: Path, view: Preprocess,
                        flips: bool, batch_size: int = 64, stats: dict[str, int] | None = None
                        ) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """name -> (anchor features, flipped or None) at `view`, through the cache (a second run encodes nothing)."""
    out = {}
    for name, enc in encoders.items():
        (plain, *flipped), ok = encode_image_views(enc, paths, cache_root, [view, *([view.flipped()] if flips else [])],
                                                   batch_size=batch_size, stats=stats, role="anchor")
        if not ok.all():
            raise BadImageError(paths[int(np.argmin(ok))], "a catalog image no longer loads; rerun the curate stage")
        out[name] = (plain, flipped[0] if flipped else None)
    return out


@dataclass
class EmbedResult:
    manifest: dict[str, Any]
    cache_stats: dict[str, dict[str, int]]


def embed_all(processed: Path, out: Path, cache_root: Path, image: Sequence[EncoderSpec], text: EncoderSpec | None,
              views: Views, device: str = "auto", batch_size: int = 64, runtime: str = "auto",
              colour_basis_for: Sequence[str] = ()) -> EmbedResult:
    """`colour_basis_for`: the encoders whose anchors are also encoded in other colours, for the colour-nuisance basis
    the retrieval projects out of their features (`features.colour_nuisance`)."""
    anchors = read_table(processed / "anchors.parquet")
    queries = read_table(processed / "queries.parquet")
    chunks = read_table(processed / "chunks.parquet")
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"anchor_scale": views.anchor.scale_to, "anchor_views": views.anchor.key(),
                                "query_views": views.query.key(), "flips": views.flips, "anchor_ids": anchors["candidate_id"].tolist(),
                                "query_ids": queries["query_id"].tolist(), "chunk_ids": chunks["chunk_id"].tolist(),
                                "local_grid": views.local_grid, "image": {}, "text": None}
    stats: dict[str, dict[str, int]] = {}
    for spec in image:
        name = spec.name
        enc = create_encoder(spec, "image", device, runtime)
        st = stats.setdefault(name, {})
        local = local_views(views.anchor, views.local_grid) if views.local_grid else []
        flips = [views.anchor.flipped()] if views.flips else []
        recoloured = recoloured_views(views.anchor) if name in colour_basis_for else []
        (a, *rest), a_ok = encode_image_views(enc, anchors["path"].tolist(), cache_root,
                                              [views.anchor, *flips, *local, *views.compare, *recoloured],
                                              batch_size=batch_size, stats=st, role="anchor")
        rest, recoloured_f = rest[: len(rest) - len(recoloured)], rest[len(rest) - len(recoloured) :]
        (q, *q_flip), q_ok = encode_image_views(enc, queries["path"].tolist(), cache_root,
                                                [views.query, *([views.query.flipped()] if views.flips else [])],
                                                shas=queries["sha256"].tolist(), batch_size=batch_size, stats=st)
        if not (a_ok.all() and q_ok.all()):
            bad = [p for p, ok in zip(list(anchors["path"]) + list(queries["path"]), np.r_[a_ok, q_ok]) if not ok]
            raise BadImageError(bad[0], f"{len(bad)} curated image(s) no longer load; rerun the curate stage")
        stem = safe_name(name)
        entry = {"id": enc.id, "dim": enc.dim, "runtime": getattr(enc, "runtime", "torch")}
        arrays = {"anchors": a, "queries": q}
        if views.flips:
            arrays |= {"anchors_flip": rest[0], "queries_flip": q_flip[0]}
        if local:
            arrays["anchors_local"] = np.stack(rest[len(flips) : len(flips) + len(local)], axis=1)
        if recoloured:
            arrays["colour_basis"] = nuisance_basis(a, recoloured_f)
        for key, array in arrays.items():
            entry[key] = f"{stem}__{key}.npy"
            np.save(out / entry[key], array, allow_pickle=False)
        entry["anchors_at"] = {}
        for view, array in zip(views.compare, rest[len(flips) + len(local) :]):
            entry["anchors_at"][str(view.scale_to)] = f"{stem}__anchors_at_{view.scale_to}.npy"
            np.save(out / entry["anchors_at"][str(view.scale_to)], array, allow_pickle=False)
        if has_text_tower(spec):
            entry["chunks"] = f"{safe_name(name)}__chunks.npy"
            np.save(out / entry["chunks"], encode_texts(enc, chunks["text"].tolist(), cache_root, batch_size, st), allow_pickle=False)
        manifest["image"][name] = entry
    if text and any("chunks" not in v for v in manifest["image"].values()):
        tenc = create_encoder(text, "text", device, runtime)
        manifest["text"] = {"name": text.name, "id": tenc.id, "dim": tenc.dim, "runtime": getattr(tenc, "runtime", "torch"), "chunks": f"{safe_name(text.name)}__chunks.npy"}
        st = stats.setdefault(text.name, {})
        np.save(out / manifest["text"]["chunks"], encode_texts(tenc, chunks["text"].tolist(), cache_root, batch_size, st), allow_pickle=False)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    hits, misses = (sum(st.get(k, 0) for st in stats.values()) for k in ("hits", "misses"))
    say(f"feature cache {cache_root}: {hits} vectors reused, {misses} computed. A forced `dvc repro -f -s embed` reuses "
        "it too (same images, views and model give the same vectors); to recompute them, `make clean-features` first.")
    return EmbedResult(manifest, stats)
