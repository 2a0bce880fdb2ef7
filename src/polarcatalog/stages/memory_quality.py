"""The memory_quality stage (notebook 08): how good must PolarMem's memory be before its constraints help?

The constraint axis (`ablate_polar@constraint`) compares the configured memory with its two bounds, the oracle and
a random memory. This stage fills the space between: the oracle memory degraded toward the configured memory's edge
quality (`memory.memories.degraded_memory`: true edges dropped, wrong ones added, at random), along three paths from
the configured quality (t = 0) to the oracle (t = 1), measured on the pairs the queries read: precision alone,
recall alone, both. At each point the primary
constrained queries are scored under every constraint strength. The break-even of a path is the first point where
`hard` beats `none` on dev target accuracy. None of the three papers has this analysis; it says whether the
configured memory's failure to help is a matter of degree (where it sits on the curve) or of kind.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from polarcatalog.config import Graph, probe_lever  # noqa: E402
from polarcatalog.eval.bootstrap import Interval  # noqa: E402
from polarcatalog.eval.protocol import Protocol, diff_text, headline_value, long_rows  # noqa: E402
from polarcatalog.memory.constraints import Strength  # noqa: E402
from polarcatalog.memory.memories import QUALITY, Memory, degraded_memory, edge_quality  # noqa: E402
from polarcatalog.memory.polar_sweeps import PolarSetup  # noqa: E402
from polarcatalog.memory.verifiers import ProbeVerifier  # noqa: E402
from polarcatalog.parallel import fork_map  # noqa: E402
from polarcatalog.paths import FEATURE_CACHE  # noqa: E402

# the levers' probe scores, kept by content beside the feature vectors (`make clean-features` empties both): a rerun
# for a retrieval param refits none of them
PROBE_CACHE = FEATURE_CACHE / "probe-scores"

PATHS = {"precision": ("has_precision", "not_has_precision"), "recall": ("has_recall", "not_has_recall"), "both": QUALITY}
ACCURACY = "target mRR@1"


def calibrated_memory(truth: np.ndarray, target: dict[str, float], cand: np.ndarray, concepts: np.ndarray, seed: int,
                      rounds: int = 4) -> Memory:
    """A degraded memory whose edge quality *on the pairs the queries read* is `target`: `degraded_memory` sets it over
    every pair, and the read pairs (look-alikes' concepts) are harder, so its knobs are rescaled a few times by how
    far the measured quality on the read pairs falls from the target (recall by the ratio, precision by the ratio of
    the error rates)."""
    knobs = dict(target)
    for _ in range(rounds):
        memory = degraded_memory(truth, knobs, seed)
        got = edge_quality(memory, cand, concepts, truth)
        for k in QUALITY:
            if k.endswith("recall"):
                knobs[k] = float(np.clip(knobs[k] * target[k] / max(got[k], 1e-9), 1e-6, 1.0))
            else:
                err = (1 - knobs[k]) * (1 - target[k]) / max(1 - got[k], 1e-9)
                knobs[k] = float(np.clip(1 - err, 1e-6, 1.0))
    return degraded_memory(truth, knobs, seed)


def quality_curve(setup: PolarSetup, strengths: list[Strength], protocol: Protocol, steps: int, seed: int
                  ) -> tuple[pd.DataFrame, dict[str, float]]:
    """Tidy rows (path, t, strength, the memory's measured edge quality on the pairs the queries read, split, group,
    metric, value, CI) and the configured memory's edge quality there. The configured memory itself is path
    `configured memory`; each degraded memory is drawn once per point (seeded)."""
    cq = setup.queries
    cand, concepts = setup.asked(cq)
    truth = setup.inputs.truth
    _, configured = setup.configured_memory()
    start = {k: edge_quality(configured, cand, concepts, truth)[k] for k in QUALITY}
    pq = protocol.take(cq.rows)
    metrics = (ACCURACY, f"Conflict@{setup.k} (ground truth)", "Filter rate (ground truth)")

    def point_rows(point: tuple[str, float, dict[str, float] | None]) -> list[dict[str, Any]]:
        """The rows of one point: its memory (the configured one, or drawn to the point's quality), scored."""
        path, t, quality = point
        memory = configured if quality is None else calibrated_memory(truth, quality, cand, concepts, seed)
        ids = {"path": path, "t": t}
        measured = edge_quality(memory, cand, concepts, truth)
        results = dict(setup.evaluate(cq, memory, strengths))
        none = results[Strength.parse("none").label()][ACCURACY]
        rows: list[dict[str, Any]] = []
        for label, values in results.items():
            rows.extend(long_rows(pq, {m: values[m] for m in metrics}, strength=label, **ids,
                                  **{k: round(measured[k], 4) for k in QUALITY}))
            diff = pq.difference(values[ACCURACY], none, "test")
            rows.append({"strength": label, **ids, **{k: round(measured[k], 4) for k in QUALITY}, "split": "test",
                         "queries": "all", "metric": f"Δ {ACCURACY} vs none", "value": diff.value, "ci_low": diff.ci_low,
                         "ci_high": diff.ci_high, "n": diff.n})
        return rows

    points: list[tuple[str, float, dict[str, float] | None]] = [("configured memory", 0.0, None)]
    for path, keys in PATHS.items():
        for t in np.linspace(0.0, 1.0, steps):
            quality = {k: start[k] + t * (1.0 - start[k]) if k in keys else start[k] for k in QUALITY}
            points.append((path, round(float(t), 4), quality))
    # every point is drawn from its own seed and scored alone: the machine's other core takes half of them
    return pd.DataFrame([row for rows in fork_map(point_rows, points) for row in rows]), start


def kappa_sensitivity(setup: PolarSetup, kappas: list[float], protocol: Protocol) -> pd.DataFrame:
    """κ is fixed a priori (PolarMem gives no value): the configured memory rebuilt at each κ, its edge quality on the
    pairs the queries read and the dev target accuracy under `none`, the configured strength and `hard`. Dev only:
    a sensitivity check, not a choice."""
    cq = setup.queries
    cand, concepts = setup.asked(cq)
    pq = protocol.take(cq.rows)
    strengths = list(dict.fromkeys([Strength.parse("none"), setup.strength, Strength.parse("hard")]))
    graph = setup.graph(setup.proposer)

    def at(kappa: float) -> dict[str, Any]:
        memory = graph.memory(setup.inputs.species_ids, kappa, setup.completion)
        quality = edge_quality(memory, cand, concepts, setup.inputs.truth)
        row = {"κ": kappa, **{k.replace("_", " "): round(100 * quality[k], 1) for k in QUALITY}}
        for label, values in setup.evaluate(cq, memory, strengths):
            row[f"dev {label}"] = round(100 * pq.mean(values[ACCURACY], "dev"), 1)
        return row

    return pd.DataFrame(fork_map(at, kappas))  # each κ rebuilds its own memory: half on the other core


def memory_levers(setup: PolarSetup, graph: Graph, levers: list[str], protocol: Protocol) -> pd.DataFrame:
    """Can the embedded memory be moved toward the break-even? The probe verifier refitted with one knob changed per
    lever (`ablations.memory_levers`), the configured memory rebuilt from its scores: edge quality on the pairs the
    queries read, dev target accuracy under `none`, the configured strength and `hard`, and `dev gain`, the paired
    dev difference from the memory as configured under the configured strength (its Interval record). Dev only; a
    lever earns a place in params.yaml only when that CI lies above 0. Empty for another verifier (the levers are the
    probe's). The first row is the memory as configured, from the graph stage's own scores."""
    if graph.verifier != "probe" or not levers:
        return pd.DataFrame()
    cq = setup.queries
    cand, concepts = setup.asked(cq)
    pq = protocol.take(cq.rows)
    strengths = list(dict.fromkeys([Strength.parse("none"), setup.strength, Strength.parse("hard")]))
    configured = setup.strength.label()

    def row(name: str, lever: PolarSetup) -> dict[str, Any]:
        memory = lever.configured_memory()[1]
        results = dict(lever.evaluate(cq, memory, strengths))
        quality = edge_quality(memory, cand, concepts, setup.inputs.truth)
        return {"probe": name, **{k.replace("_", " "): round(100 * quality[k], 1) for k in QUALITY},
                **{f"dev {label}": round(100 * pq.mean(values[ACCURACY], "dev"), 1) for label, values in results.items()},
                "_hit": results[configured][ACCURACY]}

    def lever_row(spec: str | None) -> dict[str, Any]:
        if spec is None:
            return row("as configured", setup)
        g = graph.model_copy(update=probe_lever(spec))
        return row(spec, replace(setup, scores=ProbeVerifier(g.probe_folds, g.probe_c, g.seed, g.probe_dim, PROBE_CACHE).score(setup.inputs)))

    rows = fork_map(lever_row, [None, *levers])  # each lever refits (or reads back) its own probe: half on the other core
    for r in rows:
        r["dev gain"] = pq.difference(r["_hit"], rows[0]["_hit"], "dev").record("dev") | {"strength": configured}
    return pd.DataFrame(rows).drop(columns="_hit")


def gain_text(record: dict[str, Any]) -> str:
    """A lever's `dev gain` record as the tables print differences: `+0.7 [+0.2, +1.4] *`."""
    return diff_text(Interval(record["value"], record["ci_low"], record["ci_high"], record["n"]))


def lever_gains_above_zero(records: list[dict[str, Any]]) -> list[str]:
    """The levers (not the configured row) whose dev gain has a CI above 0."""
    return [r["probe"] for r in records[1:] if r["dev gain"]["ci_low"] > 0]


def _dev(df: pd.DataFrame, strength: str) -> pd.DataFrame:
    sel = (df["split"] == "dev") & (df["queries"] == "all") & (df["metric"] == ACCURACY) & (df["strength"] == strength)
    return df[sel].set_index(["path", "t"])["value"]


def break_even(df: pd.DataFrame, strength: str = "hard") -> dict[str, Any]:
    """Per path, the first point (smallest t) where `strength` beats `none` on dev target accuracy, with its measured
    edge quality; None where no point of the path does."""
    gain = (_dev(df, strength) - _dev(df, "none")).rename("dev gain")
    test = df[(df["split"] == "test") & (df["metric"] == f"Δ {ACCURACY} vs none") & (df["strength"] == strength)]
    out: dict[str, Any] = {}
    for path in PATHS:
        g = gain.xs(path).sort_index()
        hit = g[g > 0]
        if hit.empty:
            out[path] = None
            continue
        t = float(hit.index[0])
        row = test[(test["path"] == path) & (test["t"] == t)].iloc[0]
        out[path] = {"t": t, **{k: float(row[k]) for k in QUALITY}, "dev_gain": round(float(hit.iloc[0]), 6),
                     "test_gain": {"value": round(float(row["value"]), 6), "ci_low": round(float(row["ci_low"]), 6),
                                   "ci_high": round(float(row["ci_high"]), 6), "n": int(row["n"]), "split": "test"}}
    return out


def curve_figure(df: pd.DataFrame, start: dict[str, float], even: dict[str, Any]) -> plt.Figure:
    """Test target accuracy (95 % CI band) per strength along each path; the configured memory's own accuracy as
    points at t = 0, the break-even of `hard` as a dotted line."""
    test = df[(df["split"] == "test") & (df["queries"] == "all") & (df["metric"] == ACCURACY)]
    fig, axes = plt.subplots(1, len(PATHS), figsize=(13, 3.8), sharey=True)
    real = test[test["path"] == "configured memory"]
    for ax, path in zip(axes, PATHS):
        d = test[test["path"] == path]
        for strength, s in d.groupby("strength", sort=False):
            s = s.sort_values("t")
            line = ax.plot(s["t"], 100 * s["value"], marker="o", ms=3, label=strength)[0]
            ax.fill_between(s["t"], 100 * s["ci_low"], 100 * s["ci_high"], alpha=0.15, color=line.get_color())
            mine = real[real["strength"] == strength]
            ax.plot([0.0] * len(mine), 100 * mine["value"], marker="x", ms=8, ls="", color=line.get_color())
        if even.get(path):
            ax.axvline(even[path]["t"], color="grey", ls=":")
        keys = ", ".join(k.replace("_", " ") for k in PATHS[path])
        ax.set_title(f"{path}: {keys}" if path != "both" else "precision and recall together", fontsize=9)
        ax.set_xlabel("t: 0 = configured memory's edge quality, 1 = oracle")
    axes[0].set_ylabel("test target accuracy@1 (%, 95% CI)")
    axes[-1].legend(fontsize=7, loc="upper left")
    fig.suptitle("Memory quality vs accuracy under constraints (x: the configured memory itself at t = 0; dotted: hard "
                 "beats none on dev)", fontsize=9)
    fig.tight_layout()
    return fig


def _pct(v: float) -> str:
    return f"{100 * v:.1f}"


def markdown(df: pd.DataFrame, start: dict[str, float], even: dict[str, Any], n_queries: int,
             kappas: pd.DataFrame | None = None, levers: pd.DataFrame | None = None) -> str:
    test = df[(df["split"] == "test") & (df["queries"] == "all")]
    acc = test[test["metric"] == ACCURACY]
    delta = test[test["metric"] == f"Δ {ACCURACY} vs none"]
    lines = [
        "# Memory quality: when do PolarMem's constraints help?", "",
        __doc__.split("\n\n", 1)[1].strip().replace("\n", " "), "",
        f"{n_queries} primary constrained queries (Q+ a concept the target has, Q− one a look-alike has). The configured "
        "memory's edge quality on the pairs they read: " + ", ".join(f"{k.replace('_', ' ')} {_pct(v)}" for k, v in start.items())
        + " %. Values in %; test with 95 % CIs (paired species bootstrap), dev point values choose.", "",
    ]
    for path in ("configured memory", *PATHS):
        d = acc[acc["path"] == path]
        if d.empty:
            continue
        table = d.pivot_table(index="t", columns="strength", values="value", sort=False).mul(100).round(1)
        dd = delta[(delta["path"] == path) & (delta["strength"] == "hard")].set_index("t")
        table["hard − none [95% CI]"] = [f"{100 * r.value:+.1f} [{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}]"
                                         + (" *" if r.ci_low > 0 or r.ci_high < 0 else "") for r in dd.loc[table.index].itertuples()]
        quality = d.drop_duplicates("t").set_index("t")[list(PATHS["both"])].mul(100).round(1)
        quality.columns = [c.replace("_", " ") for c in quality.columns]
        lines += [f"## {path}", "", pd.concat([quality, table], axis=1).reset_index().to_markdown(index=False), ""]
    lines += ["## Break-even (`hard` beats `none` on dev target accuracy)", ""]
    for path, e in even.items():
        if e is None:
            lines.append(f"- {path}: no point of the path, up to the oracle, where hard beats none on dev.")
        else:
            g = e["test_gain"]
            lines.append(f"- {path}: from t = {e['t']:g} (" + ", ".join(f"{k.replace('_', ' ')} {_pct(e[k])}" for k in PATHS[path])
                         + f" %); there, test hard − none {100 * g['value']:+.1f} [{100 * g['ci_low']:+.1f}, {100 * g['ci_high']:+.1f}].")
    lines += ["", "The degraded memories place their errors at random among the pairs; the configured memory's errors "
              "are not random (they fall on the species a query confuses, where a wrong edge costs most), so its own "
              "accuracy (path `configured memory`) can sit below the t = 0 point of a path with the same measured quality: "
              "the gap is what the structure of its errors costs, beyond their rate.", ""]
    if kappas is not None:
        lines += ["## κ sensitivity (dev only)", "",
                  "κ sets the UNCERTAIN margin δ = κ·σ_w; it is fixed a priori, since PolarMem gives no value. The configured "
                  "memory rebuilt at each κ, dev target accuracy@1 in %:", "", kappas.to_markdown(index=False), ""]
    if levers is not None and not levers.empty:
        records = levers.to_dict("records")
        up = lever_gains_above_zero(records)
        table = levers.drop(columns="dev gain").assign(**{
            f"dev Δ {records[0]['dev gain']['strength']} [95% CI]": [gain_text(r["dev gain"]) for r in records]})
        lines += ["## Memory levers (dev only)", "",
                  "The probe verifier refitted with one knob changed, the configured memory rebuilt from its scores; edge "
                  "quality on the pairs the queries read and dev target accuracy@1 in %, the last column the paired dev "
                  "gain over the memory as configured (`*`: its CI lies above 0). Test is not read here.", "",
                  table.to_markdown(index=False), "",
                  (f"Dev gain with a CI above 0: {', '.join(up)} — a candidate for params.yaml." if up else
                   "No lever's dev gain has a CI above 0: the probes keep their configured knobs, and none of these moves "
                   "the memory's edge quality near the break-even above."), ""]
    return "\n".join(lines)


def headline(d: dict[str, Any]) -> dict[str, Any]:
    """The test accuracy gain of hard over none with the configured memory, and each path's break-even point."""
    out = {"memory quality: test hard - none (configured)": headline_value(d["configured_hard_minus_none"])}
    for path, e in d["break_even"].items():
        if e:  # a path with no break-even up to the oracle has no key
            out[f"break-even t ({path})"] = e["t"]
    return out
