"""Summaries -> fixed-size word windows: the text units retrieval indexes (VR-RAG §5.1)."""

from __future__ import annotations

import pandas as pd


def chunk_words(text: str, size: int, overlap: int) -> list[str]:
    """Windows of `size` words, each starting `size - overlap` after the last; the tail window ends at the text end.

    A tail shorter than the overlap is already inside the previous window and is not emitted again.
    """
    if overlap >= size:
        raise ValueError(f"overlap ({overlap}) must be smaller than size ({size})")
    words = text.split()
    if not words:
        return []
    stride = size - overlap
    chunks = []
    for start in range(0, len(words), stride):
        chunks.append(" ".join(words[start : start + size]))
        if start + size >= len(words):
            break
    return chunks


def chunk_table(species: pd.DataFrame, size: int, overlap: int) -> pd.DataFrame:
    """One row per chunk: chunk_id, species_id, position in the summary, text."""
    rows = [
        {"chunk_id": f"{sid}:{i}", "species_id": sid, "position": i, "text": chunk}
        for sid, summary in zip(species["species_id"], species["summary"])
        for i, chunk in enumerate(chunk_words(summary, size, overlap))
    ]
    return pd.DataFrame(rows, columns=["chunk_id", "species_id", "position", "text"])
