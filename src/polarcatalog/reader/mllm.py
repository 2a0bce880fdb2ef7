"""The reader model: a Qwen2.5-VL-class MLLM through transformers, one user turn (image, then the prompt), greedy
decoding, batched with left padding so a batched answer equals the one-by-one answer (tested on a tiny random model)."""

from __future__ import annotations

from typing import Sequence

from PIL import Image

from polarcatalog.device import resolve_device
from polarcatalog.progress import batches


class MLLMReader:
    def __init__(self, model: str, device: str = "auto", batch_size: int = 4, max_new_tokens: int = 24):
        import torch  # heavy: only for the GPU profile's reader
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.device = resolve_device(device)
        self.model_name, self.batch_size, self.max_new_tokens = model, batch_size, max_new_tokens
        self.processor = AutoProcessor.from_pretrained(model)
        self.processor.tokenizer.padding_side = "left"
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.model = AutoModelForImageTextToText.from_pretrained(model, dtype=dtype).to(self.device).eval()

    def chat(self, prompt: str) -> str:
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
        return self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def read(self, images: Sequence[Image.Image], prompts: Sequence[str], desc: str = "reader") -> list[str]:
        """The answer to each (image, prompt) pair, special tokens dropped."""
        import torch  # heavy (see __init__)

        if len(images) != len(prompts):
            raise ValueError(f"{len(images)} images for {len(prompts)} prompts")
        tok = self.processor.tokenizer
        out: list[str] = []
        for i in batches(len(prompts), self.batch_size, desc, unit="query"):
            texts = [self.chat(p) for p in prompts[i : i + self.batch_size]]
            enc = self.processor(text=texts, images=list(images[i : i + self.batch_size]), return_tensors="pt",
                                 padding=True).to(self.device)
            with torch.inference_mode():
                gen = self.model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False,
                                          pad_token_id=tok.pad_token_id)
            out += tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        return out
