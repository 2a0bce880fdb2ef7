"""The GPU-profile verifier: a Qwen2-VL-class model asked "Does this image show {concept}? Answer Yes or No."."""

from __future__ import annotations

import copy
import inspect
from typing import Sequence, TYPE_CHECKING

import numpy as np

from polarcatalog.data.images import load_rgb
from polarcatalog.data.regions import content_box, grid_cell
from polarcatalog.device import resolve_device
from polarcatalog.memory.verifiers.verifier_types import Scores
from polarcatalog.progress import progress

if TYPE_CHECKING:  # annotations only: the inputs module pulls in the data layer (scikit-image)
    from polarcatalog.memory.inputs import GraphInputs

TEMPLATES = (
    "Does this image show {concept}? Answer Yes or No.",
    "Is the following true of the Pokémon in the image: it has {concept}? Answer Yes or No.",
    "Look at the image. Can you see {concept}? Answer Yes or No.",
)


class VLMVerifier:
    """Qwen2-VL-class verifier: mean over templates of P(Yes) from the first answer token's logits, softmax over the
    Yes/No pair. The image prefix is run once per image and its KV cache reused for every concept x template suffix
    (one batch); the paper's 5.53 s/episode is the number to beat. `local_grid` > 0 also asks the catalog images'
    grid² local views (the global + local proposer's input)."""

    def __init__(self, model: str, device: str = "auto", templates: int | Sequence[str] = 3, local_grid: int = 0):
        import torch  # heavy: torch and transformers load only when a VLM verifier is built
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.device = resolve_device(device)
        self.model_name, self.local_grid = model, local_grid
        self.processor = AutoProcessor.from_pretrained(model)
        tok = self.processor.tokenizer
        tok.padding_side = "left"
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.model = AutoModelForImageTextToText.from_pretrained(model, dtype=dtype).to(self.device).eval()
        self.yes_no = [tok.convert_tokens_to_ids(t) for t in ("Yes", "No")]
        self.templates = TEMPLATES[:templates] if isinstance(templates, int) else tuple(templates)
        self.calls = 0

    def score(self, inputs: GraphInputs) -> Scores:
        """Global views of catalog and query images; with `local_grid`, the catalog images' local views too."""
        ws = inputs.workspace
        names = [c.name for c in inputs.vocab]
        cells = [(r, c) for r in range(self.local_grid) for c in range(self.local_grid)]
        anchor, local = [], []
        for p in progress(ws.anchors["path"].tolist(), len(ws.anchors), "VLM verify catalog images", unit="img"):
            im = load_rgb(p)  # decoded once for the global view and its local views
            anchor.append(self.scores(im, names))
            local.append([self.scores(grid_cell(content_box(im), self.local_grid, r, c), names) for r, c in cells])
        query = [self.scores(load_rgb(p), names)
                 for p in progress(ws.queries["path"].tolist(), len(ws.queries), "VLM verify queries", unit="img")]
        return Scores(np.stack(anchor), np.stack(query), np.array(local) if self.local_grid else None)

    def describe(self, inputs: GraphInputs) -> str:
        return f"VLM `{self.model_name}`, P(Yes) averaged over {len(self.templates)} templates."

    def calls_per_image(self, n_concepts: int) -> float:
        return 2.0 * (1 + self.local_grid ** 2)  # one prefix pass + one batched suffix pass, per view

    def _prompt(self, question: str | None) -> str:
        content = [{"type": "image"}] + ([{"type": "text", "text": question}] if question else [])
        return self.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)

    def p_yes_one(self, image, question: str) -> float:
        """Reference path: the whole prompt in one forward (used to test the reuse path)."""
        import torch  # heavy (see __init__)

        enc = self.processor(text=[self._prompt(question)], images=[image], return_tensors="pt").to(self.device)
        with torch.inference_mode():
            logits = self.model(**enc).logits[0, -1, self.yes_no].float()
        self.calls += 1
        return float(logits.softmax(-1)[0])

    def scores(self, image, concepts: Sequence[str]) -> np.ndarray:
        """s_c for every concept: mean over templates of P(Yes), all suffixes in one batch on a shared prefix."""
        import torch  # heavy (see __init__)

        questions = [t.format(concept=c) for c in concepts for t in self.templates]
        full = [self._prompt(q) for q in questions]
        marker = "<|vision_end|>"
        prefix_text = full[0][: full[0].index(marker) + len(marker)]
        if any(not f.startswith(prefix_text) for f in full):
            raise ValueError("chat template does not put the image first; cannot reuse the image prefix")
        enc = self.processor(text=[prefix_text], images=[image], return_tensors="pt").to(self.device)
        with torch.inference_mode():
            out = self.model(**enc, use_cache=True)
            self.calls += 1
            cache = getattr(out, "cache", None) or out.past_key_values
            tok = self.processor.tokenizer
            suffixes = [f[len(prefix_text):] for f in full]
            s_enc = tok(suffixes, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
            n, L = s_enc["input_ids"].shape
            P = enc["input_ids"].shape[1]
            # 3-D rope positions continue after the prefix: text positions = prefix max + 1 + offset (Qwen mrope)
            pos_ids, deltas = self.model.model.get_rope_index(
                input_ids=enc["input_ids"], image_grid_thw=enc.get("image_grid_thw"), attention_mask=enc["attention_mask"],
                mm_token_type_ids=enc.get("mm_token_type_ids")) if _accepts_mm(self.model) else self.model.model.get_rope_index(
                input_ids=enc["input_ids"], image_grid_thw=enc.get("image_grid_thw"), attention_mask=enc["attention_mask"])
            start = int(pos_ids.max()) + 1
            mask_s = s_enc["attention_mask"]
            offsets = (mask_s.cumsum(-1) - 1).clamp(min=0)  # left padding: real tokens count from 0
            text_pos = (start + offsets).unsqueeze(0).expand(3, n, L)
            big = copy.deepcopy(cache)
            big.batch_repeat_interleave(n)
            attn = torch.cat([enc["attention_mask"].expand(n, P), mask_s], dim=1)
            logits = self.model(input_ids=s_enc["input_ids"], attention_mask=attn, cache=big,
                                position_ids=text_pos, use_cache=True).logits[:, -1, self.yes_no].float()
            self.calls += 1
        p = logits.softmax(-1)[:, 0].cpu().numpy().reshape(len(concepts), len(self.templates))
        return p.mean(1)


def _accepts_mm(model) -> bool:
    return "mm_token_type_ids" in inspect.signature(model.model.get_rope_index).parameters
