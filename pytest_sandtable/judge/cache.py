"""Judge verdicts kept by content, so that a judge is never paid twice for one question.

The key is the sha256 of everything that decides a judge's answer: the prompt's
version, the judge (provider and model), the policy, the criterion's question and what
it reads, and the lines of the transcript it is shown. A rerun of identical
transcripts, a second run of a replayed suite (``--sandtable-record``) and ``regrade``
find every verdict here and make no model call. An entry is one small JSON file,
written whole or not at all; one that cannot be read is a miss (asked again, written
over). Only answers are kept: a timeout, a failed call or a refused budget is asked
again next time.

This cache is the judge's recording: with ``--sandtable-record=none`` (replay only) a
judge question that is not in it is not sent, and its verdict is void.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..domain.files import read_regular, write_atomic
from ..domain.model import Criterion
from .prompt import PROMPT_VERSION, Line, render, what_is_read

MAX_ENTRY_BYTES = 1 << 20
"""The largest cache entry read: one verdict, its quote and its usage."""


def cache_key(judge: str, policy: str, criterion: Criterion, lines: Sequence[Line]) -> str:
    """The content key of one judge's verdict on one criterion of one transcript."""
    parts = [PROMPT_VERSION, judge, policy, criterion.question, what_is_read(criterion), render(lines)]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


class JudgeCache:
    """Verdicts in ``folder``, one file per key; ``folder`` None keeps nothing."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def _path(self, key: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{key[:2]}" / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        if path is None:
            return None
        try:
            entry = json.loads(read_regular(path, MAX_ENTRY_BYTES, "a judge cache entry"))
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and entry.get("key") == key else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        path = self._path(key)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps({**entry, "key": key}, ensure_ascii=False, sort_keys=True).encode())
        except OSError:  # a full or read-only disk: the verdict stands, unkept
            pass
