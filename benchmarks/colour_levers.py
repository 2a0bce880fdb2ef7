"""Colour-robust levers for palette swaps (shiny sprites), chosen on dev and reported on test with CIs.

A shiny sprite is the same drawing in another palette, and the catalog's artwork shows the regular palette only. Three
levers give the configured retrieval features that care less about colour; each lever's setting (which encoders it
touches, and the weight w of the colour-robust part) is chosen on **dev** mRR@1, then read once on **test**:

- grey views: every anchor and query also seen in grey; an encoder's feature is [colour, w * grey] (the cosine is a
  weighted mean of the colour and the grey cosines);
- grey anchor prototype: each anchor's feature is colour + w * grey (queries unchanged: the catalog covers both);
- hue-shifted anchor prototype: each anchor's feature is colour + w * mean(hue + 120°, hue + 240°);
- colour-nuisance projection: the directions along which an anchor's feature moves when only its colours change
  (its hue-shifted and grey views minus its own view: a nuisance subspace learnt from the catalog's artwork alone, no
  query seen) are projected out of every anchor and query feature; the setting is the subspace's dimension d.

    .venv/bin/python benchmarks/colour_levers.py

The base is the configured retrieval *without* its own colour-nuisance projection (`retrieval.colour_invariant: []`),
so the projection is read here as one lever among the others, on the same base. It is configured (chosen on dev with
the ensemble members in benchmarks/encoder_search.py); the other levers are not.

Needs a finished embed stage. Every new view goes through the feature cache (about 2 min here the first time, seconds
after). Writes reports/benchmarks/colour_levers.{json,md}. Not a DVC stage: the cold `dvc repro` stays within its time
budget.
"""

from __future__ import annotations

from polarcatalog.numerics import pin_process

pin_process()  # before numpy loads, as the `polarcatalog` command does

import argparse
import itertools
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from polarcatalog.from_params import protocol_for, query_view
from polarcatalog.retrieval.query_side import catalog_for, query_values, run_retrieval
from polarcatalog.config import load_params
from polarcatalog.encoders import create_encoder
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.eval.metrics import RANK_METRICS
from polarcatalog.eval.protocol import ci_text, diff_text
from polarcatalog.features.colour_nuisance import learn_basis, recoloured_views
from polarcatalog.retrieval.query_side import project_out
from polarcatalog.features.encode import encode_image_views
from polarcatalog.features.workspace import Workspace, average_flips, load_workspace
from polarcatalog.io import write_json
from polarcatalog.paths import FEATURE_CACHE, FEATURES, PROCESSED
from polarcatalog.retrieval.vrrag import query_encoders
from polarcatalog.vectors import l2_normalise

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Extra:
    """One encoder's colour-robust features: grey anchors and queries (flips averaged, like the configured views) and
    hue-shifted anchors (one view per shift)."""

    grey_anchors: np.ndarray
    grey_queries: np.ndarray
    hue_anchors: np.ndarray
    basis: np.ndarray  # [d, dim] the colour-nuisance directions, as the embed stage learns them


def encode_extras(ws: Workspace, params, names: list[str]) -> dict[str, Extra]:
    e = params.encoders
    grey_anchor = Preprocess(e.content_box, ws.manifest["anchor_scale"], grey=True)
    grey_query = replace(query_view(params), grey=True)  # the pipeline's query view, in grey
    both = lambda v: [v, v.flipped()] if ws.has_flips else [v]  # noqa: E731  the configured views' flips
    hues = recoloured_views(replace(grey_anchor, grey=False))[:-1]  # the embed stage's hue-shifted views (its last: grey)
    out = {}
    for name in names:
        enc = create_encoder(e.spec(name), "image", e.device, e.runtime)
        # one call per image set: every view of an image is cut from one decode
        a, ok = encode_image_views(enc, ws.anchors["path"].tolist(), ROOT / FEATURE_CACHE, [*hues, *both(grey_anchor)],
                                   batch_size=e.batch_size, role="anchor")
        q, q_ok = encode_image_views(enc, ws.queries["path"].tolist(), ROOT / FEATURE_CACHE, both(grey_query),
                                     shas=ws.queries["sha256"].tolist(), batch_size=e.batch_size)
        if not (ok.all() and q_ok.all()):
            raise SystemExit("a curated image no longer loads; rerun the curate stage")
        flip_mean = lambda views: average_flips(views[0], views[1] if len(views) > 1 else None)  # noqa: E731
        out[name] = Extra(flip_mean(a[len(hues):]), flip_mean(q), l2_normalise(np.sum(a[: len(hues)], axis=0)),
                          learn_basis(enc, ws.anchors["path"].tolist(), ROOT / FEATURE_CACHE,
                                      replace(grey_anchor, grey=False), e.batch_size))
    return out


