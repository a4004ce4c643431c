"""Edits to a domain file's text at the place of one item, leaving every other byte
as it was.

``review`` and ``init`` change a drafted file in small ways: add or remove
``pending: true`` on a rule or task, remove an item, replace an item with a
person's edit, add ``# copied from`` comments. A YAML library that loads the whole
file and writes it again reflows what it does not model (ruamel.yaml's round trip
rewrites every wrapped flow mapping ``{ ... }``, 199 of the 425 lines of
example_domains/clinic/sandtable.yaml, with no edit at all), so each edit here is
made on the lines where the item is, found from the YAML node positions, and then
*verified*: the edited text must load to exactly the data expected (the old data with
that one change), or the edit raises :class:`EditError` and nothing is written.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["EditError", "Item", "find_items", "insert_pending", "remove_item", "remove_pending",
           "replace_item", "safe_data"]

LISTS = {"invariants": "rule", "tasks": "task"}
"""The top-level lists whose items can be pending review, and what an item is called."""

_LINE = re.compile(r"[^\r\n\x85\u2028\u2029]*(?:\r\n|[\r\n\x85\u2028\u2029])|[^\r\n\x85\u2028\u2029]+$")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class EditError(ValueError):
    """An edit that cannot be made in place (the file's shape is not one this module
    edits, or the result would not load to the expected data)."""


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` with their line breaks, split where YAML breaks lines."""
    return _LINE.findall(text)


