"""The stage notebooks in JupyterLab: a real kernel and a real jupyter_server (the one Lab runs on), saving through
its REST API exactly as Lab does, with this venv's server config (installed by `make venv`)."""

from __future__ import annotations

import copy
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel

from polarcatalog_tools.lab import KERNELSPEC, LANGUAGE_INFO, normalise
from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebooks_are_stored_as_jupyter_saves_them(path):
    raw = path.read_text()
    nb = json.loads(raw)
    assert normalise(copy.deepcopy(nb)) == nb, "outputs or kernel metadata in a stage source: save it through `make lab`"
    assert nbformat.writes(nbformat.from_dict(nb)) + "\n" == raw  # byte for byte what `nbformat.write` (Lab's save) writes
    assert nb["nbformat_minor"] >= 5 and all(c.get("id") for c in nb["cells"])  # no ids: Lab adds them on save


def test_the_stored_kernel_description_is_what_the_project_kernel_reports():
    """What Lab writes into an opened notebook: the kernelspec (name, display name, language) and the kernel's
    language_info. Equal values leave the notebook unmodified; the Python patch version is the machine's."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert {"name": "python3", "display_name": spec.display_name, "language": spec.language} == KERNELSPEC
    km, kc = start_new_kernel(kernel_name="python3", extra_arguments=["--IPKernelApp.log_level=ERROR"])
    try:
        info = kc.kernel_info(reply=True, timeout=60)["content"]["language_info"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert {k: v for k, v in info.items() if k != "version"} == {k: v for k, v in LANGUAGE_INFO.items() if k != "version"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, token: str, method: str = "GET", body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def _serve(app: str, root: Path):
    """Run `python -m <app>` (jupyter_server, or jupyterlab on top of it) on 127.0.0.1, this venv's server config
    included, on a copy of the stage notebooks and dvc.yaml under `root`; yield (url, token, root)."""
    config = Path(sys.prefix) / "etc/jupyter/jupyter_server_config.py"
    assert config.is_file(), f"{config} is missing: `make venv` installs it (the notebooks' pre-save hook)"
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    shutil.copy(ROOT / "dvc.yaml", root / "dvc.yaml")
    port, token = _free_port(), "polarcatalog-test"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(root / "runtime"), "JUPYTERLAB_WORKSPACES_DIR": str(root / "ws")}
    proc = subprocess.Popen([sys.executable, "-m", app, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--allow-root"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                _request(f"{url}/api/status", token)
                break
            except OSError:
                assert proc.poll() is None, f"{app} exited with {proc.returncode}"
                time.sleep(0.5)
        yield url, token, root
    finally:  # the server and what it started (kernels, terminals): a busy machine may delay a clean shutdown
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real jupyter_server (the one JupyterLab runs on), shared by the REST tests below: each reads the bytes it
    compares from the server's folder at its own start."""
    yield from _serve("jupyter_server", tmp_path_factory.mktemp("jupyter_server"))


def test_opening_running_and_saving_without_edits_leaves_every_notebook_byte_identical(server):
    url, token, root = server
    spec = _request(f"{url}/api/kernelspecs", token)["kernelspecs"]["python3"]["spec"]
    for path in NOTEBOOKS:
        rel = f"notebooks/{path.name}"
        before = (root / rel).read_bytes()
        model = _request(f"{url}/api/contents/{rel}?type=notebook&content=1", token)
        nb = model["content"]
        # what Lab does on opening (kernel metadata) and running every cell (outputs, counts), then Ctrl+S
        nb["metadata"]["kernelspec"] = {"name": "python3", "display_name": spec["display_name"], "language": spec["language"]}
        nb["metadata"]["language_info"] = {**LANGUAGE_INFO, "version": "3.11.99"}  # another machine's Python
        for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
            cell["execution_count"] = i + 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "interactive output\n"}]
        _request(f"{url}/api/contents/{rel}", token, "PUT", {"type": "notebook", "format": "json", "content": nb})
        assert (root / rel).read_bytes() == before, rel


def test_an_edit_is_saved(server):
    url, token, root = server
    rel = "notebooks/05_ablate.ipynb"
    nb = _request(f"{url}/api/contents/{rel}?type=notebook&content=1", token)["content"]
    nb["cells"][0]["source"] += "\n\nA note added in Lab."
    _request(f"{url}/api/contents/{rel}", token, "PUT", {"type": "notebook", "format": "json", "content": nb})
    assert "A note added in Lab." in (root / rel).read_text()


def test_an_executed_copy_keeps_its_outputs(server):
    url, token, root = server
    (root / "reports").mkdir(exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1", execution_count=1,
                                                                 outputs=[nbformat.v4.new_output("execute_result", {"text/plain": "1"}, execution_count=1)])])
    _request(f"{url}/api/contents/reports/run.ipynb", token, "PUT", {"type": "notebook", "format": "json", "content": nb})
    assert json.loads((root / "reports/run.ipynb").read_text())["cells"][0]["outputs"]


def _whole_json(path: Path) -> bool:
    try:
        json.loads(path.read_bytes())
    except ValueError:
        return False
    return True


@pytest.fixture
def lab(tmp_path):
    """A real JupyterLab."""
    yield from _serve("jupyterlab", tmp_path)


@pytest.mark.slow  # JupyterLab, a kernel and Chromium
def test_in_a_real_jupyterlab_opening_and_saving_changes_no_notebook(lab):
    """Chromium drives JupyterLab as a person does: open a stage notebook, let its kernel start, check that Lab
    does not mark it modified, press Ctrl+S, and compare the file's bytes (what `dvc status` compares)."""
    from playwright.sync_api import sync_playwright

    url, token, root = lab
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "no Chromium: `make system-deps` installs it (Debian package chromium)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        # two notebooks: they share every piece of metadata Lab touches (the REST test above covers all seven)
        for i, path in enumerate([NOTEBOOKS[0], NOTEBOOKS[-2]]):
            before, saved = path.read_bytes(), root / "notebooks" / path.name
            written = saved.stat().st_mtime_ns
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{url}/lab/workspaces/t{i}/tree/notebooks/{path.name}?reset&token={token}")
            page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').first.wait_for(timeout=120_000)
            page.wait_for_timeout(1500)  # kernel info and metadata updates arrive after idle
            tab = page.locator(".lm-TabBar-tab.jp-mod-current").first
            if platform.python_version() == LANGUAGE_INFO["version"]:  # the kernel is this interpreter; another patch
                # version legitimately updates language_info on opening (and the save below still changes nothing)
                assert "jp-mod-dirty" not in tab.get_attribute("class"), f"{path.name}: Lab marks it modified on opening"
            page.locator(".jp-Notebook:visible").first.click()
            page.keyboard.press("Control+s")
            for _ in range(300):  # Lab's save has landed: a new mtime, and the whole notebook written (the server
                # truncates, then writes, so a busy machine can show an empty or partial file between the two)
                if saved.stat().st_mtime_ns != written and _whole_json(saved):
                    break
                page.wait_for_timeout(100)
            assert saved.stat().st_mtime_ns != written, f"{path.name}: Ctrl+S did not save"
            assert saved.read_bytes() == before, f"{path.name}: saving changed it"
            page.close()
        browser.close()
