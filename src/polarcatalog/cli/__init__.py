"""The `polarcatalog` command: `main()` pins the BLAS kernel and thread count (`polarcatalog.numerics`) before numpy
loads, then runs the command line (`cli.main`)."""

from __future__ import annotations


def main() -> None:
    from polarcatalog.numerics import pin_process  # heavy: not itself, but nothing may load numpy before the pins

    pin_process()  # before numpy loads: the kernel and thread count that give the same bits on every machine
    from polarcatalog.cli.main import app  # heavy: loads numpy, after the pins

    app()
