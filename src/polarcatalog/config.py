"""params.yaml, validated once: a bad key fails before any compute, naming the key and what is allowed.

Every stage notebook and the CLI call `load_params(params_file, overrides)`; nothing else reads params.yaml.
Compound values are parsed here, once, into the typed values the code consumes (`open_clip:ViT-B-32-quickgelu:openai` ->
`EncoderSpec`, `soft:0.03` -> `Strength`, `top_n:6` -> `ProposerSpec`), by the same parsers and registries the
runtime uses, so "fails before compute" holds for every key. This module sits above the library it configures:
the library never reads params; the stages (`polarcatalog.stages`, `polarcatalog.from_params`) hand it these typed values.
"""

from __future__ import annotations

import copy
import reprlib
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, ValidationError,
                      field_validator, model_validator)

from polarcatalog.data.domain import DOMAINS
from polarcatalog.encoders import EncoderSpec, has_text_tower, parse_encoder
from polarcatalog.encoders.registry import PACKAGED_IMAGE
from polarcatalog.memory.constraints import Strength
from polarcatalog.memory.propose import ProposerSpec
from polarcatalog.memory.verifiers import VERIFIERS


class ParamsError(ValueError):
    """Raised for any invalid params; the message names every offending key."""


def _name_in(registry: Iterable[str], what: str) -> AfterValidator:
    """A name that must be a key of `registry`: the same table the runtime looks it up in."""
    def check(name: str) -> str:
        if name not in registry:
            raise ValueError(f"unknown {what} {name!r}; allowed: {', '.join(registry)}")
        return name
    return AfterValidator(check)


# Compound values: parsed on the way in by the runtime's own parser, written back as their canonical text.
ImageEncoderName = Annotated[EncoderSpec, PlainValidator(lambda v: parse_encoder(v, "image")), PlainSerializer(str, return_type=str)]
TextEncoderName = Annotated[EncoderSpec, PlainValidator(lambda v: parse_encoder(v, "text")), PlainSerializer(str, return_type=str)]
StrengthSpec = Annotated[Strength, PlainValidator(Strength.parse), PlainSerializer(str, return_type=str)]
CoverageSpec = Annotated[ProposerSpec, PlainValidator(ProposerSpec.parse), PlainSerializer(str, return_type=str)]
def _existing_folder(path: str | None) -> str | None:
    if path is not None and not Path(path).is_dir():
        raise ValueError(f"{path} is not a folder (give one, absolute or relative to the repository root, or null)")
    return path


Folder = Annotated[str | None, AfterValidator(_existing_folder)]
# Names looked up in a registry at runtime.
DomainName = Annotated[str, _name_in(DOMAINS, "domain")]
ClassifierName = Annotated[str, _name_in(PACKAGED_IMAGE, "filter encoder")]  # an ImageNet classifier: a packaged EfficientNet
VerifierName = Annotated[str, _name_in(VERIFIERS, "verifier")]


class _Section(BaseModel):
    # extra="forbid": a typo in params.yaml must not be silently ignored. strict: a value of the wrong type is refused,
    # not coerced (`k: true` is not 1, `r: '100'` is not 100, `content_box: 'yes'` is not true); an int is a float.
    # allow_inf_nan=False: `.inf` / `.nan` are YAML floats, but no knob means them (κ = inf gives no edges and NaN in
    # the metrics). Every int has an upper bound too, so a typo fails here, not as a crash or a terabyte allocation.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class Dataset(_Section):
    domain: DomainName = "pokemon"
    species_limit: int | None = Field(None, ge=1, le=1_000_000)
    sprites_package: str = "pokesprite-images@2.7.0"
    sprites_sha256: str = Field(
        "28f6190c6b70deb9a1856654104baf36f84ef552996a10a44652b2ad76d2850d", pattern=r"^[0-9a-f]{64}$"
    )
    query_variants: list[Literal["regular", "shiny"]] = Field(default_factory=lambda: ["regular", "shiny"], min_length=1)
    seed: int = Field(0, ge=0, le=2**32 - 1)  # numpy's seed range


