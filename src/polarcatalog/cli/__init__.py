"""The `polarcatalog` command: `main()` pins the BLAS kernel and thread count (`polarcatalog.numerics`) before numpy
loads, then runs the command line (`cli.main`); `run-notebook`, which every stage runs, goes straight to its own module.
The two commands DVC runs, `run-notebook` and `check-params`, are forked from the checkout's warm process when one
serves it (`runner.warm_kernel`): their imports are done there."""

from __future__ import annotations

import sys


def main() -> None:
    from polarcatalog.numerics import pin_process  # heavy: not itself, but nothing may load numpy before the pins

    pin_process()  # before numpy loads: the kernel and thread count that give the same bits on every machine
    if sys.argv[1:2] == ["run-notebook"]:  # every stage's command: without the rest of the CLI's imports
        from polarcatalog.runner.run_notebook import run_forked  # heavy: not itself, but after the pins

        run_forked(sys.argv[2:])  # returns only where no warm process serves this checkout yet
        from polarcatalog.cli.run_notebook_command import run  # heavy: not itself, but after the pins

        run(sys.argv[2:])
        return
    if sys.argv[1:2] == ["check-params"]:  # the `check` stage, first in every run: forked like a stage's runner
        from polarcatalog.runner.run_notebook import run_forked  # heavy: not itself, but after the pins

        run_forked(sys.argv[1:], module="polarcatalog.cli.main")  # returns where no warm process serves yet
    from polarcatalog.cli.main import run_app  # heavy: loads numpy, after the pins

    run_app()
