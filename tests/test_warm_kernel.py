"""Stage kernels forked from a warm process (runner/warm_kernel.py): the same kernel as a fresh one, started with
the stages' imports done, for this code and environment only, and gone when the stage is."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from polarcatalog.runner import warm_kernel
from tests.conftest import ROOT


def _probe(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('params_file = "x"\nexecuted_notebook = None')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "import os, sys\n"
        "print('preloaded' if 'polarcatalog.stages.ablate' in sys.modules else 'fresh', os.getpid(), os.getcwd(),\n"
        "      os.environ['OPENBLAS_CORETYPE'], os.environ.get('PC_PROBE'), sys.modules['__main__'].__name__)\n"
        "runner = int(os.environ['JPY_PARENT_PID'])  # the process that started this kernel: papermill's\n"
        "print('runner-forked' if int(open(f'/proc/{runner}/stat').read().rsplit(')', 1)[1].split()[1]) == os.getppid()\n"
        "      else 'runner-fresh')\n"
        "import subprocess\nfrom polarcatalog.runner import warm_kernel\n"  # as the MLflow companion is started
        "done = subprocess.run(warm_kernel.command([sys.executable, '-m', 'pc_probe_companion']), input='ping',\n"
        "                      capture_output=True, text=True)\n"
        "print(done.returncode, done.stdout.strip())")]
    nbformat.write(nb, tmp_path / "probe.ipynb")
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src/pc_probe_companion.py").write_text(
        "import sys\nprint(sys.stdin.read(), 'mlflow' in sys.modules, __name__)\nsys.exit(3)\n")
    return tmp_path / "probe.ipynb"


def _run(tmp_path: Path, warm: str) -> list[str]:
    cli = Path(sys.executable).parent / "polarcatalog"
    out = f"out/{warm}.ipynb"
    env = {**os.environ, "POLARCATALOG_WARM_KERNEL": warm, "PC_PROBE": f"probe-{warm}"}
    proc = subprocess.run([str(cli), "run-notebook", "probe.ipynb", out], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return nbformat.read(tmp_path / out, as_version=4).cells[-1].outputs[0]["text"].split()  # all three lines


@pytest.mark.slow  # real kernels
@pytest.mark.skipif(not warm_kernel.enabled(), reason="fork and Unix sockets: Linux")
def test_a_forked_kernel_has_the_imports_and_the_stages_own_folder_environment_and_pins(tmp_path):
    """The warm path's kernel starts with the stage modules imported, in the stage's folder with its environment
    (a variable set per run, the numerics pins) like a fresh kernel, and so does a `python -m` it starts through
    `warm_kernel.command` (the MLflow companion); the runner that starts the kernel is forked too; the kernel is gone
    when the stage is. Off, all are fresh."""
    _probe(tmp_path)
    fresh = _run(tmp_path, "0")
    assert fresh[0] == "fresh" and fresh[2:] == [str(tmp_path.resolve()), "Haswell", "probe-0", "__main__",
                                                 "runner-fresh", "3", "ping", "False", "__main__"], fresh
    first = _run(tmp_path, "1")  # starts the warm process; fresh while its imports run, forked once they are done
    deadline = time.monotonic() + 120
    while (first[0] != "preloaded" or "runner-forked" not in first) and time.monotonic() < deadline:  # both forked
        time.sleep(1)
        first = _run(tmp_path, "1")
    warm = [first, _run(tmp_path, "1")]
    for run in warm:  # the runner and the companion too: forked, their streams and exit codes passed through
        assert run[0] == "preloaded" and run[2:] == [str(tmp_path.resolve()), "Haswell", "probe-1", "__main__",
                                                     "runner-forked", "3", "ping", "True", "__main__"], run
    assert warm[0][1] != warm[1][1]  # one kernel per stage, never a kernel reused
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{run[1]}").exists() for run in warm) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{run[1]}").exists() for run in warm), "a stage's forked kernel outlived it"


def _gone(*pids: int, within: float = 20) -> bool:
    deadline = time.monotonic() + within
    while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(Path(f"/proc/{p}").exists() for p in pids)


@pytest.mark.slow  # real kernels
@pytest.mark.skipif(not warm_kernel.enabled(), reason="fork and Unix sockets: Linux")
def test_a_forked_runner_passes_on_exit_codes_and_interrupts_and_goes_with_its_command(tmp_path):
    """What DVC sees of a stage whose runner is forked: a failing notebook's error and exit code; Ctrl-C (SIGINT to
    the command DVC started) ends it with 130, as an interrupted Python does; and if that command is killed, the
    runner and its kernel go too."""
    import signal

    cli = str(Path(sys.executable).parent / "polarcatalog")
    _probe(tmp_path)
    deadline = time.monotonic() + 120
    while "runner-forked" not in _run(tmp_path, "1") and time.monotonic() < deadline:  # the warm process is up
        time.sleep(1)
    for name, code in {"fail": "1 / 0", "slow": "import os, time\n"
                       "open('pids', 'w').write(f\"{os.environ['JPY_PARENT_PID']} {os.getpid()}\")\ntime.sleep(120)"}.items():
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("executed_notebook = None", metadata={"tags": ["parameters"]}),
                    nbformat.v4.new_code_cell(code)]
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    env = {**os.environ, "POLARCATALOG_WARM_KERNEL": "1", "PC_PROBE": "probe-1"}  # the environment the warm one has
    failed = subprocess.run([cli, "run-notebook", "fail.ipynb", "out/fail.ipynb"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, env=env)
    assert failed.returncode == 1 and "ZeroDivisionError" in failed.stderr, failed.stderr
    # the `check` stage's command, forked the same way: its message and exit code for a bad value, its stamp for a good one
    good = (ROOT / "params.yaml").read_text()
    (tmp_path / "params.yaml").write_text(good.replace("\n  lam: 0.7 ", "\n  lam: 7.0 ", 1))
    bad = subprocess.run([cli, "check-params", "--stamp", "ok.txt"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env=env)
    assert bad.returncode == 2 and "retrieval.lam: Input should be less than or equal to 1" in bad.stderr, bad.stderr
    assert not (tmp_path / "ok.txt").exists()
    (tmp_path / "params.yaml").write_text(good)
    ok = subprocess.run([cli, "check-params", "--stamp", "ok.txt"], cwd=tmp_path, capture_output=True, text=True,
                        timeout=300, env=env)
    assert ok.returncode == 0 and (tmp_path / "ok.txt").read_text() == "params.yaml validated\n", ok.stderr

    for how, want in ((signal.SIGINT, 128 + signal.SIGINT), (signal.SIGKILL, -signal.SIGKILL)):
        (tmp_path / "pids").unlink(missing_ok=True)
        proc = subprocess.Popen([cli, "run-notebook", "slow.ipynb", "out/slow.ipynb"], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not (tmp_path / "pids").is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        runner, kernel = map(int, (tmp_path / "pids").read_text().split())
        assert runner != proc.pid  # forked: the command DVC started stands in for it
        proc.send_signal(how)
        assert proc.wait(timeout=60) == want
        assert _gone(runner, kernel), f"after {how.name}, the runner or its kernel outlived the stage's command"


def test_the_key_follows_the_code_and_the_load_time_environment_not_the_stage(tmp_path, monkeypatch):
    """A code edit or another library setting gets its own warm process; the stage's own variables (DVC_STAGE, the
    kernel's JPY_ ones) do not split it."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src/mod.py").write_text("x = 1\n")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    base = warm_kernel.key(tmp_path)
    monkeypatch.setenv("DVC_STAGE", "ablate@lam")
    monkeypatch.setenv("JPY_PARENT_PID", "1234")
    assert warm_kernel.key(tmp_path) == base
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # read by libraries as they load
    assert warm_kernel.key(tmp_path) != base
    monkeypatch.delenv("OMP_NUM_THREADS")
    (tmp_path / "src/mod.py").write_text("x = 2\n")
    assert warm_kernel.key(tmp_path) != base


