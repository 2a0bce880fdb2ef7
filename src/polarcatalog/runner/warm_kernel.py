"""Stage kernels forked from a warm process: a stage's notebook starts with its imports already done.

A notebook stage pays, before its own work, a fresh Python for its kernel and the imports of its setup cell (pandas,
matplotlib, seaborn with scipy.stats, the params schema, the stage modules): nearly all a do-nothing stage costs
(reports/benchmarks/stage_floor.md), nine times over in a one-value experiment. The same imports are
done once here, in a process that then forks one kernel per stage (the zygote of Android and of Chromium's
renderers): a forked child has every module its parent imported, at the cost of a fork.

How it runs, for one `dvc repro` or `dvc exp run`:
- `polarcatalog run-notebook` calls `ensure` before papermill: it starts a warm process for this checkout, code and
  environment (`key`) unless one is listening, detached from the stage (its own session, no inherited terminal), so
  DVC does not wait for it. It exits after `IDLE_S` seconds without a request.
- papermill's kernel command becomes `python -m polarcatalog.runner.warm_kernel client SOCKET -- <the usual
  ipykernel command>`: a small process that hands its standard streams and the kernel's arguments to the warm process
  over a Unix socket, which forks; the child becomes the ipykernel, with the same connection file and environment a
  fresh kernel would have. The small process stands in for the kernel towards Jupyter's client: it forwards
  interrupts, and when it is killed (papermill's immediate shutdown) the socket closes and the kernel exits.
- The kernel's MLflow companion (`runner.tracking_companion`) is forked the same way (`command`), with MLflow and
  nbconvert imported and its HTML templates compiled; it ends as a fresh one does, when the kernel's end of its input closes.
- From a run's second stage on, the runner itself (`polarcatalog run-notebook`, papermill and Jupyter's client) is
  forked too (`run_forked`): the command DVC started stands in for it, as the client does for a kernel, passing on
  Ctrl-C and the exit code; killed, it takes the runner, and so the kernel, with it.
- Anything off the path falls back to a fresh process, without waiting: no warm process, or one still importing
  (the first stage of a run), an environment without fork or Unix sockets, or `POLARCATALOG_WARM_KERNEL=0`.

What keeps a forked kernel the same as a fresh one: the key covers the interpreter, the checkout's src/ (every
file's bytes), the installed packages and the environment the libraries read at load (the numerics pins among it), so
a code edit or another setting gets its own warm process; the warm process imports modules (and compiles the HTML
templates, pure Python) only, starting no thread, no BLAS call and no GPU context (torch is not preloaded), and the
child takes the client's working folder, environment and argv. The runner's client is ready as soon as a forked
kernel is (`kernel_manager_class`). The socket lives in a folder only this user can open, and the warm process serves only
connections from its own user id (SO_PEERCRED): it runs whatever kernel it is asked for, as that user.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import hashlib
import importlib
import json
import os
import runpy
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from queue import Empty  # a Jupyter channel's timeout

from polarcatalog.runner.nbfile import import_nbformat

IDLE_S = 60.0  # a warm process exits after this long without a request: a DVC run's stages follow each other within seconds
REPLY_S = 30.0  # how long a client waits for the warm process to fork, once connected
SOCKET_VAR = "POLARCATALOG_WARM_SOCKET"  # set for a stage's kernel: where its MLflow companion is forked from
# set per stage or per shell, and read by no library as it loads: not in the key
VOLATILE = ("DVC_", "JPY_", SOCKET_VAR, "PWD", "OLDPWD", "_", "SHLVL", "TERM", "COLUMNS", "LINES")
STALE_S = 7 * 86400  # the files of a warm process unused this long (another code version's) are removed
# What a stage's setup cell imports (notebooks/*.ipynb), with what ipykernel, the runner (papermill) and the `check`
# stage's command (cli.main) need, and what a stage or a kernel would otherwise import on first use: ipykernel's
# debugger (debugpy, part of every kernel's start), pyarrow.dataset (on the first parquet read) and tabulate (on the
# first `DataFrame.to_markdown`, which the stages' tables and reports call). The stage
# modules come first, as in a setup cell: those that draw select matplotlib's Agg backend at import, before anything
# imports pyplot. Every stage module but the bird reference's, which imports torch (a forked child may not share a
# parent's torch state). A module here that has a `warm_up()` gets it called once, after its import: work every child
# would otherwise repeat (the MLflow companion's HTML templates, compiled on first use; the parse of every module of
# the package, which `check` reads to write the stages' code manifests).
PRELOAD = ("polarcatalog.stages.fetch", "polarcatalog.stages.curate", "polarcatalog.stages.embed",
           "polarcatalog.stages.retrieve", "polarcatalog.stages.kg", "polarcatalog.stages.ablate",
           "polarcatalog.stages.graph", "polarcatalog.stages.memory_quality", "polarcatalog.stages.report",
           "polarcatalog.stages.select_retrieval", "polarcatalog.stages.birds_catalog", "polarcatalog.config",
           "polarcatalog.runner.tracking", "polarcatalog.features.workspace", "polarcatalog.from_params",
           "polarcatalog.retrieval.query_side", "seaborn", "pandas", "pyarrow.parquet", "pyarrow.dataset",
           "IPython.display", "ipykernel.kernelapp", "ipykernel.debugger", "polarcatalog.runner.tracking_companion",
           "nbconvert", "polarcatalog.cli.run_notebook_command", "papermill", "jupyter_client.manager",
           "polarcatalog.cli.main", "polarcatalog.runner.code_deps", "tabulate")


def enabled() -> bool:
    return (os.environ.get("POLARCATALOG_WARM_KERNEL", "1") != "0" and hasattr(os, "fork")
            and hasattr(socket, "AF_UNIX") and hasattr(socket, "send_fds") and sys.platform.startswith("linux"))


def package_dir() -> Path:
    """The polarcatalog a kernel of this environment imports: the first PYTHONPATH entry holding it (the checkout's
    src/, which run-notebook puts first), else this process's own (the editable install)."""
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and (Path(entry) / "polarcatalog" / "__init__.py").is_file():
            return (Path(entry) / "polarcatalog").resolve()
    return Path(__file__).resolve().parents[1]


