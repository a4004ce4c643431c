"""Built domains kept on disk, so that a process that loads a domain file someone
already loaded skips the YAML and the checks.

Reading a 5 MB domain file takes about a second (YAML, schema, cross-references,
building); unpickling the built :class:`~pytest_sandtable.domain.model.Domain` takes
a few hundredths. Every pytest-xdist worker collects every domain file itself, and
so did each run again: this is what made ``-n 2`` slower than no xdist on a big
domain. :func:`load_domain_cached` returns what :func:`~.loader.load_domain` would,
taking it from the cache folder when an entry for the same bytes exists there.

An entry is named by the sha256 of the file's bytes and a stamp of everything that
could change what loading makes of those bytes: this package's version, the code of
this package's ``domain/`` modules and its domain schema, the Python implementation and
:data:`ENTRY_FORMAT`. A file that changed, an upgrade, or an edit to the loader while
developing it gets a new entry, never a stale one.

Safety. The cache never changes what a run does: a missing, partial, corrupt or
foreign entry is ignored and the file is loaded as always (and the entry written
again, over it); so is an entry that is not a regular file (a named pipe, a link to
``/dev/zero``) or is bigger than :data:`MAX_ENTRY_BYTES`, of which nothing is
read; a cache folder that cannot be created or written means no cache, never an
error; a file with problems is never cached (every process words its problems, as
before). Entries are written whole (a temporary file, then a rename), carry a sha256
of their payload, and are unpickled by an unpickler that resolves only this
package's model classes (``find_class`` refuses every other global), so an entry
cannot name a function to call. Still, the folder is a local cache written by this
package: do not fill it from a source you do not trust.

Under xdist the workers collect at the same time: the first to miss takes a lock on
the folder (``fcntl.flock``, released by the OS if the process dies; waited on for
at most :data:`LOCK_WAIT_SECONDS`), builds and writes the entry; the others wait,
then read it. Where there is no ``fcntl`` (Windows) each worker builds on a miss.
"""

from __future__ import annotations

import gc
import hashlib
import io
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import lru_cache
from pathlib import Path

from . import model
from .files import open_regular, read_at_most, read_regular, write_atomic
from .model import Domain

# The loader (YAML, jsonschema, the checks: about 0.15-0.3 s to import) is imported
# only on a miss: a hit needs none of it.

__all__ = [
    "ENTRY_FORMAT",
    "MAX_CACHED_BYTES",
    "MAX_ENTRIES",
    "MAX_ENTRY_BYTES",
    "MIN_CACHED_BYTES",
    "entry_name",
    "load_domain_cached",
]

# Raise when the entry's layout or the meaning of its payload changes.
ENTRY_FORMAT = 1
# Smaller files load in a few milliseconds: caching them would cost more than it saves.
MIN_CACHED_BYTES = 64 * 1024
# Larger files are not hashed (a wrong path to a disk image costs nothing); they go
# straight to the loader, whose own limit (the same size today) refuses them.
MAX_CACHED_BYTES = 64 * 1024 * 1024
# The largest entry read or written: a built domain pickles to about as many bytes as its
# file (τ-bench airline: 3.8 MB), and the file is at most MAX_CACHED_BYTES.
MAX_ENTRY_BYTES = 8 * MAX_CACHED_BYTES
# Entries kept; the least recently used go when a new one is written (each edit of a
# big file makes a new entry).
MAX_ENTRIES = 32
LOCK_WAIT_SECONDS = 120.0

_MAGIC = b"sandtable-domain-cache\n"
_DIGEST = hashlib.sha256().digest_size
_SUFFIX = ".domain"
_LOCK_FILE = "build.lock"


def load_domain_cached(path: str | Path, cache_dir: Path | Callable[[], Path | None] | None) -> Domain:
    """The domain file at ``path``, loaded, from ``cache_dir`` when it holds the file's
    entry (and stored there when it does not). ``None``: no cache, as ``load_domain``.
    A callable is asked for the folder only when the file is one to cache (so that no
    folder is made for small files).

    Raises :class:`~.errors.DomainError` exactly as ``load_domain`` does: only a file
    that loads without problems is ever cached."""
    raw = _bytes_to_key(Path(path)) if cache_dir is not None else None
    if raw is not None and callable(cache_dir):
        cache_dir = cache_dir()
    if raw is None or cache_dir is None or callable(cache_dir):
        from .loader import load_domain

        return load_domain(path)
    file_sha = hashlib.sha256(raw).hexdigest()
    entry = cache_dir / entry_name(file_sha)
    domain = _read_entry(entry, file_sha)
    if domain is None:
        with _build_lock(cache_dir):
            domain = _read_entry(entry, file_sha)  # another process may have built it while we waited
            if domain is None:
                from .loader import load_domain

                domain = load_domain(path)
                if domain.sha256 == file_sha:  # else the file changed in between: nothing to store
                    _write_entry(entry, domain)
    domain.path = str(path)
    return domain