class Curate(_Section):
    pokeapi_dir: Folder = None
    size_bins_m: list[float] = Field(default_factory=lambda: [0.5, 1.0, 2.0, 4.0], min_length=4, max_length=4)
    colour_min_fraction: float = Field(0.12, gt=0.0, lt=1.0)
    colour_max_names: int = Field(3, ge=1, le=11)
    summarizer: Literal["extractive", "llm"] = "extractive"
    summary_max_words: int = Field(127, ge=10, le=2000)
    llm_model: str | None = None
    llm_max_new_tokens: int = Field(200, ge=1, le=4096)
    llm_batch_size: int = Field(4, ge=1, le=256)  # summarizer prompts per generate call
    chunk_words: int = Field(40, ge=5, le=1000)
    chunk_overlap: int = Field(10, ge=0, le=999)
    anchor_filter: Literal["prototype", "imagenet_bird", "vlm"] = "prototype"
    filter_encoder: ClassifierName = "efficientnet_lite0"
    prototype_z: float = Field(3.0, gt=0.0, le=10.0)
    bird_threshold: float = Field(0.1, gt=0.0, lt=1.0)
    vlm_model: str | None = None
    vlm_threshold: float = Field(0.5, gt=0.0, lt=1.0)
    # The prototype filter assumes targets are the majority: distractors stay well below half.
    distractor_fraction: float = Field(0.1, ge=0.0, lt=0.5)
    bird_eval_dir: Folder = None
    batch_size: int = Field(32, ge=1, le=4096)  # images per anchor-filter forward (every filter, the VLM's too)

    @field_validator("size_bins_m")
    @classmethod
    def _increasing(cls, v: list[float]) -> list[float]:
        if any(b <= a for a, b in zip(v, v[1:])) or v[0] <= 0:
            raise ValueError("must be 4 positive, strictly increasing heights in metres, e.g. [0.5, 1.0, 2.0, 4.0]")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Curate":
        if self.chunk_overlap >= self.chunk_words:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_words ({self.chunk_words})")
        if self.summarizer == "llm" and not self.llm_model:
            raise ValueError("summarizer 'llm' needs llm_model (a hub id or a local model folder)")
        if self.anchor_filter == "vlm" and not self.vlm_model:
            raise ValueError("anchor_filter 'vlm' needs vlm_model (a hub id or a local model folder)")
        return self


class Encoders(_Section):
    image: list[ImageEncoderName] = Field(default_factory=lambda: [parse_encoder("efficientnet_lite0"), parse_encoder("efficientnet_lite2")],
                                          min_length=1)
    text: TextEncoderName | None = parse_encoder("minilm", "text")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    runtime: Literal["auto", "onnxruntime", "torch"] = "auto"  # on CPU, auto: EfficientNets in ONNX Runtime, MiniLM in numpy
    batch_size: int = Field(64, ge=1, le=4096)
    content_box: bool = True
    anchor_scale: Literal["auto"] | int | None = "auto"
    anchor_scale_ratio: float = Field(1.0, gt=0.25, le=8.0)  # auto: anchors at this multiple of the queries' subject size
    compare_scale_ratios: list[Annotated[float, Field(gt=0.25, le=8.0)]] = Field(default_factory=list)  # also encoded: the scale lever
    flips: bool = True  # also encode every anchor's and query's mirror image; retrieval averages each with its flip
    local_grid: int = Field(0, ge=0, le=4)  # catalog images also encoded as grid x grid local views; 0 = none

    @field_validator("local_grid")
    @classmethod
    def _grid(cls, v: int) -> int:
        if v == 1:
            raise ValueError("local_grid 1 is the global view again; use 0 (no local views) or 2-4")
        return v

    @field_validator("image")
    @classmethod
    def _once(cls, v: list[EncoderSpec]) -> list[EncoderSpec]:
        if len(set(v)) != len(v):
            raise ValueError("each image encoder once")
        return v

    @property
    def names(self) -> list[str]:
        """The image encoders' names, as the embed stage's outputs are keyed."""
        return [spec.name for spec in self.image]

    def spec(self, name: str) -> EncoderSpec:
        """The parsed spec of the image encoder `name` (retrieval and graph refer to encoders by name)."""
        return next(spec for spec in self.image if spec.name == name)

    @field_validator("anchor_scale")
    @classmethod
    def _scale(cls, v: Any) -> Any:
        if isinstance(v, int) and not 8 <= v <= 4096:
            raise ValueError("anchor_scale in pixels must lie in [8, 4096] (or 'auto', or null)")
        return v


