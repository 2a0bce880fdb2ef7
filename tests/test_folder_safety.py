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
    with pytest.raises(ValueError, match=r"results.txt is a file, so no folder can be made there"):
        folder_eval.check_out(tmp_path / "results.txt" / "out", ROOT)  # was 'Not a directory', after all the encoding
    folder_eval.check_out(ROOT / "reports" / "evaluate" / "mine", ROOT)  # the default place is fine
    # inside the query folder, the next run read this run's quarantined copies and results as queries (2 -> 4 -> 6)
    (tmp_path / "q").mkdir()
    for out in (tmp_path / "q" / "results", tmp_path / "q"):
        with pytest.raises(ValueError, match=r"is inside --queries .*: the next run would read this run's results"):
            folder_eval.check_out(out, ROOT, tmp_path / "q")
    folder_eval.check_out(tmp_path / "q_results", ROOT, tmp_path / "q")  # beside it is fine


def test_a_run_never_deletes_the_queries_or_a_quarantine_folder_it_did_not_write(tmp_path):
    """`--queries out/quarantine --out out` replaced out/quarantine, deleting the 19 images being read; a user's own
    out/quarantine/important.txt was deleted by the next run."""
    out = tmp_path / "out"
    (out / "quarantine").mkdir(parents=True)
    (out / "quarantine" / "important.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"--queries .* is inside --out .*would delete the images it reads"):
        folder_eval.check_out(out, ROOT, out / "quarantine")
    with pytest.raises(ValueError, match=r"holds a quarantine/ that no `polarcatalog evaluate` wrote"):
        folder_eval.check_out(out, ROOT, tmp_path / "elsewhere")
    assert (out / "quarantine" / "important.txt").read_text() == "mine"


def test_a_second_run_to_the_same_out_is_refused_while_the_first_holds_it(tmp_path):
    """Two runs finishing together left one's metrics.json beside the other's predictions.csv (8 of 40 tries)."""
    out = tmp_path / "out"
    with folder_eval.claim(out):
        with pytest.raises(ValueError, match=r"another `polarcatalog evaluate` is writing there now"):
            with folder_eval.claim(out):
                pass
        folder_eval.write_results(out, pd.DataFrame({"query_id": ["a.png"]}), {"mRR@1": 1.0})
    with folder_eval.claim(out):  # released with the run
        pass
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "predictions.csv"]  # no temporary left
    with pytest.raises(RuntimeError):
        with folder_eval.claim(tmp_path / "failed"):
            raise RuntimeError("the run failed before writing")
    assert not (tmp_path / "failed").exists()  # a folder it made and left empty is removed


def test_metrics_are_strict_json_and_the_quarantine_is_this_runs(tmp_path):
    """NaN went into metrics.json as bare `NaN` (no strict reader takes it); a rerun kept the last run's quarantined
    copies beside metrics that listed none."""
    from polarcatalog.data.images import Quarantine

    out, bad = tmp_path / "out", tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    with folder_eval.claim(out):
        quarantine = Quarantine(out / folder_eval.QUARANTINE_STAGING)
        quarantine.add(bad, "unreadable", "query")
        folder_eval.write_results(out, pd.DataFrame({"query_id": []}), {"mRR@1": float("nan"), "ci": [float("inf"), 0.5]},
                                  quarantine)
    assert json.loads((out / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(c)) == {"mRR@1": None,
                                                                                                      "ci": [None, 0.5]}
    assert sorted(p.name for p in (out / "quarantine").iterdir()) == [folder_eval.QUARANTINE_MARK, "00000_bad.png"]
    assert quarantine.rows[0]["copy"] == str(out / "quarantine" / "00000_bad.png")
    with folder_eval.claim(out):
        folder_eval.write_results(out, pd.DataFrame({"query_id": ["a.png"]}), {"mRR@1": 1.0},
                                  Quarantine(out / folder_eval.QUARANTINE_STAGING))
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "predictions.csv"]
    # as readable as any file the user writes (the temporary file's 0600 was kept: others could not read the results)
    mask = os.umask(0o022)
    try:
        with folder_eval.claim(out):
            folder_eval.write_results(out, pd.DataFrame({"query_id": ["a.png"]}), {"mRR@1": 1.0})
    finally:
        os.umask(mask)
    assert {oct(p.stat().st_mode & 0o777) for p in out.iterdir()} == {"0o644"}


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