def test_no_warm_process_means_the_usual_command_not_a_hang(tmp_path):
    """A kernel or companion command falls back to the usual one when nothing serves the socket; and with no warm
    process named, a companion command is the usual one."""
    sock = tmp_path / "none.sock"
    for fresh in ([sys.executable, "-c", "print('fresh kernel')", "ipykernel_launcher", "-f", "x.json"],
                  [sys.executable, "-m", "json.tool", "--help"]):
        start = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "polarcatalog.runner.warm_kernel", "client", str(sock), "--", *fresh],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert out.returncode == 0 and time.monotonic() - start < 20, out.stderr
        assert out.stdout == "fresh kernel\n" if "-c" in fresh else out.stdout.startswith("usage:"), out.stdout
    os.environ.pop(warm_kernel.SOCKET_VAR, None)
    assert warm_kernel.command([sys.executable, "-m", "m"]) == [sys.executable, "-m", "m"]


@pytest.mark.skipif(not warm_kernel.enabled(), reason="Unix sockets: Linux")
def test_the_socket_is_private_to_its_user(tmp_path, monkeypatch):
    """Whoever connects gets a kernel running as this user: the socket's folder is 0700 and the socket 0600, and a
    folder another user could write into turns warm kernels off rather than be used."""
    monkeypatch.setattr(warm_kernel.tempfile, "gettempdir", lambda: str(tmp_path))
    path = warm_kernel.socket_path("k")
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    proc = subprocess.Popen([sys.executable, "-m", "polarcatalog.runner.warm_kernel", "serve", str(path)])
    try:
        deadline = time.monotonic() + 120
        while not path.exists() and time.monotonic() < deadline:  # bound once its imports are done
            time.sleep(0.05)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        proc.kill()
        proc.wait()
    os.chmod(path.parent, 0o777)
    with pytest.raises(OSError, match="not a private folder"):
        warm_kernel.socket_path("k")


