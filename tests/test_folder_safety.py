"""`polarcatalog evaluate` on a hostile folder or output path: links never lead it out of the query folder, its CSV
cannot run as a spreadsheet formula, its results go nowhere DVC owns and are written whole or not at all."""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from polarcatalog import folder_eval
from polarcatalog.data.query_folder import read_query_folder
from tests.conftest import ROOT

SPECIES = pd.DataFrame({"species_id": [25], "name": ["Pikachu"], "slug": ["pikachu"]})


def test_links_out_of_the_folder_dangling_or_looping_are_skipped_and_reported(tmp_path):
    folder, outside = tmp_path / "queries", tmp_path / "secret"
    (folder / "pikachu").mkdir(parents=True)
    outside.mkdir()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(folder / "pikachu" / "a.png")
    (outside / "shadow.png").write_bytes(b"root:x:0:0")
    os.symlink(outside / "shadow.png", folder / "pikachu" / "shadow.png")  # out of the folder
    os.symlink(folder / "pikachu" / "a.png", folder / "pikachu" / "again.png")  # inside: a file like any other
    os.symlink(tmp_path / "nowhere.png", folder / "pikachu" / "dangling.png")
    os.symlink(folder, folder / "pikachu" / "loop")  # a directory link back up
    os.symlink(outside, folder / "elsewhere")
    listing = read_query_folder(folder, SPECIES)
    assert sorted(listing.rows["query_id"]) == ["pikachu/a.png", "pikachu/again.png"]
    assert listing.links_skipped == ["elsewhere/", "pikachu/dangling.png", "pikachu/loop/", "pikachu/shadow.png"]
    assert "4 symlink(s) skipped" in " ".join(listing.notes()) and listing.report()["links_skipped"]


def test_csv_cells_that_a_spreadsheet_would_run_are_escaped():
    df = pd.DataFrame({"query_id": ["=HYPERLINK(\"http://x\")", "+1", "-2", "@sum", "ok.png"], "rank": [1, 2, 3, 4, 5]})
    safe = folder_eval.csv_safe(df)
    assert list(safe["query_id"]) == ["'=HYPERLINK(\"http://x\")", "'+1", "'-2", "'@sum", "ok.png"]
    assert list(safe["rank"]) == [1, 2, 3, 4, 5] and df["query_id"][0].startswith("=")  # the input is untouched


def test_out_inside_a_stage_output_or_naming_a_file_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match=r"inside data/features, an output of the `embed` stage"):
        folder_eval.check_out(ROOT / "data" / "features" / "mine", ROOT)
    (tmp_path / "results.txt").write_text("x")
    with pytest.raises(ValueError, match="a file, not a folder"):
        folder_eval.check_out(tmp_path / "results.txt", ROOT)
    folder_eval.check_out(ROOT / "reports" / "evaluate" / "mine", ROOT)  # the default place is fine


def test_results_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    out = tmp_path / "out"
    pred, metrics = pd.DataFrame({"query_id": ["a.png"]}), {"mRR@1": 1.0}
    assert folder_eval.write_results(out, pred, metrics) is False
    assert folder_eval.write_results(out, pred, {"mRR@1": 0.5}) is True  # a rerun says it replaced the results
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(folder_eval.os, "fsync", full_disk)
    with pytest.raises(OSError, match="the disk is full.*previous results there are unchanged"):
        folder_eval.write_results(out, pd.DataFrame({"query_id": ["b.png"] * 1000}), {"mRR@1": 0.0})
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert json.loads((out / "metrics.json").read_text()) == {"mRR@1": 0.5}
