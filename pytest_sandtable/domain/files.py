"""Which files are domain files, and finding them under a folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

# folders never searched for domain files
_SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox", ".sandtable"}


def is_domain_file(path: Path) -> bool:
    """``sandtable.yaml`` or ``*.sandtable.yaml``."""
    return path.name == "sandtable.yaml" or path.name.endswith(".sandtable.yaml")


def find_domain_files(folder: Path) -> Iterator[Path]:
    """Domain files under ``folder``, in sorted order, skipping tool and VCS folders."""
    entries = sorted(folder.iterdir(), key=lambda p: p.name)
    for entry in entries:
        if entry.is_dir():
            if entry.name not in _SKIP_DIRS and not entry.name.startswith("."):
                yield from find_domain_files(entry)
        elif is_domain_file(entry):
            yield entry
