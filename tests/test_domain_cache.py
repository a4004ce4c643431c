"""The domain cache (domain/cache.py and --sandtable-cache-dir): a built domain kept on
disk for later processes and xdist workers, which never changes what a run does."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _sandtable_shop import run_dirs, strip_timings

from pytest_sandtable.domain import cache
from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import load_domain
from pytest_sandtable.report.results_json import read_results

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(REPO.glob("example_domains/*/sandtable.yaml"))
FREIGHT = REPO / "example_domains" / "freight" / "sandtable.yaml"
CLINIC = REPO / "example_domains" / "clinic" / "sandtable.yaml"


def padded(src: Path, dest: Path) -> Path:
    """``src`` with a trailing comment block that takes it over the size the cache starts at
    (the domain it describes is the same)."""
    text = src.read_text(encoding="utf-8")
    pad = "".join(f"# padding line {i:05d} {'-' * 40}\n" for i in range(cache.MIN_CACHED_BYTES // 50 + 1))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text + "\n" + pad, encoding="utf-8")
    assert dest.stat().st_size >= cache.MIN_CACHED_BYTES
    return dest


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.domain")) if folder.is_dir() else []


def the_entry(folder: Path, domain_file: Path) -> Path:
    (entry,) = entries(folder)
    assert entry.name == cache.entry_name(hashlib.sha256(domain_file.read_bytes()).hexdigest())
    return entry


# --------------------------------------------------------------------------- the core


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_a_cached_domain_is_the_domain_the_loader_builds(tmp_path: Path, example: Path) -> None:
    path = padded(example, tmp_path / "sandtable.yaml")
    for module in example.parent.glob("*_handlers.py"):  # the handlers a domain names (device_desk)
        shutil.copy(module, tmp_path / module.name)
    store = tmp_path / "cache"
    built = cache.load_domain_cached(path, store)  # a miss: built, then stored
    the_entry(store, path)
    again = cache.load_domain_cached(path, store)  # a hit
    assert built == again == load_domain(path)
    assert again is not built
    assert again.path == str(path)
    assert again.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_hit_is_read_from_the_entry(tmp_path: Path) -> None:
    path = padded(FREIGHT, tmp_path / "sandtable.yaml")
    store = tmp_path / "cache"
    domain = cache.load_domain_cached(path, store)
    entry = the_entry(store, path)
    domain.description = "as stored in the cache"
    cache._write_entry(entry, domain)
    assert cache.load_domain_cached(path, store).description == "as stored in the cache"


def test_the_same_bytes_at_another_path_share_the_entry_and_keep_their_own_path(tmp_path: Path) -> None:
    a = padded(FREIGHT, tmp_path / "a" / "sandtable.yaml")
    b = padded(FREIGHT, tmp_path / "b" / "sandtable.yaml")
    store = tmp_path / "cache"
    assert cache.load_domain_cached(a, store).path == str(a)
    assert cache.load_domain_cached(b, store).path == str(b)
    the_entry(store, a)


def test_an_edited_file_gets_a_new_entry(tmp_path: Path) -> None:
    path = padded(FREIGHT, tmp_path / "sandtable.yaml")
    store = tmp_path / "cache"
    cache.load_domain_cached(path, store)
    path.write_text(path.read_text(encoding="utf-8").replace("name: freight", "name: freight2", 1), encoding="utf-8")
    assert cache.load_domain_cached(path, store).name == "freight2"
    assert len(entries(store)) == 2


def _bad_entries(entry: Path, good: bytes) -> dict[str, bytes]:
    head = len(cache._MAGIC) + hashlib.sha256().digest_size

    def signed(payload: bytes) -> bytes:
        return cache._MAGIC + hashlib.sha256(payload).digest() + payload

    class Calls:  # a pickle that would call os.mkdir when loaded by a plain unpickler
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return os.mkdir, (str(entry.parent / "pwned"),)

    return {
        "empty": b"",
        "truncated": good[: len(good) // 2],
        "header only": good[:head],
        "another magic": b"x" + good[1:],
        "a flipped payload byte": good[:-1] + bytes([good[-1] ^ 1]),
        "signed garbage": signed(b"\x80\x05garbage"),
        "a pickle that calls a function": signed(pickle.dumps(Calls(), protocol=5)),
        "a pickle of something else": signed(pickle.dumps({"name": "freight"}, protocol=5)),
    }


def test_a_damaged_or_foreign_entry_is_rebuilt_never_an_error(tmp_path: Path) -> None:
    path = padded(FREIGHT, tmp_path / "sandtable.yaml")
    store = tmp_path / "cache"
    expected = cache.load_domain_cached(path, store)
    entry = the_entry(store, path)
    good = entry.read_bytes()
    for what, data in _bad_entries(entry, good).items():
        entry.write_bytes(data)
        assert cache.load_domain_cached(path, store) == expected, what
        assert entry.read_bytes() == good, what  # written again, whole
    assert not (store / "pwned").exists()


def test_an_entry_of_another_file_under_this_files_name_is_rebuilt(tmp_path: Path) -> None:
    a = padded(FREIGHT, tmp_path / "a.sandtable.yaml")
    b = padded(CLINIC, tmp_path / "b.sandtable.yaml")
    store = tmp_path / "cache"
    other = cache.load_domain_cached(b, store)
    entry = store / cache.entry_name(hashlib.sha256(a.read_bytes()).hexdigest())
    cache._write_entry(entry, other)  # b's domain where a's belongs
    assert cache.load_domain_cached(a, store) == load_domain(a)


def test_a_cache_folder_that_cannot_be_made_means_no_cache(tmp_path: Path) -> None:
    path = padded(FREIGHT, tmp_path / "sandtable.yaml")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    assert cache.load_domain_cached(path, blocker / "cache") == load_domain(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "sandtable.yaml"]


def test_small_files_and_files_with_problems_are_not_cached(tmp_path: Path) -> None:
    store = tmp_path / "cache"
    assert cache.load_domain_cached(FREIGHT, store) == load_domain(FREIGHT)
    broken = padded(FREIGHT, tmp_path / "sandtable.yaml")
    broken.write_text(broken.read_text(encoding="utf-8").replace("version: 1", "version: one", 1), encoding="utf-8")
    with pytest.raises(DomainError) as cached:
        cache.load_domain_cached(broken, store)
    with pytest.raises(DomainError) as plain:
        load_domain(broken)
    assert str(cached.value) == str(plain.value)
    assert entries(store) == []


def test_no_file_is_the_loaders_error(tmp_path: Path) -> None:
    with pytest.raises(DomainError) as e:
        cache.load_domain_cached(tmp_path / "missing.sandtable.yaml", tmp_path / "cache")
    assert str(e.value) == f"{tmp_path / 'missing.sandtable.yaml'}: no such file"


def test_only_the_most_recently_used_entries_are_kept(tmp_path: Path) -> None:
    path = padded(FREIGHT, tmp_path / "sandtable.yaml")
    store = tmp_path / "cache"
    domain = load_domain(path)
    for i in range(cache.MAX_ENTRIES + 3):
        old = store / cache.entry_name(f"{i:064x}")
        cache._write_entry(old, domain)
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
    cache.load_domain_cached(path, store)  # writes one more, then prunes
    kept = entries(store)
    assert len(kept) == cache.MAX_ENTRIES
    assert the_entry_of(path) in {p.name for p in kept}
    assert store / cache.entry_name(f"{0:064x}") not in kept  # the oldest went


_WAITER = """\
import sys
from pathlib import Path
from pytest_sandtable.domain.cache import load_domain_cached
print("ready", flush=True)
print(load_domain_cached(Path(sys.argv[1]), Path(sys.argv[2])).description, flush=True)
"""


def test_a_process_that_misses_while_another_builds_waits_and_reads_its_entry(tmp_path: Path) -> None:
    fcntl = pytest.importorskip("fcntl")
    path = padded(FREIGHT, tmp_path / "sandtable.yaml")
    store = tmp_path / "cache"
    store.mkdir()
    domain = load_domain(path)
    domain.description = "built by the process that held the lock"
    with open(store / cache._LOCK_FILE, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a process building the entry does
        waiter = subprocess.Popen(
            [sys.executable, "-c", _WAITER, str(path), str(store)], stdout=subprocess.PIPE, text=True
        )
        assert waiter.stdout is not None
        assert waiter.stdout.readline() == "ready\n"
        time.sleep(1.0)  # it misses, then waits for the lock
        cache._write_entry(store / the_entry_of(path), domain)
    out, _ = waiter.communicate(timeout=60)
    assert out == "built by the process that held the lock\n"


def the_entry_of(path: Path) -> str:
    return cache.entry_name(hashlib.sha256(path.read_bytes()).hexdigest())


# --------------------------------------------------------------------------- the plugin


def _big_freight(pytester: pytest.Pytester) -> Path:
    return padded(FREIGHT, pytester.path / "sandtable.yaml")


def _results(pytester: pytest.Pytester) -> dict[str, Any]:
    return strip_timings(read_results(run_dirs(pytester.path)[-1] / "results.json"))


def test_runs_share_the_cache_in_pytests_cache_folder_with_the_same_results(pytester: pytest.Pytester) -> None:
    path = _big_freight(pytester)
    store = pytester.path / ".pytest_cache" / "d" / "sandtable-domains"
    assert pytester.runpytest("--sandtable-k=2", "--sandtable-cache-dir=off").ret == 0
    uncached = _results(pytester)
    assert entries(store) == []
    assert pytester.runpytest("--sandtable-k=2").ret == 0  # cold: builds and stores
    cold = _results(pytester)
    entry = the_entry(store, path)
    stored = entry.read_bytes()
    assert pytester.runpytest("--sandtable-k=2").ret == 0  # warm: reads it
    assert uncached == cold == _results(pytester)
    assert entry.read_bytes() == stored
    assert pytester.runpytest("--sandtable-k=2", "--cache-clear").ret == 0  # pytest's own clearing clears it too
    assert entries(store) == [entry]  # and it was built again


def test_the_cache_dir_option_and_ini_key(pytester: pytest.Pytester) -> None:
    path = _big_freight(pytester)
    (pytester.path / "sub").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(pytester.path / "sub")
        assert pytester.runpytest(str(path), "-p", "no:cacheprovider", "--sandtable-cache-dir=built").ret == 0
    the_entry(pytester.path / "sub" / "built", path)  # relative to where pytest started
    pytester.makeini("[pytest]\nsandtable_cache_dir = ini-built\n")
    assert pytester.runpytest("-p", "no:cacheprovider").ret == 0
    the_entry(pytester.path / "ini-built", path)  # relative to the ini file
    pytester.makeini("[pytest]\nsandtable_cache_dir = off\n")
    assert pytester.runpytest().ret == 0
    assert not (pytester.path / ".pytest_cache" / "d" / "sandtable-domains").exists()


def test_without_pytests_cache_there_is_no_domain_cache(pytester: pytest.Pytester) -> None:
    _big_freight(pytester)
    assert pytester.runpytest("-p", "no:cacheprovider").ret == 0
    assert sorted(p.name for p in pytester.path.iterdir()) == [".sandtable", "sandtable.yaml"]


def test_a_small_domain_makes_no_cache_folder(pytester: pytest.Pytester) -> None:
    (pytester.path / "sandtable.yaml").write_bytes(FREIGHT.read_bytes())
    assert pytester.runpytest().ret == 0
    assert (pytester.path / ".pytest_cache").is_dir()  # pytest's own
    assert not (pytester.path / ".pytest_cache" / "d" / "sandtable-domains").exists()


def test_xdist_workers_share_the_cache_with_the_same_results(pytester: pytest.Pytester) -> None:
    path = _big_freight(pytester)
    store = pytester.path / ".pytest_cache" / "d" / "sandtable-domains"
    args = ("-p", "xdist", "--sandtable-k=3")
    assert pytester.runpytest_subprocess(*args, "-n", "0", "--sandtable-cache-dir=off").ret == 0
    serial = _results(pytester)
    assert pytester.runpytest_subprocess(*args, "-n", "2").ret == 0  # cold: one worker builds, one waits
    cold = _results(pytester)
    entry = the_entry(store, path)
    assert pytester.runpytest_subprocess(*args, "-n", "2").ret == 0  # warm
    assert serial == cold == _results(pytester)
    assert entries(store) == [entry]
    assert not list(store.glob(".*.tmp"))