def test_each_constraint_concepts_exclusion_quality_is_measured_against_the_truth():
    """Hand-computed: 5 species; `not fire` must exclude the 2 fire species and the memory's HAS edges catch one of
    them plus one non-fire species (recall 1/2, precision 1/2, and 2 of the 3 species without fire kept); `has green`
    must exclude the 3 species that are not green and the memory's NOT_HAS edges catch all 3 and nothing else (1, 1,
    both green species kept). Under hard the weak concept is flagged."""
    from polarcatalog.data.concepts import Concept
    from polarcatalog.memory.inputs import GraphInputs
    from polarcatalog.memory.memories import IncidenceMemory

    vocab = [Concept("type:fire", "type", "fire"), Concept("colour:green", "colour", "green")]
    truth = np.array([[1, 1], [1, 0], [0, 1], [0, 0], [0, 0]], bool)
    has = np.array([[1, 1], [0, 0], [1, 1], [0, 0], [0, 0]], bool)
    not_has = np.array([[0, 0], [0, 1], [0, 0], [0, 1], [0, 1]], bool)
    inputs = GraphInputs(vocab, np.arange(5), truth, np.zeros((5, 2)), np.arange(5), np.zeros((1, 2)), np.arange(1))
    memory = IncidenceMemory(has, not_has)
    fire, = folder_eval.concept_quality(inputs, memory, [0], "not")
    green, = folder_eval.concept_quality(inputs, memory, [1], "has")
    assert (fire["should be excluded"], fire["excluded"], fire["exclusion recall"], fire["exclusion precision"]) == (2, 2, 0.5, 0.5)
    assert (green["should be excluded"], green["excluded"], green["exclusion recall"], green["exclusion precision"]) == (3, 3, 1.0, 1.0)
    assert (fire["should be kept"], fire["kept"], green["should be kept"], green["kept"]) == (3, 2 / 3, 2, 1.0)
    hard = folder_eval.Constraint("green, not fire", ["colour:green"], ["type:fire"], "hard", [green, fire])
    lines = hard.quality_lines()
    assert sum("WARNING" in line for line in lines) == 1 and "'fire'" in next(line for line in lines if "WARNING" in line)
    assert not any("WARNING" in line for line in folder_eval.Constraint("x", [], [], "soft (p=0.01)", [fire]).quality_lines())


def test_a_has_constraint_the_memory_contradicts_for_most_wanted_species_is_flagged():
    """Hand-computed: 10 species, 3 electric; the memory marks NOT_HAS on 2 of the 3 electric ones and on every
    non-electric one. Exclusion recall 7/7 and precision 7/9 (both near the bar), but a hard `has electric` keeps
    1 of the 3 species asked for: the kept share (1/3) is what flags it."""
    from polarcatalog.data.concepts import Concept
    from polarcatalog.memory.inputs import GraphInputs
    from polarcatalog.memory.memories import IncidenceMemory

    vocab = [Concept("type:electric", "type", "electric")]
    truth = np.array([[1], [1], [1]] + [[0]] * 7, bool)
    not_has = np.array([[1], [1], [0]] + [[1]] * 7, bool)
    inputs = GraphInputs(vocab, np.arange(10), truth, np.zeros((10, 1)), np.arange(10), np.zeros((1, 1)), np.arange(1))
    electric, = folder_eval.concept_quality(inputs, IncidenceMemory(np.zeros_like(not_has), not_has), [0], "has")
    assert (electric["exclusion recall"], electric["exclusion precision"], electric["kept"]) == (1.0, 7 / 9, 1 / 3)
    lines = folder_eval.Constraint("an electric type", ["type:electric"], [], "hard", [electric]).quality_lines()
    assert "it keeps 33 % of the 3 it should keep" in lines[0] and "WARNING" in lines[1]


