"""VR-RAG retrieval at the paper's scale: 11,202 species x 5 chunks, 3 ensemble encoders, 3 anchors per species,
768-d, plus a re-ranker. Reports queries/s of the vectorised pipeline (FAISS flat + vectorised re-rank), of the
same scoring written as a per-candidate Python loop, and the raw matmul throughput of this machine (roofline), all in one
run and under the same thread settings: the pipeline's own (one BLAS / OpenMP thread: `polarcatalog.numerics`, for
bits that do not depend on the core count) and both cores. Where the time goes beyond the matmul is split into FAISS's
top-r selection, the re-rank and the rest.

    .venv/bin/python benchmarks/retrieval_scale.py [--queries 512] [--loop-queries 2]

Writes reports/benchmarks/retrieval_scale.{json,md}. Synthetic random vectors: speed only, no accuracy.
"""

from __future__ import annotations

from polarcatalog.numerics import pin_process

pin_process()  # before numpy loads, as the `polarcatalog` command does

import argparse
import json
import os
import platform
import time
from pathlib import Path

import faiss
import numpy as np
from threadpoolctl import threadpool_limits

from polarcatalog.index import search
from polarcatalog.retrieval.vrrag import VRRAG, Catalog
from polarcatalog.vectors import l2_normalise as normalise

ROOT = Path(__file__).resolve().parents[1]


def synthetic_catalog(species: int, chunks_per: int, anchors_per: int, dim: int, encoders: list[str], seed: int = 0) -> Catalog:
    rng = np.random.default_rng(seed)
    chunk_species = np.repeat(np.arange(species), chunks_per)
    anchor_mean, chunk_text = {}, {}
    for name in encoders:
        anchors = normalise(rng.standard_normal((species * anchors_per, dim), dtype=np.float32))
        anchor_mean[name] = normalise(anchors.reshape(species, anchors_per, dim).mean(1))
        chunk_text[name] = normalise(rng.standard_normal((species * chunks_per, dim), dtype=np.float32))
    return Catalog(np.arange(species), chunk_species, anchor_mean, chunk_text, {n: np.zeros(dim, np.float32) for n in encoders})


def loop_scores(catalog: Catalog, chunk_vecs: dict[str, np.ndarray], ensemble: list[str], reranker: str,
                q: dict[str, np.ndarray], qi: int, r: int, lam: float, k: int) -> list[int]:
    """The same VR-RAG scoring, one candidate at a time in Python (what the vectorised path replaces).
    Chunk vectors are precomputed, as in the vectorised path: only the scoring is timed."""
    scored = []
    for c in range(len(catalog.chunk_species)):
        s = 0.0
        for n in ensemble:
            s += float(np.dot(q[n][qi], chunk_vecs[n][c]))
        scored.append((s / len(ensemble), c))
    scored.sort(reverse=True)
    best: dict[int, float] = {}
    for s_m, c in scored[:r]:
        sp = int(catalog.chunk_species[c])
        best.setdefault(sp, s_m)
    final = [(lam * s_m + (1 - lam) * float(np.dot(q[reranker][qi], catalog.anchor_mean[reranker][sp])), sp) for sp, s_m in best.items()]
    final.sort(reverse=True)
    return [sp for _, sp in final[:k]]


def matmul_gflops(n: int = 2048, repeats: int = 5) -> float:
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    a @ a
    return 2 * n**3 / best_seconds(lambda: a @ a, repeats) / 1e9


