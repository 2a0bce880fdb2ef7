"""A transformers causal LM answering prompts greedily: the summarizer (curate) and the triple extractor (kg) of the
GPU profile share it. Batched with left padding, so a batched answer equals the one-by-one answer (tested)."""

from __future__ import annotations

from typing import Sequence

from polarcatalog.device import resolve_device
from polarcatalog.progress import batches


class CausalLM:
    def __init__(self, model: str, max_new_tokens: int = 200, device: str = "auto", batch_size: int = 4):
        import torch  # heavy: only for the GPU profile's language models
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = resolve_device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=dtype).to(self.device).eval()
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size

    def chat(self, text: str) -> str:
        """`text` as one user turn of the model's chat template (a base model without one gets it verbatim)."""
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                      add_generation_prompt=True)
        return text

    def answer(self, prompts: Sequence[str], desc: str, unit: str) -> list[str]:
        """The generated continuation of each prompt, special tokens dropped, with a progress bar."""
        import torch  # heavy: only for the GPU profile's language models

        out: list[str] = []
        for i in batches(len(prompts), self.batch_size, desc, unit=unit):
            enc = self.tokenizer(list(prompts[i : i + self.batch_size]), return_tensors="pt", padding=True).to(self.device)
            with torch.inference_mode():
                gen = self.model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False,
                                          pad_token_id=self.tokenizer.pad_token_id)
            out += self.tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        return out
