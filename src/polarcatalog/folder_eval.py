"""`polarcatalog evaluate`: the configured retriever on a folder of new query images, scored if labelled; with
`--where "a yellow Pokémon that is not an electric type"` the candidates are re-ordered by the polarized memory
(PolarMem, the graph stage's output) under the configured constraint strength. It orchestrates every layer
(features, retrieval, memory) with the same library and params-wiring calls as the pipeline's stages."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from PIL import Image

from polarcatalog.config import Params, ParamsError, flatten, validate
from polarcatalog.eval.bootstrap import Bootstrap
from polarcatalog.data.images import Quarantine
from polarcatalog.data.query_folder import QueryFolder, listed, printable, read_query_folder
from polarcatalog.encoders import image_encoder
from polarcatalog.eval.metrics import gold_ranks, per_query, summarize
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.features.embedding import AnchorScale, choose_anchor_scale, encode_anchor_views
from polarcatalog.features.encode import encode_image_views
from polarcatalog.features.workspace import Workspace, average_flips, load_workspace
from polarcatalog.from_params import domain_for, memory_proposer, query_view
from polarcatalog.kg import bridge
from polarcatalog.kg.completeness import answer_order
from polarcatalog.kg.knowledge_graph import species_links
from polarcatalog.kg.triples import read_triples
from polarcatalog.memory.constraints import conflict_at_k, reorder, sort_keys
from polarcatalog.memory.memories import Memory
from polarcatalog.memory.memories import states as memory_states
from polarcatalog.memory.polar_graph import species_memory
from polarcatalog.memory.inputs import GraphInputs, graph_inputs
from polarcatalog.memory.typed_constraint import parse_constraint
from polarcatalog.memory.verifiers import load_scores
from polarcatalog.retrieval.query_side import QuerySide, Retriever, species_scores
from polarcatalog.retrieval.vrrag import query_encoders
from polarcatalog.runner.pipelines import PIPELINES, stage_names, stage_outputs
from polarcatalog.runner.tracking import git_output


STATE_MARK = {-1: " [conflict]", 0: "", 1: " [has]"}


@dataclass
class Constraint:
    text: str
    q_pos: list[str]
    q_neg: list[str]
    strength: str
    quality: list[dict[str, Any]] = field(default_factory=list)  # `concept_quality`, one record per constraint concept

    def quality_lines(self) -> list[str]:
        """Each concept's measured exclusion quality, and a warning where a hard constraint rests on a weak one."""
        lines = []
        for q in self.quality:
            lines.append(f"  {q['concept']} ({q['side']}): the memory excludes {_pct(q['exclusion recall'])} of the "
                         f"{q['should be excluded']} catalog species it should (recall), {_pct(q['exclusion precision'])} "
                         f"of the {q['excluded']} it excludes should be (precision), and it keeps {_pct(q['kept'])} of "
                         f"the {q['should be kept']} it should keep")
            if weak(q) and self.strength == "hard":
                lines.append(f"  WARNING: the hard constraint rests on {q['concept']!r}, below the {_pct(QUALITY_BAR)} bar: "
                             "species are kept or dropped on a weak edge; try --strength soft:0.01 (the configured "
                             "strength's dev choice) and read the result with care")
        return lines