def safe_data(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


@dataclass
class Item:
    """A rule or task in the file's text: where it is and what it says."""

    kind: str  # "rule" or "task"
    key: str  # the top-level list it is in: "invariants" or "tasks"
    index: int  # its position in that list
    id: str
    pending: bool
    first: int  # 0-based line of its first leading comment (else of its dash)
    start: int  # 0-based line of its dash
    end: int  # 0-based line after its last line
    dash_col: int
    node: yaml.MappingNode
    list_key_line: int  # 0-based line of `tasks:` / `invariants:`

    @property
    def label(self) -> str:
        return f"{self.kind} {self.id}"

    def text(self, text: str) -> str:
        """The item's lines, leading comments included."""
        return "".join(split_lines(text)[self.first:self.end])


def _is_comment_or_blank(line: str, max_indent: int) -> bool:
    stripped = line.strip()
    if not stripped:
        return True
    return stripped.startswith("#") and len(line) - len(line.lstrip()) <= max_indent


def _dash_position(lines: Sequence[str], line: int, col: int) -> tuple[int, int]:
    """The line and column of the ``-`` that starts a block sequence item whose node
    starts at (line, col)."""
    before = lines[line][:col]
    while True:
        stripped = before.rstrip()
        if stripped.endswith("-"):
            return line, len(stripped) - 1
        if stripped or line == 0:
            raise EditError(f"line {line + 1}: expected a '- ' list item here")
        line -= 1
        before = lines[line].rstrip("\r\n\x85\u2028\u2029")


def _root(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise EditError(f"not valid YAML: {str(e).splitlines()[0]}") from None


def _scalar(node: yaml.Node | None) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _value(mapping: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    for k, v in mapping.value:
        if _scalar(k) == key:
            return k, v
    return None


def find_items(text: str) -> list[Item]:
    """Every rule and task of the file, in file order, with its place in the text."""
    root = _root(text)
    if not isinstance(root, yaml.MappingNode):
        return []
    lines = split_lines(text)
    items: list[Item] = []
    for key_node, seq in root.value:
        kind = LISTS.get(_scalar(key_node) or "")
        if kind is None or not isinstance(seq, yaml.SequenceNode) or not seq.value:
            continue
        if seq.flow_style:
            raise EditError(f"line {seq.start_mark.line + 1}: '{key_node.value}' is a flow list ([...]); "
                            "review edits block lists, one '- ' item a line")
        starts = [_dash_position(lines, n.start_mark.line, n.start_mark.column) for n in seq.value]
        for i, node in enumerate(seq.value):
            if not isinstance(node, yaml.MappingNode):
                continue
            start, dash_col = starts[i]
            # the last item ends where its node does: a block mapping's end mark is the next
            # token's start (column 0 at a top-level key), a flow mapping's is just past its '}'
            last = node.end_mark.line + (1 if node.end_mark.column > 0 else 0)
            end = starts[i + 1][0] if i + 1 < len(seq.value) else min(last, len(lines))
            while end - 1 > start and _is_comment_or_blank(lines[end - 1], dash_col):
                end -= 1
            first = start
            while first - 1 >= 0 and lines[first - 1].strip().startswith("#") \
                    and _is_comment_or_blank(lines[first - 1], dash_col) and first - 1 > key_node.start_mark.line:
                first -= 1
            id_pair = _value(node, "id")
            pending_pair = _value(node, "pending")
            items.append(Item(kind, str(key_node.value), i, _scalar(id_pair[1]) or "" if id_pair else "",
                              bool(pending_pair and safe_data(_scalar(pending_pair[1]) or "") is True),
                              first, start, end, dash_col, node, key_node.start_mark.line))
    return items


def _verified(new_lines: Sequence[str], expected: Any, what: str) -> str:
    text = "".join(new_lines)
    try:
        got = safe_data(text)
    except yaml.YAMLError:
        got = _Mismatch()
    if got != expected:
        raise EditError(f"could not {what} without changing anything else; do it by hand")
    return text


class _Mismatch:
    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


def _expected(text: str, item: Item) -> tuple[Any, dict[str, Any]]:
    data = copy.deepcopy(safe_data(text))
    return data, data[item.key][item.index]


def remove_pending(text: str, item: Item) -> str:
    """The text with ``pending: true`` removed from ``item`` (accepted)."""
    found = _value(item.node, "pending")
    if found is None:
        return text
    key, value = found
    data, entry = _expected(text, item)
    entry.pop("pending", None)
    lines = split_lines(text)
    row, col = key.start_mark.line, key.start_mark.column
    line = lines[row]
    if item.node.flow_style:
        end = value.end_mark.column if value.end_mark.line == row else len(line)
        after = line[end:]
        m = re.match(r"\s*,\s*", after)
        if m:  # `pending: true, next` -> `next`
            lines[row] = line[:col] + after[m.end():]
        else:  # the last entry: `prev, pending: true }` -> `prev }`
            head = re.sub(r",\s*$", "", line[:col])
            lines[row] = head + (" " if after.lstrip().startswith("}") and not head.endswith(" ") else "") + \
                after.lstrip()
    elif not line[:col].strip():
        del lines[row]  # `    pending: true` on a line of its own
    else:  # `  - pending: true` starts the item: the next key moves up onto the dash
        nxt = row + 1
        while nxt < len(lines) and not lines[nxt].strip():
            nxt += 1
        if nxt >= len(lines) or len(lines[nxt]) - len(lines[nxt].lstrip()) != col:
            raise EditError(f"line {row + 1}: could not remove 'pending: true' without changing anything else")
        lines[row] = line[:col] + lines[nxt].lstrip()
        del lines[row + 1:nxt + 1]
    return _verified(lines, data, f"remove 'pending: true' from {item.label}")


def insert_pending(text: str, item: Item) -> str:
    """The text with ``pending: true`` added as the first key of ``item``."""
    if item.pending:
        return text
    data, entry = _expected(text, item)
    entry["pending"] = True
    lines = split_lines(text)
    first_key = item.node.value[0][0] if item.node.value else None
    if first_key is None:
        raise EditError(f"line {item.start + 1}: {item.kind} {item.index} is empty")
    row, col = first_key.start_mark.line, first_key.start_mark.column
    line = lines[row]
    if item.node.flow_style:
        lines[row] = line[:col] + "pending: true, " + line[col:]
    else:
        br = re.search(r"(\r\n|[\r\n\x85\u2028\u2029])$", line)
        lines[row] = line[:col] + "pending: true" + (br.group(1) if br else "\n") + " " * col + line[col:]
    return _verified(lines, data, f"add 'pending: true' to {item.label}")


def remove_item(text: str, item: Item) -> str:
    """The text without ``item`` (rejected), its leading comments included; a list
    left empty becomes ``[]``."""
    data = copy.deepcopy(safe_data(text))
    del data[item.key][item.index]
    lines = split_lines(text)
    del lines[item.first:item.end]
    if not data[item.key]:
        key_line = lines[item.list_key_line]
        body = key_line.rstrip("\r\n\x85\u2028\u2029")
        lines[item.list_key_line] = body + " []" + key_line[len(body):]
    return _verified(lines, data, f"remove {item.label}")


def replace_item(text: str, item: Item, new_item: str) -> str:
    """The text with ``item`` replaced by ``new_item``: a one-item YAML list as a
    person edited it (see :func:`editable`), indented back to the item's place."""
    parsed = safe_data(new_item) if new_item.strip() else None
    if not (isinstance(parsed, list) and len(parsed) == 1 and isinstance(parsed[0], dict)):
        raise EditError("the edited text must be one list item ('- id: ...'), a mapping")
    data = copy.deepcopy(safe_data(text))
    data[item.key][item.index] = parsed[0]
    pad = " " * item.dash_col
    new_lines = [pad + ln if ln.strip() else ln for ln in split_lines(new_item)]
    if new_lines and not new_lines[-1].endswith(("\n", "\r")):
        new_lines[-1] += "\n"
    lines = split_lines(text)
    lines[item.first:item.end] = new_lines
    return _verified(lines, data, f"replace {item.label}")


def editable(text: str, item: Item) -> str:
    """The item's lines moved left so that its dash is at column 0, for an editor."""
    cut = item.dash_col
    return "".join(ln[cut:] if ln[:cut].strip() == "" else ln.lstrip() for ln in split_lines(item.text(text)))


def _anchors(node: yaml.Node, anchor: int, in_flow: bool) -> Iterator[tuple[int, str]]:
    """``(line, text)`` for every string scalar under ``node``: the line a comment about
    it can go above (the line of its key or list item, or where the flow collection
    holding it starts)."""
    if isinstance(node, yaml.ScalarNode):
        if node.tag == "tag:yaml.org,2002:str":
            yield anchor, node.value
        return
    flow = in_flow or bool(getattr(node, "flow_style", False))
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            yield from _anchors(v, anchor if flow else k.start_mark.line, flow)
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            yield from _anchors(v, anchor if flow else v.start_mark.line, flow)


def anchored_strings(text: str) -> list[tuple[int, str]]:
    """Every string value of the document with the (0-based) line a comment about it goes above."""
    root = _root(text)
    if not isinstance(root, yaml.MappingNode):
        return []
    return list(_anchors(root, 0, False))


def add_comments(text: str, comments: dict[int, list[str]]) -> str:
    """The text with comment lines added above the given (0-based) lines, indented as
    those lines are; verified to load to the same data."""
    data = safe_data(text)
    lines = split_lines(text)
    for row in sorted(comments, reverse=True):
        line = lines[row]
        indent = line[: len(line) - len(line.lstrip(" "))]
        lines[row:row] = [f"{indent}# {c}\n" for c in comments[row]]
    return _verified(lines, data, "add comments")
