"""Data sources and the tables built from them: the Pokémon and bird catalogs, query folders, images and their
quarantine, concept vocabularies, near-duplicate checks."""
