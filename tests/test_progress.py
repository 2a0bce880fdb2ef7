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


def test_the_embed_path_reports_images_with_count_and_rate_on_the_terminal(tiny_clip_name, tmp_path, monkeypatch, capfd):
    """What `dvc repro` shows while the embed stage runs: one bar per encoder and view set, counted in images."""
    import numpy as np
    import torch
    from PIL import Image

    from polarcatalog.encoders import create_encoder
    from polarcatalog.encoders.preprocess import Preprocess
    from polarcatalog.features.encode import encode_image_views

    paths = []
    for i in range(10):
        a = np.full((30, 30, 3), 255, np.uint8)
        a[5:25, 5:25] = (i * 20, 100, 200 - i * 10)
        Image.fromarray(a).save(tmp_path / f"{i}.png")
        paths.append(str(tmp_path / f"{i}.png"))
    torch.manual_seed(0)
    enc = create_encoder(f"open_clip:{tiny_clip_name}:random", "image", "cpu")
    monkeypatch.setattr(sys, "stderr", OutStream())
    encode_image_views(enc, paths, tmp_path / "cache", [Preprocess(), Preprocess(flip=True)], batch_size=4)
    terminal = capfd.readouterr().err
    assert f"encode {enc.id}" in terminal and "10/10" in terminal and "img/s" in terminal


def test_the_terminal_line_does_not_move_the_cursor(monkeypatch, capfd):
    monkeypatch.setattr(sys, "stderr", OutStream())
    list(batches(300, 32, "efficientnet_lite0"))
    terminal = capfd.readouterr().err
    assert "300/300" in terminal and "\x1b[A" not in terminal
