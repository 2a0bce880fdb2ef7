"""The tiny pipeline's real `dvc repro` (tests/tiny_pipeline.py: 12 species, a real MLflow sqlite store): what every
stage wrote and logged, the `polarcatalog evaluate` CLI on folders of new query images, and a second repro that
does nothing. The tools around a built pipeline (DVC queue, plots and remote; MLflow UI and team server) are in
tests/test_pipeline_tools.py, on their own copy."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient
from PIL import Image

from tests import read_audit as audit
from tests import tiny_pipeline as tiny
from polarcatalog.runner.pipelines import declaration, stage_names
from tests.conftest import SHARED_DATA, run_ok

pytestmark = pytest.mark.slow
N_SPECIES = tiny.N_SPECIES


@pytest.fixture(scope="module")
def repo(tiny_pipeline, tmp_path_factory):
    return tiny.checkout(tiny_pipeline, tmp_path_factory.mktemp("pipeline") / "tiny")


def test_processed_tables(repo):
    root, _ = repo
    species = pd.read_parquet(root / "data/processed/species.parquet")
    assert species["species_id"].tolist() == list(range(1, N_SPECIES + 1))
    assert (species["summary"].str.split().str.len() > 5).all()
    assert (species["summary_words"] <= species["article_words"]).all()
    chunks = pd.read_parquet(root / "data/processed/chunks.parquet")
    assert set(chunks["species_id"]) == set(species["species_id"])
    queries = pd.read_parquet(root / "data/processed/queries.parquet")
    assert len(queries) == 2 * N_SPECIES and set(queries["variant"]) == {"regular", "shiny"}
    assert queries.set_index("query_id").loc["regular/bulbasaur", "species_id"] == 1
    anchors = pd.read_parquet(root / "data/processed/anchors.parquet")
    assert set(anchors["species_id"]) == set(species["species_id"])  # every species keeps >= 1 anchor


def test_every_stage_reads_only_what_dvc_yaml_declares(repo):
    """DVC reruns a stage only when what it declares changes: every params key and repository file a stage's
    notebook read (recorded under POLARCATALOG_AUDIT, see tests/read_audit.py) must be declared for it."""
    root, env = repo
    records, problems = {}, {}
    for stage in stage_names(root, ("dvc.yaml",)):  # the bird pipeline's stages: tests/test_birds_pipeline.py
        if "run-notebook" not in declaration(root, stage)["cmd"]:
            continue  # `check`: validates params.yaml in the CLI, outside any notebook
        path = Path(env[audit.ENV]) / f"{stage}.json"
        if not path.is_file():  # e.g. the kernel imported another checkout's polarcatalog, without the audit
            problems[stage] = f"no record at {path}"
            continue
        records[stage] = json.loads(path.read_text())
        missing = {kind: keys for kind, keys in audit.undeclared(root, stage, records[stage]).items() if keys}
        if missing:
            problems[stage] = missing
    assert not problems, "reads that dvc.yaml does not declare for the stage:\n" + "\n".join(
        f"  {stage}: {missing}" for stage, missing in problems.items())
    # the records are not vacuous: parquet (io.read_table), numpy and image reads, field reads in the kernel
    assert {"data/processed/queries.parquet", "data/features/manifest.json"} <= set(records["retrieve"]["files"])
    assert any(f.endswith(".npy") for f in records["retrieve"]["files"]) and "retrieval.lam" in records["retrieve"]["params"]
    assert any(f.startswith("data/raw/pokesprite/") for f in records["embed"]["files"])


def test_embed_keeps_a_colour_basis_for_the_projected_encoders_only(repo):
    """The embed stage learns the colour-nuisance directions for `retrieval.colour_invariant` and no other encoder; the
    retrieval's anchors of those encoders have no component left along the configured directions."""
    from polarcatalog.retrieval.query_side import retrieval_features
    from polarcatalog.config import load_params
    from polarcatalog.features.workspace import load_workspace

    root, _ = repo
    params = load_params(root / "params.yaml")
    rp = params.retrieval
    ws = load_workspace(root / "data/features", root / "data/processed")
    assert rp.colour_invariant and set(ws.colour_basis) == set(rp.colour_invariant) != set(ws.anchor_f)
    feats = retrieval_features(ws.anchor_f, ws, rp)
    for name, basis in ws.colour_basis.items():
        np.testing.assert_allclose(basis @ basis.T, np.eye(len(basis)), atol=1e-4)
        assert len(basis) == 3 * len(ws.anchors)  # hue +120, hue +240 and grey per anchor (fewer than MAX_DIM here)
        np.testing.assert_allclose(feats[name] @ basis[: rp.colour_invariant_dim].T, 0.0, atol=1e-5)
    for name in set(ws.anchor_f) - set(rp.colour_invariant):
        assert feats[name] is ws.anchor_f[name]


