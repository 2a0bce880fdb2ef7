"""VR-RAG retrieval (Neural Catalog §5): chunk vectors, encoder ensemble, visual re-rank, and their sweeps."""
