"""The GPU check: the GPU code paths on tiny random models of the real classes, run on the device and compared with the
CPU or with their reference path. Meant for a lent GPU machine with no network and only a stock Python on it (torch,
transformers and its own needs, Pillow, timm, onnxruntime, pandas, scikit-learn, scipy): nothing here needs the
project's install, so `scripts/device_check.sh` runs it with the system `python3` on a plain checkout. `--device cpu`
runs the same checks here, to check the script itself (tests/test_device_check.py runs it with every package the bare
machine lacks blocked).

The checks (`--only` picks groups):
- encoders: open_clip (image and text towers) and transformers' DINOv2 on the device give the CPU's vectors. Skipped,
  with a note naming the wheels to carry (`scripts/device_check.sh wheels`), when open_clip is not importable;
- verifier: the graph stage's VLM verifier (`memory.verifiers.vlm.VLMVerifier`), its image prefix reused across the
  concept x template suffixes, equals the one-forward-per-question path; bf16 agrees with fp32; its time per episode;
- reader: the MLLM reader (`reader.mllm.MLLMReader`) answers the same batched as one by one;
- faiss: a flat index on the GPU returns the CPU's top-10; skipped, with a note, when faiss (or its GPU build) is not
  importable: the faiss-gpu wheel is too large to carry;
- stage: one pipeline stage's own compute, the curate stage's VLM anchor filter: `curate.anchors.create_anchor_filter`
  ("vlm") called on a mix of image sizes as `curate.pipeline.filter_anchors` calls it, its padded batches against one
  image at a time, and on a GPU its bf16 scores against fp32 and its device scores against the CPU's. (The embed
  stage's feature cache is no option here: its index is parquet, which needs pyarrow at run time.)

Prints one line per check and writes every number to `<out>/device_check.json` (`checks`: one record per check, each
with `ok` and, when it did not run, `skipped`; `imports`: the third-party packages the run imported); exits 1 if a
check fails."""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
# A plain checkout on the GPU machine, not pip-installed: the package from src/, and tests/tiny_models.py (the tiny
# Qwen2.5-VL the test suite uses) from the repo root. src/ first, so that an installed copy never shadows the checkout.
_first = [str(ROOT / "src"), str(ROOT)]
sys.path[:] = _first + [p for p in sys.path if p not in _first]

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from tests.tiny_models import save_tiny_qwen25_vl  # noqa: E402

WHEELS = ("open_clip_torch", "ftfy", "wcwidth")  # what open_clip needs beyond the machine's stock packages
GROUPS = ("encoders", "verifier", "reader", "faiss", "stage")

checks: dict[str, dict[str, object]] = {}
failed: list[str] = []


def check(name: str, ok: bool, **numbers: object) -> None:
    checks[name] = {"ok": bool(ok), **numbers}
    print(f"[{'ok' if ok else 'FAIL'}] {name}: " + ", ".join(f"{k}={v}" for k, v in numbers.items()), flush=True)
    if not ok:
        failed.append(name)


def skip(name: str, note: str) -> None:
    """A check that cannot run on this machine: recorded with the reason, not counted as a failure."""
    checks[name] = {"ok": True, "skipped": note}
    print(f"[skip] {name}: {note}", flush=True)


def pinned(names: tuple[str, ...]) -> list[str]:
    """`name==version` from constraints.txt (the versions the test suite passed with) for each of `names`."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            pins[name.lower().replace("-", "_")] = version
    return [f"{n}=={pins[n]}" if n in pins else n for n in names]


def images(n: int, seed: int = 0) -> list[Image.Image]:
    """Random RGB images, 56 px wide and alternately 56 and 84 px high: two token counts, so batches are padded."""
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 255, (56 + 28 * (i % 2), 56, 3), dtype=np.uint8)) for i in range(n)]


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@functools.cache
def tiny_vlm(tmp: Path) -> Path:
    """The tiny random Qwen2.5-VL (tests/tiny_models.py), saved once per run for every VLM check."""
    return save_tiny_qwen25_vl(tmp / "vlm")


def vlm_verifier_class() -> type:
    """`VLMVerifier`: its module imports the graph inputs' type for annotations only, so no data-layer package
    (scikit-image) is needed to build it."""
    from polarcatalog.memory.verifiers.vlm import VLMVerifier

    return VLMVerifier


def encoders(device: str, tmp: Path) -> None:
    """open_clip and transformers DINOv2 encoders on the device give the CPU's vectors (fp32)."""
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    from polarcatalog.encoders.hf import HFEncoder

    ims = images(8)
    name = "open_clip image+text on device = cpu"
    try:
        import open_clip
    except ImportError as err:
        skip(name, f"open_clip is not importable ({err}): carry the wheels {' '.join(pinned(WHEELS))} "
                   "(`scripts/device_check.sh wheels DIR` on a networked machine, then `scripts/device_check.sh DIR`)")
    else:
        from polarcatalog.encoders.open_clip_encoder import OpenClipEncoder

        cfg = {"embed_dim": 16, "vision_cfg": {"image_size": 64, "layers": 2, "width": 32, "head_width": 16, "patch_size": 16},
               "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}}
        (tmp / "oc").mkdir()
        (tmp / "oc" / "dc-tiny-clip.json").write_text(json.dumps(cfg))
        open_clip.add_model_config(tmp / "oc")
        torch.manual_seed(0)
        on, off = OpenClipEncoder("dc-tiny-clip", "random", device), OpenClipEncoder("dc-tiny-clip", "random", "cpu")
        off.model.load_state_dict(on.model.state_dict())
        texts = ["a red bird", "a small fish"]
        d_img = float(np.abs(on.encode_images(ims) - off.encode_images(ims)).max())
        d_txt = float(np.abs(on.encode_texts(texts) - off.encode_texts(texts)).max())
        check(name, d_img < 1e-3 and d_txt < 1e-3, max_abs_image=d_img, max_abs_text=d_txt,
              open_clip=getattr(open_clip, "__version__", "?"), open_clip_from=str(Path(open_clip.__file__).parent))
    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, image_size=56)).save_pretrained(tmp / "dino")
    BitImageProcessor(do_center_crop=False, size={"height": 56, "width": 56}, image_mean=[0.485, 0.456, 0.406],
                      image_std=[0.229, 0.224, 0.225]).save_pretrained(tmp / "dino")
    d = float(np.abs(HFEncoder(str(tmp / "dino"), device).encode_images(ims) - HFEncoder(str(tmp / "dino"), "cpu").encode_images(ims)).max())
    check("DINOv2 (transformers) on device = cpu", d < 1e-3, max_abs=d)