@dataclass
class EvaluateResult:
    predictions: pd.DataFrame
    metrics: dict | None
    quarantined: list[dict]
    constraint: Constraint | None = None
    anchor_scale: AnchorScale | None = None
    folder: QueryFolder | None = None
    replaced: bool = False  # a previous run's predictions.csv / metrics.json in the output folder were replaced

    def render(self, show: int = 5) -> str:
        lines = [f"code commit: {self.metrics['code commit']}"] if "code commit" in (self.metrics or {}) else []
        lines += [self.anchor_scale.describe()] if self.anchor_scale else []
        cache = (self.metrics or {}).get("feature_cache", {})
        if cache.get("anchors", {}).get("misses"):  # a new scale's anchors were written: the cache grew, say by how much
            lines.append(f"  {cache['anchors']['misses']} anchor vectors added to the feature cache (data/cache/features, "
                         f"now {cache['bytes'] / 1e6:.0f} MB; `make clean-features` empties it, and the next "
                         "`dvc repro -f -s embed` refills the catalog's)")
        centring = (self.metrics or {}).get("query_centring")
        if centring and centring.get("note"):
            lines.append(centring["note"])
        if self.constraint:
            c = self.constraint
            lines.append(f"constraint {c.text!r}: has {c.q_pos or '-'}, not_has {c.q_neg or '-'} ({c.strength}; "
                         "[has] = the memory entails it, [conflict] = the memory contradicts it)")
            lines += c.quality_lines()
        for row in self.predictions.itertuples():
            place = f"rank {row.gold_rank:g}" if np.isfinite(row.gold_rank) else "not among the retrieved candidates"
            gold = f" (gold: {row.gold_name}, {place})" if isinstance(row.gold_name, str) else ""
            added = set(getattr(row, "bridged_names", None) or [])  # --kgret: the whole evidence set, the graph's marked
            shown = len(row.predicted_names) if added else show
            named = ", ".join(n + STATE_MARK[m] + (" [kg]" if n in added else "")
                              for n, m in zip(row.predicted_names[:shown], row.states))  # states 0 unconstrained
            lines.append(f"{printable(row.query_id)}: {named}{gold}")
        if self.quarantined:
            lines.append(f"{len(self.quarantined)} image(s) quarantined (unreadable or blank; copies in the output's "
                         "quarantine/): " + "; ".join(f"{printable(q['path'])}: {q['reason']}" for q in self.quarantined))
        lines += self.folder.notes() if self.folder else []
        if self.predictions.empty:  # a folder of broken files "succeeded" with a header-only predictions.csv
            lines.append("\nno image of the folder could be ranked (see the quarantined and skipped files above): "
                         "nothing was scored")
        kg = (self.metrics or {}).get("kgret")
        if kg:
            matched = next(k for k in kg if k.startswith("budget-matched"))
            lines.append(f"+KGret (B = {kg['B']}): {kg['species added per query']:.2f} species added per query by the "
                         "knowledge graph ([kg] in the lists above); evidence set = first-stage top-k + bridged, "
                         "ordered by the re-ranker"
                         + (f"; completeness {_pct(kg['completeness (labelled)'], 1)} vs "
                            f"{matched.removesuffix(' (labelled)')} {_pct(kg[matched], 1)} over {kg['labelled']} labelled "
                            "queries" if kg["labelled"] else ""))
        if self.constraint and self.metrics:
            c = self.metrics["constraint"]
            conflict = next(key for key in c if key.startswith("Conflict@"))
            value = "n/a (no image ranked)" if c[conflict] is None else _pct(c[conflict], 1)
            lines.append(f"constraint: {conflict} {value}, gold contradicted by the memory {c['gold contradicted by the memory']}")
        if self.metrics and self.metrics.get("labelled") is None and self.metrics.get("unknown_labels"):
            lines.append("\nno image has a label naming a catalog species: nothing scored")
        if self.metrics and self.metrics.get("labelled"):
            m = self.metrics["labelled"]
            # in %, as every report and `polarcatalog experiments` (metrics.json keeps fractions, as MLflow does)
            lines.append(f"\n{m['n']} labelled queries, in %: " + "  ".join(f"{name} {_pc(m[name])}" for name in
                                                                          ("mRR@1", "mRR@5", "mRR@10", "R@10", "acc@1")))
            if kg:  # the kg stage's protocol: the answerer ranks the evidence set only, so @10 reads a shorter list
                lines.append(f"  (+KGret: each list is the evidence set, k + B = {kg['evidence set']} species; a gold "
                             "outside it counts as not found, so the @10 numbers are not a plain run's top 10)")
            ci = self.metrics["labelled_ci"]
            if ci["species"] < 2:  # a bootstrap over one species resamples the same images: a zero-width "interval"
                lines.append(f"no CI: every labelled image is of one species, and the bootstrap resamples species (a "
                             "species' images move together); label images of more species for an interval")
            else:
                # all labelled images at rank 1, say: every resample scores the same, a zero-width "interval" that a
                # reader takes for certainty
                same = [name for name, r in ci["metrics"].items() if r["ci_low"] == r["ci_high"]]
                caveat = (f"  (every resample scores the same {', '.join(same)}: a zero-width interval over "
                          f"{ci['species']} species is no sign of certainty)" if same
                          else f"  (over {ci['species']} species the bootstrap has few distinct resamples: the "
                          "interval's own width is uncertain, narrow or wide)" if ci["species"] < 10 else "")
                lines.append(f"{100 * ci['level']:g} % CI, bootstrap over this folder's {ci['species']} species (a species' "
                             "images move together): " + "  ".join(f"{name} [{_pc(r['ci_low'])}, {_pc(r['ci_high'])}]"
                                                                    for name, r in ci["metrics"].items()) + caveat)
        if self.metrics and self.metrics.get("unknown_labels"):
            names = self.metrics["unknown_label_names"]
            lines.append(f"{self.metrics['unknown_labels']} image(s) with a label that names no catalog species (not "
                         f"scored): {listed(names)}; a label is a species id or name (any case; spaces, _ or - "
                         "alike; `mr-mime` = Mr. Mime; `025_pikachu` is read by its name)")
        return "\n".join(lines)


def folder_intervals(ranks: np.ndarray, gold: np.ndarray, params: Params) -> dict[str, Any]:
    """mRR@1, mRR@10 and R@10 of the labelled queries with the pipeline's interval: a bootstrap over species (the
    folder's gold species; its images move together), `eval.bootstrap` resamples at `eval.confidence`."""
    e = params.eval
    boot = Bootstrap.over(gold, e.bootstrap, e.seed, e.confidence)
    names = ("mRR@1", "mRR@10", "R@10")
    values = per_query(ranks, names)
    return {"level": e.confidence, "resamples": e.bootstrap, "species": int(len(np.unique(gold))),
            "metrics": {name: boot.interval(values[:, j]).record("folder") for j, name in enumerate(names)}}


SHOWN = ("retrieval.ensemble", "retrieval.reranker", "retrieval.lam", "retrieval.r", "retrieval.k", "retrieval.chunks",
         "retrieval.colour_invariant", "retrieval.query_centre", "retrieval.hubness", "encoders.anchor_scale")


