"""Run profiles: a named params overlay (`params.<name>.yaml`, only the keys that differ from params.yaml) and the
pipeline it runs. `make repro PROFILE=<name>` calls `polarcatalog profile <name>`, which validates params.yaml with
the overlay before any compute, then runs

- `dvc repro <pipeline>` when the overlay changes nothing (birds-offline: the bird pipeline as configured), or
- `dvc exp run <pipeline> -n <name> -S key=value ...` otherwise: a DVC experiment, so the profile's params, metrics
  and plots sit beside the default's in `dvc exp show` and in MLflow (each stage run is tagged with the experiment).
  As with any `dvc exp run`, params.yaml in the workspace then holds the profile's values; `git checkout params.yaml`
  returns to the default. A rerun on the same commit is named `<name>-2`, `<name>-3`, ... (`experiment_name`).

A profile that claims the papers' setup (`Profile.paper_setup`) is held to it: every knob of `PAPER_SETUP` (the settings
the CPU default tunes away from the papers) takes the paper's value, or the overlay's `departures:` section names the
key with its reason. An unnamed departure fails validation, so a knob added to the CPU default later cannot slip into
"the papers' setup" unannounced. `departures:` is the profile's metadata, never a param.
"""

from __future__ import annotations

import itertools
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polarcatalog.config import Params, ParamsError, flatten, load_params, read_params_yaml
from polarcatalog.data import bird_reference


@dataclass(frozen=True)
class Profile:
    pipeline: str  # the dvc.yaml it runs
    overlay: str  # the params overlay file
    about: str
    paper_setup: bool = False  # held to PAPER_SETUP (every other value named in its `departures:`)


@dataclass(frozen=True)
class PaperValue:
    """A knob's value in the papers' setup, where the paper says so, and the pipelines that read the knob."""

    value: Any
    source: str
    pipelines: tuple[str, ...] = ("dvc.yaml",)


BOTH = ("dvc.yaml", "birds/dvc.yaml")
# Visual RAG (VR-RAG) describes images going to its encoders as they are: no crop, rescale, flip, centring or hubness
# step; these knobs are the CPU default's, chosen on dev for the embedded EfficientNets.
PAPER_SETUP: dict[str, PaperValue] = {
    "encoders.anchor_scale": PaperValue(None, "VR-RAG §5.1: each image at the encoder's own input resolution"),
    "encoders.content_box": PaperValue(False, "VR-RAG: the whole image reaches the encoder"),
    "encoders.flips": PaperValue(False, "VR-RAG: no test-time augmentation"),
    "retrieval.center": PaperValue(False, "VR-RAG §5.1: cosine similarity of the encoders' own vectors"),
    "retrieval.hubness": PaperValue("none", "VR-RAG §5.1: no hubness correction"),
    "retrieval.colour_invariant": PaperValue([], "VR-RAG: no feature projection"),
    "retrieval.chunks": PaperValue("multimodal", "VR-RAG Eq. 1: text and anchor vectors averaged"),
    "retrieval.r": PaperValue(100, "VR-RAG §5: r = 100"),
    "retrieval.k": PaperValue(5, "VR-RAG §5: k = 5"),
    "retrieval.lam": PaperValue(0.7, "VR-RAG §5: λ = 0.7"),
    "curate.summarizer": PaperValue("llm", "VR-RAG §3: each article distilled by an LLM", BOTH),
    "curate.anchor_filter": PaperValue("vlm", "VR-RAG §3: a VLM's yes/no answer keeps an anchor", BOTH),
    "graph.verifier": PaperValue("vlm", "PolarMem: the VLM's P(Yes) per concept"),
}


PROFILES: dict[str, Profile] = {
    "birds-offline": Profile("birds/dvc.yaml", "params.birds-offline.yaml",
                             "the bird pipeline without photos or network (runs on a laptop in minutes)"),
    "gpu-pokemon": Profile("dvc.yaml", "params.gpu-pokemon.yaml",
                           "the papers' models on the Pokémon catalog (CUDA GPU, model weights from the hub or local paths)",
                           paper_setup=True),
    "gpu-birds": Profile("birds/dvc.yaml", "params.gpu-birds.yaml",
                         "the bird pipeline with Wikipedia articles, the LLM summarizer and the VLM filter (GPU, network)"),
}


def get(name: str) -> Profile:
    if name not in PROFILES:
        raise ParamsError(f"unknown profile {name!r}; allowed: {', '.join(PROFILES)}")
    return PROFILES[name]


def _overlay_file(name: str, root: Path) -> dict[str, Any]:
    return read_params_yaml(root / get(name).overlay)


def overlay(name: str, root: Path = Path(".")) -> dict[str, Any]:
    """The profile's keys, dotted (its `departures:` section is metadata, not params)."""
    return flatten({k: v for k, v in _overlay_file(name, root).items() if k != "departures"})


def departures(name: str, root: Path = Path(".")) -> dict[str, str]:
    """The keys the profile names as departing from the papers' setup, with its reason for each."""
    named = _overlay_file(name, root).get("departures") or {}
    if not isinstance(named, dict) or not all(isinstance(v, str) and v.strip() for v in named.values()):
        raise ParamsError(f"profile {name} ({get(name).overlay}): departures must map each key to its reason, e.g. "
                          "`encoders.flips: kept: sprites face both ways`")
    return {str(k): v for k, v in named.items()}


