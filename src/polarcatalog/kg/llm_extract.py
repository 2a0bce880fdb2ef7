"""Text triples by an extractor model (the GPU profile): a causal LM reads each article and answers a JSON array of
facts, as the graph-RAG paper's GPT-4o-mini extracts triples once per chunk (§3.3). Its answers are untrusted text:
`extract.parse_extractor_json` keeps what is well formed and counts the rest; more than `MAX_FACTS` facts for one
text are cut and counted too (the paper's rules: entities of at least five characters, at most eight facts)."""

from __future__ import annotations

from typing import Sequence

from polarcatalog.encoders.causal_lm import CausalLM
from polarcatalog.kg.extract import Extraction, parse_extractor_json
from polarcatalog.kg.facts import MAX_FACTS
from polarcatalog.kg.triples import Entities

PROMPT = ("Extract at most {limit} facts about {name} from the text below, as a JSON array of objects with the keys "
          "\"subject\", \"relation\" and \"object\". Use full names of at least 5 characters for subject and object. "
          "Reply with the JSON array only.\n\nText: {text}")


class LLMExtractor:
    """Greedy generation with a causal LM (`encoders.causal_lm`): deterministic, batched, in a fixed order."""

    def __init__(self, model: str, max_new_tokens: int = 256, device: str = "auto", batch_size: int = 4):
        self.lm = CausalLM(model, max_new_tokens, device, batch_size)

    def prompt(self, name: str, text: str) -> str:
        return self.lm.chat(PROMPT.format(limit=MAX_FACTS, name=name, text=text))

    def answers(self, names: Sequence[str], texts: Sequence[str]) -> list[str]:
        return self.lm.answer([self.prompt(n, t) for n, t in zip(names, texts)], "llm triples", "text")

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