# keys of the sections evaluate reads that only the pipeline's stages use: accepted, they changed nothing
CATALOG_ONLY = {
    "encoders.flips": "the embed stage decided whether the catalog's anchors have mirrored views; "
                      "`dvc exp run -S encoders.flips=...`, then evaluate again",
    "encoders.compare_scale_ratios": "the embed stage's comparison scales; evaluate sees the anchors at --anchor-scale",
    "encoders.local_grid": "the memory's local views are the graph stage's; `dvc exp run -S encoders.local_grid=...`",
    "eval.dev_fraction": "it splits the catalog's own queries into dev and test; evaluate scores every image of the folder",
    "retrieval.reference_folds": "it cross-fits the pipeline's dev queries when dev itself is scored; a folder's "
                                 "queries take every dev query as reference",
    **{f"graph.{k}": f"the memory's concept scores are the graph stage's (data/processed/graph/scores.npz); "
                     f"`dvc exp run -S graph.{k}=...`, then evaluate again"
       for k in ("verifier", "zero_shot_encoder", "vlm_model", "probe_folds", "probe_c", "probe_dim", "templates")},
    "kg.bridge": "B is --kgret's value",
    **{f"kg.{k}": f"the knowledge graph's triples are the kg stage's; `dvc exp run -S kg.{k}=...`, then evaluate again"
       for k in ("package", "extractor", "llm_model", "llm_max_new_tokens", "llm_batch_size")},
}


def idle_override(key: str, params: Params, anchor_scale: str | int = "auto") -> str | None:
    """Why a `--set key` that evaluate reads changes nothing under the rest of the configuration (a knob of a part
    that is switched off), or None. The configuration line marks it, so a sweep over it is not read as a null result."""
    rp = params.retrieval
    # CSLS reads query statistics: none when each query is centred by the catalog alone, or not centred (`query_side`)
    statistics = "retrieval.center is false" if not rp.center else \
        "CSLS needs query statistics, and retrieval.query_centre is catalog" if rp.query_centre == "catalog" else None
    idle = {
        "retrieval.hubness": (rp.hubness != "none" and statistics is not None, statistics),
        "retrieval.hubness_k": (rp.hubness == "none" or statistics is not None,
                                "retrieval.hubness is none" if rp.hubness == "none" else statistics),
        # the seed draws an IVF index's training sample and the bridge's species folds; a flat index over anchors
        # reads neither
        "retrieval.seed": (rp.index == "flat" and rp.chunks == "anchors",
                           "retrieval.index is flat and retrieval.chunks is anchors"),
        "encoders.anchor_scale_ratio": (anchor_scale != "auto", f"--anchor-scale is {anchor_scale}, not auto"),
        "retrieval.ivf_nlist": (rp.index == "flat", "retrieval.index is flat"),
        "retrieval.min_center_batch": (rp.query_centre != "batch", f"retrieval.query_centre is {rp.query_centre}"),
        "retrieval.small_batch_centre": (rp.query_centre != "batch", f"retrieval.query_centre is {rp.query_centre}"),
        "retrieval.colour_invariant_dim": (not rp.colour_invariant, "retrieval.colour_invariant is empty"),
        "retrieval.lam": (rp.reranker is None, "retrieval.reranker is null"),
        # the ridge bridge maps text chunks into an image encoder's space; the anchors chunks read no text
        "retrieval.bridge_folds": (rp.chunks == "anchors", "retrieval.chunks is anchors"),
        "retrieval.bridge_alpha": (rp.chunks == "anchors", "retrieval.chunks is anchors"),
    }
    unused, why = idle.get(key, (False, ""))
    return f"changes nothing here: {why}" if unused else None


def unread_override(key: str, constraint: bool, kg: bool) -> str | None:
    """Why `evaluate` would ignore `--set key`, or None when it reads it: the query side (retrieval, encoders, eval,
    dataset.seed), graph with --where and kg with --kgret. Everything else shaped the catalog, which the pipeline
    built: a `--set` there was accepted and silently unused."""
    section = key.split(".", 1)[0]
    if key in CATALOG_ONLY:
        return f"--set {key}: evaluate does not read it ({CATALOG_ONLY[key]})"
    if key == "encoders.anchor_scale":
        return ("--set encoders.anchor_scale: evaluate sees the catalog anchors at --anchor-scale (auto, catalog or a "
                "size in px); use that option")
    if section in ("retrieval", "encoders", "eval") or key == "dataset.seed":
        return None
    if section == "graph":
        return None if constraint else f"--set {key}: the graph's settings apply with --where only"
    if section == "kg":
        return None if kg else f"--set {key}: the knowledge graph's settings apply with --kgret only"
    if not _known_key(key):
        return None  # a typo: validation names it as an unknown key, with the allowed ones
    reads = "it reads retrieval, encoders, eval and dataset.seed; graph with --where, kg with --kgret"
    if section in ("dataset", "curate"):
        return (f"--set {key}: evaluate does not read it ({reads}); it shapes the catalog the pipeline built: "
                f"`dvc exp run -S {key}=...`, then evaluate again")
    return f"--set {key}: evaluate does not read it ({reads}; {section} is for the pipeline's stages)"


def _known_key(key: str) -> bool:
    """Whether `key` names a params field (a section's, or a nested one's)."""
    model: Any = Params
    for part in key.split("."):
        fields = getattr(model, "model_fields", None)
        if not isinstance(fields, dict) or part not in fields:
            return False
        model = fields[part].annotation
    return True