@dataclass(frozen=True)
class KnobStatus:
    key: str
    paper: Any
    value: Any
    source: str
    reason: str | None  # the profile's reason, for a departure it names

    @property
    def state(self) -> str:
        if self.value == self.paper:
            return "paper"
        return "departure" if self.reason else "UNNAMED departure"


def paper_knobs(name: str, params: Params, root: Path = Path(".")) -> list[KnobStatus]:
    """Each PAPER_SETUP knob the profile's pipeline reads: the paper's value, the profile's, and its reason."""
    named, mine = departures(name, root), flatten(params.model_dump(mode="json"))
    unknown = sorted(set(named) - set(PAPER_SETUP))
    if unknown:
        raise ParamsError(f"profile {name} ({get(name).overlay}): departures {unknown} are not knobs of the papers' "
                          f"setup; allowed: {', '.join(PAPER_SETUP)}")
    return [KnobStatus(k, pv.value, mine[k], pv.source, named.get(k))
            for k, pv in PAPER_SETUP.items() if get(name).pipeline in pv.pipelines]


def knobs_text(knobs: list[KnobStatus]) -> str:
    """The table `check-params --profile` prints: where the profile stands against the papers' setup."""
    rows = [f"  {k.key:<28} {k.state:<18} {_show(k.value):<12} (paper: {_show(k.paper)}; {k.source})"
            + (f"\n  {'':<28} reason: {k.reason}" if k.reason and k.state != "paper" else "") for k in knobs]
    return "against the papers' setup:\n" + "\n".join(rows)


def _show(value: Any) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def resolve(name: str, root: Path = Path(".")) -> tuple[Params, dict[str, Any]]:
    """params.yaml with the overlay, validated (a bad key fails here, naming the profile file), the input data the
    profile's pipeline reads present; and the keys whose value differs from params.yaml."""
    keys = overlay(name, root)
    try:
        params = load_params(root / "params.yaml", keys)
    except ParamsError as err:
        raise ParamsError(f"profile {name} ({get(name).overlay}): {err}") from None
    if get(name).pipeline == "birds/dvc.yaml":  # its reference data, checked before DVC deletes any output to rerun
        reference = Path(params.birds.reference_dir)
        absent = bird_reference.missing(reference if reference.is_absolute() else root / reference)
        if absent:
            raise ParamsError(f"profile {name} ({get(name).overlay}): {bird_reference.explain(params.birds.reference_dir, absent)}")
    if get(name).paper_setup:
        unnamed = [k.key for k in paper_knobs(name, params, root) if k.state == "UNNAMED departure"]
        if unnamed:
            raise ParamsError(f"profile {name} ({get(name).overlay}) claims the papers' setup, but {', '.join(unnamed)} "
                              "differ from the paper's values without a reason: set the paper's value, or name the key "
                              "under `departures:` with its reason (`polarcatalog check-params --profile` lists them)")
    base = flatten(load_params(root / "params.yaml").model_dump(mode="json"))
    mine = flatten(params.model_dump(mode="json"))
    return params, {k: mine[k] for k in keys if mine[k] != base.get(k)}


def hydra_value(value: Any) -> str:
    """A value in the override grammar `dvc exp run -S` parses (Hydra's): strings double-quoted, lists bracketed."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = str(value)
    if '"' in text or "\\" in text:
        raise ParamsError(f"profile value {text!r}: quotes and backslashes cannot pass through `dvc exp run -S`")
    return f'"{text}"'


def machine_problem(params: Params) -> str | None:
    """Why this machine cannot run these params (a requested GPU torch cannot see), or None."""
    if params.encoders.device != "cuda":
        return None
    from polarcatalog.device import cuda_problem  # heavy: torch

    return cuda_problem()


def command(name: str, root: Path = Path(".")) -> list[str]:
    """The DVC command the profile runs (validated first)."""
    prof = get(name)
    _, changed = resolve(name, root)
    if not changed:
        return ["dvc", "repro", prof.pipeline]
    sets = [a for k, v in changed.items() for a in ("-S", f"{k}={hydra_value(v)}")]
    return ["dvc", "exp", "run", prof.pipeline, "-n", experiment_name(name, root), *sets]


def experiment_name(name: str, root: Path = Path(".")) -> str:
    """`name`, or for a rerun on the same commit the next free `name-2`, `name-3`, ...: DVC refuses a second
    experiment of one name on one commit, and its `-f` would also force every stage to rerun (hours on the GPU
    profile), where a rerun under a new name reruns only what changed. Outside a git repository: `name`."""
    git = lambda *args: subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout  # noqa: E731
    try:
        head = git("rev-parse", "HEAD").strip()
        taken = {ref.rsplit("/", 1)[-1] for ref in git("for-each-ref", "--format=%(refname)", f"refs/exps/{head[:2]}/{head[2:]}/").split()}
    except (OSError, subprocess.CalledProcessError):
        return name
    return next(n for n in itertools.chain([name], (f"{name}-{i}" for i in itertools.count(2))) if n not in taken)