class Retrieval(_Section):
    ensemble: list[str] = Field(default_factory=lambda: ["efficientnet_lite0"], min_length=1)
    chunks: Literal["text", "multimodal", "anchors"] = "anchors"
    reranker: str | None = "efficientnet_lite2"
    r: int = Field(100, ge=1, le=100_000)
    k: int = Field(5, ge=1, le=1000)
    lam: float = Field(0.7, ge=0.0, le=1.0)
    center: bool = True
    # reference: each query alone, by the statistics (mean, CSLS neighbourhoods) of a fixed, label-free set of dev
    # queries (cross-fitted over reference_folds folds of the dev species when dev itself is scored); catalog: each
    # query alone, by the catalog mean; batch: by the scored queries' own mean (transductive)
    query_centre: Literal["batch", "catalog", "reference"] = "reference"
    reference_folds: int = Field(5, ge=2, le=20)
    min_center_batch: int = Field(32, ge=2, le=1_000_000)
    # query_centre batch with fewer queries than min_center_batch (a user's small folder): reference | catalog
    small_batch_centre: Literal["reference", "catalog"] = "reference"
    hubness: Literal["none", "csls"] = "none"  # csls: penalise catalog items that are near every query of the batch (transductive)
    hubness_k: int = Field(10, ge=1, le=1000)
    bridge_folds: int = Field(2, ge=2, le=20)
    bridge_alpha: float = Field(1.0, gt=0.0, le=1e6)
    index: Literal["flat", "ivf"] = "flat"
    ivf_nlist: int = Field(256, ge=1, le=65_536)
    seed: int = Field(0, ge=0, le=2**32 - 1)  # numpy's seed range
    # encoders whose features lose the colour-nuisance subspace (features/colour_nuisance.py; the embed stage encodes
    # their anchors in other colours to learn it), and how many of its directions
    colour_invariant: list[str] = Field(default_factory=list)
    colour_invariant_dim: int = Field(16, ge=1, le=256)

    @model_validator(mode="after")
    def _k_within_r(self) -> "Retrieval":
        if self.k > self.r:
            raise ValueError(f"k ({self.k}) cannot exceed r ({self.r}): the re-rank only sees the top-r chunks")
        return self


class Graph(_Section):
    verifier: VerifierName = "probe"
    zero_shot_encoder: str | None = None  # a CLIP-like member of encoders.image (open_clip:... or hf:...)
    vlm_model: str | None = None
    probe_folds: int = Field(2, ge=2, le=20)
    probe_c: float = Field(1.0, gt=0.0, le=1e6)
    probe_dim: int | None = Field(256, ge=2, le=4096)
    proposer: CoverageSpec = ProposerSpec("top_n", 12)
    kappa: float = Field(0.5, ge=0.0, le=10.0)
    templates: int = Field(3, ge=1, le=3)
    constraint: StrengthSpec = Strength("hard")
    adaptive_temperature: float = Field(0.02, gt=0.0, le=10.0)
    critical_completion: bool = True
    constraint_k: int = Field(3, ge=1, le=100)
    filter_pool: int = Field(10, ge=1, le=1000)  # the pre-context pool the filter rate is measured over (unconstrained top-n)
    seed: int = Field(0, ge=0, le=2**32 - 1)  # numpy's seed range

    @model_validator(mode="after")
    def _vlm(self) -> "Graph":
        if self.verifier == "vlm" and not self.vlm_model:
            raise ValueError("verifier 'vlm' needs vlm_model (a hub id or a local Qwen2-VL-class folder)")
        return self

    @model_validator(mode="after")
    def _pool_holds_context(self) -> "Graph":
        if self.filter_pool < self.constraint_k:
            raise ValueError(f"filter_pool ({self.filter_pool}) must be >= constraint_k ({self.constraint_k}): the filter "
                             "rate asks which contradictory candidates of the pool stay out of the top-k context")
        return self


class Eval(_Section):
    """The results protocol: which species choose (dev) and which report (test), and how uncertainty is measured."""

    dev_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    bootstrap: int = Field(1000, ge=10, le=100_000)  # species-level paired bootstrap resamples
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    seed: int = Field(0, ge=0, le=2**32 - 1)  # numpy's seed range


PROBE_LEVERS = ("probe_folds", "probe_c", "probe_dim")