def entry_name(file_sha: str) -> str:
    """The entry's file name: the file's sha256, then the stamp of the code that built it."""
    return f"{file_sha}-{_stamp()}{_SUFFIX}"


# --------------------------------------------------------------------------- the key


def _bytes_to_key(path: Path) -> bytes | None:
    """The file's bytes when it is one worth caching: of :data:`MIN_CACHED_BYTES` to
    :data:`MAX_CACHED_BYTES` (told by its size before reading). None otherwise, and
    when it cannot be read: the loader then words what is wrong, as without a cache."""
    try:
        with open_regular(path, MAX_CACHED_BYTES, "a cached domain file") as f:  # a named pipe: not opened to wait
            if os.fstat(f.fileno()).st_size < MIN_CACHED_BYTES:
                return None
            raw = read_at_most(f, MAX_CACHED_BYTES)
    except OSError:  # FileRefused too
        return None
    return raw if len(raw) <= MAX_CACHED_BYTES else None


@lru_cache(maxsize=1)
def _stamp() -> str:
    """What, besides the file's bytes, decides what loading it makes (see the module docstring)."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256(f"{ENTRY_FORMAT}\0{sys.implementation.cache_tag}\0{pickle.HIGHEST_PROTOCOL}\0".encode())
    try:
        h.update(version("pytest-sandtable").encode())
    except PackageNotFoundError:
        h.update(b"?")
    here = Path(__file__).parent
    for source in [*sorted(here.glob("*.py")), here.parent / "schemas" / "domain.schema.json"]:
        h.update(source.name.encode() + b"\0")
        with suppress(OSError):
            h.update(source.read_bytes())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- entries


class _ModelOnly(pickle.Unpickler):
    """Unpickles a Domain and nothing else: the only globals it resolves are the
    classes of :mod:`.model` (``find_class`` is the one way a pickle reaches code)."""

    def find_class(self, module: str, name: str) -> type:
        allowed = _model_classes()
        if module == model.__name__ and name in allowed:
            return allowed[name]
        raise pickle.UnpicklingError(f"{module}.{name} is not a domain model class")


@lru_cache(maxsize=1)
def _model_classes() -> dict[str, type]:
    return {n: v for n, v in vars(model).items() if isinstance(v, type) and v.__module__ == model.__name__}


def _read_entry(entry: Path, file_sha: str) -> Domain | None:
    """The Domain in ``entry``, or None when there is none or it is not whole, not ours,
    or not of this file: such an entry is simply rebuilt. Nothing is read of an entry
    that is not a regular file or is over :data:`MAX_ENTRY_BYTES`."""
    try:
        data = read_regular(entry, MAX_ENTRY_BYTES, "a domain cache entry")
    except (OSError, MemoryError):  # FileRefused too: a miss
        return None
    head = len(_MAGIC) + _DIGEST
    if not data.startswith(_MAGIC) or len(data) <= head:
        return None
    payload = memoryview(data)[head:]
    if hashlib.sha256(payload).digest() != data[len(_MAGIC) : head]:
        return None
    try:
        with _no_gc():
            domain = _ModelOnly(io.BytesIO(payload)).load()
    except Exception:  # whatever a damaged payload raises: it is only a miss
        return None
    if not isinstance(domain, Domain) or domain.sha256 != file_sha:
        return None
    with suppress(OSError):
        os.utime(entry)  # recently used: pruned last
    return domain


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic garbage collector off while inside: unpickling a big domain makes
    hundreds of thousands of containers, none of them garbage, and the collections
    their allocation sets off took about a fifth of the unpickling (0.045 against
    0.037 CPU s for τ-bench airline's 3.8 MB entry)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _write_entry(entry: Path, domain: Domain) -> None:
    """Store ``domain`` as ``entry``, whole or not at all; any failure (a read-only
    folder, a full disk) leaves the cache as it was."""
    try:
        payload = pickle.dumps(domain, protocol=pickle.HIGHEST_PROTOCOL)
        if len(payload) + len(_MAGIC) + _DIGEST > MAX_ENTRY_BYTES:
            return  # it would never be read
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(entry, _MAGIC + hashlib.sha256(payload).digest() + payload)
        _prune(entry.parent)
    except Exception:  # no cache is never an error
        return


def _prune(cache_dir: Path) -> None:
    """Keep the :data:`MAX_ENTRIES` most recently used entries."""
    entries = []
    for p in cache_dir.glob(f"*{_SUFFIX}"):
        with suppress(OSError):
            entries.append((p.stat().st_mtime, p))
    entries.sort(reverse=True)
    for _, p in entries[MAX_ENTRIES:]:
        with suppress(OSError):
            p.unlink()


@contextmanager
def _build_lock(cache_dir: Path) -> Iterator[None]:
    """Hold the folder's build lock while inside, when it can be had within
    :data:`LOCK_WAIT_SECONDS`; else (no folder, no ``fcntl``, a holder stuck in a
    debugger) go on without it: two processes then both build, which is only slower."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(cache_dir / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.02)
            except OSError:  # a file system without locks
                break
        yield
    finally:
        os.close(fd)  # releases the lock
