"""PolarCatalog: verifiable open-vocabulary recognition with retrieval (VR-RAG + PolarMem)."""

__version__ = "0.1.0"