def configuration(params: Params, params_file: Path, overrides: dict[str, Any], constraint: bool = False,
                  anchor_scale: str | int = "auto") -> dict[str, dict[str, Any]]:
    """The values that scored the folder, each with where it came from: `--set`, the params file as committed, or the
    params file's uncommitted value (what a `dvc exp run` leaves in the workspace; `git checkout params.yaml` undoes it)."""
    values = flatten(params.model_dump(mode="json"))
    committed = _committed_params(params_file)
    keys = [k for k in SHOWN if k in values] + (["graph.constraint", "graph.kappa"] if constraint else [])
    # every other value that departs from the committed file: a `--set retrieval.center=false` changed the scores
    # and must be in the line that describes the run
    keys += [k for k in values if k not in keys and (k in overrides or (committed is not None and k in committed
             and committed[k] != values[k] and k.split(".", 1)[0] in ("retrieval", "encoders", "eval")))]
    out = {}
    for key in keys:
        if key in overrides:
            idle = idle_override(key, params, anchor_scale)
            source = f"--set; {idle}" if idle else "--set"
        elif committed is None:
            source = params_file.name
        elif committed.get(key, values[key]) != values[key]:
            source = f"{params_file.name}, uncommitted (HEAD has {committed[key]!r})"
        else:
            source = params_file.name
        out[key] = {"value": values[key], "source": source}
    if anchor_scale != "auto" and "encoders.anchor_scale" in out:  # the option decides the anchors' scale here
        out["encoders.anchor_scale"] = {"value": anchor_scale, "source": "--anchor-scale"}
    return out


def code_state(root: Path) -> str:
    """The commit whose code scored the folder, and whether the package's code departs from it: two runs of one
    configuration on different code are not the same experiment."""
    commit = git_output(root, "rev-parse", "HEAD")
    if not commit:
        return "unknown (not a git checkout)"
    changed = git_output(root, "status", "--porcelain", "--untracked-files=no", "--", "src", "pyproject.toml")
    return commit + (" + uncommitted changes to src/" if changed else "")


def _committed_params(params_file: Path) -> dict[str, Any] | None:
    """The params file as HEAD has it, validated and flattened; None outside git or for an untracked file."""
    path = params_file.resolve()
    try:
        text = subprocess.run(["git", "show", f"HEAD:./{path.name}"], cwd=path.parent, capture_output=True, text=True,
                              timeout=20, check=True).stdout
        return flatten(validate(yaml.safe_load(text), f"HEAD:{path.name}").model_dump(mode="json"))
    except (OSError, subprocess.SubprocessError, ParamsError, ValueError, AttributeError):
        return None


def configuration_text(config: dict[str, dict[str, Any]]) -> str:
    """One line; a value's source is named where it is not the committed params file."""
    departs = lambda source: source.startswith(("--set", "--anchor-scale")) or ", uncommitted" in source  # noqa: E731
    return "configuration: " + "; ".join(f"{k} = {v['value']}" + (f" ({v['source']})" if departs(v["source"]) else "")
                                         for k, v in config.items())


QUALITY_BAR = 0.8  # a constraint concept whose exclusion recall, precision or kept share is below this is flagged under hard


def weak(quality: dict[str, Any]) -> bool:
    """A `concept_quality` record below the bar on any of its three shares (a nan share, no species to measure it
    on, is not below it)."""
    return any(quality[k] < QUALITY_BAR for k in ("exclusion recall", "exclusion precision", "kept"))


def _pct(x: float | None, decimals: int = 0, unit: str = " %") -> str:
    """A fraction in %, as the reports print it."""
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.{decimals}f}{unit}"


def _pc(x: float) -> str:
    """A metric in a line that says "in %": one decimal, no unit."""
    return _pct(x, 1, "")


def concept_quality(inputs: GraphInputs, memory: Memory, concepts: list[int], side: str) -> list[dict[str, Any]]:
    """How well the memory excludes what a constraint on each concept must exclude, measured on the whole catalog
    against the domain's ground truth: for `not` (Q−) a species that has the concept (its HAS edge), for `has` (Q+) a
    species that lacks it (its NOT_HAS edge). Recall: share of those species excluded; precision: share of the
    excluded that should be; kept: share of the species that satisfy the constraint that the memory does not exclude.
    Precision alone hides a concept the memory contradicts for most of the few species that have it (a `has` on a
    rare concept can drop most of them while nearly all it drops lack it): kept is the share of the species a user
    asked for that a hard constraint leaves in place."""
    every = np.arange(len(inputs.species_ids))[None, :]
    out = []
    for c in concepts:
        has, not_has = memory.edges(every, np.array([[c]]))
        excluded = (has if side == "not" else not_has)[0, :, 0]
        should = inputs.truth[:, c].astype(bool) if side == "not" else ~inputs.truth[:, c].astype(bool)
        out.append({"concept": inputs.vocab[c].name, "side": side, "should be excluded": int(should.sum()),
                    "excluded": int(excluded.sum()),
                    "exclusion recall": float(excluded[should].mean()) if should.any() else float("nan"),
                    "exclusion precision": float(should[excluded].mean()) if excluded.any() else float("nan"),
                    "should be kept": int((~should).sum()),
                    "kept": float((~excluded[~should]).mean()) if (~should).any() else float("nan")})
    return out


@dataclass
class _Memory:
    """A `--where` constraint resolved against the polarized memory: concept indices and the configured memory."""

    constraint: Constraint
    inputs: GraphInputs
    memory: Memory
    q_pos: list[int]
    q_neg: list[int]


def configured_memory(ws: Workspace, params: Params, root: Path, inputs: GraphInputs) -> Memory:
    """The polarized memory the graph stage's configuration builds from its verifier scores (graph.kappa,
    graph.proposer, graph.critical_completion): what `--where` and `concepts` read."""
    gp = params.graph
    scores = load_scores(root / "data/processed/graph/scores.npz", inputs.vocab)
    return species_memory(inputs, ws.anchors["candidate_id"].tolist(), scores, memory_proposer(params, inputs),
                          gp.kappa, gp.critical_completion)