def verifier(device: str, tmp: Path) -> None:
    """The prefix-reuse verifier equals the one-by-one path on the device; bf16 agrees with fp32; the verifier's time
    per episode (one image, 12 concepts x 3 templates)."""
    VLMVerifier = vlm_verifier_class()
    ims = images(3, 1)
    concepts = ["red wings", "a long tail", "fire", "webbed feet", "a hooked bill", "white head", "black feet",
                "a crest", "spots", "stripes", "a pouch", "horns"]
    v = VLMVerifier(str(tiny_vlm(tmp)), device, templates=3)
    v.model.float()
    fast = v.scores(ims[0], concepts[:4])
    slow = np.array([[v.p_yes_one(ims[0], t.format(concept=c)) for t in v.templates] for c in concepts[:4]]).mean(1)
    d = float(np.abs(fast - slow).max())
    check("VLM verifier prefix reuse = one by one (fp32)", d < 1e-4, max_abs=d)
    fp32 = np.stack([v.scores(im, concepts) for im in ims])
    v.model.to(torch.bfloat16)
    bf16 = np.stack([v.scores(im, concepts) for im in ims])
    d = float(np.abs(bf16 - fp32).max())
    rank = float(np.mean([np.corrcoef(np.argsort(np.argsort(a)), np.argsort(np.argsort(b)))[0, 1] for a, b in zip(bf16, fp32)]))
    check("bf16 vs fp32 P(Yes)", d < 0.05, max_abs=round(d, 5), spearman=round(rank, 4))
    for _ in range(2):
        v.scores(ims[0], concepts)  # warm-up
    sync(device)
    t = time.perf_counter()
    for im in ims:
        v.scores(im, concepts)
    sync(device)
    per = (time.perf_counter() - t) / len(ims)
    check("VLM verifier time per episode (tiny model; 12 concepts x 3 templates)", True, seconds=round(per, 4))


def reader(device: str, tmp: Path) -> None:
    """The reader's batched answers (left-padded, mixed image sizes) equal its one-by-one answers."""
    from polarcatalog.reader.mllm import MLLMReader
    from polarcatalog.reader.prompt import reader_prompt

    folder = tiny_vlm(tmp)
    ims = images(3, 1)
    prompts = [reader_prompt([("Laysan Albatross", "White head."), ("Black-footed Albatross", "Dark brown.")]),
               reader_prompt([("Mew", "Pink.")], "pokemon"), reader_prompt([("Laysan Albatross", "White head.")])]
    batched, single = MLLMReader(str(folder), device, 3, 6), MLLMReader(str(folder), device, 1, 6)
    batched.model.float(), single.model.float()
    a, b = batched.read(ims, prompts), single.read(ims, prompts)
    check("MLLM reader batched = one by one", a == b, answers=len(a))


