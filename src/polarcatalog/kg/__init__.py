"""The knowledge graph of the third paper ("stage- and evidence-controlled evaluation" of graph RAG, §3.1 and §3.3):
triples with provenance, one canonical id per entity, and the two ways the same graph enters the pipeline:
after retrieval as provenance-filtered facts (+KG, `facts`) and during retrieval as entity-bridged candidates
(+KGret, `bridge`), with the budget-matched control that tells a recovered candidate from a longer list.

Domain-generic: a species is an entity like any other. A domain contributes triples (table rows, article sentences,
an extractor's JSON) and the link rules that say which shared entities make two species look-alikes worth bridging
(same evolution family, or type pair plus ability, for Pokémon; same genus or family for birds)."""
