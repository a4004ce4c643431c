"""``review``: accept, edit or reject the drafted items of a domain file.

A drafted rule or task carries ``pending: true`` until a person accepts it (the key
is removed) or rejects it (the item is removed, its leading comments with it). Every
change is made on the lines of that item (:mod:`.yamltext`), so comments, quoting and
layout elsewhere stay byte for byte, and is written only when the whole file still
validates, through a temporary file and a rename. Before each write the file is read
again: when its hash is not the one review last read or wrote, someone else changed
it, and review stops (:class:`Conflict`) without writing; what was decided before is
already in the file.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..domain.errors import DomainError
from ..domain.files import write_atomic
from ..domain.loader import load_domain_text
from ..report.fmt import plural
from ..report.safe import for_terminal
from .yamltext import EditError, Item, editable, find_items, remove_item, remove_pending, replace_item

__all__ = ["Conflict", "Invalid", "ReviewError", "ReviewFile", "Tally", "interactive", "scripted"]

PROMPT = "[a]ccept [e]dit [r]eject [s]kip [q]uit? "


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ReviewError(Exception):
    """Review cannot go on; the message is one line."""


class Conflict(ReviewError):
    """The file changed on disk since review read it."""


class Invalid(ReviewError):
    """A file (or a change to it) that does not validate; ``problems`` are its lines."""

    def __init__(self, message: str, problems: Sequence[str]) -> None:
        super().__init__(message)
        self.problems = list(problems)


@dataclass
class Tally:
    accepted: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def summary(self, left: int, path: Path) -> str:
        parts = [f"{len(self.accepted)} accepted", f"{len(self.rejected)} rejected", f"{len(self.edited)} edited",
                 f"{len(self.skipped)} skipped"]
        return f"review: {', '.join(parts)}; {plural(left, 'item')} still pending in {path}"


class ReviewFile:
    """A domain file under review: its text as last read or written, and its hash."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise ReviewError(f"no such file: {path}") from None
        except OSError as e:
            raise ReviewError(f"{path}: cannot be read: {e.strerror or e}") from None
        self.bom = raw.startswith(b"\xef\xbb\xbf")
        try:
            self.text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ReviewError(f"{path}: not UTF-8 text (byte offset {e.start})") from None
        self.sha = _sha256(raw)
        problems = self._problems(self.text)
        if problems:
            raise Invalid(f"{path} does not validate; fix it before review", problems)

    def _problems(self, text: str) -> list[str]:
        try:
            load_domain_text(text, str(self.path))
        except DomainError as e:
            return [str(p) for p in e.problems]
        return []

    def items(self) -> list[Item]:
        try:
            return find_items(self.text)
        except EditError as e:
            raise ReviewError(f"{self.path}: {e}") from None

    def pending(self) -> list[Item]:
        return [item for item in self.items() if item.pending]

    def find(self, kind: str, item_id: str) -> Item | None:
        return next((i for i in self.items() if i.kind == kind and i.id == item_id), None)

    def write(self, text: str, what: str) -> None:
        """Write ``text`` when it validates and the file is still as review last saw it."""
        problems = self._problems(text)
        if problems:
            raise Invalid(f"{what} would leave {self.path} invalid; nothing was written", problems)
        try:
            now = _sha256(self.path.read_bytes())
        except OSError:
            now = ""
        if now != self.sha:
            raise Conflict(f"{self.path} changed on disk since review read it (edited elsewhere?); {what} was not "
                           "written, and decisions before it are saved; run review again")
        data = (b"\xef\xbb\xbf" if self.bom else b"") + text.encode("utf-8")
        write_atomic(self.path, data)
        self.text, self.sha = text, _sha256(data)


def _edit(fn: Callable[[str, Item], str], text: str, item: Item, path: Path) -> str:
    try:
        return fn(text, item)
    except EditError as e:
        raise ReviewError(f"{path}: {e}") from None


def resolve(review: ReviewFile, ids: Sequence[str]) -> list[tuple[str, str]]:
    """``(kind, id)`` of each id given (``ID``, ``rule:ID`` or ``task:ID``) among the
    pending items; ReviewError naming the first that is not one."""
    pending = review.pending()
    out = []
    for raw in ids:
        kind, _, bare = raw.partition(":") if raw.startswith(("rule:", "task:")) else ("", "", raw)
        matches = [i for i in pending if i.id == bare and (not kind or i.kind == kind)]
        if len(matches) > 1:
            raise ReviewError(f"{raw!r} is both a pending rule and a pending task; say rule:{bare} or task:{bare}")
        if not matches:
            known = [i for i in review.items() if i.id == bare and (not kind or i.kind == kind)]
            listed = ", ".join(i.id for i in pending) or "none"
            state = f"{known[0].label} is not pending review" if known else f"no pending rule or task {raw!r}"
            raise ReviewError(f"{review.path}: {state} (pending: {listed})")
        if (matches[0].kind, bare) not in out:
            out.append((matches[0].kind, bare))
    return out