def best_seconds(fn, repeats: int = 5) -> float:
    """The fastest of `repeats` calls: on a shared machine the minimum is the run least disturbed by others."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def split_by_part(vr: VRRAG, q: dict[str, np.ndarray], ensemble: list[str], reranker: str, r: int, flops_per_query: int) -> dict:
    """At the current thread settings: the square-matmul roofline, the pipeline's candidates, and the parts they are
    made of (the ensemble matmul alone at the search's shape, FAISS's search with its top-r selection, the re-rank
    matmul), each the best of five."""
    n = len(next(iter(q.values())))
    qq = np.hstack([q[name] for name in ensemble]) / len(ensemble)
    search_flop = 2 * n * vr.m.shape[0] * vr.m.shape[1]
    cand_s = best_seconds(lambda: vr.candidates(q))
    sgemm_s = best_seconds(lambda: qq @ vr.m.T)
    search_s = best_seconds(lambda: search(vr.index, qq, r))
    top1_s = best_seconds(lambda: search(vr.index, qq, 1))
    rerank_s = best_seconds(lambda: q[reranker] @ vr.catalog.anchor_mean[reranker].T)
    # numpy and FAISS each ship their own OpenBLAS build: the roofline is the fastest matmul either reaches here
    rates = {"numpy, square 2048": matmul_gflops(), "numpy, the search's shape": search_flop / sgemm_s / 1e9,
             "FAISS's BLAS, the search's shape (top-1 search)": search_flop / top1_s / 1e9}
    gflops = max(rates.values())
    bound_s = n * flops_per_query / (gflops * 1e9)
    return {"matmul_gflops": round(gflops, 1), "matmul_gflops_by_kind": {k: round(v, 1) for k, v in rates.items()},
            "roofline_queries_per_s": round(n / bound_s, 1),
            "candidates_s": round(cand_s, 4), "queries_per_s": round(n / cand_s, 1),
            "fraction_of_roofline": round(bound_s / cand_s, 3),
            "parts_s": {"ensemble matmul at the search's shape (numpy)": round(sgemm_s, 4),
                        "FAISS flat search (matmul + top-r selection)": round(search_s, 4),
                        "re-rank matmul": round(rerank_s, 4),
                        "the rest (first chunk per species, gathers)": round(max(cand_s - search_s - rerank_s, 0.0), 4)}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--species", type=int, default=11202)
    ap.add_argument("--chunks-per-species", type=int, default=5)
    ap.add_argument("--anchors-per-species", type=int, default=3)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--queries", type=int, default=512)  # a batch whose matmul runs near the square rate
    ap.add_argument("--loop-queries", type=int, default=2)
    ap.add_argument("--r", type=int, default=100)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--lam", type=float, default=0.7)
    args = ap.parse_args()

    ensemble, reranker = ["clip", "openclip", "siglip"], "dinov2"
    t0 = time.perf_counter()
    catalog = synthetic_catalog(args.species, args.chunks_per_species, args.anchors_per_species, args.dim, [*ensemble, reranker])
    build_catalog_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    vr = VRRAG(catalog, ensemble, "multimodal", reranker, r=args.r, index="flat")
    build_index_s = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    q = {n: normalise(rng.standard_normal((args.queries, args.dim), dtype=np.float32)) for n in [*ensemble, reranker]}

    vr.rank(vr.candidates({n: v[:8] for n, v in q.items()}), args.lam, args.k)  # warm-up
    cands = vr.candidates(q)
    rank_s = best_seconds(lambda: vr.rank(cands, args.lam, args.k))
    ranking = vr.rank(cands, args.lam, args.k)

    chunk_vecs = {n: catalog.chunk_vectors(n, "multimodal") for n in ensemble}
    t0 = time.perf_counter()
    loop_top = [loop_scores(catalog, chunk_vecs, ensemble, reranker, q, i, args.r, args.lam, args.k) for i in range(args.loop_queries)]
    loop_s = (time.perf_counter() - t0) / args.loop_queries
    agree = all(loop_top[i] == ranking.species_ids[i].tolist() for i in range(args.loop_queries))

    n_chunks = args.species * args.chunks_per_species
    flops_per_query = 2 * n_chunks * args.dim * len(ensemble) + 2 * args.species * args.dim  # ensemble search + re-rank matmul
    pinned = split_by_part(vr, q, ensemble, reranker, args.r, flops_per_query)  # the pipeline's settings: 1 thread
    cores = os.cpu_count() or 1
    with threadpool_limits(cores):
        faiss.omp_set_num_threads(cores)
        all_cores = split_by_part(vr, q, ensemble, reranker, args.r, flops_per_query)
    result = {
        "scale": {"species": args.species, "chunks": n_chunks, "ensemble_encoders": len(ensemble), "reranker": 1,
                  "anchors_per_species": args.anchors_per_species, "dim": args.dim, "r": args.r, "k": args.k},
        "machine": {"cpus": cores, "platform": platform.platform(), "numpy": np.__version__,
                    "blas_kernel": os.environ.get("OPENBLAS_CORETYPE", "native")},
        "build_catalog_s": round(build_catalog_s, 2), "build_index_s": round(build_index_s, 2),
        "flops_per_query": flops_per_query, "queries": args.queries,
        "pipeline_threads": pinned, "all_cores": all_cores,
        "lambda_point_queries_per_s": round(args.queries / rank_s, 1),
        "python_loop": {"queries": args.loop_queries, "s_per_query": round(loop_s, 2), "queries_per_s": round(1 / loop_s, 3),
                        "same_top_k_as_vectorised": agree},
    }
    result["speedup_vs_loop"] = round(pinned["queries_per_s"] / result["python_loop"]["queries_per_s"], 1)
    result["fraction_of_roofline"] = pinned["fraction_of_roofline"]
    out = ROOT / "reports" / "benchmarks"
    out.mkdir(parents=True, exist_ok=True)
    (out / "retrieval_scale.json").write_text(json.dumps(result, indent=2) + "\n")
    lp = result["python_loop"]
    selection_s = pinned["parts_s"]["FAISS flat search (matmul + top-r selection)"] - pinned["parts_s"]["ensemble matmul at the search's shape (numpy)"]
    rows = [f"| {label} | {part['queries_per_s']} | {part['roofline_queries_per_s']} (matmul at {part['matmul_gflops']} GFLOP/s) | "
             f"{100 * part['fraction_of_roofline']:.0f}% |" for label, part in
             (("1 (the pipeline's setting)", pinned), (f"{cores} (every core)", all_cores))]
    parts = [f"| {name} | {pinned['parts_s'][name]} | {all_cores['parts_s'][name]} |" for name in pinned["parts_s"]]
    (out / "retrieval_scale.md").write_text("\n".join([
        "# VR-RAG retrieval at the paper's scale", "",
        f"{args.species:,} species x {args.chunks_per_species} chunks = {n_chunks:,} chunk vectors, {len(ensemble)} ensemble "
        f"encoders + 1 re-ranker, {args.anchors_per_species} anchors/species, {args.dim}-d, r={args.r}, k={args.k}, "
        f"{args.queries} queries; {cores} CPUs, OpenBLAS kernel {result['machine']['blas_kernel']}. "
        "Command: `.venv/bin/python benchmarks/retrieval_scale.py`.", "",
        "The vectorised path (FAISS flat over the concatenated ensemble + gathered re-rank) against the roofline: "
        f"{flops_per_query:,} FLOP per query at the fastest matmul rate measured in this run with the same threads (below).", "",
        "| threads | queries/s | roofline queries/s | share of roofline |", "|---|---|---|---|", *rows, "",
        "Where the time goes (seconds for the batch, best of five):", "",
        f"| part | 1 thread | {cores} threads |", "|---|---|---|", *parts, "",
        "The ensemble matmul is one BLAS call of the search's own shape; FAISS's search is that matmul in blocks plus "
        "each query's top-r heap, so their difference is the selection's cost. The pipeline runs on one thread: "
        "reductions split across threads round differently (`polarcatalog.numerics`). What separates the path from "
        f"the roofline at one thread: the top-r selection ({selection_s:+.3f} s "
        "against the bare matmul), the re-rank matmul's thin shape and the first-chunk-per-species pass.", "",
        "The roofline is the fastest matmul measured in this run (numpy and FAISS ship different OpenBLAS builds), in GFLOP/s:", "",
        f"| matmul | 1 thread | {cores} threads |", "|---|---|---|",
        *[f"| {kind} | {pinned['matmul_gflops_by_kind'][kind]} | {all_cores['matmul_gflops_by_kind'][kind]} |"
          for kind in pinned["matmul_gflops_by_kind"]], "",
        "| other paths | queries/s |", "|---|---|",
        f"| one λ / k point from cached candidates (a re-sort) | {result['lambda_point_queries_per_s']} |",
        f"| per-candidate Python loop (same scores; top-k identical: {lp['same_top_k_as_vectorised']}) | {lp['queries_per_s']} |", "",
        f"Speed-up over the loop: {result['speedup_vs_loop']}x; "
        f"{100 * result['fraction_of_roofline']:.0f}% of the matmul roofline at the pipeline's setting.", "",
    ]))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
