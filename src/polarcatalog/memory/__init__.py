"""PolarMem ("PolarMem: A Training-Free Polarized Latent Graph Memory for Verifiable Vision-Language Models"):
a polarized HAS / NOT_HAS concept graph over the catalog images, and lexicographic logic-aware retrieval over it.

Write path: `verifiers` score concepts -> `propose` picks C_prop -> `partition` splits each image's scores into
HAS / NOT_HAS / UNCERTAIN -> `graph.build_graph`. Read path: `constraints` (Algorithm 1 + constraint strength) over
the VR-RAG candidates. `evaluate` and `sweeps` measure it on constrained queries; `report` writes what a reader sees.
"""
