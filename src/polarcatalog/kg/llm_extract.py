"""Text triples by an extractor model (the GPU profile): a causal LM reads each article and answers a JSON array of
facts, as the graph-RAG paper's GPT-4o-mini extracts triples once per chunk (§3.3). Its answers are untrusted text:
`extract.parse_extractor_json` keeps what is well formed and counts the rest; more than `MAX_FACTS` facts for one
text are cut and counted too (the paper's rules: entities of at least five characters, at most eight facts)."""

from __future__ import annotations

from typing import Sequence

from polarcatalog.device import resolve_device
from polarcatalog.kg.extract import Extraction, parse_extractor_json
from polarcatalog.kg.facts import MAX_FACTS
from polarcatalog.kg.triples import Entities
from polarcatalog.progress import batches

PROMPT = ("Extract at most {limit} facts about {name} from the text below, as a JSON array of objects with the keys "
          "\"subject\", \"relation\" and \"object\". Use full names of at least 5 characters for subject and object. "
          "Reply with the JSON array only.\n\nText: {text}")


class LLMExtractor:
    """Greedy generation with a causal LM (transformers), batched with left padding: deterministic, in a fixed order."""

    def __init__(self, model: str, max_new_tokens: int = 256, device: str = "auto", batch_size: int = 4):
        import torch  # heavy: only for the GPU-profile extractor
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = resolve_device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=dtype).to(self.device).eval()
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size

    def prompt(self, name: str, text: str) -> str:
        content = PROMPT.format(limit=MAX_FACTS, name=name, text=text)
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                      add_generation_prompt=True)
        return content

    def answers(self, names: Sequence[str], texts: Sequence[str]) -> list[str]:
        import torch  # heavy: only for the GPU-profile extractor

        out: list[str] = []
        for i in batches(len(texts), self.batch_size, "llm triples", unit="text"):
            prompts = [self.prompt(n, t) for n, t in zip(names[i : i + self.batch_size], texts[i : i + self.batch_size])]
            enc = self.tokenizer(prompts, return_tensors="pt", padding=True).to(self.device)
            with torch.inference_mode():
                gen = self.model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False,
                                          pad_token_id=self.tokenizer.pad_token_id)
            out += self.tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        return out

    def extract(self, names: Sequence[str], texts: Sequence[str], sources: Sequence[str], entities: Entities) -> Extraction:
        return parse_answers(self.answers(names, texts), sources, entities)


def parse_answers(answers: Sequence[str], sources: Sequence[str], entities: Entities) -> Extraction:
    """Every answer through the tolerant parser; beyond `MAX_FACTS` well-formed facts per text, the rest are dropped
    and counted."""
    out = Extraction()
    for answer, source in zip(answers, sources):
        one = parse_extractor_json(answer, source, entities)
        if len(one.triples) > MAX_FACTS:
            one.problems.append(f"{source}: {len(one.triples)} facts, the first {MAX_FACTS} kept")
            one.triples = one.triples[:MAX_FACTS]
        out.triples += one.triples
        out.problems += one.problems
    return out