def test_curation_report(repo):
    root, _ = repo
    m = json.loads((root / "reports/curation.json").read_text())
    assert m["species"] == m["species_with_summary"] == N_SPECIES
    assert m["queries"] == 2 * N_SPECIES and m["anchor_candidates_distractors"] == 3
    assert 0 <= m["anchor_filter"]["precision"] <= 1 and 0 <= m["anchor_filter"]["recall"] <= 1
    assert m["summary_words_mean"] < m["article_words_mean"]
    md = (root / "reports/curation.md").read_text()
    for heading in ("## Catalog", "## Anchor filter", "## Quarantine", "precision"):
        assert heading in md
    if (SHARED_DATA / "pokeapi").is_dir():
        assert m["article_words_mean"] > 100 and "colour_vs_pokedex" in m
    for fig in ("curation_summary_lengths", "curation_anchor_filter", "curation_colours"):
        assert (root / f"reports/figures/{fig}.png").stat().st_size > 1000


def test_the_kg_stage_builds_the_catalogs_graph_and_reports_kgret_against_its_control(repo):
    root, _ = repo
    triples = pd.read_parquet(root / "data/processed/kg/triples.parquet")
    species = {h for h in triples["head"] if h.startswith("species:")}
    assert species == {f"species:{i}" for i in range(1, N_SPECIES + 1)}  # the catalog's species only
    evolves = set(zip(triples.loc[triples["relation"] == "evolves_from", "head"], triples.loc[triples["relation"] == "evolves_from", "tail"]))
    assert {("species:2", "species:1"), ("species:3", "species:2")} <= evolves  # Ivysaur from Bulbasaur, Venusaur from Ivysaur
    assert set(triples.loc[triples["head"] == "species:1", "source"]) >= {"@pkmn/dex@0.10.11#1", "article:1"}
    kg = json.loads((root / "reports/kg.json").read_text())
    for system in ("baseline", "budget-matched", "+KG", "+KGret"):
        assert f"all queries/{system}/completeness" in kg["test"] and f"all queries/{system}/Recall@5" in kg["test"]
    assert kg["test"]["all queries/+KG/completeness"] == kg["test"]["all queries/baseline/completeness"]  # no reader
    audit = pd.read_parquet(root / "data/processed/audit/kg_queries.parquet")
    assert len(audit) == 2 * N_SPECIES and audit["kg_facts"].map(len).between(1, 8).all()
    assert all(set(b).isdisjoint(t) and len(b) <= kg["bridge"] for b, t in zip(audit["bridged"], audit["top_k"]))
    assert "budget-matched" in (root / "reports/kg.md").read_text()


def _stage_runs(env):
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(experiment_names=["polarcatalog"], output_format="list")
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags], [r for r in runs if "mlflow.parentRunId" in r.data.tags]


def test_one_mlflow_run_per_stage_with_notebook_and_figures(repo):
    root, env = repo
    parents, children = _stage_runs(env)
    runs = {r.info.run_name: r for r in parents}
    assert sorted(r.info.run_name for r in parents) == sorted(["fetch", "curate", "embed", "retrieve", "graph", "kg",
                                                               "ablate@lam", "ablate@top_k", "ablate_polar@constraint",
                                                               "ablate_polar@coverage", "ablate_kg@bridge", "memory_quality",
                                                               "report"])
    assert all(r.info.status == "FINISHED" for r in parents + children)
    # one child run per ablation value, under its axis
    lam_children = [c for c in children if c.data.tags["mlflow.parentRunId"] == runs["ablate@lam"].info.run_id]
    assert sorted(c.data.params["retrieval.lam"] for c in lam_children) == ["0.0", "0.5", "1.0"]
    assert all(c.data.params["retrieval.k"] == "5" and c.data.params["ablation.axis"] == "lam" for c in lam_children)
    # a child's metrics: every split and metric on all queries, each with its CI; every query group's rows are in the
    # parent's tidy table
    table = pd.read_csv(root / "reports/plots/ablate_lam.csv")
    assert table["queries"].nunique() > 1
    for c in lam_children:
        rows = table[(table["lam"] == float(c.data.params["retrieval.lam"])) & (table["queries"] == "all")]
        assert len(c.data.metrics) == 3 * len(rows) > 0 and {"dev", "test"} <= set(rows["split"])
        assert all("/all/" in name for name in c.data.metrics)
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    assert [a.path for a in client.list_artifacts(runs["ablate@lam"].info.run_id, "tables")] == ["tables/ablate_lam.csv"]
    assert all(r.data.tags["run_kind"] == "pipeline" for r in parents)
    cur = runs["curate"]
    assert cur.info.status == "FINISHED"
    assert cur.data.params["curate.chunk_words"] == "40" and cur.data.params["dataset.species_limit"] == str(N_SPECIES)
    assert cur.data.metrics["species"] == N_SPECIES
    assert cur.data.tags["dvc_stage"] == "curate" and len(cur.data.tags["git_commit"]) == 40
    assert "seed" not in cur.data.params and cur.data.params["dataset.seed"] == "0" and "graph.kappa" not in cur.data.params
    assert [a.path for a in client.list_artifacts(cur.info.run_id, "notebook")] == ["notebook/01_curate.html",
                                                                                    "notebook/01_curate.ipynb"]
    assert len(client.list_artifacts(cur.info.run_id, "figures")) == 3
    assert (root / "reports/notebooks/01_curate.ipynb").is_file()


