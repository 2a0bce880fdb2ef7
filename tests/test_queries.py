import pandas as pd
import pytest
from PIL import Image

from polarcatalog.data.names import name_key
from polarcatalog.data.query_folder import read_query_folder

SPECIES = pd.DataFrame({"species_id": [1, 4, 29, 32, 83, 122, 669, 772],
                        "name": ["Bulbasaur", "Charmander", "Nidoran♀", "Nidoran♂", "Farfetch'd", "Mr. Mime", "Flabébé",
                                 "Type: Null"]})


def _img(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 16)).save(path)


def test_labels_from_species_folders_by_id_name_or_slug(tmp_path):
    for rel in ("bulbasaur/a.png", "4/b.jpg", "MR. MIME/c.png", "missingno/d.png", "loose.png"):
        _img(tmp_path / rel)
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / ".DS_Store").write_bytes(b"\0")  # a hidden file is no one's query: not listed either
    found = read_query_folder(tmp_path, SPECIES)
    df = found.rows.set_index("query_id")
    assert sorted(df.index) == ["4/b.jpg", "MR. MIME/c.png", "bulbasaur/a.png", "loose.png", "missingno/d.png"]
    assert (df.loc["4/b.jpg", "species_id"], df.loc["bulbasaur/a.png", "species_id"], df.loc["MR. MIME/c.png", "species_id"]) == (4, 1, 122)
    assert pd.isna(df.loc["missingno/d.png", "species_id"]) and df.loc["missingno/d.png", "label"] == "missingno"
    assert pd.isna(df.loc["loose.png", "species_id"]) and pd.isna(df.loc["loose.png", "label"])
    assert found.not_images == ["notes.txt"]  # skipped, and said so
    assert found.notes() == ["1 file(s) skipped, not images by their suffix (.bmp, .gif, .jpeg, .jpg, .png, .tif, "
                             ".tiff, .webp): notes.txt"]


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