def probe_lever(spec: str) -> dict[str, Any]:
    """`probe_folds=5` -> {"probe_folds": 5}, checked against the graph section's own bounds (`null` = no PCA)."""
    key, eq, value = spec.partition("=")
    if not eq or key not in PROBE_LEVERS:
        raise ValueError(f"memory lever {spec!r}: write <knob>=<value> with a knob of {', '.join(PROBE_LEVERS)}")
    parsed = None if value in ("null", "none") else yaml.safe_load(value)
    try:
        Graph(**{key: parsed})
    except ValidationError as err:
        raise ValueError(f"memory lever {spec!r}: {err.errors()[0]['msg']}") from None
    return {key: parsed}


class Ablations(_Section):
    lam: list[float] = Field(default_factory=lambda: [round(0.1 * i, 1) for i in range(11)], min_length=1)
    top_k: list[int] = Field(default_factory=lambda: [1, 3, 5, 10, 15], min_length=1)
    constraint: list[StrengthSpec] = Field(default_factory=lambda: [Strength.parse(s) for s in ("none", "soft:0.01", "soft:0.03",
                                                                                                "soft:0.1", "adaptive", "hard")], min_length=1)
    coverage: list[CoverageSpec] = Field(default_factory=lambda: [ProposerSpec.parse(s) for s in (
        "random_n:6", "top_n:3", "top_n:6", "multi_prompt:6", "top_n:12", "multi_prompt:12", "top_n:24", "all")], min_length=1)
    bridge: list[int] = Field(default_factory=lambda: [0, 1, 2, 4, 8], min_length=1)  # B of +KGret (kg stage figure too)
    memory_quality_steps: int = Field(6, ge=2, le=21)  # points per path of the memory-quality curve, configured to oracle
    kappa_sensitivity: list[Annotated[float, Field(ge=0.0, le=10.0)]] = Field(default_factory=lambda: [0.0, 0.25, 0.5, 1.0],
                                                                               min_length=1)  # dev only: κ is a priori
    # dev only: the probe verifier refitted with one knob changed (`probe_folds=5`), the memory rebuilt from it
    memory_levers: list[str] = Field(default_factory=lambda: ["probe_folds=5", "probe_c=0.1", "probe_dim=32", "probe_dim=128",
                                                                       "probe_dim=256"])

    @field_validator("memory_levers")
    @classmethod
    def _probe_knobs(cls, v: list[str]) -> list[str]:
        for spec in v:
            probe_lever(spec)
        return v

    @field_validator("lam")
    @classmethod
    def _unit(cls, v: list[float]) -> list[float]:
        if any(not 0.0 <= x <= 1.0 for x in v):
            raise ValueError("every lambda must lie in [0, 1]")
        return v

    @field_validator("top_k")
    @classmethod
    def _pos(cls, v: list[int]) -> list[int]:
        if any(x < 1 for x in v):
            raise ValueError("every k must be >= 1")
        return v

    @field_validator("bridge")
    @classmethod
    def _budgets(cls, v: list[int]) -> list[int]:
        if any(b < 0 or b > 50 for b in v) or v != sorted(set(v)):
            raise ValueError("bridge budgets: distinct values in [0, 50], increasing")
        return v


LINK_KINDS = ("family", "egg_group", "typing", "ability", "type", "generation", "genus", "shape", "habitat")


class Kg(_Section):
    """The knowledge graph of the graph-RAG paper: its fetched source, and how +KGret bridges (§3.1, §3.3)."""

    package: str = "@pkmn/dex@0.10.11"  # evolution links, egg groups, types, abilities, generation for every species
    sha256: str = Field("ca4c1912805c295ae90cd5f2d0f465cceec1093757af44469bde9788681ad55b", pattern=r"^[0-9a-f]{64}$")
    # the species table a one-off `node` run exports from the package at fetch time (no JavaScript at pipeline time)
    export_sha256: str = Field(
        "1b2bc55abaf665e7516422eee08b9b4861eaff66070f40dc30a749ff4c675051", pattern=r"^[0-9a-f]{64}$"
    )
    extractor: Literal["rules", "llm"] = "rules"  # article triples: rule-based, or a causal LM's JSON (GPU profile)
    llm_model: str | None = None  # hub id or local folder of the causal LM, for extractor llm
    llm_max_new_tokens: int = Field(256, ge=1, le=4096)  # one species' JSON triples
    llm_batch_size: int = Field(4, ge=1, le=256)  # articles per generate call
    bridge: int = Field(2, ge=0, le=50)  # B: bridged species added after the top-k (the paper's two chunks)
    hops: Literal[1, 2] = 1
    # two species are linked when they share an entity of every kind of one rule (`typing+ability`: the same type
    # pair and an ability)
    links: list[str] = Field(default_factory=lambda: ["family", "egg_group", "typing+ability"], min_length=1)

    @model_validator(mode="after")
    def _llm_named(self) -> "Kg":
        if self.extractor == "llm" and not self.llm_model:
            raise ValueError("kg.extractor llm needs kg.llm_model (a causal LM: hub id or local folder)")
        return self

    @field_validator("links")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        for rule in v:
            bad = [k for k in rule.split("+") if k not in LINK_KINDS]
            if bad:
                raise ValueError(f"link rule {rule!r}: unknown kind {bad[0]!r}; allowed kinds: {', '.join(LINK_KINDS)} "
                                 "(join several with +)")
        return v


