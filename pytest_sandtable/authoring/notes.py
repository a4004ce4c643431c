"""SOP notes for ``init``: read them strictly, and find the sentences a draft copied.

Notes are text or markdown files in UTF-8 (a byte order mark is allowed). A file that
is missing, a folder with no notes in it, an empty file, a file that is not UTF-8 or
holds NUL bytes, or notes too large for one draft, each stop ``init`` with a
:class:`NotesError` naming the file (and, for bad bytes, the byte offset and line),
before any model is called.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..report.fmt import count

__all__ = ["MAX_NOTES_BYTES", "NOTES_SUFFIXES", "Note", "NotesError", "find_copy", "read_notes"]

MAX_NOTES_BYTES = 200_000
"""The most notes (all files together) one draft takes: about 50,000 tokens, which
leaves a model's context room for the instructions and the draft itself."""
NOTES_SUFFIXES = (".md", ".markdown", ".txt", ".text")
"""The files a folder given as notes contributes."""
MIN_COPY_CHARS = 24
"""The shortest sentence counted as copied: shorter runs match by chance."""

_WS = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n\s*\n")


class NotesError(ValueError):
    """The notes cannot be used; the message names the file."""


@dataclass
class Note:
    """One notes file: its name as the user gave it, its text, and the same text with
    every run of whitespace made one space, with the line each character came from."""

    name: str
    text: str
    size: int
    flat: str = ""
    flat_lines: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        chars: list[str] = []
        lines: list[int] = []
        line = 1
        for ch in self.text:
            if ch.isspace():
                if chars and chars[-1] != " ":
                    chars.append(" ")
                    lines.append(line)
                if ch == "\n":
                    line += 1
                continue
            chars.append(ch)
            lines.append(line)
        self.flat = "".join(chars)
        self.flat_lines = lines

    @property
    def line_count(self) -> int:
        return self.text.count("\n") + (0 if self.text.endswith("\n") else 1)


def read_notes(paths: Sequence[str]) -> list[Note]:
    """The notes files named (a folder stands for its notes files, sorted by name).

    Raises :class:`NotesError` for the first file that cannot be used.
    """
    notes: list[Note] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in NOTES_SUFFIXES)
            if not found:
                raise NotesError(f"notes folder {raw}: no notes in it (expected {', '.join(NOTES_SUFFIXES)} files)")
            notes += [_read_one(p, str(p)) for p in found]
        else:
            notes.append(_read_one(path, raw))
    total = sum(n.size for n in notes)
    if total > MAX_NOTES_BYTES:
        raise NotesError(f"the notes are {count(total)} bytes in all; one draft takes at most "
                         f"{count(MAX_NOTES_BYTES)} bytes: draft from the sections that matter, "
                         "or draft parts separately")
    return notes


def _read_one(path: Path, name: str) -> Note:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise NotesError(f"notes file {name}: no such file") from None
    except IsADirectoryError:
        raise NotesError(f"notes file {name}: is a folder") from None
    except OSError as e:
        raise NotesError(f"notes file {name}: cannot be read: {e.strerror or e}") from None
    if len(raw) > MAX_NOTES_BYTES:
        raise NotesError(f"notes file {name}: {count(len(raw))} bytes; one draft takes at most "
                         f"{count(MAX_NOTES_BYTES)} bytes of notes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        offset = e.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)
        line = raw[:offset].count(b"\n") + 1
        hint = "; it looks like UTF-16" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise NotesError(f"notes file {name}: not UTF-8 text (byte 0x{raw[offset]:02X} at offset {offset}, "
                         f"line {line}){hint}; save it as UTF-8 and run again") from None
    nul = text.find("\x00")
    if nul >= 0:
        offset = len(text[:nul].encode("utf-8")) + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)
        raise NotesError(f"notes file {name}: not a text file (a NUL byte at offset {offset}); "
                         "expected SOP notes as text or markdown")
    if not text.strip():
        raise NotesError(f"notes file {name}: empty; expected SOP notes as text or markdown")
    return Note(name, text, len(raw))


def sentences(text: str) -> Iterable[str]:
    """The sentences (and list items, and lines of a paragraph-less text) of ``text``,
    whitespace made single spaces, at least :data:`MIN_COPY_CHARS` long."""
    for part in _SENTENCE_END.split(text):
        flat = _WS.sub(" ", part).strip()
        if len(flat) >= MIN_COPY_CHARS:
            yield flat


def find_copy(text: str, notes: Sequence[Note]) -> list[tuple[str, int]]:
    """Where ``text`` was copied from: ``(notes file, line)`` for each of its sentences
    that appears word for word (whitespace aside) in the notes, in order, each once."""
    found: list[tuple[str, int]] = []
    for sentence in sentences(text):
        for note in notes:
            at = note.flat.find(sentence)
            if at >= 0:
                place = (note.name, note.flat_lines[at])
                if place not in found:
                    found.append(place)
                break
    return found


def quote_found(quote: str, notes: Sequence[Note]) -> bool:
    """Whether ``quote`` appears word for word (whitespace aside) in the notes."""
    flat = _WS.sub(" ", quote).strip()
    return bool(flat) and any(flat in note.flat for note in notes)
