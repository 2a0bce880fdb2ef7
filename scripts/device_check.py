"""The GPU check: the GPU code paths on tiny random models of the real classes, FAISS on the GPU against the CPU,
bf16 against fp32, and the VLM verifier's time per episode. Run by `scripts/device_check.sh` on a lent GPU machine
(`--device cpu` runs the same checks here, without the FAISS GPU part, to check the script itself).

Prints one line per check and writes every number to `<out>/device_check.json`; exits 1 if a check fails."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/tiny_models.py: the tiny Qwen2.5-VL the test suite uses

from tests.tiny_models import save_tiny_qwen25_vl  # noqa: E402

results: dict[str, object] = {}
failed: list[str] = []


def check(name: str, ok: bool, **numbers: object) -> None:
    results[name] = {"ok": bool(ok), **numbers}
    print(f"[{'ok' if ok else 'FAIL'}] {name}: " + ", ".join(f"{k}={v}" for k, v in numbers.items()), flush=True)
    if not ok:
        failed.append(name)


def images(n: int, seed: int = 0) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 255, (56 + 28 * (i % 2), 56, 3), dtype=np.uint8)) for i in range(n)]


def encoders(device: str, tmp: Path) -> None:
    """open_clip and transformers DINOv2 encoders on the device give the CPU's vectors (fp32)."""
    import open_clip
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    from polarcatalog.encoders.hf import HFEncoder
    from polarcatalog.encoders.open_clip_encoder import OpenClipEncoder

    cfg = {"embed_dim": 16, "vision_cfg": {"image_size": 64, "layers": 2, "width": 32, "head_width": 16, "patch_size": 16},
           "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}}
    (tmp / "oc").mkdir()
    (tmp / "oc" / "dc-tiny-clip.json").write_text(json.dumps(cfg))
    open_clip.add_model_config(tmp / "oc")
    torch.manual_seed(0)
    on, off = OpenClipEncoder("dc-tiny-clip", "random", device), OpenClipEncoder("dc-tiny-clip", "random", "cpu")
    off.model.load_state_dict(on.model.state_dict())
    ims = images(8)
    d_img = float(np.abs(on.encode_images(ims) - off.encode_images(ims)).max())
    d_txt = float(np.abs(on.encode_texts(["a red bird", "a small fish"]) - off.encode_texts(["a red bird", "a small fish"])).max())
    check("open_clip image+text on device = cpu", d_img < 1e-3 and d_txt < 1e-3, max_abs_image=d_img, max_abs_text=d_txt)
    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, image_size=56)).save_pretrained(tmp / "dino")
    BitImageProcessor(do_center_crop=False, size={"height": 56, "width": 56}, image_mean=[0.485, 0.456, 0.406],
                      image_std=[0.229, 0.224, 0.225]).save_pretrained(tmp / "dino")
    d = float(np.abs(HFEncoder(str(tmp / "dino"), device).encode_images(ims) - HFEncoder(str(tmp / "dino"), "cpu").encode_images(ims)).max())
    check("DINOv2 (transformers) on device = cpu", d < 1e-3, max_abs=d)


def verifier_and_reader(device: str, tmp: Path) -> None:
    """The prefix-reuse verifier equals the one-by-one path on the device; bf16 agrees with fp32; the reader's
    batched answers equal one-by-one; the verifier's time per episode (one image, 12 concepts x 3 templates)."""
    from polarcatalog.memory.verifiers import VLMVerifier
    from polarcatalog.reader.mllm import MLLMReader
    from polarcatalog.reader.prompt import reader_prompt

    folder = save_tiny_qwen25_vl(tmp / "vlm")
    ims = images(3, 1)
    concepts = ["red wings", "a long tail", "fire", "webbed feet", "a hooked bill", "white head", "black feet",
                "a crest", "spots", "stripes", "a pouch", "horns"]
    v = VLMVerifier(str(folder), device, templates=3)
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
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for im in ims:
        v.scores(im, concepts)
    if device == "cuda":
        torch.cuda.synchronize()
    per = (time.perf_counter() - t) / len(ims)
    check("VLM verifier time per episode (tiny model; 12 concepts x 3 templates)", True, seconds=round(per, 4))
    prompts = [reader_prompt([("Laysan Albatross", "White head."), ("Black-footed Albatross", "Dark brown.")]),
               reader_prompt([("Mew", "Pink.")], "pokemon"), reader_prompt([("Laysan Albatross", "White head.")])]
    batched, single = MLLMReader(str(folder), device, 3, 6), MLLMReader(str(folder), device, 1, 6)
    batched.model.float(), single.model.float()
    a, b = batched.read(ims, prompts), single.read(ims, prompts)
    check("MLLM reader batched = one by one", a == b, answers=len(a))


def faiss_gpu_vs_cpu(device: str) -> None:
    """A flat inner-product index on the GPU returns the CPU's top-10."""
    import faiss

    from polarcatalog.index.faiss_index import build_index, search

    rng = np.random.default_rng(0)
    x = rng.standard_normal((20000, 256)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[:500] + 0.1 * rng.standard_normal((500, 256)).astype(np.float32)
    s_cpu, i_cpu = search(build_index(x, use_gpu=False), q, 10)
    if device != "cuda" or not (hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0):
        check("FAISS GPU index = CPU", device != "cuda", skipped="no faiss GPU (faiss-cpu build or no CUDA)")
        return
    s_gpu, i_gpu = search(build_index(x, use_gpu=True), q, 10)
    same = float((i_gpu == i_cpu).mean())
    check("FAISS GPU index = CPU", same > 0.999 and float(np.abs(s_gpu - s_cpu).max()) < 1e-4, same_ids=same,
          max_abs_score=float(np.abs(s_gpu - s_cpu).max()), gpus=faiss.get_num_gpus())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device visible to torch: run on a GPU machine, or --device cpu to check the script", file=sys.stderr)
        return 2
    results["machine"] = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
                          "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None}
    print(json.dumps(results["machine"]), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        encoders(args.device, Path(tmp))
        verifier_and_reader(args.device, Path(tmp))
        faiss_gpu_vs_cpu(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "device_check.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"{len(results) - 1 - len(failed)} checks passed, {len(failed)} failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
