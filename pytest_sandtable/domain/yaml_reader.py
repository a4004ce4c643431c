"""Read a YAML file safely and remember where every node is.

Only PyYAML's ``SafeLoader`` is used (a subclass of it, never ``full_load``):
a domain file can build plain data and nothing else. The subclass resolves
plain scalars by the YAML 1.2 core schema, as editors do: only ``true`` and
``false`` are booleans (``yes``, ``no``, ``on``, ``off`` stay strings), dates
and times stay strings, ``010`` is the integer 10 and ``10:30`` is a string.

Every value is recorded by its path, e.g. ``("tools", 2, "params", "rate")``,
with the 1-based line and column of the value and of its key, so that the
loader can point at the exact place of a mistake.

Files take a fast path when they can: libyaml's parser (when PyYAML has it) and
data built straight from its events, with the same resolvers and constructors.
It takes only the plain case (one mapping document; no anchors, aliases, merges,
tags, directives, tabs or byte order marks; string keys, none twice; nesting at
most 64 deep; nothing that libyaml and PyYAML read differently) and hands
anything else, or any error, to the pure-Python path, which alone words the
problems a user sees. Positions inside a list item that is a mapping or a list
(a seed row, a tool, a task) are found when first asked for, by reading that
item's text with the pure-Python path, so a 100,000-row table costs no position
records until a problem needs one. Both paths give the same data and positions
(tests/test_yaml_fast.py compares them).

Whatever the file holds, reading it gives data or a :class:`DomainError`, never
another exception (tests/test_fuzz_domain.py): a tag on a value of the wrong kind
(`!!bool mini`), a control character, a lone surrogate escape (`"\\ud800"`, not text),
an integer past Python's 4,300 digits, and aliases that repeat more than
:data:`ALIAS_VALUES_MAX` values are each a problem at their place. The fast path
takes none of these files, so they are all worded by the pure-Python path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from .errors import DomainError, PathTuple, Problem, format_path
from .model import Pos
from .wording import clip, show

_CParser: Any
try:
    from yaml._yaml import CParser as _CParser
except ImportError:  # PyYAML built without libyaml: the pure-Python path only
    _CParser = None

__all__ = ["Document", "load_yaml"]

# Stop recording positions (not reading) after this many nodes: a file that
# expands aliases into millions of nodes is not a domain anyone wrote by hand.
_NODE_BUDGET = 200_000

# The most values aliases may repeat in one file (docs/spec.md, "Limits"): light use
# (a row template merged into rows) stays far below it; an 800-byte nest of aliases
# that stands for ten million values (a "billion laughs") is refused before it is built.
ALIAS_VALUES_MAX = 100_000

# The most digits of an integer: Python's own limit for turning one into text and
# back (sys.int_info.default_max_str_digits); a longer one could be read but not shown
# in a message or written to results.json.
INT_DIGITS_MAX = 4300
_INT_TOO_BIG = 10**INT_DIGITS_MAX

_MERGE_TAG = "tag:yaml.org,2002:merge"
_YAML_TAG_PREFIX = "tag:yaml.org,2002:"

# Half of a UTF-16 pair: a `"\ud800"` escape makes one, and it is not text (it cannot
# be written as UTF-8, to results.json or a terminal).
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


@dataclass(frozen=True)
class _Unreadable:
    """A scalar whose tag's constructor cannot make it (`!!bool mini`), in place of a
    value: the walk, which knows its path, reports :attr:`message` there."""

    message: str


class _Loader(yaml.SafeLoader):
    """SafeLoader with the YAML 1.2 core schema's plain-scalar resolution, which also
    records where each alias is used (for the cap on what aliases repeat)."""

    yaml_implicit_resolvers = {}  # noqa: RUF012 - only the resolvers added below

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases: list[tuple[yaml.Mark, str]] = []  # where each alias is, and its anchor

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            self.aliases.append((event.start_mark, str(event.anchor)))
        return super().compose_node(parent, index)

    def scan_flow_scalar_non_spaces(self, double: bool, start_mark: yaml.Mark) -> list[str]:
        # PyYAML turns a `\U` escape into a character with chr(), which raises for one
        # past U+10FFFF; word it as the scanner words its other escape mistakes.
        try:
            return super().scan_flow_scalar_non_spaces(double, start_mark)  # type: ignore[no-any-return]
        except (ValueError, OverflowError):
            raise yaml.scanner.ScannerError(
                "while scanning a double-quoted scalar",
                start_mark,
                "found an escape past the last Unicode character, \\U0010FFFF",
                self.get_mark(),
            ) from None


def _tag_name(tag: str) -> str:
    """``tag:yaml.org,2002:bool`` -> ``!!bool``."""
    return "!!" + tag[len(_YAML_TAG_PREFIX) :] if tag.startswith(_YAML_TAG_PREFIX) else f"!<{tag}>"


# what each standard scalar tag expects, for a value it cannot make
_TAG_EXPECTS = {
    "tag:yaml.org,2002:bool": "true or false",
    "tag:yaml.org,2002:int": "an integer",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:timestamp": "a date or time such as 2026-05-04",
}


def _mistagged(node: yaml.ScalarNode) -> _Unreadable:
    tag = _tag_name(node.tag)
    expected = _TAG_EXPECTS.get(node.tag, f"a value {tag} can read")
    return _Unreadable(
        f"found {tag} {show(str(node.value))}, expected {expected}; remove the tag to read the value as written"
    )


_TOO_BIG = _Unreadable(
    f"found an integer of more than {INT_DIGITS_MAX:,} digits, expected at most {INT_DIGITS_MAX:,}; "
    "put it in quotes to keep it as text"
)

_Construct = Callable[[yaml.SafeLoader, yaml.ScalarNode], Any]


def _guarded(construct: _Construct) -> _Construct:
    """A scalar constructor that gives an :class:`_Unreadable` where PyYAML's raises
    a plain Python error (KeyError for `!!bool mini`, ValueError for `!!int x`,
    AttributeError for `!!timestamp x`) instead of a YAML error with a position."""

    def guarded(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, KeyError, AttributeError, IndexError, TypeError, OverflowError):
            return _mistagged(node)

    return guarded


def _int_1_2(text: str) -> int:
    """An integer in YAML 1.2 core notation (raises ValueError for any other)."""
    if text.isdigit():  # the common case, as below without a sign or prefix
        return int(text)
    body = text.lstrip("+-")
    sign = -1 if text.startswith("-") else 1
    if body.startswith("0o"):
        return sign * int(body[2:], 8)
    if body.startswith("0x"):
        return sign * int(body[2:], 16)
    return sign * int(body, 10)


_DECIMAL = re.compile(r"[-+]?[0-9_]+")


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | _Unreadable:
    text = str(loader.construct_scalar(node))
    try:
        value = _int_1_2(text)
    except ValueError:
        if len(text) > INT_DIGITS_MAX and _DECIMAL.fullmatch(text):
            return _TOO_BIG  # int() refuses more digits than that
        # an explicit !!int in another notation (0b101, 1_000): YAML 1.1 rules
        value = int(yaml.SafeLoader.construct_yaml_int(loader, node))
    return _TOO_BIG if abs(value) >= _INT_TOO_BIG else value


def _construct_str(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    r"""A string, each `"\ud83d\ude00"` pair of escapes joined into the one character it
    stands for (as JSON reads it); a lone half stays, for the walk to report."""
    text = str(loader.construct_scalar(node))
    if _SURROGATE.search(text):
        text = _SURROGATE_PAIR.sub(_join_pair, text)
    return text


def _join_pair(match: re.Match[str]) -> str:
    return match.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le")


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])
_Loader.add_implicit_resolver(_MERGE_TAG, re.compile(r"^(?:<<)$"), ["<"])
_Loader.add_constructor("tag:yaml.org,2002:int", _guarded(_construct_int))
_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)
# every standard scalar tag PyYAML's safe constructors read (int above, str never fails)
for _tag in ("bool", "float", "timestamp", "binary", "null"):
    _Loader.add_constructor(
        _YAML_TAG_PREFIX + _tag, _guarded(SafeConstructor.yaml_constructors[_YAML_TAG_PREFIX + _tag])
    )


# A list item whose inner positions are recorded when first asked for: the start
# and end of its text (character offsets), its 0-based line and column, its number
# in the order the position walk visits values (for the node budget), and whether
# it is in a `[ ]` list.
_Span = tuple[int, int, int, int, int, bool]


@dataclass
class Document:
    """A parsed YAML file: its data and where each value and key is."""

    data: Any
    filename: str
    positions: dict[PathTuple, Pos] = field(default_factory=dict)
    key_positions: dict[PathTuple, Pos] = field(default_factory=dict)
    # mistakes that do not stop the loader from checking the rest (duplicate keys)
    problems: list[Problem] = field(default_factory=list)
    # the file's text and its lazily positioned items (fast path only)
    text: str = field(default="", repr=False)
    lazy: dict[PathTuple, _Span] = field(default_factory=dict, repr=False)

    def pos(self, path: Sequence[str | int]) -> Pos | None:
        """Where the value at ``path`` is, or its nearest recorded ancestor."""
        p = tuple(path)
        if self.lazy:
            self._expand(p)
        while True:
            found = self.positions.get(p)
            if found is not None or not p:
                return found
            p = p[:-1]

    def key_pos(self, path: Sequence[str | int]) -> Pos | None:
        """Where the key of the value at ``path`` is (falls back to :meth:`pos`)."""
        p = tuple(path)
        if self.lazy:
            self._expand(p)
        return self.key_positions.get(p) or self.pos(p)

    def problem(self, path: Sequence[str | int], message: str, *, at_key: bool = False) -> Problem:
        """A :class:`Problem` at ``path`` (at its key when ``at_key``)."""
        pos = self.key_pos(path) if at_key else self.pos(path)
        return Problem(
            self.filename,
            pos.line if pos else None,
            pos.col if pos else None,
            format_path(path),
            message,
        )

    def _expand(self, path: PathTuple) -> None:
        """Record the positions inside the lazily positioned item on the way to ``path``
        (an item's own position is always recorded)."""
        for i in range(1, len(path)):
            span = self.lazy.pop(path[:i], None)
            if span is not None:
                self._read_item(path[:i], span)
                return

    def _read_item(self, at: PathTuple, span: _Span) -> None:
        # The item's text, padded to its column so that every column stays what it
        # is in the file, read by the pure-Python path as the whole file would be;
        # an item of a `[ ]` list inside one too (`[?x]` is a mapping there).
        start, end, line, col, index, in_flow = span
        text = self.text
        if in_flow:
            # up to the `,` or `]` after the item, where PyYAML puts a value left
            # empty at its end (`[?x]`), read as that `]`
            while end < len(text) and text[end] not in ",]":
                end = text.find("\n", end) if text[end] == "#" else end + 1
                if end < 0:
                    end = len(text)
            body, line, index = f"[\n{' ' * col}{text[start:end]}]", line - 1, index - 1
        else:
            body = " " * col + text[start:end]
        loader = _Loader(body)
        try:
            node = loader.get_single_node()
            if node is None:  # pragma: no cover - the fast path read a mapping or list here
                return
            data = loader.construct_document(node)
            sub = Document(data=data, filename=self.filename)
            walker = _Walker(loader, sub)
            walker.budget = _NODE_BUDGET - index
            walker.walk(node, data, ())
        except (yaml.YAMLError, RecursionError):  # pragma: no cover - as above
            return
        finally:
            loader.dispose()
        skip = 2 if in_flow else 1  # the item itself, and the `[ ]` around it
        for p, pos in sub.positions.items():
            if len(p) >= skip:
                self.positions[at + p[skip - 1 :]] = Pos(pos.line + line, pos.col)
        for p, pos in sub.key_positions.items():
            if len(p) >= skip:
                self.key_positions[at + p[skip - 1 :]] = Pos(pos.line + line, pos.col)


def _pos(mark: yaml.Mark) -> Pos:
    return Pos(mark.line + 1, mark.column + 1)


def _syntax_problem(filename: str, text: str, exc: yaml.YAMLError) -> Problem:
    if isinstance(exc, yaml.MarkedYAMLError):
        message = exc.problem or exc.context or "not valid YAML"
        if exc.problem and exc.context and exc.problem.startswith("but "):
            message = f"{exc.context}, {exc.problem}"
        elif exc.problem and exc.context:
            context = exc.context
            if exc.context_mark is not None:
                context += f" that starts at line {exc.context_mark.line + 1}"
            message += f" ({context})"
        if "'\\t'" in message:
            message += "; indent with spaces, not tabs"
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        col = mark.column + 1 if mark else None
        return Problem(filename, line, col, "", f"invalid YAML: {message}")
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[: exc.position]
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        return Problem(filename, line, col, "", f"invalid YAML: {exc.reason} ({exc.character!r})")
    return Problem(filename, None, None, "", f"invalid YAML: {exc}")


def _character_problem(filename: str, text: str) -> Problem:
    """The first character YAML does not allow anywhere in a file (a control character
    such as NUL, ESC or DEL; U+FFFE), at its line and column, with the escape that
    writes it in a double-quoted string."""
    found = yaml.reader.Reader.NON_PRINTABLE.search(text)
    at = found.start() if found else 0
    code = ord(text[at]) if found else 0
    before = text[:at]
    line = before.count("\n") + 1
    col = at - (before.rfind("\n") + 1) + 1
    if _SURROGATE.match(text, at):  # only in text given as a string: a file is UTF-8
        return Problem(filename, line, col, "", f"invalid YAML: {_surrogate_message(text[at])}")
    escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    kind = "control character" if code < 0x20 or 0x7F <= code <= 0x9F else "character"
    return Problem(
        filename,
        line,
        col,
        "",
        f"invalid YAML: found {kind} U+{code:04X}, which YAML does not allow in a file; "
        f'to put it in a value, write it as an escape in a double-quoted string: "{escape}"',
    )


def _check_aliases(root: yaml.Node, aliases: Sequence[tuple[yaml.Mark, str]], filename: str) -> None:
    """Refuse a file whose aliases repeat more than :data:`ALIAS_VALUES_MAX` values.

    The composer shares an alias's node, so the file costs little until something
    walks the values it stands for (the checks, a trial's world, results.json): ten
    levels of ten aliases each are ten billion values. Counting them costs one visit
    of each node written (:func:`_expanded_sizes`).
    """
    sizes = _expanded_sizes(root)
    if sizes[id(root)] - len(sizes) > ALIAS_VALUES_MAX:
        raise DomainError([_alias_past_cap(root, sizes, aliases, filename)])


def _expanded_sizes(root: yaml.Node) -> dict[int, int]:
    """How many values each node stands for, itself and what its aliases repeat
    included, by the node's id. The root's less the number of nodes written is what
    the aliases repeat."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = 1  # a node inside itself counts once (the walk refuses it)
        sizes[id(node)] = 1 + sum(size(child) for _, child in _children(node))
        return sizes[id(node)]

    size(root)
    return sizes


def _alias_past_cap(
    root: yaml.Node, sizes: dict[int, int], aliases: Sequence[tuple[yaml.Mark, str]], filename: str
) -> Problem:
    """The problem at the alias that takes what aliases repeat past the cap. In
    document order a node met again is an alias (an anchor comes before its aliases),
    so the n-th node met again is the n-th alias the composer recorded; what they
    repeat, added in that order, is what the whole file repeats, so one passes the cap."""
    seen: set[int] = set()
    uses = iter(aliases)
    repeated = 0

    def find(node: yaml.Node, path: PathTuple) -> Problem | None:
        nonlocal repeated
        if id(node) not in seen:
            seen.add(id(node))
            for step, child in _children(node):
                found = find(child, path if step is None else (*path, step))
                if found is not None:
                    return found
            return None
        mark, anchor = next(uses, (node.start_mark, "?"))
        repeated += sizes[id(node)]
        if repeated <= ALIAS_VALUES_MAX:
            return None
        return Problem(
            filename,
            mark.line + 1,
            mark.column + 1,
            format_path(path),
            f"alias *{clip(anchor)} repeats {sizes[id(node)]:,} values and takes the file past "
            f"{ALIAS_VALUES_MAX:,} values repeated by aliases, the most a domain file may have; "
            "write the values out, or use fewer aliases",
        )

    found = find(root, ())
    assert found is not None, "aliases repeat more than the cap, so one of them passes it"
    return found


def _children(node: yaml.Node) -> list[tuple[str | int | None, yaml.Node]]:
    """A node's children in document order, each with the step of its path: a list's
    items with their index; a mapping's keys (None: a key has its mapping's path) and
    values (the key's text, when the key is a scalar; else None)."""
    if isinstance(node, yaml.SequenceNode):
        return list(enumerate(node.value))
    out: list[tuple[str | int | None, yaml.Node]] = []
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            out.append((None, key_node))
            out.append((str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else None, value_node))
    return out


def _scalar_key(node: yaml.Node) -> tuple[str, str] | None:
    if isinstance(node, yaml.ScalarNode):
        return (node.tag, str(node.value))
    return None


def _find_duplicates(root: yaml.Node, filename: str) -> list[Problem]:
    """Duplicate keys in any mapping. Runs before construction, which would
    silently keep the last value (and would mix in `<<` merges, which may
    legitimately override keys)."""
    problems: list[Problem] = []
    stack: set[int] = set()
    budget = [_NODE_BUDGET]

    def walk(node: yaml.Node, path: PathTuple) -> None:
        if id(node) in stack or budget[0] <= 0:
            return
        budget[0] -= 1
        stack.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                seen: dict[tuple[str, str], yaml.Node] = {}
                for key_node, value_node in node.value:
                    if key_node.tag == _MERGE_TAG:
                        continue
                    k = _scalar_key(key_node)
                    child: PathTuple = (*path, str(key_node.value)) if k else path
                    if k is not None:
                        if k in seen:
                            first = seen[k].start_mark.line + 1
                            problems.append(
                                Problem(
                                    filename,
                                    key_node.start_mark.line + 1,
                                    key_node.start_mark.column + 1,
                                    format_path(child),
                                    f"duplicate key '{k[1]}' (first at line {first})",
                                )
                            )
                        else:
                            seen[k] = key_node
                    walk(value_node, child)
            elif isinstance(node, yaml.SequenceNode):
                for i, item in enumerate(node.value):
                    walk(item, (*path, i))
        finally:
            stack.discard(id(node))

    walk(root, ())
    return problems


_JSON_SCALARS = (str, int, float, bool, type(None))


def _type_name(value: Any) -> str:
    return type(value).__name__


class _Walker:
    """Walks the node tree and the constructed data side by side."""

    def __init__(self, loader: _Loader, doc: Document) -> None:
        self.loader = loader
        self.doc = doc
        self.fatal: list[Problem] = []
        self.stack: set[int] = set()
        self.budget = _NODE_BUDGET

    def _fail(self, node: yaml.Node, path: PathTuple, message: str) -> None:
        m = node.start_mark
        self.fatal.append(Problem(self.doc.filename, m.line + 1, m.column + 1, format_path(path), message))

    def walk(self, node: yaml.Node, data: Any, path: PathTuple) -> None:
        if id(data) in self.stack and isinstance(data, (dict, list)):
            self._fail(node, path, "a value may not contain itself (recursive alias)")
            return
        # past the budget, positions are no longer recorded, but every value is
        # still checked: one the domain cannot hold must never get through
        recorded = self.budget > 0
        if recorded:
            self.budget -= 1
            self.doc.positions[path] = _pos(node.start_mark)
        if isinstance(data, str):
            if _SURROGATE.search(data):
                self._fail(node, path, _surrogate_message(data))
        elif isinstance(node, yaml.MappingNode) and isinstance(data, dict):
            self.stack.add(id(data))
            try:
                self._mapping(node, data, path, recorded)
            finally:
                self.stack.discard(id(data))
        elif isinstance(node, yaml.SequenceNode) and isinstance(data, list):
            self.stack.add(id(data))
            try:
                for i, (item_node, item) in enumerate(zip(node.value, data, strict=False)):
                    self.walk(item_node, item, (*path, i))
            finally:
                self.stack.discard(id(data))
        elif isinstance(data, _Unreadable):
            self._fail(node, path, data.message)
        elif not isinstance(data, _JSON_SCALARS):
            self._fail(
                node,
                path,
                f"unsupported YAML value of type {_type_name(data)}; use strings, numbers, "
                "booleans, null, lists and mappings",
            )

    def _mapping(self, node: yaml.MappingNode, data: dict[Any, Any], path: PathTuple, recorded: bool) -> None:
        # after `<<` merges are flattened, a later pair with the same key wins,
        # as it does in `data`; record positions in that order
        for key_node, value_node in node.value:
            key = self.loader.construct_object(key_node)
            if isinstance(key, _Unreadable):
                self._fail(key_node, path, key.message)
                continue
            if not isinstance(key, str):
                shown = "null" if key is None else str(key).lower() if isinstance(key, bool) else clip(repr(key))
                self._fail(
                    key_node,
                    path,
                    f'key {shown} is {_article(key)}; keys must be strings (write it in quotes: "{shown}")',
                )
                continue
            if _SURROGATE.search(key):
                self._fail(key_node, path, _surrogate_message(key))
                continue
            if key not in data:
                continue
            child = (*path, key)
            if recorded:  # the keys of a mapping whose own position is recorded
                self.doc.key_positions[child] = _pos(key_node.start_mark)
            self.walk(value_node, data[key], child)


def _surrogate_message(text: str) -> str:
    lone = _SURROGATE.search(text)
    code = ord(lone.group()) if lone else 0
    return (
        f"found \\u{code:04x}, half of a UTF-16 surrogate pair and not a character (it cannot be "
        'written to results.json); write the character itself, or a \\U escape such as "\\U0001F600"'
    )


def _article(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    return f"a {_type_name(value)}"


# --------------------------------------------------------------------------- fast path


class _GiveUp(Exception):
    """The fast path does not handle this file; the pure-Python path will."""


# deeper files go the pure-Python way, which words "nested too deeply"
_FAST_MAX_DEPTH = 64

_CONSTRUCTOR = SafeConstructor()

# a `|` or `>` header as PyYAML reads it; libyaml also takes e.g. `>#comment`
_BLOCK_HEADER = re.compile(r"[|>](?:[+-][1-9]?|[1-9][+-]?)?(?:[ \r\n\x85\u2028\u2029]|\Z)")


def _plain_bool(value: str) -> Any:
    return SafeConstructor.bool_values[value.lower()]


def _plain_int(value: str) -> int:
    number = _int_1_2(value)  # int() raises past INT_DIGITS_MAX decimal digits
    if abs(number) >= _INT_TOO_BIG:  # as many in hexadecimal or octal: the problem is worded there
        raise _GiveUp
    return number


def _plain_float(value: str) -> Any:
    return _CONSTRUCTOR.construct_yaml_float(yaml.ScalarNode("tag:yaml.org,2002:float", value))


def _plain_null(value: str) -> None:
    return None


# what _Loader constructs from a plain scalar its resolvers give each tag
_MAKERS: dict[str, Callable[[str], Any]] = {
    "tag:yaml.org,2002:bool": _plain_bool,
    "tag:yaml.org,2002:int": _plain_int,  # its resolver matches YAML 1.2 notation only
    "tag:yaml.org,2002:float": _plain_float,
    "tag:yaml.org,2002:null": _plain_null,
}

# _Loader's own resolvers by first character (it has no wildcard ones), in order,
# each with what it makes; None (the `<<` merge key) is for the pure-Python path
_RULES: dict[str, tuple[tuple[re.Pattern[str], Callable[[str], Any] | None], ...]] = {
    first: tuple((regexp, _MAKERS.get(tag)) for tag, regexp in resolvers)
    for first, resolvers in _Loader.yaml_implicit_resolvers.items()
}


def _plain(value: str) -> Any:
    """A plain scalar as _Loader resolves (BaseResolver.resolve) and constructs it."""
    for regexp, make in _RULES.get(value[:1], ()):
        if regexp.match(value):
            if make is None:
                raise _GiveUp
            return make(value)
    return value


class _Frame:
    """A mapping or list being read."""

    __slots__ = ("data", "flow", "is_map", "item", "path", "recorded", "span")

    def __init__(self, data: Any, path: PathTuple | None, recorded: bool, flow: bool = False) -> None:
        self.data = data
        self.is_map = isinstance(data, dict)
        self.flow = flow  # a `{ }` or `[ ]`
        self.path = path  # None inside a lazily positioned item
        self.recorded = recorded  # within the node budget
        self.item: PathTuple = ()  # a lazily positioned item's path
        # its start, line, column, number, and whether it is in a `[ ]`
        self.span: tuple[int, int, int, int, bool] | None = None


def _fast_load(text: str, filename: str) -> Document | None:
    """The document read by libyaml, or None when the pure-Python path must read it."""
    if _CParser is None or "\t" in text or "\ufeff" in text:
        # libyaml takes a tab for a space where PyYAML says "indent with spaces",
        # and counts a byte order mark as a column where PyYAML does not
        return None
    try:
        parser = _CParser(text)  # raises for a lone surrogate, which it cannot encode
    except Exception:
        return None
    try:
        return _fast_read(parser, text, filename)
    except Exception:  # _GiveUp, a YAML error, anything: the pure-Python path decides
        return None
    finally:
        parser.dispose()


def _fast_read(parser: Any, text: str, filename: str) -> Document:
    """Build the data from libyaml's events, recording the positions the pure-Python
    walk records, in the same order (which the node budget counts)."""
    get = parser.get_event
    ev: Any
    scalar = yaml.ScalarEvent
    mapping_start, mapping_end = yaml.MappingStartEvent, yaml.MappingEndEvent
    sequence_start, sequence_end = yaml.SequenceStartEvent, yaml.SequenceEndEvent
    rules = _RULES
    end = len(text)
    if type(get()) is not yaml.StreamStartEvent:
        raise _GiveUp
    ev = get()
    if type(ev) is not yaml.DocumentStartEvent or ev.version is not None or ev.tags:
        raise _GiveUp
    ev = get()
    if type(ev) is not mapping_start or ev.anchor is not None or ev.tag is not None:
        raise _GiveUp
    doc = Document(data={}, filename=filename, text=text)
    positions, key_positions, lazy = doc.positions, doc.key_positions, doc.lazy
    budget = _NODE_BUDGET
    mark: Any = ev.start_mark
    positions[()] = Pos(mark.line + 1, mark.column + 1)
    n = 1  # values seen, in the order the position walk visits them
    stack = [_Frame(doc.data, (), True)]
    while stack:
        top = stack[-1]
        ev = get()
        t = type(ev)
        path: PathTuple | None
        if top.is_map:
            if t is mapping_end:
                stack.pop()
                if top.span is not None:
                    start, line, col, number, in_flow = top.span
                    lazy[top.item] = (start, ev.end_mark.index, line, col, number, in_flow)
                continue
            # a key, then its value
            if t is not scalar or ev.anchor is not None or ev.tag is not None:
                raise _GiveUp
            name: str = ev.value
            if ev.style in ("|", ">") or (top.flow and ev.implicit[0] and "?" in name):
                raise _GiveUp
            if ev.implicit[0] and (not name or name[0] in rules) and _plain(name) is not name:
                raise _GiveUp  # a key that is not a string
            if name in top.data:
                raise _GiveUp  # a duplicate key
            key: str | int = name
            path = top.path
            if path is not None:
                path = (*path, key)
                if top.recorded:
                    mark = ev.start_mark
                    key_positions[path] = Pos(mark.line + 1, mark.column + 1)
            ev = get()
            t = type(ev)
        else:
            if t is sequence_end:
                stack.pop()
                if top.span is not None:
                    start, line, col, number, in_flow = top.span
                    lazy[top.item] = (start, ev.end_mark.index, line, col, number, in_flow)
                continue
            key = len(top.data)
            path = None if top.path is None else (*top.path, key)
        number = n
        n += 1
        value: Any
        if t is scalar:
            if ev.anchor is not None or ev.tag is not None:
                raise _GiveUp
            value = ev.value
            if ev.style in ("|", ">") and not _BLOCK_HEADER.match(text, ev.start_mark.index):
                raise _GiveUp
            if top.flow and ev.implicit[0] and "?" in value:
                raise _GiveUp  # PyYAML ends a plain scalar at `?` inside `{ }` and `[ ]`
            if ev.implicit[0] and (not value or value[0] in rules):
                if not value and path is not None and ((top.flow and top.is_map) or ev.start_mark.index == end):
                    # libyaml puts an empty value elsewhere than PyYAML in `{ a: }`
                    # (at the next token, not after the colon) and at the very end of
                    # a file without a last newline (on a line of its own)
                    raise _GiveUp
                value = _plain(value)
            if path is not None and number < budget:
                mark = ev.start_mark
                positions[path] = Pos(mark.line + 1, mark.column + 1)
        elif t is mapping_start or t is sequence_start:
            if ev.anchor is not None or ev.tag is not None or len(stack) >= _FAST_MAX_DEPTH:
                raise _GiveUp
            value = {} if t is mapping_start else []
            recorded = number < budget
            frame = _Frame(value, path, recorded, bool(ev.flow_style))
            if path is not None:
                mark = ev.start_mark
                if recorded:
                    positions[path] = Pos(mark.line + 1, mark.column + 1)
                if not top.is_map:
                    # an item of a list (a seed row, a tool, a task): what is inside
                    # it is positioned when a problem asks
                    frame.path = None
                    if recorded:
                        frame.item = path
                        frame.span = (mark.index, mark.line, mark.column, number, top.flow)
            stack.append(frame)
        else:  # an alias
            raise _GiveUp
        if top.is_map:
            top.data[key] = value
        else:
            top.data.append(value)
    if type(get()) is not yaml.DocumentEndEvent or type(get()) is not yaml.StreamEndEvent:
        raise _GiveUp  # more than one document
    return doc


def load_yaml(text: str, filename: str) -> Document:
    """Parse ``text`` (the contents of ``filename``) into a :class:`Document`.

    Raises :class:`DomainError` when the text is not YAML, is empty, or holds
    values JSON cannot (non-string keys, binary, sets). Duplicate keys are
    returned in ``Document.problems`` so that the rest can still be checked.
    """
    fast = _fast_load(text, filename)
    if fast is not None:
        return fast
    return _slow_load(text, filename)


def _slow_load(text: str, filename: str) -> Document:
    """The pure-Python path: any YAML file, and the words for every problem."""
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError:  # it checks every character first
        raise DomainError([_character_problem(filename, text)]) from None
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                raise DomainError(
                    [Problem(filename, None, None, "", "the file is empty; a domain starts with 'version: 1'")]
                )
            if loader.aliases:
                _check_aliases(node, loader.aliases, filename)
            duplicates = _find_duplicates(node, filename)
            data = loader.construct_document(node)
        except yaml.YAMLError as exc:
            raise DomainError([_syntax_problem(filename, text, exc)]) from None
        except RecursionError:
            raise DomainError([Problem(filename, None, None, "", "the file is nested too deeply")]) from None
        doc = Document(data=data, filename=filename, problems=duplicates)
        walker = _Walker(loader, doc)
        try:
            walker.walk(node, data, ())
        except RecursionError:
            raise DomainError([Problem(filename, None, None, "", "the file is nested too deeply")]) from None
        except yaml.YAMLError as exc:
            raise DomainError([_syntax_problem(filename, text, exc)]) from None
        if walker.fatal:
            raise DomainError(sorted(walker.fatal + duplicates, key=Problem.sort_key))
        return doc
    finally:
        loader.dispose()