def key(root: Path) -> str:
    """What the warm process's imported modules depend on: interpreter, code (the package it imports and the
    checkout's src/, every file's bytes), packages and load-time environment."""
    h = hashlib.sha256()
    h.update(f"{sys.executable}\0{root.resolve()}\0".encode())
    for folder in sorted({package_dir(), (root / "src").resolve()}):
        for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
            h.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    for site in sorted({p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)}):
        h.update("\0".join(sorted(os.listdir(site))).encode())  # dist-info names carry the versions
    env = sorted((k, v) for k, v in os.environ.items() if not k.startswith(VOLATILE))
    h.update(json.dumps(env).encode())
    return h.hexdigest()[:24]


def socket_path(key_: str) -> Path:
    """In a folder of this user's only (0700): a Unix socket's path must stay under 108 bytes."""
    folder = Path(tempfile.gettempdir()) / f"polarcatalog-warm-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.lstat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or not folder.is_dir() or folder.is_symlink():
        raise OSError(f"{folder} is not a private folder of this user: warm kernels are off")
    return folder / f"{key_}.sock"


def listening(path: Path) -> bool:
    """Whether a warm process answers on `path` (it listens once its imports are done)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
        s.sendall(b"{}")  # a ping: the warm process closes it unanswered
        return True


def ensure(root: Path) -> Path | None:
    """The socket of this checkout's warm process, starting one if none serves; None when warm kernels are off.
    Returns at once: until the warm process has done its imports, kernels start fresh."""
    if not enabled():
        return None
    try:
        path = socket_path(key(root))
    except OSError:
        return None
    if (path.exists() and listening(path)) or _serving(path):  # serving, or still importing
        return path
    log = path.with_suffix(".log")
    with open(log, "ab") as err:
        subprocess.Popen([sys.executable, "-m", "polarcatalog.runner.warm_kernel", "serve", str(path)], cwd=root,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                         close_fds=True)
    return path


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def preload() -> None:
    """What the warm process does before it forks anything: the imports of PRELOAD, the `warm_up()` of those that
    have one (work every child would otherwise repeat), then `gc.freeze()`. A child shares its parent's memory until
    it writes to a page; the cyclic garbage collector writes to every object it traverses, so a child's first full
    collection copied the whole preloaded heap, page by page, at a moment no code chose (in a forked runner: inside
    papermill's bookkeeping between two cells). Frozen objects are never traversed (the pre-fork servers' use of
    `gc.freeze`), and modules, classes and functions are not garbage anyway."""
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")  # what ipykernel sets
    import_nbformat()  # first, as every process that reads notebooks does (runner/nbfile.py)
    for name in PRELOAD:
        module = importlib.import_module(name)
        if callable(getattr(module, "warm_up", None)):
            module.warm_up()
    gc.collect()  # what is garbage now goes now, not frozen for the warm process's life
    gc.freeze()


def serve(path: Path) -> None:
    """Import, then listen, then fork per request: until the imports are done nothing answers, and a stage starts a
    fresh kernel rather than wait (the first stage of a run overlaps its own start with these imports)."""
    lock = open(path.with_suffix(".lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # another warm process for this key is starting or serving
    _prune(path.parent)
    preload()
    path.unlink(missing_ok=True)  # a dead process's socket: the lock says nobody serves it
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # one request, one message
    umask = os.umask(0o177)
    try:
        server.bind(str(path))  # 0600, in a 0700 folder
    finally:
        os.umask(umask)
    try:
        server.listen(16)
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the system reaps the children: no zombies
        server.settimeout(IDLE_S)
        while True:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                return
            if _peer_uid(conn) != os.getuid():
                conn.close()
                continue
            conn.settimeout(10)
            try:
                msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            except OSError:
                conn.close()
                continue
            if len(fds) == 3 and msg:
                if os.fork() == 0:
                    server.close()
                    lock.close()  # the lock says "a warm process serves": a child outliving this one must not hold it
                    _child(conn, json.loads(msg), fds)  # never returns
            for fd in fds:
                os.close(fd)
            conn.close()
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
            if not path.with_suffix(".log").stat().st_size:
                path.with_suffix(".log").unlink()


def _prune(folder: Path) -> None:
    """Remove the lock, socket and log of warm processes long gone (each code version has its own key)."""
    now = time.time()
    for lock_path in folder.glob("*.lock"):
        with contextlib.suppress(OSError):
            if now - lock_path.stat().st_mtime < STALE_S:
                continue
            with open(lock_path) as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while a process holds it
                for suffix in (".sock", ".log", ".lock"):
                    lock_path.with_suffix(suffix).unlink(missing_ok=True)


def _child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """Become the process the client asked for, with its streams, folder and environment: the ipykernel (argv as
    ipykernel_launcher's), or `python -m <module>` (the stage's MLflow companion). Its exit code goes back last."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        conn.settimeout(None)
        conn.sendall(struct.pack("q", os.getpid()))
        module = request.get("module")
        # a kernel runs until told to stop, and the stage's runner until its notebook ends: either goes with its client
        # (killed at shutdown, or its runner or DVC died); the companion ends by itself, on its stdin's EOF
        if not module or request.get("with_client"):
            def orphaned() -> None:  # the client is gone: so is this process
                with contextlib.suppress(OSError):
                    conn.recv(1)
                os._exit(1)

            threading.Thread(target=orphaned, daemon=True).start()
        if sys.path and sys.path[0] == "":
            del sys.path[0]
        try:
            if module:
                sys.argv = [module, *request["argv"]]
                sys.modules.pop(module, None)  # run as __main__, as `python -m` does (runpy warns of a copy imported)
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                sys.argv = ["ipykernel_launcher", *request["argv"]]
                from ipykernel import kernelapp  # heavy: preloaded by the warm process; the client never imports it

                kernelapp.launch_new_instance()
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        except KeyboardInterrupt:  # Ctrl-C, forwarded by the client: the status of a process ended by SIGINT
            code = 128 + signal.SIGINT
        except BaseException:  # what `python -m` prints before exiting 1
            traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        with contextlib.suppress(OSError):
            conn.sendall(struct.pack("q", code))
    finally:
        os._exit(code)