class Birds(_Section):
    """The bird pipeline (`birds/dvc.yaml`, VR-RAG's domain): AviList 2025's catalog, its taxonomy graph, text-query
    retrieval from CUB's descriptors, the anchor filter on clip-art birds, the five benchmarks' split lists."""

    # reference data, beside the repository by default: cub/ (attributes, descriptors_cub.json), vrrag_splits/
    # (the test split lists), openclipart_birds/ (clip-art birds for the anchor filter)
    reference_dir: str = "../shared/data"
    species_limit: int | None = Field(None, ge=1, le=1_000_000)  # null = all 11,131 AviList species; N = the first N (smoke runs)
    articles: Literal["taxonomy", "wikipedia"] = "taxonomy"  # taxonomy: the checklist's sentence (offline) | wikipedia
    wikipedia_api: str = "https://en.wikipedia.org/w/api.php"
    wikipedia_interval_s: float = Field(1.0, ge=0.0, le=3600.0)  # at least this long between two API requests
    benchmarks: list[Literal["cub", "birdsnap", "nabirds", "inat", "indian"]] = Field(
        default_factory=lambda: ["cub", "birdsnap", "nabirds", "inat", "indian"], min_length=1)
    image_root: Folder = None  # the benchmarks' photos: <image_root>/<benchmark>/<Class>/<file>.jpg (counted when set)


class Reader(_Section):
    """VR-RAG's recognition step (Table 3): an MLLM reads the query image with the top-k summaries and names the
    species. No model = no reader: the answerer is the visual re-ranker (Eq. 2), as the reports say."""

    model: str | None = None  # Qwen2.5-VL-class: hub id or local folder
    facts: bool = False  # +KG: the knowledge graph's facts about the candidates enter the prompt (at most eight)
    batch_size: int = Field(4, ge=1, le=256)
    max_new_tokens: int = Field(24, ge=1, le=512)
    fuzzy_threshold: float = Field(0.85, gt=0.0, le=1.0)  # answer -> species: exact, alias, then fuzzy at this ratio


class Selection(_Section):
    """The search spaces of the selection pipeline (`selection/dvc.yaml`): every value is scored on dev only."""

    lam: list[Annotated[float, Field(ge=0.0, le=1.0)]] = Field(default_factory=lambda: [0.5, 0.6, 0.7], min_length=1)
    colour_invariant_dim: list[Annotated[int, Field(ge=0, le=256)]] = Field(default_factory=lambda: [0, 4, 16, 64], min_length=1)
    hubness_k: list[Annotated[int, Field(ge=1, le=1000)]] = Field(default_factory=lambda: [5, 10, 20, 40], min_length=1)
    anchor_scale_ratio: list[Annotated[float, Field(gt=0.25, le=8.0)]] = Field(default_factory=lambda: [1.0, 1.6, 1.9, 2.6],
                                                                                  min_length=1)
    winners_curse_splits: int = Field(50, ge=2, le=1000)  # dev halvings that measure a winner's optimism


class Tracking(_Section):
    experiment: str = Field("polarcatalog", min_length=1)
    uri: str | None = Field(None, min_length=1)  # a tracking server (team mode); null = sqlite:///<repo>/mlflow.db
    log_notebook: bool = True


