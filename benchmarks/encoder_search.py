"""The dev search that chose the configured retrieval: ensemble members, re-ranker, λ and the colour-nuisance projection.

Every configuration below is scored on **dev** mRR@1; the best one on dev is read once on **test** (95 % species-bootstrap
CIs, paired against the previous default: Lite0 re-ranked by Lite2, λ 0.5, no projection). It is configured only when its
paired dev gain over that default has a CI above 0. The grid:

- members and re-ranker: any one or two of the embedded encoders as the ensemble g, another as the re-ranker h, or all
  three as one score ensemble;
- λ in 0.5, 0.6, 0.7 (the λ axis of the pipeline sweeps 0..1 for the configured members);
- the colour-nuisance projection (`features.colour_nuisance`) with d in 0 (off), 4, 16, 64, on the ensemble members
  or on every encoder.

    .venv/bin/python benchmarks/encoder_search.py

Needs a finished embed stage with every encoder in `encoders.image`; the recoloured anchors of encoders the pipeline
does not project go through the feature cache (seconds after the first run). Writes
reports/benchmarks/encoder_search.{json,md}.
"""

from __future__ import annotations

from polarcatalog.numerics import pin_process

pin_process()  # before numpy loads, as the `polarcatalog` command does

import itertools
import os
from pathlib import Path

import numpy as np
import pandas as pd

from polarcatalog.from_params import protocol_for
from polarcatalog.retrieval.query_side import catalog_for, query_values, run_retrieval
from polarcatalog.config import Retrieval, load_params
from polarcatalog.encoders import create_encoder
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.eval.metrics import RANK_METRICS
from polarcatalog.eval.protocol import ci_text, diff_text
from polarcatalog.features.colour_nuisance import learn_basis
from polarcatalog.features.workspace import Workspace, load_workspace
from polarcatalog.io import write_json
from polarcatalog.paths import FEATURE_CACHE, FEATURES, PROCESSED

ROOT = Path(__file__).resolve().parents[1]
LAMS = (0.5, 0.6, 0.7)
DIMS = (0, 4, 16, 64)


def colour_bases(ws: Workspace, params) -> dict[str, np.ndarray]:
    """Every encoder's colour-nuisance basis: the embed stage's where it kept one, else learnt the same way here."""
    e = params.encoders
    view = Preprocess(e.content_box, ws.manifest["anchor_scale"])
    out = dict(ws.colour_basis)
    for name in (n for n in ws.anchor_f if n not in out):
        enc = create_encoder(e.spec(name), "image", e.device, e.runtime)
        out[name] = learn_basis(enc, ws.anchors["path"].tolist(), ROOT / FEATURE_CACHE, view, e.batch_size)
    return out


def grid(names: list[str], base: Retrieval) -> list[tuple[str, Retrieval]]:
    short = lambda n: n.split("@")[0].removeprefix("efficientnet_")  # noqa: E731
    out = []
    members = [(list(ens), rr) for k in (1, 2) for ens in itertools.combinations(names, k) for rr in names if rr not in ens]
    for d, scope in [(0, "-"), *itertools.product(DIMS[1:], ("ensemble", "all"))]:
        for ens, rr in members:
            projected = [] if d == 0 else (list(ens) if scope == "ensemble" else list(names))
            for lam in LAMS:
                cfg = base.model_copy(update={"ensemble": ens, "reranker": rr, "lam": lam, "colour_invariant": projected,
                                              "colour_invariant_dim": d or base.colour_invariant_dim})
                out.append((f"{'+'.join(map(short, ens))} · re-rank {short(rr)} · λ {lam} · projection "
                            f"{'off' if d == 0 else f'd {d} on {scope}'}", cfg))
        projected = [] if d == 0 else list(names)
        cfg = base.model_copy(update={"ensemble": list(names), "reranker": None, "lam": 1.0, "colour_invariant": projected,
                                      "colour_invariant_dim": d or base.colour_invariant_dim})
        out.append((f"{'+'.join(map(short, names))} · no re-rank · projection {'off' if d == 0 else f'd {d} on all'}", cfg))
    return out


