"""Tiny random models of every class the GPU profiles use, saved to disk the way a user points a profile at local
weights: open_clip releases as `local-dir:` folders (OpenAI-style CLIP with QuickGELU; a SigLIP-style model with its
own Hugging Face tokenizer and 0.5 mean/std), an open_clip architecture from the project's
`models/open_clip_configs/` with a checkpoint file, DINOv2 and Qwen2.5-VL / Qwen2 folders for transformers.

`rehearsal_overlay` turns a GPU profile's overlay into the same profile on these models, on the CPU: every other key
(the papers' setup, the departures) stays as the profile has it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import torch

from tests.conftest import TINY_CLIP
from tests.tiny_models import save_tiny_causal_lm, save_tiny_qwen25_vl

PROJECT_ARCH = "pc-rehearsal-openclip"  # the name models/open_clip_configs/ defines in the rehearsal's repository
OPENAI_PREPROCESS = {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711]}


def _save_open_clip(model: torch.nn.Module, path: Path) -> None:
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))


def _clip_release(folder: Path) -> str:
    """OpenAI-style: QuickGELU towers, OpenAI's mean/std, weights beside the config."""
    from open_clip.model import CLIP

    cfg = {**copy.deepcopy(TINY_CLIP), "quick_gelu": True}
    folder.mkdir(parents=True)
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": cfg, "preprocess_cfg": OPENAI_PREPROCESS}))
    torch.manual_seed(1)
    _save_open_clip(CLIP(cfg["embed_dim"], cfg["vision_cfg"], cfg["text_cfg"], quick_gelu=True), folder / "open_clip_model.safetensors")
    return f"open_clip:local-dir:{folder}"


def _siglip_release(folder: Path) -> str:
    """SigLIP-style: a custom text tower with its own Hugging Face tokenizer in the folder (no hub), a logit bias,
    0.5 mean/std and squash resizing."""
    from open_clip.model import CustomTextCLIP
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    folder.mkdir(parents=True)
    words = ["<pad>", "<unk>", "</s>", *"a an the photo of pokemon bird red blue green yellow small large wings tail fire water".split()]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="</s>").save_pretrained(folder)
    cfg = {"embed_dim": 16, "init_logit_bias": -10, "custom_text": True,
           "vision_cfg": {"image_size": 64, "layers": 2, "width": 32, "head_width": 16, "patch_size": 16, "no_ln_pre": True,
                          "final_ln_after_pool": True, "pool_type": "avg"},
           "text_cfg": {"context_length": 16, "vocab_size": len(words), "hf_tokenizer_name": "in-folder",
                        "tokenizer_kwargs": {"clean": "canonicalize"}, "width": 32, "heads": 2, "layers": 2,
                        "no_causal_mask": True, "proj_bias": True, "pool_type": "last", "norm_kwargs": {"eps": 1e-6}}}
    pre = {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bicubic", "resize_mode": "squash"}
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": cfg, "preprocess_cfg": pre}))
    torch.manual_seed(2)
    _save_open_clip(CustomTextCLIP(cfg["embed_dim"], cfg["vision_cfg"], cfg["text_cfg"], init_logit_bias=-10),
                    folder / "open_clip_model.safetensors")
    return f"open_clip:local-dir:{folder}"


def _project_architecture(repo: Path, weights: Path) -> str:
    """An architecture defined in the repository's models/open_clip_configs/, its weights a checkpoint file."""
    from open_clip.model import CLIP

    configs = repo / "models" / "open_clip_configs"
    configs.mkdir(parents=True, exist_ok=True)
    (configs / f"{PROJECT_ARCH}.json").write_text(json.dumps(TINY_CLIP))
    torch.manual_seed(3)
    _save_open_clip(CLIP(TINY_CLIP["embed_dim"], TINY_CLIP["vision_cfg"], TINY_CLIP["text_cfg"]), weights)
    return f"open_clip:{PROJECT_ARCH}:{weights}"


def _dinov2(folder: Path) -> str:
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    torch.manual_seed(4)
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, image_size=56)).save_pretrained(folder)
    BitImageProcessor(do_center_crop=False, size={"height": 56, "width": 56}, image_mean=[0.485, 0.456, 0.406],
                      image_std=[0.229, 0.224, 0.225]).save_pretrained(folder)
    return f"hf:{folder}"


def save_rehearsal_models(folder: Path, repo: Path) -> dict[str, str]:
    """Every model a GPU profile names, by role -> the name the profile's params take for its tiny stand-in."""
    return {"clip": _clip_release(folder / "clip-release"),
            "openclip": _project_architecture(repo, folder / "openclip.safetensors"),
            "siglip": _siglip_release(folder / "siglip-release"),
            "dinov2": _dinov2(folder / "dinov2"),
            "vlm": str(save_tiny_qwen25_vl(folder / "qwen25-vl")),
            "llm": str(save_tiny_causal_lm(folder / "qwen2-lm"))}


def rehearsal_overlay(overlay: dict[str, Any], models: dict[str, str]) -> dict[str, Any]:
    """The profile's overlay with each model replaced by its tiny stand-in (by role, from the profile's own names),
    on the CPU, with short generations."""
    out = copy.deepcopy(overlay)
    by_profile_name: dict[str, str] = {}
    if "encoders" in out and "image" in out["encoders"]:
        roles = ("clip", "openclip", "siglip", "dinov2")
        by_profile_name = dict(zip(out["encoders"]["image"], (models[r] for r in roles), strict=True))
        out["encoders"]["image"] = [by_profile_name[n] for n in out["encoders"]["image"]]
        out["retrieval"]["ensemble"] = [by_profile_name[n] for n in out["retrieval"]["ensemble"]]
        out["retrieval"]["reranker"] = by_profile_name[out["retrieval"]["reranker"]]
    out.setdefault("encoders", {})["device"] = "cpu"
    for section, key, role in (("curate", "llm_model", "llm"), ("curate", "vlm_model", "vlm"), ("graph", "vlm_model", "vlm"),
                               ("kg", "llm_model", "llm"), ("reader", "model", "vlm")):
        if key in out.get(section, {}):
            out[section][key] = models[role]
    if "curate" in out:
        out["curate"]["llm_max_new_tokens"] = 24
    if "kg" in out:
        out["kg"]["llm_max_new_tokens"] = 48
    return out