class Params(_Section):
    dataset: Dataset = Field(default_factory=Dataset)
    curate: Curate = Field(default_factory=Curate)
    encoders: Encoders = Field(default_factory=Encoders)
    retrieval: Retrieval = Field(default_factory=Retrieval)
    graph: Graph = Field(default_factory=Graph)
    ablations: Ablations = Field(default_factory=Ablations)
    eval: Eval = Field(default_factory=Eval)
    kg: Kg = Field(default_factory=Kg)
    reader: Reader = Field(default_factory=Reader)
    birds: Birds = Field(default_factory=Birds)
    selection: Selection = Field(default_factory=Selection)
    tracking: Tracking = Field(default_factory=Tracking)

    @model_validator(mode="after")
    def _encoders_embedded(self) -> "Params":
        r = self.retrieval
        missing = [n for n in [*r.ensemble, r.reranker] if n and n not in self.encoders.names]
        if missing:
            raise ValueError(f"retrieval uses {missing} but encoders.image ({self.encoders.names}) does not embed them; "
                             "add them to encoders.image")
        unknown = [n for n in r.colour_invariant if n not in self.encoders.names]
        if unknown:
            raise ValueError(f"retrieval.colour_invariant names {unknown}, which encoders.image ({self.encoders.names}) "
                             "does not embed; name members of encoders.image")
        limit = self.dataset.species_limit
        if r.colour_invariant and limit and 3 * limit < r.colour_invariant_dim:  # 3 recoloured views per anchor, >= 1 anchor per species
            raise ValueError(f"retrieval.colour_invariant_dim {r.colour_invariant_dim} needs at least "
                             f"{-(-r.colour_invariant_dim // 3)} catalog species (3 recoloured views each), but "
                             f"dataset.species_limit is {limit}: lower retrieval.colour_invariant_dim, or set "
                             "retrieval.colour_invariant: [] for a smoke run")
        return self

    @model_validator(mode="after")
    def _zero_shot_space(self) -> "Params":
        g = self.graph
        if g.verifier != "zero_shot":
            return self
        name = g.zero_shot_encoder
        if not name or name not in self.encoders.names:
            raise ValueError(f"graph.verifier zero_shot needs graph.zero_shot_encoder set to one of encoders.image "
                             f"({self.encoders.names}) with a text tower, got {name!r}")
        if not has_text_tower(name):  # the same question the verifier asks at runtime
            raise ValueError(f"graph.zero_shot_encoder {name!r} has no text tower (no aligned space); use an open_clip:... "
                             "or CLIP-like hf:... encoder, or graph.verifier probe")
        return self

    @model_validator(mode="after")
    def _local_views_embedded(self) -> "Params":
        users = (["graph.proposer"] if self.graph.proposer.strategy == "global_local" else []) + \
            [f"ablations.coverage ({c})" for c in self.ablations.coverage if c.strategy == "global_local"]
        if users and self.encoders.local_grid == 0:
            raise ValueError(f"{', '.join(users)} propose from local views but encoders.local_grid is 0; "
                             "set encoders.local_grid to 2 (or drop the global_local proposer)")
        if not users and self.encoders.local_grid and self.graph.verifier != "vlm":
            # local views are the embed stage's largest cost (grid² forwards per anchor and encoder): only when read
            raise ValueError(f"encoders.local_grid {self.encoders.local_grid} encodes local views that no stage reads "
                             "(no global_local in graph.proposer or ablations.coverage, graph.verifier is not vlm); "
                             "set encoders.local_grid to 0, or add global_local to ablations.coverage")
        return self

    def section(self, name: str) -> dict[str, Any]:
        """A section as plain JSON-ready values (typed values as their canonical text)."""
        return getattr(self, name).model_dump(mode="json")


SECTIONS = tuple(Params.model_fields)


