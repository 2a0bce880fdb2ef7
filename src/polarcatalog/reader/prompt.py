"""The reader's prompt. VR-RAG (§5, Table 3) gives the MLLM "summaries for the top k species retrieved via VR-RAG as
context" and asks for the species name; its text does not print the reader prompt verbatim, so the wording below is
ours, in the style of the two prompts the paper does print (§3: the summarizer's and the anchor filter's), with the
subject swapped per domain as they are. Candidates keep the retrieval order (deterministic), numbered from 1."""

from __future__ import annotations

from typing import Sequence

SUBJECT = {"birds": "bird", "pokemon": "Pokémon"}


def reader_prompt(candidates: Sequence[tuple[str, str]], domain: str = "birds", facts: Sequence[str] = ()) -> str:
    """`candidates`: (species name, summary) in retrieval order; `facts`: +KG lines (at most eight, `kg.facts`)."""
    if domain not in SUBJECT:
        raise ValueError(f"unknown reader domain {domain!r}; allowed: {', '.join(SUBJECT)}")
    subject = SUBJECT[domain]
    lines = [f"Here are descriptions of {len(candidates)} {subject} species that may match the {subject} in the image:"]
    lines += [f"{i}. {name}: {' '.join(summary.split())}" for i, (name, summary) in enumerate(candidates, 1)]
    if facts:
        lines += ["Known facts about these species:"] + [f"- {f}" for f in facts]
    lines.append(f"Which {subject} species is shown in the image? Use the descriptions and the image. "
                 "Reply only with the species name.")
    return "\n".join(lines)