def test_every_executed_notebook_shows_its_figures(repo):
    """Notebook-first: each figure a stage logs is shown inline in its executed copy (an image/png output), as many
    as the stage's MLflow run holds."""
    root, env = repo
    parents, _ = _stage_runs(env)
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    for run in parents:
        stage = run.data.tags["dvc_stage"]
        figures = len(client.list_artifacts(run.info.run_id, "figures"))
        notebook = run.data.tags["mlflow.source.name"].removeprefix("notebooks/")
        name = notebook.replace("05_ablate", f"05_ablate_{stage.partition('@')[2]}") if "@" in stage else notebook
        executed = json.loads((root / "reports/notebooks" / name).read_text())
        pngs = sum("image/png" in out.get("data", {}) for cell in executed["cells"] for out in cell.get("outputs", []))
        assert pngs == figures, f"{name}: {pngs} inline figures, {figures} logged"


def _records(obj, path=""):
    """Every headline record ({value, ci_low, ci_high, split, ...}) in a metrics file, with its JSON path."""
    if isinstance(obj, dict):
        if "ci_low" in obj:
            yield path, obj
        for k, v in obj.items():
            yield from _records(v, f"{path}/{k}")


def test_retrieval_table_and_ablation_outputs(repo):
    root, _ = repo
    m = json.loads((root / "reports/retrieval.json").read_text())
    assert m["species"] == N_SPECIES and m["queries"] == 2 * N_SPECIES
    p = m["protocol"]
    assert p["dev_species"] + p["test_species"] == N_SPECIES and p["dev_species"] >= 1 and p["test_species"] >= 1
    assert set(m["configured"]) == {"all", "regular", "shiny"}
    c = m["configured"]["all"]["mRR@1"]
    assert c["split"] == "test" and c["n"] == p["test_queries"] and c["ci_low"] <= c["value"] <= c["ci_high"]
    assert m["best_on_dev"]["chosen_on"] == "dev" and m["anchor_scale_px"]["chosen_on"] == "dev"
    # 12 species (about 8 on the test side): anything sensible is well above chance (mRR@1 = 1/12)
    assert c["value"] > 2 * m["chance"]["mRR@1"]
    md = (root / "reports/retrieval.md").read_text()
    assert "(configured)" in md and "catalog-mean centring" in md and "chance" in md and "multimodal" in md
    audit = pd.read_parquet(root / "data/processed/audit/retrieve_queries.parquet")
    assert len(audit) == 2 * N_SPECIES and {"s_m", "s_i", "s", "gold_rank", "split"} <= set(audit.columns)
    splits = pd.read_parquet(root / "data/processed/splits.parquet")
    assert audit.groupby("gold_species_id")["split"].nunique().max() == 1  # species-disjoint
    assert set(splits["split"]) == {"dev", "test"}
    lam = json.loads((root / "reports/ablate_lam.json").read_text())
    assert sorted(lam["test"]["mRR@1"]) == ["0.0", "0.5", "1.0"]
    configured = yaml.safe_load((root / "params.yaml").read_text())["retrieval"]["lam"]
    assert lam["chosen_on_dev"]["lam"] in (0.0, 0.5, 1.0) and lam["chosen_on_dev"]["configured"] == configured
    lam_plot = pd.read_csv(root / "reports/plots/ablate_lam.csv")
    assert set(lam_plot["chunks"]) == {"anchors", "multimodal"}  # the paper's setting beside the configured one
    top_k = pd.read_csv(root / "reports/plots/curve_top_k.csv")
    assert top_k["k"].tolist() == [1, 3, 5, 10, 15] and top_k["test R@k"].is_monotonic_increasing  # recall never drops with k
    for name in ("retrieval", "ablate_lam", "ablate_top_k", "ablate_constraint", "ablate_coverage"):
        records = list(_records(json.loads((root / f"reports/{name}.json").read_text())))
        assert records and all(r["split"] == "test" for _, r in records), name
        defined = [r for _, r in records if r["value"] == r["value"]]  # NaN: no test query of that kind at 12 species
        assert defined and all(r["ci_low"] - 1e-9 <= r["value"] <= r["ci_high"] + 1e-9 for r in defined), name
    for fig in ("ablate_lam", "ablate_top_k", "retrieval_table", "kg_bridge"):
        assert (root / f"reports/figures/{fig}.png").stat().st_size > 1000


