"""How cost grows with the catalog: each size-dependent step of the pipeline timed (and its peak memory measured, one
fresh process per point) from the Pokémon catalog's size through the bird catalog's (11,131 species) to 100,000
species, on synthetic vectors; the exponent of time against size fitted per step; FAISS exact search against IVF and
HNSW on clustered synthetic anchors (recall@r against exact, latency, memory) to say which index to choose at which
size; and the GPU profile's cost projected from its models' FLOPs on paper.

    .venv/bin/python benchmarks/scaling.py [--sizes 1008 3000 11131 30000 100000] [--index-sizes 100000 300000 1000000]

Writes reports/benchmarks/scaling.{json,md} and reports/benchmarks/scaling.png. The steps run the production code:
`retrieval.vrrag.VRRAG` (FAISS flat over the ensemble's chunks, then the vectorised re-rank), `memory.memories.states` +
`memory.constraints.reorder` (PolarMem's lexicographic order over every candidate list) and `eval.bootstrap.Bootstrap`.
Synthetic vectors: speed and memory only, no accuracy.
"""

from __future__ import annotations

from polarcatalog.numerics import pin_process

pin_process()  # before numpy loads, as the `polarcatalog` command does

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "benchmarks"
DIM = 256  # one encoder's vector size here (the GPU profile's are 768-1024: its cost is projected below, not timed)
CHUNKS, ANCHORS, QUERIES, R, K = 5, 3, 256, 100, 5
NOISE = 0.5  # a species' anchors and a query scatter this far (vector norm) around the species' centre


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def one_point(step: str, species: int) -> dict[str, float]:
    """One (step, size) in this process: its time and the process's peak resident memory."""
    from polarcatalog.vectors import l2_normalise as normalise

    rng = np.random.default_rng(0)
    if step == "retrieve":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from retrieval_scale import synthetic_catalog

        from polarcatalog.retrieval.vrrag import VRRAG

        ensemble, reranker = ["clip", "openclip", "siglip"], "dinov2"
        catalog = synthetic_catalog(species, CHUNKS, ANCHORS, DIM, [*ensemble, reranker])
        q = {n: normalise(rng.standard_normal((QUERIES, DIM), dtype=np.float32)) for n in [*ensemble, reranker]}
        t0 = time.perf_counter()
        vr = VRRAG(catalog, ensemble, "multimodal", reranker, r=R, index="flat")
        vr.rank(vr.candidates(q), 0.7, K)
        seconds = time.perf_counter() - t0
    elif step == "polar_retrieval":
        from polarcatalog.memory.constraints import Strength, reorder
        from polarcatalog.memory.memories import IncidenceMemory, states

        concepts = 200
        has, not_has = rng.random((species, concepts)) < 3 / concepts, rng.random((species, concepts)) < 8 / concepts
        memory = IncidenceMemory(has, not_has & ~has)
        cand = np.stack([rng.choice(species, R, replace=False) for _ in range(QUERIES)])
        sims = rng.uniform(-1, 1, cand.shape)
        q_pos = [list(rng.choice(concepts, 2, replace=False)) for _ in range(QUERIES)]
        q_neg = [list(rng.choice(concepts, 1)) for _ in range(QUERIES)]
        t0 = time.perf_counter()
        reorder(states(memory, cand, q_pos, q_neg), sims, Strength("hard"), k=K)
        seconds = time.perf_counter() - t0
    elif step == "bootstrap":
        from polarcatalog.eval.bootstrap import Bootstrap

        owner = np.repeat(np.arange(species), 2)  # two query images per species (regular, shiny)
        values = rng.random(len(owner))
        t0 = time.perf_counter()
        Bootstrap.over(owner, 1000, 0, 0.95).interval(values)
        seconds = time.perf_counter() - t0
    else:
        raise ValueError(step)
    return {"seconds": seconds, "peak_mb": _peak_mb()}


