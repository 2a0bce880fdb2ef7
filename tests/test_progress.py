"""Progress reaches the terminal that launched a notebook kernel (where `dvc repro` runs), with count and rate."""

from __future__ import annotations

import io
import sys

from polarcatalog.progress import batches, progress


class OutStream(io.StringIO):
    """Stands in for ipykernel's OutStream: a kernel redirects sys.stderr; sys.__stderr__ stays the terminal."""


OutStream.__module__ = "ipykernel.iostream"


def test_inside_a_kernel_the_bar_is_mirrored_to_the_launching_terminal(monkeypatch, capfd):
    monkeypatch.setattr(sys, "stderr", OutStream())
    starts = list(batches(100, 32, "efficientnet_lite0"))
    assert starts == [0, 32, 64, 96]
    terminal = capfd.readouterr().err
    assert "efficientnet_lite0" in terminal and "100/100" in terminal and "img/s" in terminal


def test_outside_a_kernel_there_is_one_bar_and_small_jobs_are_quiet(capfd):
    assert list(progress(range(3), 3, "articles", unit="species")) == [0, 1, 2]
    err = capfd.readouterr().err
    assert err.count("3/3") == 1  # one bar, not two
    assert list(batches(10, 32, "tiny")) == [0]
    assert "tiny" not in capfd.readouterr().err  # a single batch draws no bar