def _allowed(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed at `loc` in the schema, for 'unknown key' messages."""
    model: type[BaseModel] = Params
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
            return []
        model = field.annotation
    return sorted(model.model_fields)


def _format(err: ValidationError, source: str, overridden: Iterable[str] = ()) -> str:
    """One line per bad key; a key an override set (`--set`, a notebook's `overrides`) says so, not blaming the file."""
    overridden = tuple(overridden)
    lines = [f"invalid params in {source}" + (f" with overrides {', '.join(overridden)}" if overridden else "") + ":"]
    for e in err.errors():
        loc = tuple(x for x in e["loc"])
        key = ".".join(str(x) for x in loc) or "(top level)"
        origin = next((f" [from the override {o}]" for o in overridden if key == o or key.startswith(o + ".")
                       or o.startswith(key + ".")), "")
        if e["type"] == "extra_forbidden":
            lines.append(f"  - {key}: unknown key; allowed keys here: {', '.join(_allowed(loc))}{origin}")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            # a check across keys gets the whole section (or all params) as its input: the message names the values
            got = "" if isinstance(e.get("input"), dict) else f" (got {reprlib.repr(e.get('input'))})"  # bounded
            if "'None'" in msg:  # `--set retrieval.reranker=None`: the string 'None', not YAML's null
                msg += " ('None' is text here; YAML's empty value is null)"
            lines.append(f"  - {key}: {msg}{got}{origin}")
    return "\n".join(lines)


def parse_override(item: str) -> tuple[str, Any]:
    """`retrieval.lam=0.5` → ("retrieval.lam", 0.5): the value read as YAML, with the params file's own rules (no
    aliases, no duplicate keys)."""
    key, eq, text = item.partition("=")
    if not eq or not key.strip() or any(not part for part in key.strip().split(".")):
        raise ParamsError(f"--set {item!r}: expected <section>.<key>=<value>, e.g. --set retrieval.lam=0.5")
    if not text.strip():  # YAML reads an empty value as null: `reranker=` (an unset shell variable) turned it off
        raise ParamsError(f"--set {item!r}: the value is empty; give one, or `{key.strip()}=null` to unset it")
    try:
        return key.strip(), yaml.load(text, Loader=_ParamsLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise ParamsError(f"--set {item!r}: the value is not YAML ({str(exc).splitlines()[0]})") from None


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """Every `--set`, each key once: a key given twice (or inside a section also set whole) would otherwise be
    decided by the order of the options, the last one winning without a word."""
    out: dict[str, Any] = {}
    for item in items:
        key, value = parse_override(item)
        clash = next((k for k in out if k == key or k.startswith(f"{key}.") or key.startswith(f"{k}.")), None)
        if clash is not None:
            what = "is set twice" if clash == key else f"overlaps --set {clash}"
            raise ParamsError(f"--set {key} {what}: give each key once")
        out[key] = value
    return out


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Merge dotted-key overrides (`{"dataset.species_limit": 20}`) or nested dicts onto raw params."""
    out = copy.deepcopy(raw)
    for key, value in (overrides or {}).items():
        if isinstance(value, dict) and "." not in key:
            out.setdefault(key, {})
            out[key] = {**(out[key] or {}), **value}
            continue
        parts = key.split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ParamsError(f"override {key!r}: {p!r} is not a section")
        node[parts[-1]] = value
    return out


def validate(raw: dict[str, Any], source: str = "params", overridden: Iterable[str] = ()) -> Params:
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: expected a mapping of sections {list(SECTIONS)}, got {type(raw).__name__}")
    try:
        return Params.model_validate(raw)
    except ValidationError as err:
        raise ParamsError(_format(err, source, overridden)) from None


def load_params(path: str | Path = "params.yaml", overrides: dict[str, Any] | None = None) -> Params:
    """Read, merge overrides, validate. Raises ParamsError naming each bad key."""
    return validate(apply_overrides(read_params_yaml(path), overrides), str(path), overrides or ())


def read_params_yaml(path: str | Path) -> dict[str, Any]:
    """A params (or profile) file as plain YAML data, read with the params rules (no aliases, no duplicate keys)."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"params file not found: {path.resolve()} (run from the repository root)")
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_ParamsLoader)  # noqa: S506 (a SafeLoader subclass)
    except UnicodeDecodeError as exc:
        raise ParamsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path}: not valid params YAML: {exc}") from None
    if raw is None:
        raise ParamsError(f"{path}: no params in it (empty or only comments); restore it with `git checkout {path}`")
    return raw


class _ParamsLoader(yaml.SafeLoader):
    """yaml.SafeLoader without the two things a params file never needs and that let a small file mislead:
    aliases (`*a`: nine levels of nine aliases expand a 1 KB file without bound) and duplicate keys (YAML keeps
    the last silently, so a second `retrieval:` block holding only `lam` would reset every other retrieval key)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"line {event.start_mark.line + 1}: aliases (*{event.anchor}) are not allowed in params; "
                                 "write the value out")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.YAMLError(f"line {key_node.start_mark.line + 1}: key {key!r} appears twice in one mapping "
                                     f"(first on line {seen[key]}); YAML would keep only the last")
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"curate": {"chunk_words": 40}}` -> `{"curate.chunk_words": 40}` (MLflow params)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out
