"""Derived arrays kept by content (`polarcatalog.content_cache`): a changed input is a new entry, never a stale read;
damaged or pickled files are recomputed, never loaded; the folder stays under its size limit, least recently used
entries first; a cache that cannot be written still returns the result."""

import os
import time

import numpy as np
import pytest

from polarcatalog.content_cache import ContentCache


def _counted(value: np.ndarray, calls: list[int]):
    return lambda: calls.append(1) or {"x": value}


def test_a_kept_result_is_read_back_and_any_input_change_is_a_new_entry(tmp_path):
    code = tmp_path / "code.py"
    code.write_text("a = 1\n")
    cache = ContentCache(tmp_path / "c", [code], lib="1.0")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    calls: list[int] = []
    first = cache.get({"k": 1}, [a], _counted(a * 2, calls))["x"]
    again = cache.get({"k": 1}, [a.copy()], _counted(a * 3, calls))["x"]  # same content, another object
    assert calls == [1] and again.tobytes() == first.tobytes() and (cache.hits, cache.misses) == (1, 1)
    cache.get({"k": 2}, [a], _counted(a, calls))  # a knob
    cache.get({"k": 1}, [a.astype(np.float64)], _counted(a, calls))  # the same values in another dtype
    cache.get({"k": 1}, [a.reshape(3, 2)], _counted(a, calls))  # the same bytes in another shape
    ContentCache(tmp_path / "c", [code], lib="1.1").get({"k": 1}, [a], _counted(a, calls))  # a library version
    code.write_text("a = 2\n")
    cache.get({"k": 1}, [a], _counted(a, calls))  # the code
    assert len(calls) == 6 and len(list((tmp_path / "c").glob("*.npz"))) == 6


def test_damaged_or_pickled_files_are_recomputed_never_loaded(tmp_path):
    cache = ContentCache(tmp_path)
    a = np.ones(3)
    calls: list[int] = []
    cache.get({}, [a], _counted(a, calls))
    (entry,) = tmp_path.glob("*.npz")
    entry.write_bytes(b"damaged")
    assert cache.get({}, [a], _counted(a, calls))["x"].tolist() == [1, 1, 1] and len(calls) == 2
    with open(entry, "wb") as fh:  # an object array: loading it would unpickle
        np.savez(fh, x=np.array([{"evil": 1}], dtype=object))
    assert cache.get({}, [a], _counted(a, calls))["x"].dtype == np.float64 and len(calls) == 3
    assert cache.get({}, [a], _counted(a, calls), valid=lambda kept: False) and len(calls) == 4  # invalid: recomputed


def test_the_folder_keeps_under_its_limit_dropping_the_least_recently_used(tmp_path):
    entry = np.zeros(1000, np.float64)  # 8 kB of data per entry
    cache = ContentCache(tmp_path, limit_bytes=3 * 9_000)  # 3 entries of ~8.7 kB (data, key, zip headers) fit, 4 do not
    calls: list[int] = []
    for i in range(3):
        cache.get({"i": i}, [], _counted(entry, calls))
        time.sleep(0.01)
    cache.get({"i": 0}, [], _counted(entry, calls))  # a hit renews entry 0
    time.sleep(0.01)
    cache.get({"i": 3}, [], _counted(entry, calls))  # over the limit: entry 1, the least recently used, goes
    assert len(calls) == 4 and len(list(tmp_path.glob("*.npz"))) == 3
    cache.get({"i": 0}, [], _counted(entry, calls))
    cache.get({"i": 2}, [], _counted(entry, calls))
    assert len(calls) == 4  # both kept
    cache.get({"i": 1}, [], _counted(entry, calls))
    assert len(calls) == 5  # recomputed


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_cache_that_cannot_be_written_still_returns_the_result(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        out = ContentCache(folder).get({}, [], lambda: {"x": np.arange(3)})
        assert out["x"].tolist() == [0, 1, 2] and not list(folder.iterdir())
    finally:
        folder.chmod(0o755)


def test_a_cache_whose_folder_is_a_file_still_returns_the_result(tmp_path):
    (tmp_path / "blocked").write_text("not a folder")
    out = ContentCache(tmp_path / "blocked").get({}, [], lambda: {"x": np.arange(3)})
    assert out["x"].tolist() == [0, 1, 2]


def test_an_entry_copied_over_another_keys_file_is_recomputed_not_served(tmp_path):
    """Entries were checked by shape only: a configuration's file copied over another's name was served as its own
    (one row of the retrieval table changed, silently). Each entry holds its key."""
    cache = ContentCache(tmp_path)
    calls: list[int] = []
    cache.get({"config": "a"}, [], _counted(np.zeros(3), calls))
    cache.get({"config": "b"}, [], _counted(np.ones(3), calls))
    a, b = (tmp_path / f"{cache.key({'config': c}, [])}.npz" for c in "ab")
    a.write_bytes(b.read_bytes())
    assert cache.get({"config": "a"}, [], _counted(np.zeros(3), calls))["x"].tolist() == [0, 0, 0] and len(calls) == 3


def test_the_key_holds_every_named_module_and_the_numerics_pins(tmp_path, monkeypatch):
    """The bridge and probe keys hashed only their own file: a change to `eval.splits` (the folds both draw) served the
    old arrays. A named module's text, and the pins in effect, are part of the key."""
    helper = tmp_path / "helper.py"
    helper.write_text("FOLDS = 2\n")
    import importlib.util

    spec = importlib.util.spec_from_file_location("helper_for_cache_test", helper)
    module = importlib.util.module_from_spec(spec)
    cache = lambda: ContentCache(tmp_path / "c", [module])  # noqa: E731
    before = cache().key({}, [])
    helper.write_text("FOLDS = 3\n")
    assert cache().key({}, []) != before
    pinned = cache().key({}, [])
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")
    assert cache().key({}, []) != pinned


def test_a_read_only_arrays_digest_is_kept_while_it_lives_and_any_other_is_hashed_each_time(monkeypatch):
    """The retrieve stage looks up a dozen configurations of the same workspace: a frozen array (the workspace's
    features, a catalog's vectors) is hashed once; a writable one, or a read-only view of memory someone else may
    write, every time, so an in-place change is always a new key."""
    import gc

    from polarcatalog import content_cache
    from polarcatalog.vectors import frozen

    hashed = []
    real = content_cache.hashlib.sha256

    def counting(data=b""):
        hashed.append(data)
        return real(data)

    monkeypatch.setattr(content_cache.hashlib, "sha256", counting)
    a = frozen(np.arange(12, dtype=np.float32).reshape(3, 4))  # a view: frozen with the array it views
    first = content_cache.array_digest(a)
    assert content_cache.array_digest(a) == first and len(hashed) == 1
    assert content_cache.array_digest(a.copy()) == first and len(hashed) == 2  # same content, same digest
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert content_cache.array_digest(w) == first
    w[0, 0] = 7  # written in place: a new digest
    assert content_cache.array_digest(w) != first
    view = w[:2]
    view.flags.writeable = False  # read-only, but its memory is w's
    before = content_cache.array_digest(view)
    w[1, 1] = -1
    assert content_cache.array_digest(view) != before
    with pytest.raises(ValueError):
        a[0, 0] = 1  # frozen: a write raises
    key = id(a)
    del a
    gc.collect()
    assert key not in content_cache._DIGESTS  # freed: its digest goes with it
