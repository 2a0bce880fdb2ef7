"""The `polarcatalog` command: `main()` pins the BLAS kernel and thread count (`polarcatalog.numerics`) before numpy
loads, then runs the command line (`cli.main`); `run-notebook`, which every stage runs, goes straight to its own module."""

from __future__ import annotations

import sys
import warnings


def main() -> None:
    from polarcatalog.numerics import pin_process  # heavy: not itself, but nothing may load numpy before the pins

    pin_process()  # before numpy loads: the kernel and thread count that give the same bits on every machine
    if sys.argv[1:2] == ["run-notebook"]:  # every stage's command: without the rest of the CLI's imports
        from polarcatalog.runner.run_notebook import run_forked  # heavy: not itself, but after the pins

        run_forked(sys.argv[2:])  # returns only where no warm process serves this checkout yet
        from polarcatalog.cli.run_notebook_command import run  # heavy: not itself, but after the pins

        run(sys.argv[2:])
        return
    from polarcatalog.cli.main import app  # heavy: loads numpy, after the pins

    warnings.showwarning = _one_line
    app()


def _one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int, file=None, line=None) -> None:
    """A warning as the commands print their other messages ("warning: ..."), not Python's file, line and source."""
    print(f"warning: {message}", file=sys.stderr if file is None else file, flush=True)
