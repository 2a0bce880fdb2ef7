"""Progress bars that reach the terminal where `dvc repro` runs, not only the notebook.

A stage notebook runs in a Jupyter kernel started by papermill: tqdm there draws a widget into the notebook, and the
terminal only sees papermill's "Executing 4/6" for as long as the cell takes. Inside a kernel, `sys.stderr` is the
kernel's output stream while `sys.__stderr__` is still the stderr the kernel process inherited from papermill, i.e.
the terminal. So every bar is drawn twice there: the notebook's (tqdm.auto) and a plain text one on the terminal,
throttled to one line every few seconds, with count, rate and ETA. Outside a kernel (the CLI, tests) there is one bar.
"""

from __future__ import annotations

import sys
from typing import Iterable, Iterator, TypeVar

from tqdm import tqdm as text_tqdm
from tqdm.auto import tqdm as auto_tqdm

from polarcatalog.parallel import in_child

T = TypeVar("T")


def _terminal() -> object | None:
    """The launching terminal's stream when running inside a Jupyter kernel (whose sys.stderr is ipykernel's
    OutStream), else None."""
    in_kernel = type(sys.stderr).__module__.startswith("ipykernel")
    return sys.__stderr__ if in_kernel and sys.__stderr__ is not None else None


def say(message: str) -> None:
    """A line for the notebook and, inside a kernel, for the terminal running `dvc repro` too."""
    print(message, flush=True)
    terminal = _terminal()
    if terminal is not None:
        print(message, file=terminal, flush=True)


def progress(steps: Iterable[T], total: int, desc: str, unit: str = "it", weights: Iterable[int] | None = None,
             disable: bool = False, mininterval: float = 5.0) -> Iterator[T]:
    """Yield `steps`, advancing by each step's weight (e.g. the images in a batch; default 1) out of `total`."""
    if disable or in_child():  # a fork_map child draws nothing: its parent's streams are not its own
        yield from steps
        return
    bars = [auto_tqdm(total=total, desc=desc, unit=unit)]
    terminal = _terminal()
    if terminal is not None:
        # position 0: the notebook's bar is another tqdm instance; without it this one would draw one line lower and
        # move the terminal's cursor up ("\x1b[A") on every refresh
        bars.append(text_tqdm(total=total, desc=desc, unit=unit, file=terminal, mininterval=mininterval, ascii=True,
                              dynamic_ncols=False, ncols=100, position=0))
    weights = iter(weights) if weights is not None else None
    try:
        for step in steps:
            yield step
            w = next(weights) if weights is not None else 1
            for bar in bars:
                bar.update(w)
    finally:
        for bar in bars:
            bar.close()


def batches(n: int, batch_size: int, desc: str, unit: str = "img") -> Iterator[int]:
    """Start index of each batch of `n` items, with a progress bar counted in items (shown only for > 1 batch)."""
    starts = range(0, n, batch_size)
    return progress(starts, n, desc, unit, weights=(min(batch_size, n - i) for i in starts), disable=n <= batch_size)