def test_each_stage_declares_a_few_flat_headline_numbers(repo):
    """What `dvc exp show` and `dvc metrics diff` compare: per stage, a handful of numbers; the detail is elsewhere."""
    root, _ = repo
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    declared = [next(iter(m)) for s in stages.values() for m in s.get("do", s).get("metrics", [])]
    assert all(path.startswith("reports/metrics/") for path in declared) and len(declared) == len(stages) - 2  # not check, report
    files = {f.stem: json.loads(f.read_text()) for f in (root / "reports/metrics").glob("*.json")}
    assert set(files) == {"fetch", "curation", "embed", "retrieval", "graph", "kg", "ablate_lam", "ablate_top_k",
                          "ablate_constraint", "ablate_coverage", "ablate_bridge", "memory_quality", "birds"}  # birds: birds/dvc.yaml
    for name, values in files.items():
        assert 1 <= len(values) <= 8 and all(isinstance(v, (int, float)) for v in values.values()), (name, values)
    keys = [k for values in files.values() for k in values]
    assert len(keys) == len(set(keys)), "a headline key in two files: `dvc exp show` then prefixes it with the path"
    r = files["retrieval"]
    detail = json.loads((root / "reports/retrieval.json").read_text())["configured"]["all"]["mRR@1"]
    assert (r["test mRR@1"], r["test mRR@1 lo"], r["test mRR@1 hi"]) == tuple(round(detail[k], 4) for k in ("value", "ci_low", "ci_high"))


def test_report_stage_writes_the_results_section(repo):
    root, _ = repo
    md = (root / "reports/README.md").read_text()
    for section in ("## Recognition", "## λ", "## Constraints with controls", "oracle", "random", "## Proposer coverage",
                    "## Graph quality", "## What the embedded models can and cannot show", "code commit `"):
        assert section in md, section
    generation = pd.read_csv(root / "reports/plots/generation.csv")
    assert set(generation["stratum"]) == {"gen 1"} and set(generation["split"]) == {"test"}
    for fig in ("report_generation", "report_failures"):
        assert (root / f"reports/figures/{fig}.png").stat().st_size > 1000


def test_polarized_graph_and_constraint_tables(repo):
    root, _ = repo
    from polarcatalog.memory.polar_graph import read_graphml

    g = read_graphml(root / "data/processed/graph/polar_graph.graphml")
    kinds = [d["kind"] for _, d in g.nodes(data=True)]
    assert kinds.count("visual") >= N_SPECIES and kinds.count("concept") > 20
    relations = {d["relation"] for _, _, d in g.edges(data=True)}
    assert {"HAS", "NOT_HAS"} <= relations
    graph = json.loads((root / "reports/graph.json").read_text())
    assert 0 <= graph["edges"]["has_precision"] <= 1 and graph["stats"]["visual_nodes"] >= N_SPECIES
    assert set(graph["evaluated_edges"]) == {"as proposed", "with critical completion"}
    cons = pd.read_csv(root / "reports/plots/ablate_constraint.csv")
    assert {"configured (critical completion)", "oracle (ground truth)", "random (same density)"} <= set(cons["memory"])
    assert {"all", "regular", "shiny"} <= set(cons["queries"]) and set(cons["set"]) == {
        "primary: catalog look-alikes", "secondary: ranking look-alikes"}
    at = lambda memory, strength, metric: cons[(cons["memory"] == memory) & (cons["strength"] == strength)  # noqa: E731
                                               & (cons["metric"] == metric) & (cons["queries"] == "all")
                                               & (cons["set"] == "primary: catalog look-alikes")]["value"]
    # hard retrieval keeps no memory-conflicting candidate in the top-3 when enough compatible ones exist
    assert (at("configured (critical completion)", "hard", "Conflict@3 (memory, >= 3 compatible)").dropna() == 0).all()
    assert (at("oracle (ground truth)", "hard", "Conflict@3 (ground truth)") <= at("oracle (ground truth)", "none", "Conflict@3 (ground truth)").to_numpy()).all()
    constraint = json.loads((root / "reports/ablate_constraint.json").read_text())
    assert "oracle (ground truth)/hard" in constraint["test"]["target mRR@1"]
    coverage = pd.read_csv(root / "reports/plots/ablate_coverage.csv")
    catalog = coverage[coverage["split"] == "catalog"].pivot_table(index="setting", columns="metric", values="value")
    recall = catalog["Proposal Recall@K"]
    assert recall["all"] == 1.0 and recall["top_n:3"] <= recall["top_n:12"] <= recall["all"]
    budget = catalog["concepts proposed per image"]
    for n in (6, 12):  # every strategy at equal K, the local views embedded for every catalog image
        assert budget[f"top_n:{n}"] == budget[f"multi_prompt:{n}"] == budget[f"global_local:{n}"] == n
    with np.load(root / "data/processed/graph/scores.npz") as z:
        assert z["anchor_local"].shape == (len(z["anchor"]), 4, z["anchor"].shape[1])