STEPS = {"retrieve": "VR-RAG retrieval: build the flat index over species x 5 chunks x 3 encoders, 256 queries (r = 100) "
                     "and the re-rank",
         "polar_retrieval": "PolarMem: logic states of 256 queries' top-100 lists (200 concepts) and the hard order",
         "bootstrap": "the 95 % CI: 1,000 species-bootstrap resamples over 2 query images per species"}


def measure_steps(sizes: list[int]) -> dict[str, list[dict[str, float]]]:
    out: dict[str, list[dict[str, float]]] = {}
    for step in STEPS:
        for n in sizes:
            proc = subprocess.run([sys.executable, __file__, "--one", step, "--species", str(n)], capture_output=True,
                                  text=True, check=True)
            point = json.loads(proc.stdout.strip().splitlines()[-1])
            out.setdefault(step, []).append({"species": n, **point})
            print(step, n, point, flush=True)
    return out


def exponent(points: list[dict[str, float]]) -> float:
    """The slope of log(time) against log(size) over the larger half of the sizes (fixed costs dominate the small)."""
    pts = points[len(points) // 2 - 1:] if len(points) > 3 else points
    x, y = np.log([p["species"] for p in pts]), np.log([p["seconds"] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def clustered(n: int, dim: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n anchors as species clusters (5 per species around a centre, as a catalog's anchors are), and queries as
    perturbed anchors: the structure approximate indexes exploit (uniform random vectors have none)."""
    from polarcatalog.vectors import l2_normalise as normalise

    centres = normalise(rng.standard_normal((n // 5, dim), dtype=np.float32))
    noise = lambda m: NOISE * rng.standard_normal((m, dim), dtype=np.float32) / np.sqrt(dim)  # noqa: E731  (norm ~ NOISE)
    x = normalise(np.repeat(centres, 5, axis=0) + noise(n // 5 * 5))
    q = normalise(x[rng.choice(len(x), QUERIES, replace=False)] + noise(QUERIES))
    return x, q


def measure_indexes(sizes: list[int], hnsw_max: int) -> list[dict[str, object]]:
    """Flat (exact) vs IVF (nlist = sqrt(n), nprobe 16, 64, 256) vs HNSW (M = 32, efSearch 128) at each size."""
    import faiss

    rows = []
    for n in sizes:
        rng = np.random.default_rng(0)
        x, q = clustered(n, DIM, rng)
        flat = faiss.IndexFlatIP(DIM)
        flat.add(x)
        t0 = time.perf_counter()
        _, exact = flat.search(q, R)
        flat_s = time.perf_counter() - t0
        rows.append({"anchors": n, "index": "flat (exact)", "build_s": 0.0, "ms_per_query": 1000 * flat_s / QUERIES,
                     "recall_at_r": 1.0, "memory_mb": x.nbytes / 2**20})
        nlist = int(np.sqrt(n))
        ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, nlist, faiss.METRIC_INNER_PRODUCT)
        t0 = time.perf_counter()
        ivf.train(x[rng.choice(n, min(n, 39 * nlist), replace=False)])  # faiss's minimum sample per list
        ivf.add(x)
        build = time.perf_counter() - t0
        for nprobe in (16, 64, 256):
            ivf.nprobe = nprobe
            t0 = time.perf_counter()
            _, got = ivf.search(q, R)
            s = time.perf_counter() - t0
            rows.append({"anchors": n, "index": f"IVF{nlist},Flat nprobe {nprobe}", "build_s": build,
                         "ms_per_query": 1000 * s / QUERIES, "recall_at_r": _recall(got, exact),
                         "memory_mb": (x.nbytes + nlist * DIM * 4 + n * 8) / 2**20})
        if n <= hnsw_max:
            hnsw = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = 40
            t0 = time.perf_counter()
            hnsw.add(x)
            build = time.perf_counter() - t0
            hnsw.hnsw.efSearch = 128
            t0 = time.perf_counter()
            _, got = hnsw.search(q, R)
            s = time.perf_counter() - t0
            rows.append({"anchors": n, "index": "HNSW32 efSearch 128", "build_s": build, "ms_per_query": 1000 * s / QUERIES,
                         "recall_at_r": _recall(got, exact), "memory_mb": (x.nbytes + n * 32 * 2 * 4) / 2**20})
        print(rows[-1], flush=True)
    return rows


def _recall(got: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(got.tolist(), exact.tolist())]))


# The GPU profile (params.gpu-pokemon.yaml) on paper: forward FLOPs ~ 2 x parameters x tokens (dense layers; attention
# adds a few % at these lengths). Parameters and token counts are the models' published configurations.
GPU_MODELS = {
    "CLIP ViT-L/14 (224 px, 257 tokens)": 2 * 304e6 * 257,
    "OpenCLIP ViT-L/14 (224 px, 257 tokens)": 2 * 304e6 * 257,
    "SigLIP ViT-L/16 (256 px, 256 tokens)": 2 * 316e6 * 256,
    "DINOv2 ViT-L/14 (224 px, 257 tokens)": 2 * 304e6 * 257,
    "Qwen2.5-VL-7B image prefix (448 px: 1,024 patches -> 256 tokens + 40 prompt)": 2 * 675e6 * 1024 + 2 * 7.6e9 * 296,
    "Qwen2.5-VL-7B one yes/no suffix (~15 tokens)": 2 * 7.6e9 * 15,
}
H200_BF16_DENSE = 989e12  # FLOP/s, NVIDIA's datasheet (dense, no sparsity)
UTILISATION = 0.4  # assumed share of peak a batched inference forward reaches; the projection scales with 1 / this


def gpu_projection(species: int, images_per_species: float, concepts_per_image: int, templates: int) -> dict[str, object]:
    images = species * images_per_species
    encoders = sum(v for k, v in GPU_MODELS.items() if "Qwen" not in k) * images
    verifier = images * (GPU_MODELS["Qwen2.5-VL-7B image prefix (448 px: 1,024 patches -> 256 tokens + 40 prompt)"]
                         + concepts_per_image * templates * GPU_MODELS["Qwen2.5-VL-7B one yes/no suffix (~15 tokens)"])
    rate = H200_BF16_DENSE * UTILISATION
    return {"species": species, "images": images, "encoder_flop": encoders, "verifier_flop": verifier,
            "encoder_h": encoders / rate / 3600, "verifier_h": verifier / rate / 3600}


def figure(steps: dict[str, list[dict[str, float]]], index_rows: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for step, pts in steps.items():
        axes[0].loglog([p["species"] for p in pts], [p["seconds"] for p in pts], "o-", label=f"{step} (slope {exponent(pts):.2f})")
        axes[1].loglog([p["species"] for p in pts], [p["peak_mb"] for p in pts], "o-", label=step)
    axes[0].set(xlabel="catalog species", ylabel="seconds (256 queries)", title="Time per step")
    axes[1].set(xlabel="catalog species", ylabel="peak resident MB (whole process)", title="Peak memory per step")
    import re

    family = lambda r: re.sub(r"IVF\d+", "IVF sqrt(n)", str(r["index"]))  # noqa: E731  (nlist grows with n: one series per nprobe)
    for variant in dict.fromkeys(family(r) for r in index_rows):
        rows = [r for r in index_rows if family(r) == variant]
        recall = "" if variant.startswith("flat") else f" (recall@{R} {min(r['recall_at_r'] for r in rows):.2f}-{max(r['recall_at_r'] for r in rows):.2f})"
        axes[2].loglog([r["anchors"] for r in rows], [r["ms_per_query"] for r in rows], "o-", label=variant + recall)
    axes[2].set(xlabel="anchor vectors", ylabel="ms per query", title=f"Index latency ({DIM}-d, r = {R})")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", choices=list(STEPS))
    ap.add_argument("--species", type=int)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1008, 3000, 11131, 30000, 100000])
    ap.add_argument("--index-sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    ap.add_argument("--hnsw-max", type=int, default=300_000, help="largest size HNSW is built at (its build is the slowest)")
    ap.add_argument("--render", action="store_true", help="rewrite scaling.md and scaling.png from scaling.json")
    args = ap.parse_args()
    if args.render:
        res = json.loads((OUT / "scaling.json").read_text())
        figure(res["steps"], res["indexes"], OUT / "scaling.png")
        (OUT / "scaling.md").write_text(markdown(res))
        return
    if args.one:
        print(json.dumps(one_point(args.one, args.species)))
        return
    steps = measure_steps(args.sizes)
    index_rows = measure_indexes(args.index_sizes, args.hnsw_max)
    curation = json.loads((ROOT / "reports" / "curation.json").read_text())
    per_species = (curation["anchors"] + curation["queries"]) / curation["species"]
    gpu = [gpu_projection(n, per_species, 24, 3) for n in (1008, 11131, 100000)]
    result = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "numpy": np.__version__},
              "dim": DIM, "queries": QUERIES, "r": R, "steps": steps,
              "exponents": {s: round(exponent(p), 3) for s, p in steps.items()}, "indexes": index_rows,
              "gpu_projection": {"assumptions": {"H200 bf16 dense FLOP/s": H200_BF16_DENSE, "utilisation": UTILISATION,
                                                 "images per species (this catalog: anchors + queries)": round(per_species, 3),
                                                 "concepts per image": 24, "templates": 3},
                                 "models_flop": GPU_MODELS, "catalogs": gpu}}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scaling.json").write_text(json.dumps(result, indent=2) + "\n")
    figure(steps, index_rows, OUT / "scaling.png")
    (OUT / "scaling.md").write_text(markdown(result))
    print((OUT / "scaling.md").read_text())


def index_advice(idx: list[dict[str, object]], target: float = 0.95) -> list[str]:
    """Per size, the fastest approximate index that keeps `target` of the exact top-r, against exact search."""
    out = []
    for n in sorted({r["anchors"] for r in idx}):
        rows = [r for r in idx if r["anchors"] == n]
        flat = next(r for r in rows if r["index"].startswith("flat"))
        good = sorted((r for r in rows if not r["index"].startswith("flat") and r["recall_at_r"] >= target),
                      key=lambda r: r["ms_per_query"])
        if good:
            g = good[0]
            out.append(f"- {n:,} anchors: {g['index']} keeps {g['recall_at_r']:.4f} of the exact top-{R} at "
                       f"{g['ms_per_query']:.2f} ms/query against exact's {flat['ms_per_query']:.2f} "
                       f"({flat['ms_per_query'] / g['ms_per_query']:.1f}x faster).")
        else:
            best = max((r for r in rows if not r["index"].startswith("flat")), key=lambda r: r["recall_at_r"], default=None)
            out.append(f"- {n:,} anchors: no approximate setting tried keeps {target:.2f} of the exact top-{R} (best: "
                       + (f"{best['index']}, {best['recall_at_r']:.4f} at {best['ms_per_query']:.2f} ms" if best else "none")
                       + f"); exact search costs {flat['ms_per_query']:.2f} ms/query.")
    return out


def markdown(res: dict[str, object]) -> str:
    steps, exps, idx = res["steps"], res["exponents"], res["indexes"]
    sizes = [p["species"] for p in next(iter(steps.values()))]
    step_rows = ["| step | " + " | ".join(f"{n:,} species" for n in sizes) + " | exponent |",
                 "|---|" + "---|" * (len(sizes) + 1)]
    for s, pts in steps.items():
        step_rows.append(f"| {s}: {STEPS[s]} | " + " | ".join(f"{p['seconds']:.3g} s, {p['peak_mb']:.0f} MB" for p in pts)
                         + f" | {exps[s]:.2f} |")
    index_rows = ["| anchors | index | build s | ms/query | recall@100 vs exact | memory MB |", "|---|---|---|---|---|---|"]
    index_rows += [f"| {r['anchors']:,} | {r['index']} | {r['build_s']:.1f} | {r['ms_per_query']:.2f} | {r['recall_at_r']:.3f} | "
                   f"{r['memory_mb']:.0f} |" for r in idx]
    flat = {r["anchors"]: r["ms_per_query"] for r in idx if r["index"].startswith("flat")}
    fsizes = sorted(flat)
    slope = float(np.polyfit(np.log(fsizes), np.log([flat[n] for n in fsizes]), 1)[0]) if len(fsizes) > 1 else 1.0
    at_1e7 = flat[fsizes[-1]] * (1e7 / fsizes[-1]) ** slope
    hnsw_max = max((r["anchors"] for r in idx if r["index"].startswith("HNSW")), default=0)
    g = res["gpu_projection"]
    gpu_rows = ["| catalog | images | encoders (4 ViT-L) | VLM verifier (prefix + 72 yes/no suffixes per image) |", "|---|---|---|---|"]
    gpu_rows += [f"| {c['species']:,} species | {c['images']:,.0f} | {c['encoder_flop']:.2e} FLOP, {60 * c['encoder_h']:.1f} min | "
                 f"{c['verifier_flop']:.2e} FLOP, {c['verifier_h']:.2f} h |" for c in g["catalogs"]]
    return "\n".join([
        "# How cost grows with the catalog", "",
        f"Synthetic vectors ({res['dim']}-d per encoder), {res['queries']} queries, r = {res['r']}; each point a fresh process "
        f"(peak memory is the whole process's, imports included); {res['machine']['cpus']} CPUs. Command: "
        "`.venv/bin/python benchmarks/scaling.py` (`--render` rewrites this page from scaling.json). "
        "Figure: [scaling.png](scaling.png).", "",
        "## Per step, against catalog size", "",
        *step_rows, "",
        f"The exponent is the slope of log time against log species over the larger sizes (1 = linear). Retrieval "
        f"({exps['retrieve']:.2f}) is linear in the catalog: the flat index scores every chunk, and its memory is the "
        "chunk vectors of every encoder. PolarMem's order "
        f"({exps['polar_retrieval']:.2f}) is linear too, although each query reads only its top-{res['r']} list: "
        "`IncidenceMemory.species_states` computes every species' state for every query and then gathers the listed ones "
        "(the fast path at the pipeline's sizes, a full [queries x species] table at 100k); a gather of the listed "
        "species only would make it independent of the catalog. The bootstrap "
        f"({exps['bootstrap']:.2f}) grows with the number of query species (two per species here).", "",
        "## Which index at which size", "",
        *index_rows, "",
        *index_advice(idx), "",
        f"Flat search time grows with exponent {slope:.2f} here; at 10,000,000 anchors it would take about {at_1e7:.0f} ms "
        f"per query and {1e7 * res['dim'] * 4 / 2**30:.1f} GiB per encoder (projected from the measured sizes, not run: "
        f"this machine has 24 GiB and 2 cores; HNSW was built up to {hnsw_max:,} anchors, its build being the slowest). "
        f"**Advice**: VR-RAG passes r = {res['r']} candidates on, and on these anchors the approximate indexes lose many "
        "of them at settings that are faster than exact search, so `retrieval.index: flat` is the choice up to about "
        "10^6 anchors per encoder (tens of ms per query). Past that, measure: raise IVF's nprobe (`retrieval.index: ivf`, "
        "`retrieval.ivf_nlist` about sqrt(n)) until recall@r on your own features is acceptable, or keep exact search on a "
        "GPU (faiss-gpu, the `gpu` extra). Clustered synthetic anchors (5 per species around random centres) are a hard "
        "case for approximate search (a top-100 neighbourhood spans about twenty unrelated clusters); real features "
        "have more structure.", "",
        "## The GPU profile on paper", "",
        f"FLOPs ~ 2 x parameters x tokens per forward; an H200 at {g['assumptions']['H200 bf16 dense FLOP/s'] / 1e12:.0f} "
        f"TFLOP/s bf16 dense, {100 * g['assumptions']['utilisation']:.0f} % of it assumed reached; "
        f"{g['assumptions']['images per species (this catalog: anchors + queries)']} images per species (this catalog's "
        "anchors and queries), 24 concepts x 3 templates per image for the verifier. A projection, not a measurement: "
        "`scripts/device_check.sh` measures the verifier's time per episode on a real GPU.", "",
        *gpu_rows, "",
    ])


if __name__ == "__main__":
    main()
