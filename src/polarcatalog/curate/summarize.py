"""Distil an article into a visual summary (VR-RAG §3 "Summary Generation": 552 -> 127 words on birds).

Two summarizers behind one interface, chosen by `curate.summarizer`:
- `extractive` (offline default): keeps the sentences that talk about appearance, in article order;
- `llm`: a transformers causal LM prompted with the paper's instruction (GPU profile).
"""

from __future__ import annotations

import re
from typing import Protocol, Sequence

from polarcatalog.data.colours import COLOUR_TABLE
from polarcatalog.encoders.causal_lm import CausalLM

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“(])")
_WORD = re.compile(r"[a-zà-ÿ]+", re.IGNORECASE)

# Words that make a sentence about how the species *looks*. Singular stems; plurals match via _stem.
VISUAL_TERMS: frozenset[str] = frozenset({
    *COLOUR_TABLE, "grey", "golden", "gold", "silver", "dark", "light", "bright", "pale", "crimson", "violet",
    "cream", "colour", "color", "colored", "coloured", "marking", "pattern", "spot", "spotted", "stripe", "striped",
    "head", "tail", "wing", "eye", "ear", "leg", "arm", "foot", "feet", "paw", "claw", "fin", "horn", "beak", "bill",
    "crest", "mane", "fur", "feather", "plumage", "scale", "shell", "skin", "body", "back", "belly", "chest", "face",
    "mouth", "tooth", "teeth", "fang", "tusk", "antenna", "antennae", "bulb", "flower", "petal", "leaf", "leaves",
    "flame", "spike", "neck", "nose", "snout", "whisker", "hand", "tentacle", "shape", "shaped", "tall", "long",
    "short", "round", "pointed", "slender", "covered", "look", "resemble", "appearance", "size", "small", "large",
    "huge", "tiny", "bump", "seed", "jaw", "bone", "armor", "armour", "sprout", "plant", "curl", "curled",
})


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def _stem(word: str) -> str:
    w = word.lower()
    for suffix in ("es", "s"):
        if w.endswith(suffix) and w[: -len(suffix)] in VISUAL_TERMS:
            return w[: -len(suffix)]
    return w


def visual_terms(sentence: str) -> set[str]:
    return {w for w in map(_stem, _WORD.findall(sentence)) if w in VISUAL_TERMS}


def word_count(text: str) -> int:
    return len(text.split())


class Summarizer(Protocol):
    name: str

    def summarize(self, names: Sequence[str], articles: Sequence[str]) -> list[str]: ...


class ExtractiveSummarizer:
    """Keep the identifying first sentence, then every sentence with a visual term, in order, within budget."""

    name = "extractive"

    def __init__(self, max_words: int = 127):
        self.max_words = max_words

    def summarize_one(self, article: str) -> str:
        sentences = split_sentences(article)
        if not sentences:
            return ""
        kept, used = [sentences[0]], word_count(sentences[0])
        for s in sentences[1:]:
            n = word_count(s)
            if visual_terms(s) and used + n <= self.max_words:
                kept.append(s)
                used += n
        return " ".join(kept)

    def summarize(self, names: Sequence[str], articles: Sequence[str]) -> list[str]:
        return [self.summarize_one(a) for a in articles]


# The paper's instruction (VR-RAG §3), with the subject and the trait examples set per domain.
PROMPT = (
    'Summarize the following information about the {subject} species "{name}" into a concise paragraph. '
    "Focus on the key physical characteristics that distinguish this species from other similar {subject} species. "
    "Highlight features like {traits}, and any other unique traits. "
    "The summary should be useful for someone trying to identify the {subject} species from a photograph.\n\n{article}"
)
DOMAIN_PROMPT = {
    "birds": {"subject": "bird", "traits": "size, beak shape, plumage color patterns, wing shape"},
    # Not in the paper's text (its Pokémon prompt is not given): the bird traits mapped to Pokémon anatomy.
    "pokemon": {"subject": "Pokémon", "traits": "size, body shape, color patterns, tails, wings, horns and markings"},
}


class LLMSummarizer:
    """Greedy generation with a causal LM (`encoders.causal_lm`), prompted with the paper's instruction."""

    name = "llm"

    def __init__(self, model: str, domain: str = "pokemon", max_new_tokens: int = 200, device: str = "auto", batch_size: int = 4):
        self.lm = CausalLM(model, max_new_tokens, device, batch_size)
        self.domain = domain

    def prompt(self, name: str, article: str) -> str:
        return self.lm.chat(PROMPT.format(name=name, article=article, **DOMAIN_PROMPT[self.domain]))

    def summarize(self, names: Sequence[str], articles: Sequence[str]) -> list[str]:
        prompts = [self.prompt(n, a) for n, a in zip(names, articles)]
        return [t.strip() for t in self.lm.answer(prompts, "llm summaries", "species")]


def create_summarizer(kind: str, *, max_words: int = 127, model: str | None = None, domain: str = "pokemon",
                      max_new_tokens: int = 200, device: str = "auto", batch_size: int = 4) -> Summarizer:
    if kind == "extractive":
        return ExtractiveSummarizer(max_words)
    if kind == "llm":
        if not model:
            raise ValueError("curate.llm_model must name a causal LM (hub id or local folder) for summarizer 'llm'")
        return LLMSummarizer(model, domain, max_new_tokens, device, batch_size)
    raise ValueError(f"unknown summarizer {kind!r}; allowed: extractive, llm")
