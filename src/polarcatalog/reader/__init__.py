"""VR-RAG's recognition step (Table 3, Fig. 2): an MLLM reads the query image with the top-k candidates' summaries
(and, with +KG, the knowledge graph's facts) and names the species; the answer is matched to a catalog species.

- `prompt`: the reader's prompt, per domain, candidates in retrieval order;
- `answers`: parsing and matching an answer to a species (exact, alias, fuzzy; unmatched = wrong);
- `mllm`: the Qwen2.5-VL-class reader through transformers (GPU profile; tested on tiny random weights);
- `accuracy`: reader accuracy on the top-k axis, with the results protocol's CIs.
"""