def client(path: Path, fresh: list[str]) -> None:
    """The process its starter sees (Jupyter's client for a kernel, the kernel for its MLflow companion): ask the warm
    process for it, or exec `fresh`, the usual command, when none answers. It forwards signals and exits with the
    child's code. Killed, it closes the socket, and a kernel child exits; a companion child ends as a fresh one does,
    when the kernel's end of its stdin closes (ending the stage's run KILLED if the kernel did not finish it)."""
    request = None
    if "ipykernel_launcher" in fresh:
        request = {"argv": fresh[fresh.index("ipykernel_launcher") + 1:]}
    elif fresh[1:2] == ["-m"] and len(fresh) > 2:
        request = {"module": fresh[2], "argv": fresh[3:]}
    child = _connect(path, request) if request is not None and enabled() else None
    if child is None:
        os.execv(fresh[0], fresh)
    _relay(*child)


def run_forked(root: Path, module: str, argv: list[str]) -> None:
    """`python -m <module> <argv>` (the stage's runner: papermill and Jupyter's client imported, which every stage
    would otherwise import again) forked from this checkout's warm process, this process standing in for it as the client does for a
    kernel; never returns then. Returns at once, having done nothing, when no warm process answers: the caller runs
    the command itself (and its runner starts one). The environment must already be the runner's (`key`)."""
    if not enabled():
        return
    try:
        path = socket_path(key(root))
    except OSError:
        return
    child = _connect(path, {"module": module, "argv": argv, "with_client": True}) if path.exists() else None
    if child is not None:
        _relay(*child)


