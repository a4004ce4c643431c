"""A survivor's suggestion: an expectation that would catch it, as pasteable YAML, checked.

:func:`candidates` lists what could catch a survivor, best first: from what the
reference's final world has that the mutant's lacks, or the other way round (the
agent's tables, then the user's); from the call the mutant added (``not_called``) or
removed or changed (``called``); from a word the reference's replies say and the
mutant's do not (``reply_includes``: first the words no tool result holds, which a dump
of the data cannot say either). Each comes with its edit of the task's ``expect``: the
caller (:mod:`.run`) replays the reference and the mutant with the edit made, and prints
the first that keeps the reference passing and fails the mutant. A ``reply_includes``
word the reference says in its own words, that neither a tool result nor the caller
said, ties the task to that wording, and the suggestion says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from ..domain.conditions import format_value, row_matches
from ..domain.model import CallMatcher, Expect, StateExpectation, Task
from ..engine.results import TrialResult
from .operators import Mutant

__all__ = ["Edit", "candidates", "flow", "message"]

Edit = Callable[[Expect], Expect]
Candidate = tuple[str, Edit]

_PLAIN = re.compile(r"[A-Za-z_][\w.\-/ ]*")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}
_WORD = re.compile(r"[A-Za-z][A-Za-z-]{3,}")
WORDING = "ties the task to the reference's wording: an agent that says it otherwise fails"


def flow(v: Any) -> str:
    """A value as YAML flow text that reads back as the same value."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{flow(k)}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    if isinstance(v, str):
        if _PLAIN.fullmatch(v) and v == v.strip() and v.lower() not in _YAML_WORDS and ": " not in v \
                and " #" not in v:
            return v
        return json.dumps(v, ensure_ascii=False)
    return format_value(v)


def message(task: Task, mutant: Mutant) -> str | None:
    """What is said of a survivor no expectation is suggested for (a leak, a dump of the
    data), or None."""
    if mutant.operator == "leak":
        value = mutant.extra.get("value")
        return (f"rule {mutant.id.split('@', 1)[1]} did not see {flow(value)} in the reply: "
                "check the rule's values and where")
    if mutant.operator == "spam":
        if task.expect.reply_includes:
            return (f"a dump of the tool data holds every reply_includes phrase of the task "
                    f"({flow(list(task.expect.reply_includes))}): add one the data does not hold, "
                    "or a never_disclose rule")
        return "no check reads what the replies say: add reply_includes or a never_disclose rule"
    return None


def candidates(task: Task, mutant: Mutant, ref: TrialResult, result: TrialResult) -> Iterator[Candidate]:
    """Every expectation that might catch the survivor, best first (see the module's docstring)."""
    yield from _world(task, ref.diff, result.diff)
    if "user" in ref.diff or "user" in result.diff:
        yield from _world(task, ref.diff.get("user") or {}, result.diff.get("user") or {})
    by = str(mutant.extra.get("by", "agent"))
    if mutant.operator in ("never", "not-called"):
        theirs = {x["tool"] for x in ref.calls}
        added = [c["tool"] for c in result.calls if c["tool"] not in theirs]
        tool = added[0] if added else mutant.id.split("@", 1)[1].removeprefix("user:")
        shown = {"tool": tool, "by": by} if by != "agent" else {"tool": tool}
        yield f"add not_called: {flow(shown)}", _append("not_called", CallMatcher(tool=tool, by=by))
    if mutant.call is not None and mutant.operator != "stop-after":
        yield _called(mutant, by)
    if mutant.operator in ("leak",):
        return
    data = _data_text(ref)
    caller = " ".join(e.get("text", "") for e in ref.transcript if e["role"] == "user").lower()
    for word in _new_words(ref, result, data)[:4]:
        note = "" if word in data or word in caller else f" ({WORDING})"
        yield f"add reply_includes: {flow([word])}{note}", _append("reply_includes", word)


def _called(mutant: Mutant, by: str) -> Candidate:
    assert mutant.call is not None
    tool, args = mutant.call
    arg = mutant.extra.get("arg")
    shown = {arg: args[arg]} if arg in args else ({} if mutant.operator == "stop-before" else args)
    entry: dict[str, Any] = {"tool": tool, **({"args": shown} if shown else {})}
    if by != "agent":
        entry["by"] = by
    return f"add called: {flow(entry)}", _append("called", CallMatcher(tool=tool, args=shown or None, by=by))


def _append(part: str, item: Any) -> Edit:
    def edit(expect: Expect) -> Expect:
        more: dict[str, Any] = {part: [*getattr(expect, part), item]}
        return replace(expect, **more)

    return edit


def _data_text(ref: TrialResult) -> str:
    """Everything the tool results of the reference's replay hold, as lower-case text."""
    return " ".join(json.dumps(c.get("result"), default=str, ensure_ascii=False)
                    for c in ref.calls if c.get("ok")).lower()


def _new_words(ref: TrialResult, result: TrialResult, data: str) -> list[str]:
    """The words the reference's replies say and the mutant's never do: those no tool
    result holds first, each group longest first."""
    def words(r: TrialResult) -> list[str]:
        return [w.lower() for e in r.transcript if e["role"] == "agent" for w in _WORD.findall(e.get("text", ""))]

    theirs = set(words(result))
    missing = list(dict.fromkeys(w for w in words(ref) if w not in theirs))
    return sorted(missing, key=lambda w: (w in data, -len(w)))