def test_memory_levers_start_from_the_configured_memory_and_read_dev_only(repo):
    """The memory_quality stage's levers: one row per lever after the memory as configured (a zero gain against
    itself), dev columns only."""
    root, _ = repo
    from polarcatalog.config import load_params

    levers = json.loads((root / "reports/memory_quality.json").read_text())["memory_levers_dev"]
    params = load_params(root / "params.yaml")
    assert [r["probe"] for r in levers] == ["as configured", *params.ablations.memory_levers]
    zero = levers[0]["dev gain"]
    assert (zero["value"], zero["ci_low"], zero["ci_high"], zero["split"]) == (0, 0, 0, "dev")
    assert all(k.startswith("dev") or k in ("probe", "has precision", "has recall", "not has precision", "not has recall")
               for r in levers for k in r)
    assert "## Memory levers (dev only)" in (root / "reports/memory_quality.md").read_text()


def test_cli_evaluate_on_a_tiny_folder(repo, tmp_path):
    root, env = repo
    sprites = root / "data/raw/pokesprite/package/pokemon-gen8/regular"
    q = tmp_path / "my_queries"
    for folder, slug in (("bulbasaur", "bulbasaur"), ("4", "charmander"), ("Squirtle", "squirtle")):
        (q / folder).mkdir(parents=True)
        shutil.copy(sprites / f"{slug}.png", q / folder / "a.png")
    (q / "Squirtle" / "broken.png").write_bytes(b"not an image")
    shutil.copy(sprites / "pikachu.png", q / "unlabelled.png")
    # blank frames (a white image, an all-transparent sprite) get no ranking: quarantined like unreadable files
    Image.new("RGB", (64, 48), "white").save(q / "Squirtle" / "blank.jpg")
    Image.new("RGBA", (96, 96), (0, 0, 0, 0)).save(q / "bulbasaur" / "transparent.png")
    (q / "bulbasaur" / "README.txt").write_text("where these came from")
    out = run_ok([str(Path(sys.executable).parent / "polarcatalog"), "evaluate", "--queries", str(q), "--out", str(tmp_path / "out")], root, env).stdout
    assert "3 labelled queries" in out and "broken.png" in out and "blank: one colour" in out, out
    assert "1 file(s) skipped, not images by their suffix" in out and "bulbasaur/README.txt" in out
    metrics = json.loads((tmp_path / "out/metrics.json").read_text())
    assert metrics["labelled"]["n"] == 3 and metrics["unlabelled"] == 1 and metrics["quarantined"] == 3
    # it says what scored the folder, and how sure the numbers are (a bootstrap over the folder's species)
    assert out.startswith("configuration: retrieval.ensemble = ") and "95 % CI, bootstrap over this folder's 3 species" in out
    ci = metrics["labelled_ci"]
    assert ci["species"] == 3 and ci["metrics"]["mRR@1"]["value"] == round(metrics["labelled"]["mRR@1"], 6)
    assert all(r["ci_low"] <= r["value"] <= r["ci_high"] for r in ci["metrics"].values())
    assert metrics["configuration"]["retrieval.lam"]["source"].startswith("params.yaml")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert metrics["code commit"].startswith(head) and f"\ncode commit: {head}" in out  # the code that scored it
    assert metrics["folder"]["not_images"] == ["bulbasaur/README.txt"]
    # the configured query side: each query alone, with the statistics of the pipeline's dev sprites, and it says so
    assert metrics["query_centring"]["by"] == "reference" and "each query scored on its own" in out
    note = metrics["query_centring"]["note"]
    assert "statistics of the pipeline's dev sprites" in note and "retrieval.query_centre=catalog" in note
    assert sorted(Path(r["path"]).name for r in metrics["folder"]["quarantined"]) == ["blank.jpg", "broken.png",
                                                                                       "transparent.png"]
    pred = pd.read_csv(tmp_path / "out/predictions.csv")
    # scores rounded to 4 places print as such (a float32 rounded printed as 0.15839999914169312)
    assert all(len(str(x).split(".")[-1]) <= 4 for row in pred["s"].map(json.loads) for x in row)
    assert sorted(pred["query_id"]) == ["4/a.png", "Squirtle/a.png", "bulbasaur/a.png", "unlabelled.png"]
    assert set(pred["gold_species_id"].dropna().astype(int)) == {1, 4, 7}
    # labels from a CSV instead of folders (an unknown species id is counted, not scored), centred by the catalog mean
    labels = tmp_path / "labels.csv"
    labels.write_text("image,species_id\nbulbasaur/a.png,1\nSquirtle/a.png,7\n4/a.png,99999\n")  # 99999: no such species
    cat = run_ok([str(Path(sys.executable).parent / "polarcatalog"), "evaluate", "--queries", str(q), "--labels", str(labels),
                  "--out", str(tmp_path / "out2"), "--set", "retrieval.query_centre=catalog"], root, env).stdout
    m2 = json.loads((tmp_path / "out2/metrics.json").read_text())
    assert m2["labelled"]["n"] == 2 and m2["unknown_labels"] == 1
    assert m2["query_centring"]["by"] == "catalog" and "centred by the catalog mean" in cat and "2 labelled queries" in cat
    assert m2["configuration"]["retrieval.query_centre"] == {"value": "catalog", "source": "--set"}
    assert "retrieval.query_centre = catalog (--set)" in cat
    # a --set outside the usual keys is in the configuration line too (retrieval.center=false changed the scores
    # while the line named neither it nor its source); one labelled species gets no zero-width "interval"
    (tmp_path / "one.csv").write_text("image,species_id\nbulbasaur/a.png,1\n")
    one = run_ok([str(Path(sys.executable).parent / "polarcatalog"), "evaluate", "--queries", str(q), "--labels",
                  str(tmp_path / "one.csv"), "--out", str(tmp_path / "out_one"), "--set", "retrieval.center=false"], root, env).stdout
    assert "retrieval.center = False (--set)" in one.splitlines()[0]
    assert "no CI: every labelled image is of one species" in one and "% CI, bootstrap" not in one
    bad = subprocess.run([str(Path(sys.executable).parent / "polarcatalog"), "evaluate", "--queries", str(tmp_path / "nope")],
                         cwd=root, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "not a folder" in bad.stderr
    # every label names no catalog species: nothing scored, said in words; no `nan` printed, no `NaN` in the JSON
    (tmp_path / "typo" / "pikachuu").mkdir(parents=True)
    shutil.copy(sprites / "pikachu.png", tmp_path / "typo" / "pikachuu" / "a.png")
    typo = run_ok([str(Path(sys.executable).parent / "polarcatalog"), "evaluate", "--queries", str(tmp_path / "typo"),
                   "--out", str(tmp_path / "out3")], root, env).stdout
    assert "no image has a label naming a catalog species: nothing scored" in typo and "nan" not in typo, typo
    assert "1 image(s) with a label that names no catalog species (not scored): pikachuu" in typo
    m3 = json.loads((tmp_path / "out3/metrics.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert m3["labelled"] is None and m3["labelled_ci"] is None and m3["unknown_labels"] == 1


def test_cli_evaluate_with_a_constraint_in_words(repo, tmp_path):
    root, env = repo
    cli = str(Path(sys.executable).parent / "polarcatalog")
    sprites = root / "data/raw/pokesprite/package/pokemon-gen8/regular"
    q = tmp_path / "q"
    for slug in ("bulbasaur", "charmander", "squirtle", "pikachu"):
        (q / slug).mkdir(parents=True)
        shutil.copy(sprites / f"{slug}.png", q / slug / "a.png")
    where = "a green Pokémon that is not a fire type"
    out = run_ok([cli, "evaluate", "--queries", str(q), "--where", where, "--strength", "hard", "--out", str(tmp_path / "o")], root, env).stdout
    assert "has ['colour:green'], not_has ['type:fire'] (hard" in out
    pred = pd.read_csv(tmp_path / "o/predictions.csv")
    for states in pred["states"].map(json.loads):
        assert states == sorted(states, reverse=True), states  # hard: no conflict above a compatible or unknown species
    m = json.loads((tmp_path / "o/metrics.json").read_text())
    assert m["constraint"]["has"] == ["colour:green"] and m["constraint"]["strength"] == "hard"
    quality = {q["concept"]: q for q in m["constraint"]["concept quality"]}
    assert set(quality) == {"green", "fire type"} and all(0 <= q["exclusion recall"] <= 1 for q in quality.values())
    weak = [name for name, q in quality.items() if any(q[k] < 0.8 for k in ("exclusion recall", "exclusion precision", "kept"))]
    assert out.count("WARNING: the hard constraint rests on") == len(weak) and "(not): the memory excludes" in out
    # `concepts` lists the same memory's quality for every concept, by the ids `--where +colour:green` takes
    listing = run_ok([cli, "concepts"], root, env).stdout
    shares = {line.split()[0]: re.findall(r"(\d+) %", line) for line in listing.splitlines()
              if line.split()[:1] and ":" in line.split()[0]}  # +id keeps, +id excludes, -id keeps, -id excludes
    assert {"colour:green", "type:fire", "type:electric"} <= set(shares)
    assert shares["colour:green"][0] == f"{100 * quality['green']['kept']:.0f}"
    assert shares["type:fire"][2] == f"{100 * quality['fire type']['kept']:.0f}"
    assert any(set(st) != {0} for st in pred["states"].map(json.loads))  # the memory decides some candidates
    run_ok([cli, "evaluate", "--queries", str(q), "--out", str(tmp_path / "p")], root, env)  # unconstrained: no states
    assert all(set(st) == {0} for st in pd.read_csv(tmp_path / "p/predictions.csv")["states"].map(json.loads))
    # a bad constraint fails before any image is encoded: a new image in the folder never reaches the feature cache
    Image.open(sprites / "bulbasaur.png").transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(q / "bulbasaur" / "mirrored.png")
    cached = lambda: sum(len(pd.read_parquet(f)) for f in (root / "data/cache/features").glob("*/index.parquet"))  # noqa: E731
    before = cached()
    for args, msg in ((["--where", "a pokemon, please"], "names no concept"), (["--where", "green", "--strength", "medium"], "allowed"),
                      (["--where", "a green dinosaur that can fly"], "'dinosaur', 'fly' are no concepts"),  # not dropped
                      (["--where", " "], "--where is empty"),
                      (["--where", "green and not green"], "both asks for and excludes colour:green; keep one"),
                      (["--where", "a fire or water type"], "asks for type:fire or type:water: a constraint is a conjunction")):
        bad = subprocess.run([cli, "evaluate", "--queries", str(q), *args, "--out", str(tmp_path / "x")], cwd=root, env=env,
                             capture_output=True, text=True)
        assert bad.returncode == 2 and msg in bad.stderr, bad.stderr
    assert cached() == before


def test_cli_adapts_the_anchors_to_a_folder_at_another_scale_once(repo, tmp_path):
    """A user's folder unlike the box sprites: the same sprites enlarged 3x (smooth) and 4x (nearest neighbour) on
    larger canvases. Smooth enlargement is a new scale: the anchors are re-encoded at it, label-free, and a second run
    finds every vector in the feature cache. Nearest-neighbour enlargement is the same pixel art, even saved as a JPEG:
    it is measured at its native pixels, like the sprites themselves."""
    root, env = repo
    cli = str(Path(sys.executable).parent / "polarcatalog")
    sprites = root / "data/raw/pokesprite/package/pokemon-gen8/regular"
    slugs = ("bulbasaur", "ivysaur", "charmander", "squirtle", "caterpie", "weedle")
    catalog = json.loads((root / "data/features/manifest.json").read_text())["anchor_scale"]

    def folder(name: str, factor: int, resample: Image.Resampling, suffix: str = "png") -> Path:
        for slug in slugs:
            (tmp_path / name / slug).mkdir(parents=True)
            im = Image.open(sprites / f"{slug}.png").convert("RGBA")
            big = Image.new("RGBA", (68 * factor + 37, 56 * factor + 21), (255, 255, 255, 255))
            big.alpha_composite(im.resize((68 * factor, 56 * factor), resample), (13, 7))
            big.convert("RGB").save(tmp_path / name / slug / f"a.{suffix}")
        return tmp_path / name

    runs = {}
    for name, path in (("plain", None), ("smooth3", folder("smooth3", 3, Image.Resampling.BICUBIC)),
                       ("nearest4", folder("nearest4", 4, Image.Resampling.NEAREST, "jpg"))):
        if path is None:
            path = tmp_path / "plain"
            for slug in slugs:
                (path / slug).mkdir(parents=True)
                shutil.copy(sprites / f"{slug}.png", path / slug / "a.png")
        out = run_ok([cli, "evaluate", "--queries", str(path), "--out", str(tmp_path / f"o_{name}")], root, env).stdout
        runs[name] = (json.loads((tmp_path / f"o_{name}/metrics.json").read_text()), out)
    smooth, printed = runs["smooth3"]
    scale = smooth["anchor_scale"]
    assert scale["setting"] == "auto" and scale["catalog"] == catalog
    assert scale["measured"] >= 2.5 * runs["plain"][0]["anchor_scale"]["measured"] and scale["used"] > 2 * catalog
    assert smooth["feature_cache"]["anchors"]["misses"] > 0 and "not the catalog's" in printed
    # the cache grew, and the run says by how many vectors and to what size (a user trying many sizes sees it grow)
    cached = sum(f.stat().st_size for f in (root / "data/cache/features").rglob("*") if f.is_file())
    assert smooth["feature_cache"]["bytes"] <= cached
    assert f"{smooth['feature_cache']['anchors']['misses']} anchor vectors added to the feature cache" in printed
    assert "anchor vectors added" not in runs["plain"][1]
    assert abs(runs["nearest4"][0]["anchor_scale"]["measured"] - runs["plain"][0]["anchor_scale"]["measured"]) <= 1
    assert runs["nearest4"][0]["anchor_scale"]["used"] == runs["plain"][0]["anchor_scale"]["used"]
    # the second run on the smooth folder hits the cache: no query and no anchor is encoded again
    run_ok([cli, "evaluate", "--queries", str(tmp_path / "smooth3"), "--out", str(tmp_path / "o_again")], root, env)
    again = json.loads((tmp_path / "o_again/metrics.json").read_text())
    assert again["feature_cache"]["bytes"] == cached  # nothing written by a run that found every vector
    assert again["feature_cache"]["anchors"]["misses"] == 0 and again["feature_cache"]["queries"]["misses"] == 0
    assert again["feature_cache"]["anchors"]["hits"] == smooth["feature_cache"]["anchors"]["misses"]
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "o_again/predictions.csv"), pd.read_csv(tmp_path / "o_smooth3/predictions.csv"))
    # the catalog's own anchors on request
    cat = run_ok([cli, "evaluate", "--queries", str(tmp_path / "smooth3"), "--anchor-scale", "catalog", "--out",
                  str(tmp_path / "o_cat")], root, env).stdout
    assert json.loads((tmp_path / "o_cat/metrics.json").read_text())["anchor_scale"]["used"] == catalog
    assert "encoders.anchor_scale = catalog (--anchor-scale)" in cat.splitlines()[0]  # the header said `auto`


def test_second_repro_does_nothing_and_forced_rerun_is_identical(repo):
    root, env = repo
    start = time.perf_counter()
    out = run_ok(["dvc", "repro"], root, env).stdout
    assert time.perf_counter() - start < 30
    assert "didn't change, skipping" in out and "Running stage" not in out
    assert "up to date" in run_ok(["dvc", "status", "dvc.yaml"], root, env).stdout
    # the results committed, as in a fresh clone of a repository that holds them (the results section names the last
    # commit of code or params: still the snapshot's)
    run_ok(["git", "add", "-A"], root, env)
    run_ok(["git", "commit", "-qm", "results of the tiny run"], root, env)
    # seeded: the same metrics and results section ...
    reports = ("curation.json", "graph.json", "ablate_constraint.json", "README.md")
    before = {name: (root / "reports" / name).read_bytes() for name in reports}
    lock = (root / "dvc.lock").read_text()
    forced = ["curate", "graph", "ablate_polar@constraint", "report"]
    run_ok(["dvc", "repro", "--force", "--single-item", *forced], root, env)
    for name in reports:
        assert (root / "reports" / name).read_bytes() == before[name], name
    # ... and every output's hash (no timings in a report, no unseeded figure): `dvc.lock` does not churn on a rerun
    assert (root / "dvc.lock").read_text() == lock
    assert not subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True).stdout
    # each rerun saw a clean checkout, although DVC deleted the stage's git-tracked reports before running it
    parents, _ = _stage_runs(env)
    latest = {s: max((r for r in parents if r.info.run_name == s), key=lambda r: r.info.start_time) for s in forced}
    assert {s: r.data.tags["git_dirty"] for s, r in latest.items()} == dict.fromkeys(forced, "false")