def test_the_preload_starts_no_thread_and_imports_no_torch():
    """What a fork may copy: modules, not threads (a child would hold a lock a vanished thread took) nor torch's
    thread pools or a CUDA context (a GPU profile's stage initialises CUDA in its own kernel)."""
    code = ("import gc, sys, threading\nfrom polarcatalog.runner import tracking_companion, warm_kernel\n"
            "warm_kernel.preload()\n"
            "print(threading.active_count(), 'torch' in sys.modules, 'onnxruntime' in sys.modules,\n"
            "      tracking_companion._html_exporter.cache_info().currsize, gc.get_freeze_count() > 100000)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    # then: the companion's HTML exporter was built (and its templates compiled) here, for every child to inherit; and
    # the preloaded heap is frozen, so that no child's garbage collection copies it
    assert out.stdout.split() == ["1", "False", "False", "1", "True"], out.stdout


def test_the_runners_client_retries_soon_and_is_ready_as_a_kernel_answers(tmp_path):
    """A forked kernel listens within milliseconds: the runner's client sockets retry every RECONNECT_MS, not ZeroMQ's
    100 ms, and its `wait_for_ready` returns once IOPub is quiet for IOPUB_QUIET_S, and a cell runs after it."""
    import zmq
    from jupyter_client.manager import AsyncKernelManager

    manager_class = warm_kernel.kernel_manager_class(tmp_path / "none.sock")
    assert issubclass(manager_class, AsyncKernelManager)
    manager = manager_class(kernel_name="python3")  # a fresh kernel: no warm process listens on that socket
    client = manager.client()
    assert client.context.getsockopt(zmq.RECONNECT_IVL) == warm_kernel.RECONNECT_MS
    assert manager.format_kernel_cmd()[:4] == [sys.executable, "-m", "polarcatalog.runner.warm_kernel", "client"]
    import papermill  # heavy: the runner's own

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "in.ipynb")
    papermill.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="python3",
                               progress_bar=False, kernel_manager_class=manager_class)
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert [o["text"] for o in out.cells[0].outputs] == ["42\n"]