# --------------------------------------------------------------------------- from the worlds


def _rows_by_table(diff: dict[str, Any], kind: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in diff.get(kind, []):
        out.setdefault(entry["table"], []).append(entry)
    return out


def _matching(rows: Sequence[dict[str, Any]], where: dict[str, Any]) -> int:
    return sum(1 for r in rows if row_matches(r["row"], where))


def _where_of(entry: dict[str, Any]) -> dict[str, Any]:
    return {f: v for f, v in entry["row"].items() if v != entry["key"]}


def _new_state(task: Task, entry: dict[str, Any]) -> Candidate:
    """``add state: {...}``: a new entry of the task's ``state``."""
    index = 1 + sum(1 for e in task.expect.state if e.table == entry["table"])
    made = StateExpectation(table=entry["table"], key=entry.get("key"), fields=entry.get("fields"),
                            where=entry.get("where"), count=entry.get("count"), index=index)
    return f"add state: {flow(entry)}", _append("state", made)


def _world(task: Task, ref_diff: dict[str, Any], mut_diff: dict[str, Any]) -> Iterator[Candidate]:
    ref_created, mut_created = _rows_by_table(ref_diff, "created"), _rows_by_table(mut_diff, "created")
    for table, rows in ref_created.items():
        for entry in rows:
            where = _where_of(entry)
            want = _matching(rows, where)
            theirs = mut_created.get(table, [])
            if _matching(theirs, where) != want:
                narrow = _narrowed(task, table, where, theirs, len(rows))
                if narrow is not None:
                    yield narrow
                yield _new_state(task, {"table": table, "where": where, "count": want})
    for table, rows in mut_created.items():
        for entry in rows:
            where = _where_of(entry)
            want = _matching(ref_created.get(table, []), where)
            if _matching(rows, where) != want:
                yield _new_state(task, {"table": table, "where": where, "count": want})
    ref_changed = {(c["table"], format_value(c["key"])): c for c in ref_diff.get("changed", [])}
    mut_changed = {(c["table"], format_value(c["key"])): c for c in mut_diff.get("changed", [])}
    for k, c in ref_changed.items():
        theirs = mut_changed.get(k, {}).get("fields", {})
        fields = {f: v["after"] for f, v in c["fields"].items()
                  if theirs.get(f, {}).get("after", object()) != v["after"]}
        if fields:
            yield _fields(task, c["table"], c["key"], fields)
    for k, c in mut_changed.items():
        ours = ref_changed.get(k, {}).get("fields", {})
        fields = {f: v["before"] for f, v in c["fields"].items() if f not in ours}
        if fields:
            yield _fields(task, c["table"], c["key"], fields)
    ref_deleted = {(d["table"], format_value(d["key"])) for d in ref_diff.get("deleted", [])}
    mut_deleted = {(d["table"], format_value(d["key"])): d for d in mut_diff.get("deleted", [])}
    for d in ref_diff.get("deleted", []):
        if (d["table"], format_value(d["key"])) not in mut_deleted:
            yield _new_state(task, {"table": d["table"], "where": _where_of(d), "count": 0})
    for k, d in mut_deleted.items():
        if k not in ref_deleted:
            yield _new_state(task, {"table": d["table"], "key": d["key"], "fields": _where_of(d)})


def _narrowed(task: Task, table: str, where: dict[str, Any], theirs: Sequence[dict[str, Any]],
              n: int) -> Candidate | None:
    """When the mutant made as many rows as the reference with other values: the fields
    that differ, added to the task's own expectation on that table (``add where: ... to
    state:...``), when it has one."""
    if len(theirs) != n:
        return None
    differ = {f: v for f, v in where.items() if all(r["row"].get(f) != v for r in theirs)}
    if not differ:
        return None
    for e in task.expect.state:
        if e.table != table:
            continue
        if e.key is None and e.where is not None:
            name = e.id if e.id is not None else f"{table}[where]#{e.index}"
            return f"add where: {flow(differ)} to state:{name}", _widened(e, "where", differ)
    return None


def _fields(task: Task, table: str, key: Any, fields: dict[str, Any]) -> Candidate:
    for e in task.expect.state:
        if e.table == table and e.key is not None and format_value(e.key) == format_value(key):
            name = e.id if e.id is not None else f"{table}[{format_value(key)}]#{e.index}"
            return f"add fields: {flow(fields)} to state:{name}", _widened(e, "fields", fields)
    return _new_state(task, {"table": table, "key": key, "fields": fields})


def _widened(e: StateExpectation, part: str, more: dict[str, Any]) -> Edit:
    """The edit that adds ``more`` to one state entry's ``where`` or ``fields``."""
    def edit(expect: Expect) -> Expect:
        widened: dict[str, Any] = {part: {**(getattr(e, part) or {}), **more}}
        state = [replace(x, **widened) if x is e else x for x in expect.state]
        return replace(expect, state=state)

    return edit
