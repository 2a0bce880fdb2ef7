"""Every registry answers an unknown name with the names it knows, and each known name builds what it says."""

from __future__ import annotations

import pytest

from polarcatalog.stages.ablate import AXES, axis_named
from polarcatalog.config import Ablations
from polarcatalog.data.domain import DOMAINS, create_domain
from polarcatalog.data.pokemon import PokemonDomain
from polarcatalog.encoders import EncoderSpec, create_encoder, parse_encoder
from polarcatalog.memory.constraints import Strength
from polarcatalog.memory.propose import PROPOSERS, ProposerSpec, create_proposer
from polarcatalog.memory.verifiers import VERIFIERS, ProbeVerifier, create_verifier


@pytest.mark.parametrize("make, message", [
    (lambda: parse_encoder("resnet9000"), "unknown image encoder 'resnet9000'; allowed: efficientnet_lite0, efficientnet_lite1, efficientnet_lite2, "
                                          "<name>@<input px 32-1024>, open_clip:<model>:<pretrained or checkpoint file>, "
                                          "open_clip:local-dir:<folder>, open_clip:hf-hub:<org/repo>, hf:<model id or folder>"),
    (lambda: parse_encoder("efficientnet_lite2@12"), "unknown image encoder 'efficientnet_lite2@12'"),
    (lambda: create_encoder("minilm", "image"), "unknown image encoder 'minilm'; allowed: efficientnet_lite0"),
    (lambda: create_encoder("efficientnet_lite0", "text"), "unknown text encoder 'efficientnet_lite0'; allowed: minilm"),
    (lambda: create_verifier("oracle"), "unknown verifier 'oracle'; allowed: probe, zero_shot, vlm"),
    (lambda: create_proposer("crops:6"), "proposer 'crops:6'; allowed: all, top_n:<N>, multi_prompt:<N>, global_local:<N>, random_n:<N>"),
    (lambda: axis_named("depth"), "unknown ablation axis 'depth'; allowed: " + ", ".join(AXES)),
    (lambda: create_domain("birds"), "unknown domain 'birds'; allowed: pokemon"),
    (lambda: Strength.parse("medium"), "constraint strength 'medium'; allowed: none, hard, adaptive:<p_max > 0>, soft:<penalty >= 0>"),
])
def test_unknown_names_list_the_allowed_values(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert message in str(err.value)


def test_known_names_build_what_they_name():
    assert parse_encoder("open_clip:ViT-B-32-quickgelu:openai") == EncoderSpec("open_clip", "ViT-B-32-quickgelu", "openai")
    assert parse_encoder("hf:facebook/dinov2-base").name == "hf:facebook/dinov2-base"
    assert isinstance(create_verifier("probe", folds=3), ProbeVerifier) and set(VERIFIERS) == {"probe", "zero_shot", "vlm"}
    assert create_proposer("multi_prompt:4", groups=("type",)).n == 4 and "all" in PROPOSERS
    assert isinstance(create_domain("pokemon"), PokemonDomain) and list(DOMAINS) == ["pokemon"]
    assert ProposerSpec.parse("all").n is None


def test_every_ablation_axis_has_its_values_in_params_and_back():
    """The AXES registry and the `ablations` section's axis lists name the same axes: one cannot gain an axis the other
    lacks (`memory_quality_steps`, `kappa_sensitivity` and `memory_levers` are the memory_quality stage's knobs, not axes)."""
    lists = [name for name, f in Ablations.model_fields.items()
             if str(f.annotation).startswith("list") and name not in ("kappa_sensitivity", "memory_levers")]
    assert list(AXES) == lists and all(name == axis.name for name, axis in AXES.items())


def test_an_open_clip_name_whose_weights_need_quickgelu_on_a_gelu_architecture_is_refused():
    """OpenAI's CLIP weights were trained with QuickGELU; open_clip builds `ViT-L-14` with GELU and only warns, so the
    name is refused with the faithful one. No weights are read: open_clip's configs decide."""
    with pytest.raises(ValueError, match="use open_clip:ViT-L-14-quickgelu:openai"):
        parse_encoder("open_clip:ViT-L-14:openai")
    assert parse_encoder("open_clip:ViT-L-14-quickgelu:openai").model == "ViT-L-14-quickgelu"
    assert parse_encoder("open_clip:ViT-L-14:laion2b_s32b_b82k").pretrained == "laion2b_s32b_b82k"  # GELU-trained: fine
