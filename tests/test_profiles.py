"""Run profiles: every params.<name>.yaml passes check-params, and the DVC command a profile runs carries exactly its
overlay's values through `dvc exp run -S` (parsed back with the grammar DVC itself uses)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from polarcatalog.runner import profiles
from polarcatalog.config import ParamsError
from tests.conftest import ROOT, SHARED_DATA, shared

CLI = str(Path(sys.executable).parent / "polarcatalog")


def test_every_profile_file_is_registered_and_every_profile_has_its_file():
    files = {p.name for p in ROOT.glob("params.*.yaml")}
    assert files == {p.overlay for p in profiles.PROFILES.values()} == \
        {"params.birds-offline.yaml", "params.gpu-pokemon.yaml", "params.gpu-birds.yaml"}


def _needs_reference_data(name: str) -> None:
    if profiles.get(name).pipeline == "birds/dvc.yaml":
        shared("cub")  # the bird profiles' reference data (skips where it is absent)


def _has_reference_data(name: str) -> bool:
    """A bird profile resolves only where its reference data is (`resolve` checks it before DVC runs)."""
    return profiles.get(name).pipeline != "birds/dvc.yaml" or (SHARED_DATA / "cub").exists()


@pytest.mark.parametrize("name", list(profiles.PROFILES))
def test_every_profile_passes_check_params(name):
    """In process: `profiles.resolve` is what `check-params --profile` validates with (the command runs below)."""
    _needs_reference_data(name)
    params = profiles.resolve(name, ROOT)[0]
    assert params.model_dump(mode="json")


def test_check_params_with_a_profile_prints_the_resolved_params():
    _needs_reference_data("birds-offline")
    proc = subprocess.run([CLI, "check-params", "--profile", "birds-offline"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout) == profiles.resolve("birds-offline", ROOT)[0].model_dump(mode="json")


def test_a_profile_changes_exactly_the_keys_its_overlay_sets():
    """`resolve` applies the overlay file and nothing else: every key it reports changed is in the overlay, with the
    overlay's value, and every other key keeps params.yaml's value."""
    from polarcatalog.config import flatten

    base = flatten(profiles.load_params(ROOT / "params.yaml").model_dump(mode="json"))
    names = [name for name in profiles.PROFILES if _has_reference_data(name)]
    assert "gpu-pokemon" in names  # it reads no reference data, so at least one profile is always checked
    for name in names:
        overlay = profiles.overlay(name, ROOT)
        params, changed = profiles.resolve(name, ROOT)
        mine = flatten(params.model_dump(mode="json"))
        assert set(changed) <= set(overlay), name
        assert all(mine[k] == base[k] for k in base if k not in overlay), name
        assert all(mine[k] != base.get(k) for k in changed), name


@pytest.mark.parametrize("name", list(profiles.PROFILES))
def test_the_dvc_command_carries_the_overlay(name):
    from hydra.core.override_parser.overrides_parser import OverridesParser  # what `dvc exp run -S` parses with

    _needs_reference_data(name)
    cmd = profiles.command(name, ROOT)
    _, changed = profiles.resolve(name, ROOT)
    if not changed:
        assert cmd == ["dvc", "repro", profiles.get(name).pipeline]
        return
    assert cmd[:5] == ["dvc", "exp", "run", profiles.get(name).pipeline, "-n"] and cmd[5].startswith(name)
    sets = cmd[7::2]
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(sets)}
    assert parsed == changed


def test_birds_offline_is_the_bird_pipeline_as_configured_and_bad_profiles_fail_naming_the_file(tmp_path):
    _needs_reference_data("birds-offline")
    assert profiles.command("birds-offline", ROOT) == ["dvc", "repro", "birds/dvc.yaml"]
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    (tmp_path / "params.gpu-birds.yaml").write_text("retrieval:\n  lam: 1.5\n")
    with pytest.raises(ParamsError, match=r"profile gpu-birds \(params.gpu-birds.yaml\).*retrieval.lam"):
        profiles.command("gpu-birds", tmp_path)
    with pytest.raises(ParamsError, match="unknown profile 'gpu'; allowed: birds-offline, gpu-pokemon, gpu-birds"):
        profiles.get("gpu")
    with pytest.raises(ParamsError, match="quotes"):
        profiles.hydra_value('a "b"')
    proc = subprocess.run([CLI, "profile", "gpu-birds", "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "$ dvc exp run birds/dvc.yaml -n gpu-birds -S 'birds.articles=\"wikipedia\"'" in proc.stdout


def test_a_rerun_of_a_profile_on_the_same_commit_gets_the_next_free_experiment_name(tmp_path):
    """DVC refuses a second experiment of one name on one commit; the profile's rerun is `<name>-2`, then `-3`."""
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()  # noqa: E731
    assert profiles.experiment_name("gpu-pokemon", tmp_path) == "gpu-pokemon"  # not a git repository
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "base")
    head = git("rev-parse", "HEAD")
    assert profiles.experiment_name("gpu-pokemon", tmp_path) == "gpu-pokemon"
    for taken in ("gpu-pokemon", "gpu-pokemon-2", "gpu-birds"):  # where `dvc exp run -n` keeps an experiment
        git("update-ref", f"refs/exps/{head[:2]}/{head[2:]}/{taken}", head)
    git("update-ref", f"refs/exps/00/{'0' * 38}/gpu-pokemon-3", head)  # another commit's experiment does not count
    assert profiles.experiment_name("gpu-pokemon", tmp_path) == "gpu-pokemon-3"
    assert profiles.experiment_name("birds-offline", tmp_path) == "birds-offline"