def concept_table(params: Params, root: Path) -> pd.DataFrame:
    """Every concept a `--where` can name, by id, with how far the memory can carry a hard constraint on it (the
    `concept_quality` of both sides): the list to choose ids from before a run, not after a warning."""
    ws = load_workspace(root / "data/features", root / "data/processed")
    inputs = graph_inputs(ws, domain_for(params))
    memory = configured_memory(ws, params, root, inputs)
    every = list(range(len(inputs.vocab)))
    has_records = concept_quality(inputs, memory, every, "has")
    not_records = concept_quality(inputs, memory, every, "not")
    has, not_ = pd.DataFrame(has_records), pd.DataFrame(not_records)
    return pd.DataFrame({
        "id": [c.id for c in inputs.vocab], "name": [c.name for c in inputs.vocab],
        "species with it": not_["should be excluded"],
        "+id keeps": has["kept"], "+id excludes": has["exclusion recall"],
        "-id keeps": not_["kept"], "-id excludes": not_["exclusion recall"],
        "weak under hard": [" ".join(sign for sign, w in (("+", a), ("-", b)) if w)
                            for a, b in zip(map(weak, has_records), map(weak, not_records))]})


def _memory_for(ws: Workspace, params: Params, root: Path, where: str) -> _Memory:
    """Parse the constraint and build the configured memory (graph.* with `--strength` as graph.constraint); runs
    before any query is encoded, so a constraint naming no concept or a missing graph stage fails first."""
    gp = params.graph
    inputs = graph_inputs(ws, domain_for(params))
    parsed = parse_constraint(where, inputs.vocab)
    if parsed.disjoined:
        pairs = "; ".join(f"{a} or {b}" for a, b in parsed.disjoined)
        raise ValueError(f"--where {where!r} asks for {pairs}: a constraint is a conjunction (every wanted concept "
                         "present, every excluded one absent; PolarMem, Algorithm 1), so it cannot keep an 'or'; run "
                         "evaluate once per alternative")
    if parsed.contradicted:
        raise ValueError(f"--where {where!r} both asks for and excludes {', '.join(parsed.contradicted)}; keep one")
    if not (parsed.q_pos or parsed.q_neg):
        examples = ", ".join(c.name for c in inputs.vocab[::6])
        raise ValueError(f"--where {where!r} names no concept of the vocabulary (e.g. {examples}); "
                         "phrase it like 'a yellow Pokémon that is not an electric type'")
    memory = configured_memory(ws, params, root, inputs)
    index = {c.id: j for j, c in enumerate(inputs.vocab)}
    q_pos, q_neg = [index[c] for c in parsed.q_pos], [index[c] for c in parsed.q_neg]
    quality = concept_quality(inputs, memory, q_pos, "has") + concept_quality(inputs, memory, q_neg, "not")
    constraint = Constraint(where, list(parsed.q_pos), list(parsed.q_neg), gp.constraint.label(), quality)
    return _Memory(constraint, inputs, memory, q_pos, q_neg)