def main() -> None:
    os.chdir(ROOT)
    params = load_params("params.yaml")
    ws = load_workspace(FEATURES, PROCESSED)
    ws.colour_basis = colour_bases(ws, params)
    protocol = protocol_for(ws, params)
    gold = ws.queries["species_id"].to_numpy()
    m1 = RANK_METRICS.index("mRR@1")
    names = list(ws.anchor_f)

    def values(rp: Retrieval) -> np.ndarray:
        _, _, ranking = run_retrieval(ws, catalog_for(ws, rp), rp)
        return query_values(ranking, gold)[:, m1]

    lite0, lite2 = (next((n for n in names if n.startswith(p)), None) for p in ("efficientnet_lite0", "efficientnet_lite2"))
    previous = params.retrieval.model_copy(update={"ensemble": [lite0], "reranker": lite2, "lam": 0.5, "colour_invariant": []})
    base = values(previous)
    trials = []
    for label, rp in grid(names, params.retrieval):
        v = values(rp)
        trials.append({"configuration": label, "v": v, "rp": rp,
                       **{f"{s} {g}": 100 * protocol.mean(v, s, g) for s in ("dev",) for g in ("all", "regular", "shiny")}})
    trials.sort(key=lambda t: -t["dev all"])
    for t in trials:
        g = protocol.difference(t["v"], base, "dev")
        t["dev Δ vs previous"], t["above noise"] = diff_text(g), bool(g.value > 0 and g.excludes_zero())
    best = trials[0]
    gain = protocol.difference(best["v"], base, "dev")
    above = sum(t["above noise"] for t in trials)
    configured = params.retrieval
    is_configured = all(getattr(best["rp"], k) == getattr(configured, k)
                        for k in ("ensemble", "reranker", "lam", "colour_invariant", "colour_invariant_dim"))
    rows = []
    for label, v in (("previous default: lite0 · re-rank lite2 · λ 0.5 · projection off", base), (best["configuration"], best["v"])):
        rows.append({"configuration": label, "dev mRR@1": 100 * protocol.mean(v, "dev"),
                     "dev regular": 100 * protocol.mean(v, "dev", "regular"), "dev shiny": 100 * protocol.mean(v, "dev", "shiny"),
                     "test mRR@1 [95% CI]": ci_text(protocol.interval(v)),
                     "test regular": ci_text(protocol.interval(v, "test", "regular")),
                     "test shiny": ci_text(protocol.interval(v, "test", "shiny")),
                     "Δ test vs previous": "baseline" if v is base else diff_text(protocol.difference(v, base))})
    table = pd.DataFrame(rows).round(1)
    detail = pd.DataFrame([{k: (round(x, 1) if isinstance(x, float) else x) for k, x in t.items() if k not in ("v", "rp")}
                           for t in trials])
    out = ROOT / "reports/benchmarks"
    write_json({"chosen": best["configuration"], "dev_gain": [gain.value, gain.ci_low, gain.ci_high], "above_noise": above,
                "configured": is_configured, "rows": rows, "trials": detail.to_dict("records")}, out / "encoder_search.json")
    (out / "encoder_search.md").write_text(
        "# Choosing the retrieval's encoders on dev\n\n"
        f"{len(trials)} configurations of the embedded encoders ({', '.join(names)}), each scored on **dev** mRR@1 "
        f"({protocol.describe()['dev_queries']} queries); the best one on dev is read once on **test**, in %, with 95 % "
        "species-bootstrap CIs, paired against the previous default. Command: "
        "`.venv/bin/python benchmarks/encoder_search.py`.\n\n"
        + table.to_markdown(index=False) + "\n\n"
        f"- Best on dev: {best['configuration']}, dev gain over the previous default {diff_text(gain)}"
        + (" (CI above 0)" if gain.excludes_zero() and gain.value > 0 else " (not above noise)") + ". "
        + ("It is the configured retrieval (params.yaml).\n" if is_configured else
           "**It is not what params.yaml configures**: rerun the pipeline after updating params.yaml, or say why not.\n")
        + f"- {above} of the {len(trials)} configurations have a dev gain over the previous default above noise.\n"
        + "- Winner's curse: the best of many dev scores is optimistic on dev; the test column is the honest number.\n\n"
        "## Every configuration on dev (test is read for the chosen one only)\n\n" + detail.to_markdown(index=False) + "\n")
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