def _relay(conn: socket.socket, pid: int) -> None:
    """Stand in for the forked child `pid` until it exits, with its exit code: forward signals; if this process is
    killed, `conn` closes and the child exits with it."""
    def forward(signum: int, _frame: object) -> None:  # Jupyter interrupts a kernel by SIGINT; DVC a stage by SIGINT
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, lambda signum, frame: (forward(signum, frame), os._exit(1)))
    _die_with_parent()
    while True:
        try:
            reply = conn.recv(8)
        except InterruptedError:
            continue
        os._exit(struct.unpack("q", reply)[0] if len(reply) == 8 else 1)


def command(fresh: list[str]) -> list[str]:
    """`fresh` (a `python -m <module>` command) through the warm process of the stage's runner, when there is one."""
    path = os.environ.get(SOCKET_VAR)
    if not path or not enabled():
        return fresh
    return [sys.executable, "-m", "polarcatalog.runner.warm_kernel", "client", path, "--", *fresh]


def _serving(path: Path) -> bool:
    """Whether a warm process holds this socket's lock (it does from its start to its exit)."""
    try:
        with open(path.with_suffix(".lock")) as lock:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def _connect(path: Path, request: dict) -> tuple[socket.socket, int] | None:
    """The connection and the child's pid, or None when nothing answers (no warm process, or one still importing)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(str(path))
        request = {**request, "cwd": os.getcwd(), "env": dict(os.environ)}
        socket.send_fds(s, [json.dumps(request).encode()], [0, 1, 2])
        s.settimeout(REPLY_S)
        reply = s.recv(8)
        s.settimeout(None)
    except OSError:
        s.close()
        return None
    if len(reply) != 8:
        s.close()
        return None
    return s, struct.unpack("q", reply)[0]


def _die_with_parent() -> None:
    """Linux: if the process that started this one dies (SIGKILL), this one gets SIGKILL, its socket closes, and the
    child exits."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


RECONNECT_MS = 5  # how soon the runner's sockets retry a kernel that is not listening yet (ZeroMQ's default: 100 ms)
IOPUB_QUIET_S = 0.02  # IOPub silence that ends the wait for a kernel's start-up messages (jupyter_client's: 0.2 s)


def kernel_manager_class(path: Path) -> type:
    """A Jupyter kernel manager whose kernel command goes through `client` (papermill's kernel_manager_class), and
    whose client is ready as soon as the kernel is (`ReadyClient`)."""
    import zmq.asyncio  # heavy: only in the runner
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class ReadyClient(AsyncKernelClient):
        """A forked kernel listens almost at once, and jupyter_client's client would still wait for it: its sockets
        first connect before the kernel listens and retry only every 100 ms (ZeroMQ's default), and after the
        kernel's first reply it waits for 0.2 s of silence on IOPub. Here they retry every `RECONNECT_MS` and the
        silence is `IOPUB_QUIET_S`: a start-up message that comes later answers no request of the run, and nbclient
        reads only the messages that answer its own requests."""

        def _context_default(self) -> zmq.asyncio.Context:
            self._created_context = True
            context = zmq.asyncio.Context()
            context.setsockopt(zmq.RECONNECT_IVL, RECONNECT_MS)  # the default of every socket made from it
            return context

        async def wait_for_ready(self, timeout: float | None = None) -> None:  # type: ignore[override]
            """jupyter_client's `wait_for_ready`: a kernel_info reply, and IOPub connected, then IOPub drained."""
            deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
            while True:
                self.kernel_info()
                try:
                    reply = await self.shell_channel.get_msg(timeout=1)
                except Empty:
                    reply = None
                if reply is not None and reply["msg_type"] == "kernel_info_reply":
                    try:
                        await self.iopub_channel.get_msg(timeout=0.2)  # IOPub connected (else: ask again)
                    except Empty:
                        pass
                    else:
                        self._handle_kernel_info_reply(reply)
                        break
                if not await self._async_is_alive():
                    raise RuntimeError("Kernel died before replying to kernel_info")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")
            while True:
                try:
                    await self.iopub_channel.get_msg(timeout=IOPUB_QUIET_S)
                except Empty:
                    return

    class WarmKernelManager(AsyncKernelManager):
        @default("client_factory")
        def _ready_client(self) -> type:
            return ReadyClient

        def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
            fresh = super().format_kernel_cmd(extra_arguments)
            return [sys.executable, "-m", "polarcatalog.runner.warm_kernel", "client", str(path), "--", *fresh]

    return WarmKernelManager


def main(argv: list[str]) -> None:
    if argv[:1] == ["serve"]:
        serve(Path(argv[1]))
    elif argv[:1] == ["client"] and "--" in argv:
        client(Path(argv[1]), argv[argv.index("--") + 1:])
    else:
        raise SystemExit("python -m polarcatalog.runner.warm_kernel serve SOCKET | client SOCKET -- CMD...")


if __name__ == "__main__":
    main(sys.argv[1:])
