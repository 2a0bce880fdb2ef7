"""The machine's other core for a stage's independent pieces of work: `fork_map(fn, items)` computes part of the items
in a forked child and the rest here, and returns every result in the items' order.

A stage computes on one thread (`polarcatalog.numerics` pins BLAS to one, so that its bits do not depend on the
machine), and DVC runs the stages one after the other: in a one-value experiment, half of a two-core machine idles.
Many stages sweep independent points (the memory-quality curve's memories, the bridge budgets, the constraint
strengths' memories). A point's result is the same function of the same inputs wherever it is computed, so a point
computed in the child has the bits it would have here.

Fork, not spawn: the child has the parent's imports and data at the cost of a fork, and `fn` may be a closure
(nothing is pickled on the way in); its results come back pickled through a pipe from that child (never data from
outside). A kernel's stdout and stderr belong to ipykernel's IOPub thread, which a forked child does not have: the
child writes nothing there (its streams go to /dev/null, `polarcatalog.progress` draws nothing in it), collects no
garbage (a collection would write to, and so copy, every page of the parent's heap it traverses) and leaves with
`os._exit`, running no interpreter teardown. `fn` must not draw figures, touch a faiss index (OpenMP's thread pool
does not survive a fork) or a GPU; the points mapped here are numpy and pandas only.

Sequential (everything here) with POLARCATALOG_PARALLEL=0, on one core, without fork, or for fewer than two items.
"""

from __future__ import annotations

import gc
import os
import pickle
import sys
import traceback
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_IN_CHILD = False  # set in a fork_map child: nothing there may write to the parent's streams


def enabled() -> bool:
    return (os.environ.get("POLARCATALOG_PARALLEL", "1") != "0" and hasattr(os, "fork")
            and (os.cpu_count() or 1) > 1 and not _IN_CHILD)


def in_child() -> bool:
    return _IN_CHILD


def fork_map(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """[fn(x) for x in items]: the odd-numbered items in a forked child, the even-numbered ones here (alternating, so
    that a sweep whose points grow in cost splits evenly)."""
    items = list(items)
    if len(items) < 2 or not enabled():
        return [fn(x) for x in items]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, leave
        _child(fn, items[1::2], read, write)
    os.close(write)
    try:
        mine = [fn(x) for x in items[0::2]]
    except BaseException:
        os.kill(pid, 9)
        raise
    finally:
        with os.fdopen(read, "rb") as pipe:
            payload = pipe.read()
        os.waitpid(pid, 0)
    status, theirs = pickle.loads(payload) if payload else ("error", "the child process ended without a result")
    if status != "ok":
        raise RuntimeError(f"fork_map: a point computed in the child process failed:\n{theirs}")
    out: list[R] = []
    for i in range(len(items)):
        out.append(mine[i // 2] if i % 2 == 0 else theirs[i // 2])
    return out


def fork_calls(*calls: Callable[[], R]) -> list[R]:
    """[call() for call in calls], as `fork_map` shares them out: independent computations of a stage side by side."""
    return fork_map(lambda call: call(), calls)


def _child(fn: Callable[[T], R], items: list[T], read: int, write: int) -> None:
    global _IN_CHILD
    code = 0
    try:
        _IN_CHILD = True
        gc.disable()  # a collection would write to (and so copy) every page of the parent's heap it traverses
        os.close(read)
        sys.stdout = sys.stderr = open(os.devnull, "w")
        try:
            payload = pickle.dumps(("ok", [fn(x) for x in items]), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            payload = pickle.dumps(("error", traceback.format_exc()))
        with os.fdopen(write, "wb") as pipe:
            pipe.write(payload)
    except BaseException:
        code = 1
    finally:
        os._exit(code)
