"""Retrieval: VR-RAG (visual re-rank RAG) today; PolarMem's polar constraints compose on top later."""
