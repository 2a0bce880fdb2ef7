from polarcatalog.curate.articles import compose_article
from polarcatalog.curate.chunking import chunk_table, chunk_words
from polarcatalog.curate.summarize import ExtractiveSummarizer, split_sentences, visual_terms, word_count

ARTICLE = (
    "The Snowy Puffbird is a bird of the family Bucconidae. "
    "It was first described by the naturalist Ludwig Blum in 1851. "
    "Adults have a white belly, a black crown and a short, heavy bill. "
    "The species is listed as Least Concern by the IUCN. "
    "Its wings are rounded and its tail is long and dark brown. "
    "Local people call it the sleepy bird because it sits still for hours. "
    "Juveniles look paler, with buff spots on the chest."
)


def test_extractive_summary_keeps_exactly_the_appearance_sentences_in_order():
    summary = ExtractiveSummarizer(max_words=200).summarize_one(ARTICLE)
    assert split_sentences(summary) == [
        "The Snowy Puffbird is a bird of the family Bucconidae.",  # identifying first sentence, always kept
        "Adults have a white belly, a black crown and a short, heavy bill.",
        "Its wings are rounded and its tail is long and dark brown.",
        "Juveniles look paler, with buff spots on the chest.",
    ]
    assert word_count(summary) < word_count(ARTICLE)


def test_extractive_summary_respects_the_word_budget():
    summary = ExtractiveSummarizer(max_words=25).summarize_one(ARTICLE)
    # 10 (first) + 13 (belly) = 23 words; the 13-word wing sentence no longer fits, the 9-word one would not either
    assert word_count(summary) <= 25
    assert split_sentences(summary) == [
        "The Snowy Puffbird is a bird of the family Bucconidae.",
        "Adults have a white belly, a black crown and a short, heavy bill.",
    ]


def test_visual_terms_match_plurals_and_ignore_lore():
    assert visual_terms("Its wings and eyes are red") == {"wing", "eye", "red"}
    assert visual_terms("It was first described in 1851.") == set()
    assert ExtractiveSummarizer().summarize_one("") == ""


def test_composed_article_mixes_visual_and_non_visual_facts_and_summary_drops_the_latter():
    sp = {"name": "Bulbasaur", "types": ["grass", "poison"], "height_m": 0.7, "weight_kg": 6.9,
          "abilities": ["overgrow", "chlorophyll"]}
    facts = {"genus": "Seed Pokémon", "pokedex_colour": "green", "shape": "quadruped",
             "shape_description": "Pokémon consisting of a body and four legs", "habitat": "grassland",
             "pokedex_texts": ["A strange seed was planted on its back at birth.", "It can go for days without eating"]}
    article = compose_article(sp, ["green", "blue"], "small", facts)
    assert article.startswith("Bulbasaur is a Grass/Poison-type Pokémon known as the Seed Pokémon.")
    assert "mostly green, with blue markings" in article and "four legs" in article
    summary = ExtractiveSummarizer().summarize_one(article)
    assert "Overgrow" not in summary and "weighs" not in summary and "without eating" not in summary
    assert "standing 0.7 m tall" in summary and "mostly green" in summary and "seed was planted on its back" in summary


def test_chunk_words_hand_computed():
    text = " ".join(f"w{i}" for i in range(10))
    assert chunk_words(text, 4, 1) == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    assert chunk_words(text, 4, 0) == ["w0 w1 w2 w3", "w4 w5 w6 w7", "w8 w9"]
    assert chunk_words(text, 20, 5) == [text]
    assert chunk_words("", 4, 1) == []
    # the tail (w9) lies inside the last full window: not emitted again
    assert chunk_words(text, 5, 2) == ["w0 w1 w2 w3 w4", "w3 w4 w5 w6 w7", "w6 w7 w8 w9"]


def test_chunk_table_ids_and_coverage():
    import pandas as pd

    species = pd.DataFrame({"species_id": [1, 2], "summary": ["a b c d e f", "x y"]})
    t = chunk_table(species, 4, 2)
    assert t["chunk_id"].tolist() == ["1:0", "1:1", "2:0"]
    assert t["text"].tolist() == ["a b c d", "c d e f", "x y"]