def lever_workspace(ws: Workspace, extras: dict[str, Extra], lever: str, names: tuple[str, ...], w: float) -> Workspace:
    """The workspace with `lever` applied to the encoders `names` (the others keep their features)."""
    af, qf = dict(ws.anchor_f), dict(ws.query_f)
    for n in names:
        x = extras[n]
        if lever == "grey views":
            af[n] = l2_normalise(np.hstack([ws.anchor_f[n], w * x.grey_anchors]))
            qf[n] = l2_normalise(np.hstack([ws.query_f[n], w * x.grey_queries]))
        elif lever == "grey anchor prototype":
            af[n] = l2_normalise(ws.anchor_f[n] + w * x.grey_anchors)
        elif lever == "hue-shifted anchor prototype":
            af[n] = l2_normalise(ws.anchor_f[n] + w * x.hue_anchors)
        elif lever == "colour-nuisance projection":  # w is the subspace's dimension
            af[n], qf[n] = (project_out(f, x.basis, int(w)) for f in (ws.anchor_f[n], ws.query_f[n]))
        else:
            raise ValueError(lever)
    return replace(ws, anchor_f=af, query_f=qf)


def setting(trial: dict) -> str:
    """A trial's setting as the report writes it: the weight w, or the projection's dimension d."""
    return f"d {int(trial['w'])}" if trial["lever"] == "colour-nuisance projection" else f"w {trial['w']:g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", type=float, nargs="+", default=[0.3, 0.5, 1.0])
    ap.add_argument("--dims", type=int, nargs="+", default=[4, 16, 64], help="nuisance subspace dimensions to try")
    args = ap.parse_args()
    os.chdir(ROOT)
    params = load_params("params.yaml")
    rp = params.retrieval.model_copy(update={"colour_invariant": []})  # the base: see the module docstring
    ws = load_workspace(FEATURES, PROCESSED)
    if any(t is not None for t in ws.native_text.values()) and rp.chunks != "anchors":
        raise SystemExit("these levers change image features only; run them with retrieval.chunks: anchors")
    protocol = protocol_for(ws, params)
    gold = ws.queries["species_id"].to_numpy()
    m1 = RANK_METRICS.index("mRR@1")
    names = query_encoders(rp.ensemble, rp.reranker)
    extras = encode_extras(ws, params, names)

    def values(variant: Workspace) -> np.ndarray:
        _, _, ranking = run_retrieval(variant, catalog_for(variant, rp), rp)
        return query_values(ranking, gold)[:, m1]

    base = values(ws)
    scopes = {"ensemble": tuple(rp.ensemble), "re-ranker": (rp.reranker,) if rp.reranker else (), "both": tuple(names)}
    scopes = {k: v for k, v in scopes.items() if v}
    trials = []  # every (lever, scope, w), dev and test: the dev columns choose, the test columns are read once per lever
    settings = {"grey views": args.weights, "grey anchor prototype": args.weights,
                "hue-shifted anchor prototype": args.weights, "colour-nuisance projection": args.dims}
    for lever, (scope, touched), w in ((lever, scope, w) for lever, ws_ in settings.items()
                                       for scope, w in itertools.product(scopes.items(), ws_)):
        v = values(lever_workspace(ws, extras, lever, touched, w))
        trials.append({"lever": lever, "encoders": scope, "w": w, "v": v,
                       **{f"{s} {g}": protocol.mean(v, s, g) for s in ("dev", "test") for g in ("all", "regular", "shiny")}})
    rows = [{"lever": "none (configured, without its projection)", "chosen on dev": "—", "dev mRR@1": 100 * protocol.mean(base, "dev"), "dev Δ": "baseline",
             "dev shiny": 100 * protocol.mean(base, "dev", "shiny"), "test mRR@1 [95% CI]": ci_text(protocol.interval(base)),
             "Δ vs base": "baseline", "test regular": ci_text(protocol.interval(base, "test", "regular")),
             "test shiny": ci_text(protocol.interval(base, "test", "shiny")), "Δ shiny": "baseline"}]
    gains, shiny_helped = {}, []
    for lever, group in itertools.groupby(trials, key=lambda t: t["lever"]):
        best = max(group, key=lambda t: t["dev all"])
        v = best["v"]
        dev_gain = protocol.difference(v, base, "dev")
        gains[lever] = dev_gain
        shiny_gain = protocol.difference(v, base, "test", "shiny")
        if shiny_gain.value > 0 and shiny_gain.excludes_zero() and not (dev_gain.value > 0 and dev_gain.excludes_zero()):
            shiny_helped.append(f"{lever} ({best['encoders']}, {setting(best)}: test shiny {diff_text(shiny_gain)}, "
                                f"test regular {diff_text(protocol.difference(v, base, 'test', 'regular'))}, "
                                f"overall on dev {diff_text(dev_gain)})")
        rows.append({"lever": lever, "chosen on dev": f"{best['encoders']}, {setting(best)}", "dev mRR@1": 100 * best["dev all"],
                     "dev Δ": diff_text(dev_gain),
                     "dev shiny": 100 * best["dev shiny"], "test mRR@1 [95% CI]": ci_text(protocol.interval(v)),
                     "Δ vs base": diff_text(protocol.difference(v, base)),
                     "test regular": ci_text(protocol.interval(v, "test", "regular")),
                     "test shiny": ci_text(protocol.interval(v, "test", "shiny")),
                     "Δ shiny": diff_text(protocol.difference(v, base, "test", "shiny"))})
    table = pd.DataFrame(rows).round(1)
    # a lever costs encodings (more views per image), so it is configured only when its dev gain is more than noise
    helped = [lever for lever, gain in gains.items() if gain.value > 0 and gain.excludes_zero()]
    oracle = max(trials, key=lambda t: t["test shiny"])
    dev_shiny = max(trials, key=lambda t: t["dev shiny"])
    base_dev_shiny = protocol.mean(base, "dev", "shiny")
    detail = pd.DataFrame([{k: (round(100 * x, 1) if isinstance(x, float) and k not in ("w",) else x)
                            for k, x in t.items() if k != "v"} for t in trials])
    out = ROOT / "reports/benchmarks"
    write_json({"configured": {"ensemble": rp.ensemble, "reranker": rp.reranker, "lam": rp.lam,
                               "colour_invariant": params.retrieval.colour_invariant,
                               "colour_invariant_dim": params.retrieval.colour_invariant_dim},
                "weights": args.weights, "chosen": rows, "trials": detail.to_dict("records")}, out / "colour_levers.json")
    verdict = (f"On dev, {', '.join(helped)} beat the base's mRR@1 beyond noise on its own (paired CI above 0)" if helped else
               "On dev, no lever beats the base's mRR@1 beyond noise on its own (paired CI above 0)")
    if params.retrieval.colour_invariant:
        verdict += ("; the colour-nuisance projection is configured as part of a joint choice on dev (members, re-ranker, "
                    "λ and projection together, reports/benchmarks/encoder_search.md: the best on dev, with a dev gain over the "
                    "previous default above noise); the other levers are not configured")
    (out / "colour_levers.md").write_text(
        "# Colour-robust levers for palette swaps (shiny sprites)\n\n"
        f"The configured retrieval ({'+'.join(rp.ensemble)}, re-ranker {rp.reranker}, λ = {rp.lam}) without its own "
        f"colour-nuisance projection (configured: {', '.join(params.retrieval.colour_invariant) or 'none'}, d "
        f"{params.retrieval.colour_invariant_dim}), with one lever at a time. "
        f"Each lever's setting (which encoders it touches; w in {args.weights}, or the projection's dimension d in "
        f"{args.dims}) is chosen on **dev** mRR@1 ({protocol.describe()['dev_queries']} "
        "queries), then read once on **test**, in %, with 95 % species-bootstrap CIs; Δ is paired against that base, "
        "`*` where its CI excludes 0. Command: `.venv/bin/python benchmarks/colour_levers.py`.\n\n"
        + table.to_markdown(index=False) + "\n\n"
        f"- {verdict}.\n"
        + (f"- Chosen on dev, {'; '.join(shiny_helped)} {'raise' if len(shiny_helped) > 1 else 'raises'} the shiny "
           "sprites' test score beyond noise; on its own, none is above noise on dev overall.\n" if shiny_helped else "")
        + f"- The best dev shiny score of any setting is {100 * dev_shiny['dev shiny']:.1f} ({dev_shiny['lever']}, "
        f"{dev_shiny['encoders']}, {setting(dev_shiny)}) against the base's {100 * base_dev_shiny:.1f}"
        + (": on dev the colour-robust views do not help the shiny sprites either.\n" if dev_shiny["dev shiny"] <= base_dev_shiny
           else f", at dev regular {100 * dev_shiny['dev regular']:.1f} (base {100 * protocol.mean(base, 'dev', 'regular'):.1f}).\n")
        + f"- Chosen on **test** instead (not a result: tuning on test, shown only to size the gap), the best test shiny "
        f"score of any setting is {100 * oracle['test shiny']:.1f} ({oracle['lever']}, {oracle['encoders']}, {setting(oracle)}), "
        f"at test regular {100 * oracle['test regular']:.1f} (base: shiny {100 * protocol.mean(base, 'test', 'shiny'):.1f}, "
        f"regular {100 * protocol.mean(base, 'test', 'regular'):.1f}).\n\n"
        "## Every setting tried (dev chooses; test shown for completeness)\n\n" + detail.to_markdown(index=False) + "\n")
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