def _constrain(memory: _Memory, params: Params, species: np.ndarray, s: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Re-order each query's VR-RAG species list by the memory's logic state against the constraint; also the order's
    keys in the new order (what pessimistic ties compare)."""
    cand = memory.inputs.species_index(species)
    states = memory_states(memory.memory, cand, [memory.q_pos] * len(cand), [memory.q_neg] * len(cand))
    s = np.where(cand >= 0, s, -np.inf)
    strength, temperature = params.graph.constraint, params.graph.adaptive_temperature
    order = reorder(states, s, strength, temperature)
    take = lambda a: np.take_along_axis(a, order, 1)  # noqa: E731
    return take(species), take(s), take(states), tuple(take(k) for k in sort_keys(states, s, strength, temperature))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet runs a cell starting so as a formula


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Text cells that a spreadsheet would run as a formula (a file or label named `=HYPERLINK(...)`), prefixed with
    `'` (OWASP's CSV-injection rule): the file stays readable as data everywhere."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col].dtype):
            out[col] = [("'" + v) if isinstance(v, str) and v.startswith(FORMULA_START) else v for v in out[col]]
    return out


def check_out(out: Path, root: Path, queries: Path | None = None) -> None:
    """Refuse an output folder that is (or lies under) a file, that lies inside a pipeline stage's output (DVC
    deletes and rewrites those: `--out data/features` would mix results into the feature cache), or that lies inside
    the query folder (the next run would read its quarantined copies and results as queries), before any image is
    encoded."""
    if queries is not None and queries.is_dir() and (out.resolve() == queries.resolve()
                                                     or queries.resolve() in out.resolve().parents):
        raise ValueError(f"--out {out} is inside --queries {queries}: the next run would read this run's results and "
                         "quarantined copies as query images; give a folder outside it (default "
                         "reports/evaluate/<folder name>)")
    if queries is not None and queries.is_dir() and out.resolve() in queries.resolve().parents:
        raise ValueError(f"--queries {queries} is inside --out {out}: this run replaces that folder's results and "
                         "quarantine/, which would delete the images it reads; copy them elsewhere first")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: a file, not a folder; give a folder (default reports/evaluate/<folder name>)")
    if (out / "quarantine").exists() and not (out / "quarantine" / QUARANTINE_MARK).is_file():
        raise ValueError(f"--out {out} holds a quarantine/ that no `polarcatalog evaluate` wrote, and a run replaces "
                         "it; give another --out, or move that folder")
    above = next((p for p in out.absolute().parents if p.exists() and not p.is_dir()), None)
    if above is not None:
        raise ValueError(f"--out {out}: {above} is a file, so no folder can be made there; give another folder")
    target = out.resolve()
    for pipeline in PIPELINES:
        if not (root / pipeline).is_file():
            continue
        base = (root / pipeline).parent
        for stage in stage_names(root, (pipeline,)):
            for path in stage_outputs(root, stage):
                owned = (base / path).resolve()
                if target == owned or owned in target.parents:
                    raise ValueError(f"--out {out} is inside {path}, an output of the `{stage}` stage, which DVC deletes "
                                     "and rewrites; give another folder (default reports/evaluate/<folder name>)")


QUARANTINE_STAGING = ".quarantine.partial"  # this run's quarantined copies until its results replace the last run's
QUARANTINE_MARK = ".written-by-polarcatalog-evaluate"  # in each quarantine/ a run wrote: only such a folder is replaced


@contextmanager
def claim(out: Path) -> Iterator[None]:
    """The output folder, locked for the whole run: a second `evaluate` to the same --out is refused at once (two runs
    finishing together could leave one's metrics.json beside the other's predictions.csv). A folder made here and
    left empty by a failed run is removed."""
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--out {out}: cannot make the folder ({err.strerror}); give another folder") from None
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"--out {out}: another `polarcatalog evaluate` is writing there now; wait for it to finish "
                             "or give another --out") from None
        shutil.rmtree(out / QUARANTINE_STAGING, ignore_errors=True)  # left by a killed run
        yield
    finally:
        shutil.rmtree(out / QUARANTINE_STAGING, ignore_errors=True)
        os.close(fd)
        if made and not any(out.iterdir()):
            out.rmdir()


def json_safe(value: Any) -> Any:
    """NaN and infinities as null: `json.dumps` writes them as bare `NaN`, which no strict JSON reader accepts."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_results(out: Path, pred: pd.DataFrame, metrics: dict[str, Any], quarantine: Quarantine | None = None) -> bool:
    """Both files or neither: each written beside its place, then renamed over it, so a full disk or a kill leaves
    the previous run's pair intact (`claim` keeps a second run out meanwhile). This run's quarantined copies replace
    the last run's `quarantine/`. True when a previous run's results were replaced."""
    out.mkdir(parents=True, exist_ok=True)
    replaced = (out / "predictions.csv").exists() or (out / "metrics.json").exists()
    final_quarantine = out / "quarantine"
    if quarantine is not None:
        for row in quarantine.rows:  # where the copy will be once this run's results are in place
            row["copy"] = str(final_quarantine / Path(row["copy"]).name)
    staged = {out / "predictions.csv": csv_safe(pred).to_csv(index=False).encode(),
              out / "metrics.json": (json.dumps(json_safe(metrics), indent=2, default=str, allow_nan=False) + "\n").encode()}
    temps = []
    try:
        for final, data in staged.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", dir=out)
            temps.append(Path(tmp))
            with open(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600: the results are as readable as any file written
    except OSError as err:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        why = "the disk is full" if err.errno == errno.ENOSPC else err.strerror or str(err)
        raise OSError(err.errno, f"could not write the results to {out} ({why}); nothing of this run was written, "
                                 "the previous results there are unchanged") from None
    if quarantine is not None:
        if (final_quarantine / QUARANTINE_MARK).is_file():  # a folder of the user's own is never deleted (check_out)
            shutil.rmtree(final_quarantine, ignore_errors=True)
        if quarantine.folder.is_dir():
            (quarantine.folder / QUARANTINE_MARK).write_text("quarantined copies of one `polarcatalog evaluate` run; "
                                                              "the next run to this --out replaces this folder\n")
            os.replace(quarantine.folder, final_quarantine)
    for tmp, final in zip(temps, staged):
        os.replace(tmp, final)
    return replaced


def _largest_side(root: Path, paths: pd.Series) -> int | None:
    """The longest side of the largest catalog anchor image, from the image headers (no pixels decoded)."""
    largest = 0
    for path in paths:
        try:
            with Image.open(root / path) as im:
                largest = max(largest, *im.size)
        except OSError:  # the anchor no longer loads: encoding it will say so, by name
            return None
    return largest or None


def evaluate_folder(params: Params, root: Path, folder: Path, labels: Path | None, out: Path,
                    where: str | None = None, anchor_scale: str | int = "auto", kgret: int | None = None,
                    config: dict[str, dict[str, Any]] | None = None) -> EvaluateResult:
    """`where`: a constraint in words (needs the graph stage's output), applied under graph.constraint.
    `anchor_scale`: auto (the folder's own subject size, measured label-free over the folder: transductive) | catalog
    (the embed stage's anchors) | pixels. Anchors at a new scale are encoded once into the feature cache.
    `kgret`: B, the kg stage's experiment on this folder: the first-stage top-k plus up to B species bridged by the
    knowledge graph, ordered by the re-ranker (the kg stage's answerer), with the budget-matched top-(k+B) beside it.
    `config`: the `configuration` that scored it (values and where each came from), recorded in metrics.json."""
    check_out(out, root, folder)
    with claim(out):
        return _evaluate_claimed(params, root, folder, labels, out, where, anchor_scale, kgret, config)


def _evaluate_claimed(params: Params, root: Path, folder: Path, labels: Path | None, out: Path, where: str | None,
                      anchor_scale: str | int, kgret: int | None, config: dict[str, dict[str, Any]] | None) -> EvaluateResult:
    ws = load_workspace(root / "data/features", root / "data/processed")
    rp = params.retrieval
    needed = query_encoders(rp.ensemble, rp.reranker)
    missing = [n for n in needed if n not in ws.anchor_f]
    if missing:
        raise ValueError(f"the catalog has no features for {missing}; add them to encoders.image and run `dvc repro embed`")
    listing = read_query_folder(folder, ws.species, labels)
    q = listing.rows
    memory = _memory_for(ws, params, root, where) if where else None
    triples = _kg_for(root, kgret)  # both checked before any image is encoded
    quarantine = Quarantine(out / QUARANTINE_STAGING)
    cache = root / "data/cache/features"
    e = params.encoders
    from polarcatalog.encoders.onnx_runtime import lean_memory  # heavy: torch, needed only from here on

    with lean_memory():  # a user's folder: ONNX Runtime frees its buffers after each batch (no arena; same vectors)
        encoders = {n: image_encoder(e.spec(n), e.device, e.runtime) for n in needed}  # built only on a cache miss
        view = query_view(params)
        q_views = [view, view.flipped()] if ws.has_flips else [view]
        feats, ok, stats = {}, np.ones(len(q), bool), {"queries": {}, "anchors": {}}  # feature cache hits / misses
        for i, (name, enc) in enumerate(encoders.items()):
            vecs, ok_n = encode_image_views(enc, q["path"].tolist(), cache, q_views, q["sha256"].tolist(),
                                            batch_size=params.encoders.batch_size,
                                            quarantine=quarantine if i == 0 else None, stats=stats["queries"],
                                            refuse_blank=True)
            feats[name] = average_flips(*vecs) if len(vecs) == 2 else vecs[0]  # the pipeline's rule for its own queries
            ok &= ok_n
        q = q[ok].reset_index(drop=True)
        feats = {n: f[ok] for n, f in feats.items()}
        scale = choose_anchor_scale(anchor_scale, q["path"].tolist(), ws.manifest.get("anchor_scale"), params.dataset.seed,
                                    params.encoders.anchor_scale_ratio, _largest_side(root, ws.anchors["path"])) \
            if len(q) else AnchorScale("catalog", ws.manifest.get("anchor_scale"), ws.manifest.get("anchor_scale"))
        if scale.adapted:
            anchor_view = Preprocess(params.encoders.content_box, scale.used)
            ws = ws.with_anchor_views(encode_anchor_views(encoders, [str(root / p) for p in ws.anchors["path"]], cache,
                                                          anchor_view, ws.has_flips, params.encoders.batch_size, stats["anchors"]))
    stats["bytes"] = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())  # what evaluate runs leave there
    retriever = Retriever.build(ws, rp)
    side = retriever.side(feats)
    centring = _centring(rp, len(q), side.by)
    bridged = None
    if triples is None:
        ranking = retriever.rank(side, max(rp.r, 10))
        species, s = ranking.species_ids, ranking.s
    else:
        species, s, bridged = _kgret(retriever, side, triples, params, kgret)
    states, constraint, keys = np.zeros(species.shape, np.int8), None, (s,)
    if memory is not None:
        species, s, states, keys = _constrain(memory, params, species, s)
        constraint = memory.constraint
    names = ws.species.set_index("species_id")["name"]
    gold = q["species_id"].fillna(-1).astype(int).to_numpy()
    ranks = gold_ranks(species, gold, keys)  # pessimistic ties, like every metric of the pipeline
    top = max(rp.k, 10) if kgret is None else max(rp.k + kgret, 10)  # --kgret: the whole evidence set, k + B
    pred = pd.DataFrame({
        "query_id": q["query_id"],
        "label": q["label"],
        "gold_species_id": q["species_id"],
        "gold_name": q["species_id"].map(names),
        "gold_rank": np.where(gold >= 0, ranks, np.nan),
        # the first max(k, 10) candidates (--kgret: the k + B of the evidence set); padding (a catalog smaller than
        # the list) dropped
        "predicted_ids": [r[: top][r[: top] >= 0].tolist() for r in species],
        "predicted_names": [[names.get(x, "?") for x in r[: top] if x >= 0] for r in species],
        # rounded in float64: a float32 rounded to 4 places printed as 0.15839999914169312
        "s": [r[: top][sp[: top] >= 0].astype(np.float64).round(4).tolist() for r, sp in zip(s, species)],
        "states": [r[: top][sp[: top] >= 0].tolist() for r, sp in zip(states, species)],  # memory: 1 has, -1 conflict, 0 unknown
    })
    labelled = gold >= 0
    metrics = None
    if q["label"].notna().any():
        unknown = q["label"].notna() & ~labelled
        scored = labelled.any()  # labels that all name no catalog species: nothing to score, no NaN to print
        metrics = {"labelled": summarize(ranks[labelled]) if scored else None,
                   "labelled_ci": folder_intervals(ranks[labelled], gold[labelled], params) if scored else None,
                   "anchor_scale": asdict(scale), "feature_cache": stats,
                   "unknown_labels": int(unknown.sum()), "unknown_label_names": sorted(set(q.loc[unknown, "label"])),
                   "unlabelled": int(q["label"].isna().sum()), "quarantined": len(quarantine.rows),
                   "retrieval": rp.model_dump(mode="json"), "catalog_species": int(len(ws.species))}

    if constraint:
        k = rp.k
        in_order = np.broadcast_to(np.arange(species.shape[1]), species.shape)  # lists are already re-ordered
        conflict = conflict_at_k(states == -1, in_order, species >= 0, k)
        found = labelled & (ranks <= species.shape[1])
        position = (species == gold[:, None]).argmax(1)  # where the gold sits (its rank may be pessimistic)
        gold_state = states[np.flatnonzero(found), position[found]]
        metrics = metrics or _unlabelled(q, scale, stats)
        metrics["constraint"] = {"text": constraint.text, "has": constraint.q_pos, "not_has": constraint.q_neg,
                                 "strength": constraint.strength, f"Conflict@{k} (memory)": conflict if len(q) else None,
                                 "gold contradicted by the memory": int((gold_state == -1).sum()),
                                 "concept quality": constraint.quality}
    if bridged is not None:  # which of the listed species the knowledge graph added (the rest: the first-stage top-k)
        pred["bridged_names"] = [[names.get(x, "?") for x in row] for row in bridged.added_ids]
    metrics = metrics or _unlabelled(q, scale, stats)
    metrics["folder"] = listing.report() | {"quarantined": quarantine.rows}
    if bridged is not None:
        metrics["kgret"] = bridged.summary(q["species_id"].fillna(-1).astype(int).to_numpy())
    metrics["query_centring"] = centring
    if config is not None:
        metrics["configuration"] = config
    metrics["code commit"] = code_state(root)
    replaced = write_results(out, pred, metrics, quarantine)
    return EvaluateResult(pred, metrics, quarantine.rows, constraint, scale, listing, replaced)