def test_a_profile_whose_reference_data_is_missing_fails_before_dvc_runs(tmp_path):
    """`make repro PROFILE=birds-offline` without the reference data: refused by the profile's validation, naming
    the key and every missing entry, before DVC starts (so before it deletes any stage's outputs to rerun it)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["birds"]["reference_dir"] = "no/such/folder"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for name in ("birds-offline", "gpu-birds"):
        overlay = profiles.get(name).overlay
        (tmp_path / overlay).write_text((ROOT / overlay).read_text())
    kept = tmp_path / "reports/birds/reference.md"  # a committed result the failed run must not touch
    kept.parent.mkdir(parents=True)
    kept.write_text("committed")
    proc = subprocess.run([CLI, "profile", "birds-offline"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "birds.reference_dir (no/such/folder) lacks cub/descriptors_cub.json" in proc.stderr
    assert "openclipart_birds" in proc.stderr and "$ dvc" not in proc.stdout
    assert kept.read_text() == "committed"
    with pytest.raises(ParamsError, match="birds.reference_dir"):
        profiles.resolve("birds-offline", tmp_path)
    proc = subprocess.run([CLI, "check-params", "--profile", "gpu-birds"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "lacks" in proc.stderr


def test_gpu_pokemon_is_the_papers_setup_with_every_departure_named():
    """Every knob the CPU default tunes away from the papers takes the paper's value in gpu-pokemon, or the profile names
    it with a reason; its CLIP member is OpenAI's weights on the QuickGELU architecture they were trained with."""
    params = profiles.resolve("gpu-pokemon", ROOT)[0]
    knobs = profiles.paper_knobs("gpu-pokemon", params, ROOT)
    assert {k.key for k in knobs} == set(profiles.PAPER_SETUP)
    assert all(k.state in ("paper", "departure") for k in knobs), [k for k in knobs if k.state == "UNNAMED departure"]
    assert "open_clip:ViT-L-14-quickgelu:openai" in params.retrieval.ensemble
    proc = subprocess.run([CLI, "check-params", "--profile", "gpu-pokemon", "--no-device"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "against the papers' setup" in proc.stderr and "UNNAMED" not in proc.stderr
    assert all(key in proc.stderr for key in profiles.PAPER_SETUP)


@pytest.mark.slow  # two CLI processes that import torch
def test_a_gpu_profile_on_a_machine_without_a_visible_gpu_fails_before_any_stage_without_sending_it_to_the_cpu():
    """`encoders.device: cuda` where torch sees no GPU: check-params (the pipeline's first stage) and `profile` refuse,
    naming torch's CUDA build and the driver it needs, and advise against `auto`/`cpu` (7B models on the CPU)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    for cmd in ([CLI, "check-params", "--profile", "gpu-pokemon"], [CLI, "profile", "gpu-pokemon"]):
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and "$ dvc" not in proc.stdout, proc.stdout + proc.stderr
        assert f"CUDA {torch.version.cuda or 'none'}" in proc.stderr and "driver >= 580" in proc.stderr
        assert "Do not switch this run to 'auto' or 'cpu'" in proc.stderr


def test_a_profile_claiming_the_papers_setup_fails_on_an_unnamed_departure(tmp_path):
    """A CPU-tuned value in gpu-pokemon fails validation naming the key; named under `departures:` it passes and is
    listed with its reason. `departures:` never reaches the params."""
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    overlay = yaml.safe_load((ROOT / "params.gpu-pokemon.yaml").read_text())
    overlay["encoders"]["flips"] = True
    (tmp_path / "params.gpu-pokemon.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    with pytest.raises(ParamsError, match=r"claims the papers' setup, but encoders.flips differ"):
        profiles.resolve("gpu-pokemon", tmp_path)
    overlay["departures"] = {"encoders.flips": "sprites face both ways (measured on dev with these models)"}
    (tmp_path / "params.gpu-pokemon.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    params, changed = profiles.resolve("gpu-pokemon", tmp_path)
    flips = next(k for k in profiles.paper_knobs("gpu-pokemon", params, tmp_path) if k.key == "encoders.flips")
    assert (flips.state, flips.value, flips.paper) == ("departure", True, False) and "sprites" in flips.reason
    assert "sprites face both ways" in profiles.knobs_text([flips]) and not any(k.startswith("departures") for k in changed)
    overlay["departures"] = {"encoders.batch_size": "not a knob of the papers' setup"}
    (tmp_path / "params.gpu-pokemon.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    with pytest.raises(ParamsError, match=r"departures \['encoders.batch_size'\] are not knobs"):
        profiles.resolve("gpu-pokemon", tmp_path)