def scripted(review: ReviewFile, accept: Sequence[str], reject: Sequence[str], accept_all: bool,
             say: Callable[[str], None]) -> Tally:
    """Apply ``--accept`` / ``--reject`` / ``--accept-all`` and write once."""
    to_accept = [(i.kind, i.id) for i in review.pending()] if accept_all else resolve(review, accept)
    to_reject = resolve(review, reject)
    both = [f"{k} {i}" for k, i in to_accept if (k, i) in to_reject]
    if both:
        raise ReviewError(f"{both[0]} is both accepted and rejected; pick one")
    if accept_all:
        to_accept = [x for x in to_accept if x not in to_reject]
    text, tally = review.text, Tally()
    for decisions, fn, done in ((to_accept, remove_pending, tally.accepted), (to_reject, remove_item, tally.rejected)):
        for kind, item_id in decisions:
            item = next(i for i in find_items(text) if i.kind == kind and i.id == item_id)
            text = _edit(fn, text, item, review.path)
            done.append(item.label)
    review.write(text, "these decisions")
    for label in tally.accepted:
        say(f"accepted {label}")
    for label in tally.rejected:
        say(f"rejected {label} (removed)")
    return tally


def interactive(review: ReviewFile, ask: Callable[[str], str | None], say: Callable[[str], None]) -> Tally:
    """Walk the pending items one by one; ``ask`` returns None at the end of input
    (taken as quit). Each decision is written at once."""
    tally = Tally()
    queue = [(i.kind, i.id) for i in review.pending()]
    say(f"{review.path}: {plural(len(queue), 'item')} pending review")
    for n, (kind, item_id) in enumerate(queue, 1):
        while True:
            item = review.find(kind, item_id)
            if item is None or not item.pending:
                break
            say(f"\n[{n}/{len(queue)}] {item.label} (line {item.start + 1})")
            say(for_terminal(editable(review.text, item).rstrip("\n"), ()))
            answer = ask(PROMPT)
            if answer is None or answer.strip().lower() in ("q", "quit"):
                return tally
            choice = answer.strip().lower()[:1]
            if choice == "a":
                review.write(_edit(remove_pending, review.text, item, review.path), f"accepting {item.label}")
                tally.accepted.append(item.label)
                say(f"accepted {item.label}")
            elif choice == "r":
                review.write(_edit(remove_item, review.text, item, review.path), f"rejecting {item.label}")
                tally.rejected.append(item.label)
                say(f"rejected {item.label} (removed)")
            elif choice == "s":
                tally.skipped.append(item.label)
                say(f"skipped {item.label} (still pending)")
            elif choice == "e":
                item_id = _edit_in_editor(review, item, tally, say) or item_id
                continue
            else:
                say("answer a, e, r, s or q")
                continue
            break
    return tally


def _edit_in_editor(review: ReviewFile, item: Item, tally: Tally, say: Callable[[str], None]) -> str | None:
    """Open the item in ``$EDITOR``; apply the edit when it validates. Returns the
    item's id after the edit (a person may rename it), None when nothing changed."""
    editor = os.environ.get("EDITOR", "").strip() or os.environ.get("VISUAL", "").strip()
    if not editor:
        say(f"set $EDITOR to edit an item here, or edit {review.path} by hand")
        return None
    before = editable(review.text, item)
    fd, tmp = tempfile.mkstemp(prefix=f"sandtable-{item.kind}-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(before)
        try:
            code = subprocess.run([*shlex.split(editor), tmp], check=False).returncode
        except OSError as e:
            say(f"could not start the editor {editor!r}: {e.strerror or e}; the item is unchanged")
            return None
        if code != 0:
            say(f"the editor exited with status {code}; the item is unchanged")
            return None
        with open(tmp, encoding="utf-8") as f:
            after = f.read()
    except UnicodeDecodeError:
        say("the edited text is not UTF-8; the item is unchanged")
        return None
    finally:
        os.unlink(tmp)
    if after == before:
        say("no change")
        return None
    try:
        text = replace_item(review.text, item, after)
    except EditError as e:
        say(f"{e}; the edit was not applied")
        return None
    try:
        review.write(text, f"editing {item.label}")
    except Invalid as e:
        for p in e.problems:
            say(p)
        say("the edit was not applied (the file would not validate)")
        return None
    edited = next((i for i in find_items(text) if i.kind == item.kind and i.index == item.index), None)
    new_id = edited.id if edited else item.id
    tally.edited.append(f"{item.kind} {new_id}")
    if edited is not None and not edited.pending:
        tally.accepted.append(edited.label)
        say(f"edited and accepted {edited.label}")
    else:
        say(f"edited {item.kind} {new_id} (still pending)")
    return new_id
