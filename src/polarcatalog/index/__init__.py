"""FAISS inner-product indices behind one function, CPU or GPU."""

from polarcatalog.index.faiss_index import build_index, search

__all__ = ["build_index", "search"]
