"""Which files are domain files, finding them under a folder, and writing a file whole
or not at all (:func:`write_atomic`, for every layer: results, reports, drafts,
recordings and the domain cache)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

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


def write_atomic(path: Path, data: bytes | Callable[[BinaryIO], object]) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a
    rename, so that a reader (or a crash) sees the old file or the new one, never half
    of one. An existing file keeps its permissions; a new one gets the umask's.
    ``data`` may be a function writing the content to the file it is given (a big file
    streamed, never whole in memory)."""
    import tempfile  # not at start-up: only writers need it

    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask()
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