def faiss_gpu_vs_cpu(device: str, tmp: Path) -> None:
    """A flat inner-product index on the GPU returns the CPU's top-10."""
    name = "FAISS GPU index = CPU"
    try:
        import faiss
    except ImportError as err:
        skip(name, f"faiss is not importable ({err}); the faiss-gpu wheel is too large to carry, so the GPU index is "
                   "checked only where faiss-gpu is installed")
        return
    if device != "cuda" or not (hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0):
        skip(name, "no faiss GPU here (--device cpu, a faiss-cpu build, or no GPU visible to faiss)")
        return
    from polarcatalog.index.faiss_index import build_index, search

    rng = np.random.default_rng(0)
    x = rng.standard_normal((20000, 256)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[:500] + 0.1 * rng.standard_normal((500, 256)).astype(np.float32)
    s_cpu, i_cpu = search(build_index(x, use_gpu=False), q, 10)
    s_gpu, i_gpu = search(build_index(x, use_gpu=True), q, 10)
    same = float((i_gpu == i_cpu).mean())
    check(name, same > 0.999 and float(np.abs(s_gpu - s_cpu).max()) < 1e-4, same_ids=same,
          max_abs_score=float(np.abs(s_gpu - s_cpu).max()), gpus=faiss.get_num_gpus())


def curate_anchor_filter(device: str, tmp: Path) -> None:
    """The curate stage's VLM anchor filter (`create_anchor_filter("vlm")`, called on the candidates' images as
    `curate.pipeline.filter_anchors` calls it): its scores as the stage gets them (bf16 on a GPU, fp32 on the CPU), its
    padded batches against one image at a time (fp32), and on a GPU the device's fp32 scores against the CPU's."""
    from polarcatalog.curate.anchors import create_anchor_filter

    folder = str(tiny_vlm(tmp))
    ims = images(6, 2)
    # curate.batch_size images per forward (32 in params.yaml); 4 here, so that 6 images make two padded batches
    filt = create_anchor_filter("vlm", vlm_model=folder, vlm_threshold=0.5, domain="pokemon", device=device, batch_size=4)
    batch_size = filt.batch_size
    sync(device)
    t = time.perf_counter()
    stage = filt(ims)  # FilterResult: what the stage writes as each candidate's score and keep
    sync(device)
    seconds = time.perf_counter() - t
    filt.model.float()
    batched = filt.p_yes(ims)
    filt.batch_size = 1
    single = filt.p_yes(ims)
    d_batch = float(np.abs(batched - single).max())
    numbers: dict[str, object] = {
        "images": len(ims), "batch_size": batch_size, "kept": int(stage.keep.sum()), "threshold": stage.threshold,
        "scores": [round(float(s), 5) for s in stage.scores], "seconds": round(seconds, 4),
        "max_abs_batched_vs_single": d_batch}
    ok = d_batch < 1e-4 and bool(np.isfinite(stage.scores).all()) and len(stage.scores) == len(ims)
    if device == "cuda":
        d_bf16 = float(np.abs(stage.scores - batched).max())
        cpu = create_anchor_filter("vlm", vlm_model=folder, vlm_threshold=0.5, domain="pokemon", device="cpu")
        d_cpu = float(np.abs(cpu.p_yes(ims) - batched).max())
        numbers |= {"max_abs_bf16_vs_fp32": round(d_bf16, 5), "max_abs_device_vs_cpu": d_cpu}
        ok = ok and d_bf16 < 0.05 and d_cpu < 1e-3
    check("curate stage: VLM anchor filter, batched = one by one", ok, **numbers)


RUNS: dict[str, Callable[[str, Path], None]] = {
    "encoders": encoders, "verifier": verifier, "reader": reader, "faiss": faiss_gpu_vs_cpu, "stage": curate_anchor_filter}


def third_party_imports() -> list[str]:
    """Top-level packages outside the standard library and this repo that the run imported."""
    tops = {name.partition(".")[0] for name in list(sys.modules)}
    return sorted(t for t in tops if t not in sys.stdlib_module_names and not t.startswith("_")
                  and t not in ("polarcatalog", "tests", "__main__"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks")
    ap.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated groups out of {', '.join(GROUPS)} (default: all)")
    args = ap.parse_args()
    groups = [g.strip() for g in args.only.split(",") if g.strip()]
    if unknown := [g for g in groups if g not in RUNS]:
        ap.error(f"unknown check group(s) {', '.join(unknown)}; allowed: {', '.join(GROUPS)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device visible to torch: run on a GPU machine, or --device cpu to check the script", file=sys.stderr)
        return 2
    import polarcatalog
    import transformers

    machine = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
               "transformers": transformers.__version__, "numpy": np.__version__,
               "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
               "polarcatalog": str(Path(polarcatalog.__file__).parent)}
    print(json.dumps(machine), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for group in groups:
            try:
                RUNS[group](args.device, Path(tmp))
            except Exception as err:  # one broken group is a failed check; the others still run and are written
                traceback.print_exc()
                check(f"{group}: raised", False, error=f"{type(err).__name__}: {err}")
    report = {"machine": machine, "device": args.device, "checks": checks, "failed": failed,
              "passed": len(checks) - len(failed), "imports": third_party_imports()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "device_check.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    skipped = sum("skipped" in c for c in checks.values())
    print(f"{len(checks) - len(failed) - skipped} checks passed, {skipped} skipped, {len(failed)} failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
