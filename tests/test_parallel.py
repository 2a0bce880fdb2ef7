"""`fork_map`: a stage's independent points on the machine's two cores, with the results (and their bits) of a loop."""

from __future__ import annotations

import os

import numpy as np
import pytest

from polarcatalog import parallel, progress

pytestmark = pytest.mark.skipif(not parallel.enabled(), reason="fork and two cores")


def test_the_results_are_the_loops_in_order_with_the_same_bits_and_half_come_from_a_child():
    rng = np.random.default_rng(0)
    data = rng.normal(size=(300, 50))  # closed over, not passed: nothing is pickled on the way in

    def point(i: int) -> tuple[int, np.ndarray]:
        return os.getpid(), np.linalg.svd(data[: 100 + i] * (i + 1), compute_uv=False)

    for n in (0, 1, 2, 5):
        got, want = parallel.fork_map(point, range(n)), [point(i) for i in range(n)]
        assert len(got) == n
        for (pid, values), (_, expected) in zip(got, want):
            assert values.tobytes() == expected.tobytes()  # the same bits, whichever process computed them
        pids = [pid for pid, _ in got]
        assert all(p == os.getpid() for p in pids[0::2])
        assert all(p != os.getpid() for p in pids[1::2])  # the odd-numbered points: the forked child
    assert parallel.fork_calls(lambda: "a", lambda: "b", lambda: "c") == ["a", "b", "c"]


def test_off_it_is_the_loop_itself(monkeypatch):
    monkeypatch.setenv("POLARCATALOG_PARALLEL", "0")
    assert [pid for pid in parallel.fork_map(lambda _: os.getpid(), range(4))] == [os.getpid()] * 4


def test_a_failing_point_raises_here_whichever_process_ran_it_and_leaves_no_child(monkeypatch):
    forked = []
    fork = os.fork

    def recording_fork() -> int:
        pid = fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recording_fork)

    def point(i: int) -> int:
        if i == 3:
            raise ValueError(f"bad point {i}")
        return i

    with pytest.raises(RuntimeError, match=r"(?s)failed:.*ValueError: bad point 3"):  # in the child: its traceback
        parallel.fork_map(point, range(5))
    with pytest.raises(ValueError, match="bad point 3"):  # here: the error itself
        parallel.fork_map(lambda i: point(i + 1), range(5))
    assert len(forked) == 2
    for pid in forked:  # each child was waited for (none left a zombie): it is no longer this process's child
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_the_child_writes_nothing_to_this_process_streams_and_draws_no_progress(capfd):
    def point(i: int) -> bool:
        print(f"point {i}")
        list(progress.progress(range(3), 3, f"bar {i}"))
        return parallel.in_child()

    assert parallel.fork_map(point, range(4)) == [False, True, False, True]
    out, err = capfd.readouterr()
    assert "point 0" in out and "point 2" in out and "point 1" not in out and "point 3" not in out
    assert "bar 1" not in err and "bar 3" not in err