def test_a_code_edit_reruns_check_and_then_only_the_stage_that_runs_it(repo):
    """A stage depends on its code manifest, which `check` writes (runner/code_deps.py): an edit of the graph stage's
    module changes `check`'s deps, and once `check` has rerun, the graph stage's manifest alone."""
    root, env = repo
    status = lambda: json.loads(run_ok(["dvc", "status", "dvc.yaml", "--json"], root, env).stdout)  # noqa: E731
    module = root / "src/polarcatalog/stages/graph.py"
    original = module.read_bytes()
    module.write_bytes(original + b"# an edit\n")
    try:
        assert list(status()) == ["check"]
        run_ok(["dvc", "repro", "-s", "check"], root, env)
        assert status() == {"graph": [{"changed deps": {"data/interim/code/03_graph.txt": "modified"}}]}
    finally:
        module.write_bytes(original)
        run_ok(["dvc", "repro", "-s", "check"], root, env)
    assert status() == {}


def test_a_single_stage_run_with_a_bad_value_fails_before_touching_the_committed_results(repo):
    """`dvc repro -s graph` skips the `check` stage: the stage's own command validates params.yaml (newer than check's
    stamp) and stops, naming the key, while its git-tracked results stay in place (`persist: true`)."""
    root, env = repo
    params_file = root / "params.yaml"
    original = params_file.read_bytes()
    kept = {p: (root / p).read_bytes() for p in ("reports/graph.json", "reports/graph.md", "reports/metrics/graph.json")}
    params = yaml.safe_load(original)
    params["graph"]["kappa"] = -1.0
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    try:
        proc = subprocess.run(["dvc", "repro", "-s", "graph"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode != 0
        assert "graph.kappa" in proc.stdout + proc.stderr and "[graph] executing" not in proc.stderr
        assert {p: (root / p).read_bytes() for p in kept} == kept
    finally:
        params_file.write_bytes(original)
        run_ok(["dvc", "checkout", "graph"], root, env)  # the stage's cached outputs, which DVC removed before running it
    assert "up to date" in run_ok(["dvc", "status", "graph"], root, env).stdout