def _kg_for(root: Path, budget: int | None) -> pd.DataFrame | None:
    if budget is None:
        return None
    path = root / "data/processed/kg/triples.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"--kgret needs the knowledge graph, {path}: run `dvc repro kg` first")
    return read_triples(path)


@dataclass
class _Bridged:
    """+KGret on a user's folder: the evidence sets (catalog species ids) beside the budget-matched control's."""

    final: np.ndarray  # [Q, k+B] the first-stage top-k, then the bridged species (-1 padding)
    matched: np.ndarray  # [Q, k+B] the first-stage top-(k+B)
    k: int
    budget: int

    @property
    def added_ids(self) -> list[list[int]]:
        return [[int(x) for x in row[self.k:] if x >= 0] for row in self.final]

    def summary(self, gold: np.ndarray) -> dict[str, Any]:
        labelled = gold >= 0
        inside = lambda sets: float((sets[labelled] == gold[labelled, None]).any(1).mean()) if labelled.any() else None  # noqa: E731
        return {"B": self.budget, "evidence set": self.k + self.budget, "species added per query": float((self.final[:, self.k:] >= 0).sum(1).mean()),
                "completeness (labelled)": inside(self.final), f"budget-matched top-{self.k + self.budget} completeness "
                "(labelled)": inside(self.matched), "labelled": int(labelled.sum())}


