"""Shared fixtures. Reference data lives in ../shared/data (never copied here); tests needing it skip cleanly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from polarcatalog.numerics import pin_process
from polarcatalog.runner.nbfile import import_nbformat

pin_process()  # before numpy loads, as the `polarcatalog` command does
import_nbformat()  # before any test module imports nbformat or papermill: without jsonschema's IRI grammar (3 s)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


TINY_CLIP = {"embed_dim": 16,
             "vision_cfg": {"image_size": 64, "layers": 2, "width": 32, "head_width": 16, "patch_size": 16},
             "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}}


@pytest.fixture(scope="session")
def tiny_clip_name(tmp_path_factory):
    """A tiny random open_clip architecture registered under a name (open_clip's own config mechanism)."""
    import json

    import open_clip

    folder = tmp_path_factory.mktemp("oc_cfg")
    (folder / "pc-tiny-clip.json").write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(folder)
    return "pc-tiny-clip"


def shared(sub: str) -> Path:
    path = SHARED_DATA / sub
    if not path.exists():
        pytest.skip(f"reference data {path} is absent (it lives beside the repo, in ../shared/data)")
    return path


@pytest.fixture
def solid_image():
    """A colour block on a white canvas: the foreground is exactly the block."""

    def make(colours: list[tuple[int, int, int]], size: int = 64, margin: int = 8) -> Image.Image:
        a = np.full((size, size, 3), 255, np.uint8)
        inner = size - 2 * margin
        for i, c in enumerate(colours):
            x0 = margin + i * inner // len(colours)
            x1 = margin + (i + 1) * inner // len(colours)
            a[margin : size - margin, x0:x1] = c
        return Image.fromarray(a)

    return make


def run_ok(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    """Run a command for real; fail the test with the tail of its output when it fails."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def snapshot_repo(repo: Path, edit_params: Callable[[dict[str, Any]], None], extra_env: dict[str, str],
                  skip: tuple[str, ...] = ()) -> dict[str, str]:
    """A git repository at `repo` holding this checkout's tracked files (those under `skip` left out), params.yaml
    edited by `edit_params`, committed; returns the environment to run `dvc` in it (this venv's bin first, an MLflow
    store of its own)."""
    import yaml

    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for rel in filter(None, tracked.split("\0")):
        if (ROOT / rel).is_file() and not rel.startswith(skip):
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, repo / rel)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    edit_params(params)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = repo_env(repo, extra_env)
    run_ok(["git", "init", "-q"], repo, env)
    run_ok(["git", "add", "-A"], repo, env)
    run_ok(["git", "commit", "-qm", "snapshot"], repo, env)
    return env


def repo_env(repo: Path, extra_env: dict[str, str]) -> dict[str, str]:
    """The environment to run `dvc` in a test repository: this venv's bin first, the repository's own MLflow store, and
    no DVC analytics daemon (a repository that `dvc init` made has analytics on, and `dvc queue kill` spawns it)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1",
           "MLFLOW_TRACKING_URI": f"sqlite:///{repo}/mlflow.db", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", **extra_env}
    env.pop("POLARCATALOG_ROOT", None)
    return env


@pytest.fixture(scope="session")
def tiny_pipeline(tmp_path_factory, worker_id) -> Path:
    """The folder of the tiny pipeline's real `dvc repro` (tests/tiny_pipeline.py), built once per test session: under
    xdist the first worker to ask builds it while the other waits. A module takes its own copy (`tiny_pipeline.checkout`)."""
    import fcntl

    from tests import tiny_pipeline as tiny

    shared_tmp = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared_tmp = shared_tmp.parent  # the session's folder that every worker's basetemp sits in
    folder, failed = shared_tmp / "tiny-pipeline", shared_tmp / "tiny-pipeline.failed"
    with open(shared_tmp / "tiny-pipeline.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            pytest.fail(f"the tiny pipeline's build failed in another worker:\n{failed.read_text()}")
        if not (folder / "built").exists():
            try:
                tiny.build(folder)
            except BaseException as exc:  # pytest.fail from run_ok too: the waiting worker reports it, not rebuilds
                failed.write_text(str(exc)[-8000:])
                raise
            (folder / "built").touch()
    return folder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run order (with `--dist loadfile --no-loadscope-reorder`, each file goes to one worker, in this order; without
    the flag xdist re-sorts the files by test count): the tiny pipeline's build first (every copy-only module waits for
    it), then the GPU rehearsal (the longest module) on the other worker, the tests that only copy a built pipeline last,
    so the second worker reaches them after the build, not waiting."""
    first = ("test_pipeline.py", "test_gpu_rehearsal.py", "test_birds_pipeline.py")  # the tiny build, then the longest
    last = ("test_pipeline_tools.py",)
    rank = lambda item: (0, first.index(item.path.name)) if item.path.name in first else (2 if item.path.name in last else 1, 0)  # noqa: E731
    items.sort(key=rank)  # stable: the files' own order is kept within each group
