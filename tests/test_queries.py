import pandas as pd
import pytest
from PIL import Image

from polarcatalog.data.query_folder import read_query_folder

SPECIES = pd.DataFrame({"species_id": [1, 4, 122], "name": ["Bulbasaur", "Charmander", "Mr. Mime"]})


def _img(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 16)).save(path)


def test_labels_from_species_folders_by_id_name_or_slug(tmp_path):
    for rel in ("bulbasaur/a.png", "4/b.jpg", "MR. MIME/c.png", "missingno/d.png", "loose.png"):
        _img(tmp_path / rel)
    (tmp_path / "notes.txt").write_text("not an image")
    df = read_query_folder(tmp_path, SPECIES).set_index("query_id")
    assert sorted(df.index) == ["4/b.jpg", "MR. MIME/c.png", "bulbasaur/a.png", "loose.png", "missingno/d.png"]
    assert (df.loc["4/b.jpg", "species_id"], df.loc["bulbasaur/a.png", "species_id"], df.loc["MR. MIME/c.png", "species_id"]) == (4, 1, 122)
    assert pd.isna(df.loc["missingno/d.png", "species_id"]) and df.loc["missingno/d.png", "label"] == "missingno"
    assert pd.isna(df.loc["loose.png", "species_id"]) and pd.isna(df.loc["loose.png", "label"])


def test_labels_from_csv_and_errors(tmp_path):
    for rel in ("x/a.png", "b.png", "c.png"):
        _img(tmp_path / "q" / rel)
    csv = tmp_path / "labels.csv"
    csv.write_text("image,species_id\nx/a.png,4\nb.png,\n")
    df = read_query_folder(tmp_path / "q", SPECIES, csv).set_index("query_id")
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
