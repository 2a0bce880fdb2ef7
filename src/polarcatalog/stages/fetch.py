"""The fetch stage (notebook 00): the pinned packages behind the embedded catalog, and its headline numbers."""

from __future__ import annotations

from typing import Any


def headline(d: dict[str, Any]) -> dict[str, Any]:
    return {k: d[k] for k in ("species_metadata", "sprites_regular", "sprites_shiny")}
