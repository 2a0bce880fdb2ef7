"""Reader accuracy on the top-k axis (VR-RAG Fig. 2): for each k, the reader sees the query image and the summaries of
the first k species of the ranking (and, with +KG, their facts), and its answer is matched to a species. Accuracy is
over every query (an unmatched answer is wrong), with the results protocol's dev/test rows and CIs."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
from PIL import Image

from polarcatalog.eval.protocol import Protocol, long_rows
from polarcatalog.reader.answers import SpeciesMatcher
from polarcatalog.reader.prompt import reader_prompt

Read = Callable[[Sequence[Image.Image], Sequence[str]], list[str]]  # MLLMReader.read


def top_k_prompts(ranked: np.ndarray, species: pd.DataFrame, k: int, domain: str,
                  facts: Callable[[list[int]], list[str]] | None = None) -> list[str]:
    """One prompt per query from its ranked species ids (retrieval order; -1 = padding, skipped)."""
    table = species.set_index("species_id")
    names, summaries = table["name"].to_dict(), table["summary"].to_dict()
    out = []
    for row in np.asarray(ranked)[:, :k]:
        ids = [int(i) for i in row if i >= 0]
        out.append(reader_prompt([(names[i], summaries[i]) for i in ids], domain, facts(ids) if facts else ()))
    return out


def reader_correct(read: Read, images: Sequence[Image.Image], prompts: Sequence[str], gold: np.ndarray,
                   matcher: SpeciesMatcher) -> tuple[np.ndarray, pd.DataFrame]:
    """Per query: 1.0 when the matched answer is the gold species; and the audit table (answer, parsed, match tier)."""
    answers = read(images, prompts)
    matches = [matcher.match(a) for a in answers]
    predicted = np.array([-1 if m.species_id is None else m.species_id for m in matches])
    audit = pd.DataFrame({"answer": answers, "parsed": [m.answer for m in matches], "how": [m.how for m in matches],
                          "predicted": predicted, "gold": np.asarray(gold)})
    return (predicted == np.asarray(gold)).astype(float), audit


def reader_rows(read: Read, images: Sequence[Image.Image], ranked: np.ndarray, species: pd.DataFrame, gold: np.ndarray,
                matcher: SpeciesMatcher, protocol: Protocol, ks: Sequence[int], domain: str,
                facts: Callable[[list[int]], list[str]] | None = None) -> pd.DataFrame:
    """`reader accuracy` at every k, dev and test rows with CIs (the protocol's long format)."""
    rows = []
    for k in ks:
        correct, _ = reader_correct(read, images, top_k_prompts(ranked, species, k, domain, facts), gold, matcher)
        rows += long_rows(protocol, {"reader accuracy": correct}, k=int(k))
    return pd.DataFrame(rows)