def _kgret(retriever: Retriever, side: QuerySide, triples: pd.DataFrame, params: Params, budget: int
           ) -> tuple[np.ndarray, np.ndarray, _Bridged]:
    """(species ids in the answerer's order, their scores, the evidence sets): the kg stage's experiment."""
    rp, kp = params.retrieval, params.kg
    base, answer, ids = species_scores(retriever, side)
    links = species_links(triples, ids, kp.links)
    final = bridge.kgret(base, rp.k, links, budget, kp.hops).candidates
    ordered, s = answer_order(final, answer)
    as_ids = lambda idx: np.where(idx >= 0, ids[np.maximum(idx, 0)], -1)  # noqa: E731
    return as_ids(ordered), s, _Bridged(as_ids(final), as_ids(bridge.budget_matched(base, rp.k, budget)), rp.k, budget)


def _centring(rp: Any, n_queries: int, by: str) -> dict[str, Any]:
    """`by` (`QuerySide.by`) and a note on what it means for these scores. When the configured batch centring fell
    back (a folder under `retrieval.min_center_batch` images is too small to be its own statistics, so each query is
    scored on its own by `retrieval.small_batch_centre`), scores differ from a run on a larger folder: the user is told
    rather than left to wonder."""
    if by == "none":
        return {"by": by}
    how = {"reference": "centred and hubness-corrected by the statistics of the pipeline's dev sprites",
           "catalog": "centred by the catalog mean", "batch": None}[by]
    note = None
    if rp.query_centre == "batch" and by != "batch":
        other = "catalog" if by == "reference" else "reference"
        note = (f"{n_queries} image(s) < retrieval.min_center_batch = {rp.min_center_batch}: too few to centre the "
                f"queries by this folder's own mean, so each one is scored on its own, {how} "
                f"(retrieval.small_batch_centre: {by}; the `dev-query statistics` and `catalog-mean centring` rows "
                f"of reports/retrieval.md). For images far from sprites, compare with --set "
                f"retrieval.small_batch_centre={other}")
    elif by in ("reference", "catalog"):
        note = f"each query scored on its own, {how} (retrieval.query_centre: {by})" + (
            "; for images far from sprites, compare with --set retrieval.query_centre=catalog" if by == "reference" else "")
    return {"by": by, "note": note}


def _unlabelled(q: pd.DataFrame, scale: AnchorScale, stats: dict) -> dict:
    return {"labelled": None, "queries": len(q), "anchor_scale": asdict(scale), "feature_cache": stats}