def test_a_constrained_run_with_every_image_quarantined_renders_without_a_conflict_rate():
    """Conflict@k is None when no image was ranked: `:.3f` of None was a TypeError after all the work."""
    constraint = folder_eval.Constraint("green", ["colour:green"], [], "hard")
    metrics = {"labelled": None, "unknown_labels": 0,
               "constraint": {"Conflict@5 (memory)": None, "gold contradicted by the memory": 0}}
    text = folder_eval.EvaluateResult(pd.DataFrame(), metrics, [], constraint).render()
    assert "constraint: Conflict@5 (memory) n/a (no image ranked), gold contradicted by the memory 0" in text
    assert "no image of the folder could be ranked" in text  # not a silent success


def test_a_zero_width_interval_is_said_to_be_no_certainty():
    """Eight artwork images, each at rank 1: the bootstrap printed mRR@1 [1.000, 1.000] 'few species: a wide
    interval', an interval of width 0 called wide and read as certainty."""
    def ci(low: float, high: float) -> dict:
        return {"value": high, "ci_low": low, "ci_high": high}

    labelled = {"n": 8, "mRR@1": 1.0, "mRR@5": 1.0, "mRR@10": 1.0, "R@10": 1.0, "acc@1": 1.0}
    pred = pd.DataFrame(columns=["query_id", "gold_name", "gold_rank", "predicted_names", "states"])
    for metrics, said, unsaid in (
        ({"mRR@1": ci(1, 1), "R@10": ci(1, 1)}, "every resample scores the same mRR@1, R@10: a zero-width interval "
                                                "over 8 species is no sign of certainty", "few distinct resamples"),
        ({"mRR@1": ci(0.5, 1), "R@10": ci(0.75, 1)}, "(over 8 species the bootstrap has few distinct resamples",
         "no sign of certainty"),
        ({"mRR@1": ci(0.98, 1), "R@10": ci(0.99, 1)}, "the interval's own width is uncertain, narrow or wide",
         "a wide interval"),  # a narrow interval over few species was called wide
    ):
        text = folder_eval.EvaluateResult(pred, {"labelled": labelled, "labelled_ci": {
            "species": 8, "level": 0.95, "metrics": metrics}}, []).render()
        assert said in text and unsaid not in text, text


def test_a_gold_species_outside_the_candidates_is_said_so_not_rank_inf():
    pred = pd.DataFrame({"query_id": ["a.png", "b.png"], "gold_name": ["Golurk", "Pikachu"], "gold_rank": [np.inf, 2.0],
                         "predicted_names": [["Pichu"], ["Raichu", "Pikachu"]], "states": [[0], [0, 0]]})
    text = folder_eval.EvaluateResult(pred, None, []).render()
    assert "a.png: Pichu (gold: Golurk, not among the retrieved candidates)" in text and "rank inf" not in text
    assert "b.png: Raichu, Pikachu (gold: Pikachu, rank 2)" in text


def test_the_printed_metrics_are_in_percent_like_every_report():
    """`evaluate` printed mRR@1 0.283 where the reports and `polarcatalog experiments` print 28.3: one unit in what a
    person reads (metrics.json keeps fractions, as MLflow does)."""
    labelled = {"n": 6, "mRR@1": 0.5, "mRR@5": 0.6125, "mRR@10": 0.6167, "R@10": 5 / 6, "acc@1": 0.5}
    ci = {"species": 5, "level": 0.95, "metrics": {"mRR@1": {"value": 0.5, "ci_low": 0.1667, "ci_high": 0.8333}}}
    pred = pd.DataFrame(columns=["query_id", "gold_name", "gold_rank", "predicted_names", "states"])
    text = folder_eval.EvaluateResult(pred, {"labelled": labelled, "labelled_ci": ci}, []).render()
    assert "6 labelled queries, in %: mRR@1 50.0  mRR@5 61.3  mRR@10 61.7  R@10 83.3  acc@1 50.0" in text, text
    assert "mRR@1 [16.7, 83.3]" in text and "0.500" not in text
