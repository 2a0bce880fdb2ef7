import zlib

import pandas as pd
import pytest
from PIL import Image

from polarcatalog.data.names import name_key
from polarcatalog.data.query_folder import read_query_folder

SPECIES = pd.DataFrame({"species_id": [1, 4, 29, 32, 83, 122, 669, 772],
                        "name": ["Bulbasaur", "Charmander", "Nidoran♀", "Nidoran♂", "Farfetch'd", "Mr. Mime", "Flabébé",
                                 "Type: Null"]})


def _img(path):
    """A distinct image per path (the folder reader lists byte-identical copies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 16), tuple(zlib.crc32(path.as_posix().encode()).to_bytes(4, "big")[:3])).save(path)


def test_jfif_and_ico_files_are_read_as_the_images_they_are(tmp_path):
    """A `.jfif` (a JPEG, as browsers save them) and an `.ico` (which Pillow reads) were skipped as not images."""
    Image.new("RGB", (32, 32), "red").save(tmp_path / "a.jfif", "JPEG")
    Image.new("RGB", (32, 32), "blue").save(tmp_path / "b.ico", "ICO")
    found = read_query_folder(tmp_path, SPECIES)
    assert sorted(found.rows["query_id"]) == ["a.jfif", "b.ico"] and found.not_images == []


def test_labels_from_species_folders_by_id_name_or_slug(tmp_path):
    for rel in ("bulbasaur/a.png", "4/b.jpg", "MR. MIME/c.png", "missingno/d.png", "loose.png"):
        _img(tmp_path / rel)
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / ".DS_Store").write_bytes(b"\0")  # a hidden file is no one's query: skipped, and listed
    found = read_query_folder(tmp_path, SPECIES)
    df = found.rows.set_index("query_id")
    assert sorted(df.index) == ["4/b.jpg", "MR. MIME/c.png", "bulbasaur/a.png", "loose.png", "missingno/d.png"]
    assert (df.loc["4/b.jpg", "species_id"], df.loc["bulbasaur/a.png", "species_id"], df.loc["MR. MIME/c.png", "species_id"]) == (4, 1, 122)
    assert pd.isna(df.loc["missingno/d.png", "species_id"]) and df.loc["missingno/d.png", "label"] == "missingno"
    assert pd.isna(df.loc["loose.png", "species_id"]) and pd.isna(df.loc["loose.png", "label"])
    assert found.not_images == ["notes.txt"]  # skipped, and said so
    assert found.notes() == ["1 file(s) skipped, not images by their suffix (.bmp, .gif, .ico, .jfif, .jpe, .jpeg, "
                             ".jpg, .png, .tif, .tiff, .webp): notes.txt",
                             "1 hidden file(s) or folder(s) skipped (names starting with `.`, such as macOS's .DS_Store "
                             "and ._ files; rename one to use it): .DS_Store",
                             "1 image(s) without a label (outside a species sub-folder, or no row in --labels): ranked, "
                             "not scored: loose.png"]


def test_numbers_that_are_not_species_ids_name_no_species(tmp_path):
    """`-1` (a common "unknown"), `2.5` and `25.5` were folded like names to `1`, `25`, `255`: another species, silently."""
    for rel in ("a.png", "b.png", "c.png", "d.png", "e.png"):
        _img(tmp_path / "q" / rel)
    csv = tmp_path / "labels.csv"
    csv.write_text("image,species_id\na.png,-1\nb.png,2.5\nc.png,32.5\nd.png,1e3\ne.png,+4\n")
    df = read_query_folder(tmp_path / "q", SPECIES, csv).rows.set_index("query_id")
    assert df["species_id"].isna().all(), df
    assert df["label"].tolist() == ["-1", "2.5", "32.5", "1e3", "+4"]  # kept, for the 'names no catalog species' line


def test_a_nested_folder_belongs_to_the_species_folder_above_it(tmp_path):
    """`pikachu/shiny/a.png` was labelled `shiny` (the innermost folder): the first folder under --queries names it."""
    for rel in ("bulbasaur/shiny/a.png", "4/front/side/b.png", "1/c.png"):
        _img(tmp_path / rel)
    df = read_query_folder(tmp_path, SPECIES).rows.set_index("query_id")
    assert df["species_id"].to_dict() == {"1/c.png": 1, "4/front/side/b.png": 4, "bulbasaur/shiny/a.png": 1}


def test_a_labels_csv_names_images_in_the_spellings_people_write(tmp_path):
    """`./a.png`, a Windows `sub\\b.png`, an absolute path inside the folder and `image, species_id` with a space:
    each was 'no image in the folder' (or a missing column) and its image went unscored."""
    for rel in ("a.png", "sub/b.png", "c.png", "d.png"):
        _img(tmp_path / "q" / rel)
    csv = tmp_path / "labels.csv"
    csv.write_text(f"image, species_id\n./a.png, 4\nsub\\b.png,1\n{tmp_path / 'q' / 'c.png'},29\n.\\d.png,32\n")
    found = read_query_folder(tmp_path / "q", SPECIES, csv)
    assert found.rows.set_index("query_id")["species_id"].to_dict() == {"a.png": 4, "c.png": 29, "d.png": 32, "sub/b.png": 1}
    assert found.labels_without_image == [] and found.notes() == []
    with pytest.raises(ValueError, match=r"--labels .*q: a folder; give the CSV file"):
        read_query_folder(tmp_path / "q", SPECIES, tmp_path / "q")


def test_copies_and_hidden_images_are_listed_not_dropped_or_doubled_silently(tmp_path):
    _img(tmp_path / "bulbasaur" / "a.png")
    (tmp_path / "4").mkdir()
    for copy in ("a copy.png", "a copy 2.png"):
        (tmp_path / "4" / copy).write_bytes((tmp_path / "bulbasaur" / "a.png").read_bytes())
    _img(tmp_path / "4" / ".hidden.png")
    _img(tmp_path / ".git" / "x.png")
    found = read_query_folder(tmp_path, SPECIES)
    assert found.copies == [["4/a copy 2.png", "4/a copy.png", "bulbasaur/a.png"]]
    assert found.hidden_skipped == [".git/", "4/.hidden.png"]
    notes = "\n".join(found.notes())
    assert "3 images in 1 group(s) of byte-identical copies" in notes
    assert "4/a copy 2.png = 4/a copy.png = bulbasaur/a.png" in notes
    (tmp_path / "4" / "a copy.png").unlink()
    (tmp_path / "4" / "a copy 2.png").unlink()
    (tmp_path / "bulbasaur" / "a.png").unlink()
    with pytest.raises(ValueError, match=r"no image files .*2 hidden name\(s\) skipped: .git/, 4/.hidden.png"):
        read_query_folder(tmp_path, SPECIES)


@pytest.mark.parametrize("folder, sid", [
    ("mr-mime", 122), ("Mr_Mime", 122), ("nidoran-f", 29), ("nidoran-m", 32), ("farfetchd", 83), ("flabebe", 669),
    ("type-null", 772), ("Type: Null", 772), ("029", 29), ("Nidoran♀", 29),
])
def test_folder_names_in_sprite_slug_form_name_their_species(tmp_path, folder, sid):
    """Sprite packs and web scrapes name folders by slug: `mr-mime`, `nidoran-f`, `farfetchd` are species, not unknown."""
    _img(tmp_path / folder / "a.png")
    assert read_query_folder(tmp_path, SPECIES).rows["species_id"].tolist() == [sid]
    assert name_key("Mr. Mime") == name_key("mr-mime") == "mr-mime" and name_key("Nidoran♀") != name_key("Nidoran♂")


def test_labels_from_csv_and_errors(tmp_path):
    for rel in ("x/a.png", "b.png", "c.png"):
        _img(tmp_path / "q" / rel)
    csv = tmp_path / "labels.csv"
    csv.write_text("image,species_id\nx/a.png,4\nb.png,\n")
    df = read_query_folder(tmp_path / "q", SPECIES, csv).rows.set_index("query_id")
    assert df.loc["x/a.png", "species_id"] == 4
    assert pd.isna(df.loc["b.png", "species_id"]) and pd.isna(df.loc["c.png", "species_id"])
    bad = tmp_path / "bad.csv"
    bad.write_text("file,label\na,1\n")
    with pytest.raises(ValueError, match="needs columns image,species_id"):
        read_query_folder(tmp_path / "q", SPECIES, bad)
    with pytest.raises(FileNotFoundError, match="not a folder"):
        read_query_folder(tmp_path / "nope", SPECIES)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no image files"):
        read_query_folder(tmp_path / "empty", SPECIES)


def test_a_labels_csv_scores_each_image_once_and_reports_what_it_could_not_use(tmp_path):
    """Before: a row given three times scored its image three times, and rows naming missing files vanished."""
    for rel in ("a.png", "b.png"):
        _img(tmp_path / "q" / rel)
    csv = tmp_path / "labels.csv"
    csv.write_text("image,species_id\na.png,4\na.png,4\na.png,4.0\nb.png,1\nb.png,\ngone.png,1\nalso/gone.png,4\n")
    found = read_query_folder(tmp_path / "q", SPECIES, csv)
    assert found.rows[["query_id", "species_id"]].values.tolist() == [["a.png", 4], ["b.png", 1]]  # one row per image
    assert found.labels_without_image == ["also/gone.png", "gone.png"]
    assert found.repeated_label_rows == 3  # a.png twice more (4 and 4.0 are one id), b.png's blank beside its label
    assert "2 label row(s) name no image in the folder" in "\n".join(found.notes())


def test_a_labels_csv_that_gives_an_image_two_species_is_refused_naming_it(tmp_path):
    _img(tmp_path / "q" / "a.png")
    csv = tmp_path / "labels.csv"
    csv.write_text("image,species_id\na.png,4\na.png,1\na.png,4\n")
    with pytest.raises(ValueError, match=r"labels\.csv: 1 image\(s\) given two or more species: 'a.png' \(1 / 4\); keep one"):
        read_query_folder(tmp_path / "q", SPECIES, csv)


@pytest.mark.parametrize("content, message", [
    (b"", "empty; it needs a header `image,species_id`"),
    ("image,species_id\nnaïve.png,4\n".encode("latin-1"), "not UTF-8 text"),
    # a header alone ended in "no image is labelled (... or give --labels)", although --labels was given
    (b"image,species_id\n", "a header and no rows; add one row per image"),
])
def test_an_unusable_labels_csv_is_named_in_the_error(tmp_path, content, message):
    _img(tmp_path / "q" / "a.png")
    csv = tmp_path / "my labels.csv"
    csv.write_bytes(content)
    with pytest.raises(ValueError, match=rf"--labels .*my labels\.csv: {message}"):
        read_query_folder(tmp_path / "q", SPECIES, csv)


@pytest.mark.parametrize("sep", [";", "\t", ","])
def test_a_labels_csv_saved_by_a_spreadsheet_in_any_locale_is_read(tmp_path, sep):
    """Excel saves CSV with semicolons in many locales (and a byte-order mark); spreadsheets export tabs. The header
    names the delimiter: a semicolon file was refused as lacking both columns."""
    for rel in ("a.png", "b.png", "c.png"):
        _img(tmp_path / "q" / rel)
    csv = tmp_path / "labels.csv"
    rows = ["image" + sep + "species_id", f"a.png{sep}Farfetch’d", f"b.png{sep}Mr. Mime", f"c.png{sep}004"]
    csv.write_text("\ufeff" + "\n".join(rows) + "\n", encoding="utf-8")
    df = read_query_folder(tmp_path / "q", SPECIES, csv).rows.set_index("query_id")
    assert df["species_id"].to_dict() == {"a.png": 83, "b.png": 122, "c.png": 4}
    csv.write_text("image|species_id\na.png|4\n")
    with pytest.raises(ValueError, match=r"the header reads 'image\|species_id'\), separated by commas, semicolons or tabs"):
        read_query_folder(tmp_path / "q", SPECIES, csv)


@pytest.mark.parametrize("label, sid", [("mrmime", 122), ("Mr.Mime", 122), ("MrMime", 122), ("nidoranf", 29),
                                        ("typenull", 772), ("#025", None), ("#004", 4), ("nidoran_male", None)])
def test_showdown_ids_and_run_together_names_name_their_species(tmp_path, label, sid):
    """Showdown's ids (`mrmime`, `nidoranf`, `typenull`) and `Mr.Mime` named no species; `#004` is the Pokédex's
    way to write 4 (25 is not in this table)."""
    (tmp_path / "labels.csv").write_text(f"image,species_id\na.png,{label}\n")
    _img(tmp_path / "q/a.png")
    found = read_query_folder(tmp_path / "q", SPECIES, tmp_path / "labels.csv").rows
    assert (None if pd.isna(found["species_id"][0]) else int(found["species_id"][0])) == sid


def test_two_spellings_of_one_species_and_the_two_unicode_forms_of_a_name_are_one(tmp_path):
    """`29` and `Nidoran♀` for one image were refused as two species; a CSV's `Flabébé.png` (composed, as typed) did
    not find the file macOS stored decomposed, and a quoted semicolon header was refused."""
    import unicodedata

    decomposed = unicodedata.normalize("NFD", "Flabébé.png")
    _img(tmp_path / "q" / "n.png")
    _img(tmp_path / "q" / decomposed)
    (tmp_path / "labels.csv").write_text('"image";"species_id"\nn.png;29\nn.png;Nidoran♀\nFlabébé.png;669\n',
                                         encoding="utf-8")
    found = read_query_folder(tmp_path / "q", SPECIES, tmp_path / "labels.csv")
    rows = found.rows.set_index("query_id")["species_id"]
    assert rows["n.png"] == 29 and rows[decomposed] == 669
    assert found.labels_without_image == [] and found.repeated_label_rows == 1


def test_a_name_that_is_not_utf8_is_skipped_and_listed_not_a_crash(tmp_path):
    """A Latin-1 file name (`Flab\\xe9b\\xe9.png`, from an old archive) ended the run: 'surrogates not allowed'."""
    import os

    q = tmp_path / "q"
    _img(q / "bulbasaur" / "a.png")
    with open(os.fsencode(q / "bulbasaur") + b"/Flab\xe9b\xe9.png", "wb") as f:
        Image.new("RGB", (16, 16), (9, 99, 199)).save(f, "PNG")
    found = read_query_folder(q, SPECIES)
    assert found.rows["query_id"].tolist() == ["bulbasaur/a.png"]
    assert found.undecodable_names == ["bulbasaur/Flab\ufffdb\ufffd.png"]
    assert any(n.startswith("1 file(s) skipped, their names not UTF-8") for n in found.notes())
    found.rows.to_csv(tmp_path / "ok.csv")  # what evaluate writes: every remaining name is writable


def test_a_name_with_a_newline_or_a_right_to_left_override_is_printed_on_one_line(tmp_path):
    from polarcatalog.data.query_folder import listed, printable

    assert printable("a\nb\u202egnp.exe") == "a\\u000ab\\u202egnp.exe"
    assert listed(["x\ry.png", "ok.png"]) == "x\\u000dy.png, ok.png"
    assert printable("Flabébé ピカチュウ.png") == "Flabébé ピカチュウ.png"  # letters of any script stay as they are


def test_a_species_folder_numbered_by_a_dataset_is_read_by_its_name(tmp_path):
    """`001_bulbasaur`, `004 Charmander`, CUB's `001.Black_footed_Albatross` were listed as naming no catalog species.
    The name decides: CUB's number is its class index (here `029.Mr_Mime` is species 122, not 29), and a number
    before a name the catalog lacks labels nothing."""
    for rel in ("001_bulbasaur/a.png", "004 Charmander/b.png", "029.Mr_Mime/c.png", "#032-Nidoran♂/d.png",
                "025 pikachu-alola-cap/e.png"):
        _img(tmp_path / rel)
    df = read_query_folder(tmp_path, SPECIES).rows.set_index("query_id")
    assert df["species_id"].dropna().to_dict() == {"001_bulbasaur/a.png": 1, "004 Charmander/b.png": 4,
                                                   "029.Mr_Mime/c.png": 122, "#032-Nidoran♂/d.png": 32}
    assert pd.isna(df.loc["025 pikachu-alola-cap/e.png", "species_id"])
