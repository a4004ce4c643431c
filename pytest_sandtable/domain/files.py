"""Which files are domain files, finding them under a folder, writing a file whole or
not at all (:func:`write_atomic`, for every layer: results, reports, drafts,
recordings and the domain cache), and reading one only when it is a regular file of a
bounded size (:func:`open_regular`, :func:`read_regular`: results.json, recordings, the
domain cache's entries)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, BinaryIO

__all__ = [
    "FileRefused",
    "find_domain_files",
    "is_domain_file",
    "open_regular",
    "read_at_most",
    "read_regular",
    "size_text",
    "write_atomic",
]

# folders never searched for domain files
_SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox", ".sandtable"}


def is_domain_file(path: Path) -> bool:
    """``sandtable.yaml`` or ``*.sandtable.yaml``."""
    return path.name == "sandtable.yaml" or path.name.endswith(".sandtable.yaml")


def is_virtualenv(folder: Path) -> bool:
    """A virtual environment, by pytest's own test (``_pytest.main._in_venv``): a
    ``pyvenv.cfg`` (PEP 405) or a conda environment's ``conda-meta/history``, whatever
    the folder is called. pytest does not collect in one; neither do validate and lint."""
    try:
        return (folder / "pyvenv.cfg").is_file() or (folder / "conda-meta" / "history").is_file()
    except OSError:
        return False


def find_domain_files(folder: Path) -> Iterator[Path]:
    """Domain files under ``folder``, in sorted order, skipping tool and VCS folders
    and virtual environments (:func:`is_virtualenv`)."""
    entries = sorted(folder.iterdir(), key=lambda p: p.name)
    for entry in entries:
        if entry.is_dir():
            if entry.name not in _SKIP_DIRS and not entry.name.startswith(".") and not is_virtualenv(entry):
                yield from find_domain_files(entry)
        elif is_domain_file(entry):
            yield entry


class FileRefused(OSError):
    """A file that is not read: not a regular file (a named pipe, a device such as
    ``/dev/zero``, a folder), or bigger than the cap of what it should be.
    ``str(e)`` and :attr:`problem` say which, without the path (the caller names the
    file as its messages do). An :class:`OSError`, so that a caller that treats an
    unreadable file as absent (the domain cache) needs nothing more."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem

    def __str__(self) -> str:
        return self.problem


_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def size_text(n: int) -> str:
    """A size in bytes as the refusals word it: ``5.0 GiB``, ``64 MiB``, ``12 bytes``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}" if n % size else f"{n // size} {unit}"
    return f"{n} bytes"


def open_regular(path: str | os.PathLike[str], cap: int | None, what: str) -> BinaryIO:
    """``path`` opened for reading in binary, when it is (a symbolic link to) a regular
    file of at most ``cap`` bytes (None: any size). Opened without blocking (a named
    pipe blocks in ``open()`` until a writer comes), then checked with ``fstat`` on the
    opened descriptor, so that what is checked is what is read. ``what`` names the
    expected file in the refusal (``"a results.json"``). Raises :class:`FileRefused`
    for anything else, and the :class:`OSError` of ``open()`` (no such file, no
    permission). The caller reads at most ``cap`` bytes of it (a file may grow)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
            raise FileRefused(f"not a regular file but {kind}: {what} is read only from a regular file")
        if cap is not None and st.st_size > cap:
            raise FileRefused(f"too big: {size_text(st.st_size)}, over the {size_text(cap)} cap of {what}")
        if flags & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)  # a regular file never blocks; reads behave as ever
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], cap: int, what: str) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``cap`` bytes
    (:func:`open_regular`), never reading more than ``cap + 1`` of them (a file that
    grew past the cap while it was read is refused too). Raises :class:`FileRefused`,
    or the :class:`OSError` of opening or reading it."""
    with open_regular(path, cap, what) as f:
        data = read_at_most(f, cap)
    if len(data) > cap:
        raise FileRefused(f"too big: over the {size_text(cap)} cap of {what}")
    return data


def read_at_most(f: IO[bytes], cap: int) -> bytes:
    """The rest of the regular file ``f``, or its first ``cap + 1`` bytes when it holds
    more (so a caller can tell). Memory is taken for what the file holds, never for the
    cap (``f.read(cap + 1)`` takes all of the cap up front)."""
    left = os.fstat(f.fileno()).st_size - f.tell()
    data = f.read(max(0, min(left, cap)) + 1)  # one byte more than it held: it grew
    if len(data) <= left or len(data) > cap:
        return data
    parts, got = [data], len(data)
    while got <= cap and (chunk := f.read(min(2**24, cap + 1 - got))):
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def write_atomic(path: Path, data: bytes | Callable[[BinaryIO], object]) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a
    rename, so that a reader (or a crash) sees the old file or the new one, never half
    of one. An existing file keeps its permissions; a new one gets the umask's.
    ``data`` may be a function writing the content to the file it is given (a big file
    streamed, never whole in memory)."""
    import tempfile  # not at start-up: only writers need it

    mode = _kept_mode(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            data(f) if callable(data) else f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _kept_mode(path: Path) -> int:
    """The mode of the file ``path`` replaces: its own when it is a regular file; the
    umask's for a new one, and in place of a named pipe or a device (a link to
    ``/dev/zero`` would give the new file mode 0666)."""
    try:
        st = path.stat()
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        return st.st_mode & 0o7777
    return 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
