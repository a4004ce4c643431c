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
It takes the plain case (one mapping document; no tags, directives, tabs or byte
order marks; string keys, none twice; nesting at most 64 deep; nothing that libyaml
and PyYAML read differently), anchors and aliases (an alias is its anchor's very
value, as PyYAML makes it, and what aliases repeat is counted against
:data:`ALIAS_VALUES_MAX` as the pure-Python path counts it) and a `<<` merge of one
mapping; it hands anything else, or any error, to the pure-Python path, which alone
words the problems a user sees. Positions inside a list item that is a mapping or a
list (a seed row, a tool, a task) are found when first asked for, by reading that
item's text with the pure-Python path, so a 100,000-row table costs no position
records until a problem needs one; a position that runs through an alias or a
merge is found by following its path through the pieces of the file it crosses
(the item, the anchored value), each composed when asked for. Both paths give the
same data and positions, for every value of a file of any size
(tests/test_yaml_fast.py compares them, tests/test_big_files.py checks files past
200,000 values).

Whatever the file holds, reading it gives data or a :class:`DomainError`, never
another exception (tests/test_fuzz_domain.py): a tag on a value of the wrong kind
(`!!bool mini`), a control character, a lone surrogate escape (`"\\ud800"`, not text),
an integer past Python's 4,300 digits, and aliases that repeat more than
:data:`ALIAS_VALUES_MAX` values are each a problem at their place. The fast path
takes none of these files (it gives up at the alias that passes the cap), so they
are all worded by the pure-Python path.

A syntax error is worded in the user's terms for the common mistakes (a key or list
item at the wrong depth, a tab in the indentation, an unclosed quote or bracket, a
`: ` inside a value without quotes, an unknown `\\` escape), at the place to fix,
which is not always the parser's mark (an unclosed quote is shown where it opens):
:func:`_plain_words`. Any other keeps the parser's own words.
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


# A piece of the file read when first asked for (a list item, an anchored value, a
# mapping with a merge): the start and end of its text (character offsets), its
# 0-based line and column, and whether it is inside a `[ ]` or `{ }`.
_Span = tuple[int, int, int, int, bool]

# A piece a position is looked for in: its span, and whether it is a list item
# (whose text may run on to the `,` or `]` after it, see _piece_text).
_Piece = tuple[_Span, bool]

# A key a mapping has only from an alias it merges (`<<: *defaults`): the anchor,
# and the key in the anchored mapping.
_Merged = tuple[str, str]

# the most pieces one position is looked for through (aliases of aliases, merges)
_HOPS_MAX = 64


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
    # values whose positions run through anchors elsewhere in the file (fast path
    # only): a list item or a mapping with an alias or a `<<` merge inside (its
    # piece), an alias (its anchor's name), a key merged from an alias; and the span
    # of each anchored value
    composed: dict[PathTuple, _Piece | str | _Merged] = field(default_factory=dict, repr=False)
    anchors: dict[str, _Span] = field(default_factory=dict, repr=False)
    _nodes: dict[_Piece, tuple[yaml.Node, int] | None] = field(default_factory=dict, repr=False)

    def pos(self, path: Sequence[str | int]) -> Pos | None:
        """Where the value at ``path`` is, or its nearest recorded ancestor."""
        p = tuple(path)
        if self.lazy:
            self._expand(p)
        if self.composed:
            found = self._locate(p)
            if found is not None:
                return found[0]
        while True:
            known = self.positions.get(p)
            if known is not None or not p:
                return known
            span = self.lazy.get(p) if self.lazy else None
            if span is not None:  # a lazily positioned item: where it starts
                return Pos(span[2] + 1, span[3] + 1)
            p = p[:-1]

    def key_pos(self, path: Sequence[str | int]) -> Pos | None:
        """Where the key of the value at ``path`` is (falls back to :meth:`pos`)."""
        p = tuple(path)
        if self.lazy:
            self._expand(p)
        if self.composed:
            found = self._locate(p)
            if found is not None:
                return found[1] or found[0]
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
        (not for the item itself: :meth:`pos` has it from its span)."""
        for i in range(1, len(path)):
            span = self.lazy.pop(path[:i], None)
            if span is not None:
                self._read_item(path[:i], span)
                return

    def _read_item(self, at: PathTuple, span: _Span) -> None:
        # The item read by the pure-Python path as the whole file would be.
        body, line, wrapped = _piece_text(self.text, span, item=True)
        loader = _Loader(body)
        try:
            node = loader.get_single_node()
            if node is None:  # pragma: no cover - the fast path read a mapping or list here
                return
            data = loader.construct_document(node)
            sub = Document(data=data, filename=self.filename)
            _Walker(loader, sub).walk(node, data, ())
        except (yaml.YAMLError, RecursionError):  # pragma: no cover - as above
            return
        finally:
            loader.dispose()
        self.positions[at] = Pos(span[2] + 1, span[3] + 1)
        skip = 2 if wrapped else 1  # the item itself, and the `[ ]` around it
        for p, pos in sub.positions.items():
            if len(p) >= skip:
                self.positions[at + p[skip - 1 :]] = Pos(pos.line + line, pos.col)
        for p, pos in sub.key_positions.items():
            if len(p) >= skip:
                self.key_positions[at + p[skip - 1 :]] = Pos(pos.line + line, pos.col)

    def _locate(self, path: PathTuple) -> tuple[Pos | None, Pos | None] | None:
        """Where the value at ``path`` (or its deepest ancestor) and its key are, when
        the path runs through an alias or a merge (else None).

        The path is followed through the nodes of the pieces of the file it crosses,
        as the pure-Python walk follows it: an alias is its anchor's node (so it is
        where its anchor is), and a mapping's own keys win over what its `<<` brings
        in. Only those pieces are composed, so a problem in a big file costs
        milliseconds, not a second reading of the file."""
        for i in range(len(path) + 1):
            found_entry = self.composed.get(path[:i])
            if found_entry is not None:
                break
        else:
            return None
        steps = path[i:]
        key = self.key_positions.get(path[:i])  # recorded when the fast path read it
        merged_into: Pos | None = None  # the mapping whose `<<` is being looked in
        entry: _Piece | str
        if isinstance(found_entry, tuple) and isinstance(found_entry[0], str):
            # a key merged from an alias: the key in the anchored mapping
            entry, steps = found_entry[0], (found_entry[1], *steps)
        else:
            entry = found_entry  # type: ignore[assignment]
        for _ in range(_HOPS_MAX):
            piece = (self.anchors[entry], False) if isinstance(entry, str) else entry
            found = self._piece_node(piece)
            if found is None:  # pragma: no cover - the fast path read this piece
                return None
            value, last_key, depth, hop = _follow(found[0], steps, found[1])
            if merged_into is not None and depth == 0 and hop is None and steps:
                return merged_into, None  # a key neither the mapping nor its merge has
            if depth:
                key = last_key
            if hop is None:
                return value, key if depth == len(steps) else None
            entry, merges = hop
            merged_into = value if merges else None
            steps = steps[depth:]
        return None  # pragma: no cover - the fast path refuses recursive aliases

    def _piece_node(self, piece: _Piece) -> tuple[yaml.Node, int] | None:
        """A piece's node, composed when first asked for, with the lines before it."""
        if piece not in self._nodes:
            body, line, wrapped = _piece_text(self.text, piece[0], item=piece[1])
            loader = _PieceLoader(body)
            try:
                node = loader.get_single_node()
                if wrapped and isinstance(node, yaml.SequenceNode) and node.value:
                    node = node.value[0]
                self._nodes[piece] = None if node is None else (node, line)
            except (yaml.YAMLError, RecursionError):  # pragma: no cover - the fast path read it
                self._nodes[piece] = None
            finally:
                loader.dispose()
        return self._nodes[piece]


def _piece_text(text: str, span: _Span, *, item: bool) -> tuple[str, int, bool]:
    """A piece's text, padded to its column so that every column stays what it is in
    the file, read by the pure-Python path as the whole file would be; one inside a
    `[ ]` or `{ }` inside a `[ ]` too (`[?x]` is a mapping there). Returns the text,
    the lines before the piece, and whether it is wrapped in a `[ ]`."""
    start, end, line, col, in_flow = span
    if not in_flow:
        return " " * col + text[start:end], line, False
    if item:
        # up to the `,` or `]` after the item, where PyYAML puts a value left
        # empty at its end (`[?x]`), read as that `]`
        while end < len(text) and text[end] not in ",]":
            end = text.find("\n", end) if text[end] == "#" else end + 1
            if end < 0:
                end = len(text)
    return f"[\n{' ' * col}{text[start:end]}]", line - 1, True


class _Outside(yaml.ScalarNode):
    """An alias to an anchor outside the piece of the file being read."""

    def __init__(self, anchor: str, start_mark: yaml.Mark, end_mark: yaml.Mark) -> None:
        super().__init__("tag:yaml.org,2002:null", "", start_mark, end_mark)
        self.anchor = anchor


class _PieceLoader(_Loader):
    """Composes a piece of the file, whose aliases may name anchors outside it."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            if event.anchor not in self.anchors:
                self.get_event()  # type: ignore[no-untyped-call]
                return _Outside(str(event.anchor), event.start_mark, event.end_mark)
        return super().compose_node(parent, index)


def _follow(
    node: yaml.Node, steps: PathTuple, line: int
) -> tuple[Pos | None, Pos | None, int, tuple[str, bool] | None]:
    """Follow ``steps`` down from ``node`` (of a piece ``line`` lines into the file).

    Returns where the deepest node found is, the key of the last step taken, how many
    steps were taken, and, when the rest is in another piece, the anchor to go on in
    and whether it is a `<<` merge (the next step is looked for in it) or an alias
    (the anchor's value is the value reached)."""

    def at(mark: yaml.Mark) -> Pos:
        return Pos(mark.line + 1 + line, mark.column + 1)

    key: Pos | None = None
    for depth, step in enumerate(steps):
        if isinstance(node, _Outside):
            return None, key, depth, (node.anchor, False)
        found = _child(node, step)
        if found is None:
            merge = _merged_from_outside(node) if isinstance(step, str) else None
            return at(node.start_mark), None, depth, None if merge is None else (merge, True)
        key_node, node = found
        key = None if key_node is None else at(key_node.start_mark)
    if isinstance(node, _Outside):
        return None, key, len(steps), (node.anchor, False)
    return at(node.start_mark), key, len(steps), None


def _child(node: yaml.Node, step: str | int) -> tuple[yaml.Node | None, yaml.Node] | None:
    """The key node (None in a list) and the value node one step down, or None. A
    mapping's `<<` merge of a mapping in the same piece counts, one from outside is
    for :func:`_merged_from_outside`."""
    if isinstance(node, yaml.SequenceNode):
        if isinstance(step, int) and 0 <= step < len(node.value):
            return None, node.value[step]
        return None
    if not isinstance(node, yaml.MappingNode) or not isinstance(step, str):
        return None
    found = None
    for key, value in _merged_pairs(node):
        if isinstance(key, yaml.ScalarNode) and key.value == step:
            found = key, value
    return found


def _merge_source(node: yaml.MappingNode) -> yaml.Node | None:
    """What a mapping's `<<` merges (the fast path takes one mapping), or None."""
    for key, value in node.value:
        if key.tag == _MERGE_TAG:
            if isinstance(value, yaml.SequenceNode) and len(value.value) == 1:
                value = value.value[0]
            return value if isinstance(value, yaml.Node) else None
    return None


def _merged_from_outside(node: yaml.Node) -> str | None:
    """The anchor a mapping's `<<` merges when it is outside the piece, or None."""
    if not isinstance(node, yaml.MappingNode):
        return None
    source = _merge_source(node)
    return source.anchor if isinstance(source, _Outside) else None


def _merged_pairs(node: yaml.MappingNode) -> list[tuple[yaml.Node, yaml.Node]]:
    """A mapping's pairs with its `<<` merge flattened as PyYAML's constructor does
    (SafeConstructor.flatten_mapping), without changing the node: in a file the fast
    path reads, one mapping without a merge of its own, before the mapping's own."""
    own = [(key, value) for key, value in node.value if key.tag != _MERGE_TAG]
    source = _merge_source(node)
    if isinstance(source, yaml.MappingNode):
        return [*source.value, *own]
    return own


def _pos(mark: yaml.Mark) -> Pos:
    return Pos(mark.line + 1, mark.column + 1)


def _syntax_problem(filename: str, text: str, exc: yaml.YAMLError) -> Problem:
    if isinstance(exc, yaml.MarkedYAMLError):
        plain = _plain_words(exc, text)
        if plain is not None:
            at, words = plain
            return Problem(filename, at.line + 1, at.column + 1, "", f"invalid YAML: {words}")
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


class _At:
    """A place in the file (0-based, as a yaml.Mark), for a problem placed elsewhere
    than the parser's mark (the start of a line, an opening quote)."""

    __slots__ = ("column", "line")

    def __init__(self, line: int, column: int) -> None:
        self.line, self.column = line, column


def _line_of(text: str, mark: yaml.Mark) -> str:
    """The text of the line ``mark`` is on."""
    start = text.rfind("\n", 0, mark.index) + 1
    end = text.find("\n", mark.index)
    return text[start : len(text) if end < 0 else end].rstrip("\r")


def _previous_line(text: str, mark: yaml.Mark) -> str:
    """The last line before ``mark``'s that holds more than spaces and a comment."""
    lines = text[: text.rfind("\n", 0, mark.index) + 1].splitlines()
    for line in reversed(lines):
        if line.strip() and not line.lstrip().startswith("#"):
            return line
    return ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _token(token: str, line: str, mark: yaml.Mark) -> str:
    """A token the parser names (``'<scalar>'``) as the user sees it in the file."""
    if token == "'<stream end>'":
        return "the end of the file"
    if token.startswith("'<"):
        word = re.match(r"[^\s:,\[\]{}]*", line[mark.column :])
        return f"'{clip(word.group(), 40)}'" if word and word.group() else "a value"
    return token


_DEEPER = (
    "this line is indented more than the key above it expects (a key at the wrong depth? "
    "or, if it goes on with the value above, that value needs quotes)"
)


def _plain_words(exc: yaml.MarkedYAMLError, text: str) -> tuple[yaml.Mark | _At, str] | None:
    """The common YAML mistakes in plain words, at the place to fix (not always the
    parser's mark: an unclosed quote is shown where it opens); None for the others,
    which keep the parser's own words."""
    problem, context = exc.problem or "", exc.context or ""
    mark, start = exc.problem_mark, exc.context_mark
    if mark is None:
        return None
    line = _line_of(text, mark)
    if problem == "mapping values are not allowed here":
        before = line[: mark.column]
        if ": " not in before and _indent(line) > _indent(_previous_line(text, mark)):
            return _At(mark.line, _indent(line)), _DEEPER
        return mark, (
            "this ': ' is inside a value without quotes, where YAML takes it for the start of a key; "
            "put the whole value in quotes"
        )
    if problem.startswith("expected <block end>, but found "):
        found = problem[len("expected <block end>, but found ") :]
        if found in ("'<block sequence start>'", "'-'"):
            return mark, "this list item is not lined up with the items or keys above it (a '-' at the wrong depth?)"
        if found == "'<block mapping start>'":
            if _indent(line) > _indent(_previous_line(text, mark)):  # after a `{ }` or `[ ]` value
                return _At(mark.line, _indent(line)), _DEEPER
            return _At(mark.line, _indent(line)), (
                "this line is indented less than the key above it and more than that key's parent "
                "(a key at the wrong depth?)"
            )
        if found == "'?'":
            return mark, "a key where the list above expects an item: add its '- ', or line the key up with its mapping"
        if found == "'<scalar>'":
            last = line[: mark.column].rstrip()[-1:]
            if last in ("'", '"'):
                return mark, (
                    f"text after the closing {last} of a value: put the whole value in quotes, writing a quote "
                    "inside it as '' in '...' or as \\\" in \"...\""
                )
            if last in ("]", "}"):
                return mark, (
                    f"text after the closing {last} of a value: a value that starts with '[' or '{{' is a list "
                    "or a mapping; put the whole value in quotes"
                )
        if found in ("']'", "'}'"):
            opening = "[" if found == "']'" else "{"
            return mark, f"this {found} closes nothing: no '{opening}' is open before it"
        if found == "':'":
            return mark, "this ':' has no key before it"
        return None
    if problem == "found character '\\t' that cannot start any token":
        if not line[: mark.column].strip(" \t-"):
            return mark, "a tab in the indentation: YAML indents with spaces only; replace the tab with spaces"
        return None
    cannot = re.fullmatch(r"found character '(.)' that cannot start any token", problem)
    if cannot and cannot.group(1) in "@`%":
        return mark, f"a value cannot start with '{cannot.group(1)}' (YAML reserves it); put the value in quotes"
    if context in ("while scanning a quoted scalar", "while scanning a double-quoted scalar") and start is not None:
        quote = text[start.index : start.index + 1]
        if problem == "found unexpected end of stream":
            return start, (
                f"this {quote} is never closed: the value runs on to the end of the file; close it where the value ends"
            )
        escape = re.fullmatch(r"found unknown escape character '?(.)'?", problem)
        if escape:  # the mark is at the character after the backslash
            return _At(mark.line, max(mark.column - 1, 0)), (
                f"'\\{escape.group(1)}' is not an escape YAML knows inside \"...\": write a backslash "
                "as '\\\\', or put the value in '...', where a backslash is itself"
            )
        digits = re.fullmatch(r"expected escape sequence of (\d+) hexadecimal numbers, but found .*", problem)
        backslash = text.rfind("\\", start.index, mark.index)
        if digits and backslash >= 0:
            escape_text = text[backslash : backslash + 2]
            return _At(mark.line, mark.column - (mark.index - backslash)), (
                f"'{escape_text}' takes {digits.group(1)} hexadecimal digits inside \"...\": write a backslash "
                "as '\\\\', or put the value in '...', where a backslash is itself"
            )
        return None
    flow = re.fullmatch(r"expected ',' or '([\]}])', but got (.+)", problem)
    if flow and start is not None:
        close, got = flow.group(1), _token(flow.group(2), line, mark)
        opening = "[" if close == "]" else "{"
        if start.line != mark.line:
            return start, (
                f"this '{opening}' is never closed (found {got} at line {mark.line + 1}, column {mark.column + 1} "
                f"before a '{close}'); close it, or put the value in quotes if the '{opening}' is text"
            )
        if got in ("']'", "'}'"):
            column = start.column + 1
            return mark, f"this {got} comes before the '{close}' that closes the '{opening}' at column {column}"
        return mark, (
            f"found {got} where the '{opening}' at column {start.column + 1} expects ',' or '{close}'; "
            "a value that holds ': ', ',', '[', ']', '{' or '}' inside brackets needs quotes"
        )
    if problem == "could not find expected ':'" and start is not None:
        above = _previous_line(text, start).rstrip()
        if above.endswith(("|", ">", "|-", ">-", "|+", ">+")):
            return start, f"the text of the '{above.split()[-1]}' above must be indented more than its key"
        return start, (
            "this line has no ': ' after its key (a key without its ':'? or the text of a value above "
            "that goes on here at the wrong depth?)"
        )
    if problem == "sequence entries are not allowed here":
        return mark, "a '- ' list item cannot start on the line of its key: put it on the next line, indented"
    alias = re.fullmatch(r"found undefined alias '?(.+?)'?", problem)
    if alias:
        return mark, (
            f"'*{clip(alias.group(1))}' stands for an anchor '&{clip(alias.group(1))}' that is not defined above; "
            "put a value that starts with '*' in quotes"
        )
    return None


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
        return _past_cap(filename, mark, path, anchor, sizes[id(node)])

    found = find(root, ())
    assert found is not None, "aliases repeat more than the cap, so one of them passes it"
    return found


def _past_cap(filename: str, mark: Any, path: PathTuple, anchor: str, size: int) -> Problem:
    """The problem at the alias that takes what aliases repeat past the cap."""
    return Problem(
        filename,
        mark.line + 1,
        mark.column + 1,
        format_path(path),
        f"alias *{clip(anchor)} repeats {size:,} values and takes the file past "
        f"{ALIAS_VALUES_MAX:,} values repeated by aliases, the most a domain file may have; "
        "write the values out, or use fewer aliases",
    )


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

    def walk(node: yaml.Node, path: PathTuple) -> None:
        if id(node) in stack:
            return
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

    def _fail(self, node: yaml.Node, path: PathTuple, message: str) -> None:
        m = node.start_mark
        self.fatal.append(Problem(self.doc.filename, m.line + 1, m.column + 1, format_path(path), message))

    def walk(self, node: yaml.Node, data: Any, path: PathTuple) -> None:
        if id(data) in self.stack and isinstance(data, (dict, list)):
            self._fail(node, path, "a value may not contain itself (recursive alias)")
            return
        # every value's position, however big the file: aliases repeat at most
        # ALIAS_VALUES_MAX values (checked before this walk), so there are at most
        # that many more than the file has nodes
        self.doc.positions[path] = _pos(node.start_mark)
        if isinstance(data, str):
            if _SURROGATE.search(data):
                self._fail(node, path, _surrogate_message(data))
        elif isinstance(node, yaml.MappingNode) and isinstance(data, dict):
            self.stack.add(id(data))
            try:
                self._mapping(node, data, path)
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

    def _mapping(self, node: yaml.MappingNode, data: dict[Any, Any], path: PathTuple) -> None:
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


class _PastCap(Exception):
    """Aliases repeat more than :data:`ALIAS_VALUES_MAX` values: read again with every
    path followed, to say where (:func:`_fast_load`)."""


class _Discard(dict[PathTuple, Pos]):
    """Positions not kept (the second reading of a file past the alias cap)."""

    def __setitem__(self, key: PathTuple, value: Pos) -> None:
        pass


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

    __slots__ = (
        "anchor", "composed", "data", "flow", "in_flow", "is_map", "item", "mark", "merge_anchor", "merges", "owner",
        "path", "start",
    )  # fmt: skip

    def __init__(self, data: Any, path: PathTuple | None, owner: _Frame | None, mark: Any, in_flow: bool) -> None:
        self.data = data
        self.is_map = isinstance(data, dict)
        self.mark = mark  # where it starts
        self.flow = False  # a `{ }` or `[ ]`
        self.in_flow = in_flow  # inside one
        self.path = path  # None inside a lazily positioned item and inside a merge
        self.owner = owner  # the lazily positioned item this is in, if any
        self.item: PathTuple | None = None  # a lazily positioned item's path
        self.composed = False  # an alias or a merge inside: positioned through them
        self.merges: list[Any] = []  # the values of its `<<` keys
        self.merge_anchor: str | None = None  # the anchor its `<<` is an alias of
        self.anchor: str | None = None  # its anchor, and the values read before it
        self.start = 0


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
    except _PastCap:
        pass
    except Exception:  # _GiveUp, a YAML error, anything: the pure-Python path decides
        return None
    finally:
        parser.dispose()
    # Past the alias cap: found as the file is read, without building what the
    # aliases stand for; read it again following every path (which a big file's
    # rows are not, for speed) to say at which alias, as the pure-Python path would.
    parser = _CParser(text)
    try:
        _fast_read(parser, text, filename, every_path=True)
    except DomainError:
        raise
    except Exception:  # pragma: no cover - it was read once already
        return None
    finally:
        parser.dispose()
    return None  # pragma: no cover - as above


def _merge(frame: _Frame, merged: set[int]) -> None:
    """Put a mapping's `<<` merge under its own keys, as PyYAML's constructor does
    (SafeConstructor.flatten_mapping): the merged mapping's keys first, its own keys
    winning. Only one mapping, itself without a merge: where several meet, PyYAML's
    versions order and pick keys differently, so the pure-Python path reads those."""
    (source,) = frame.merges
    if type(source) is list and len(source) == 1:
        source = source[0]
    if type(source) is not dict or id(source) in merged:
        raise _GiveUp
    own = dict(frame.data)
    frame.data.clear()
    frame.data.update(source)
    frame.data.update(own)
    merged.add(id(frame.data))


def _fast_read(parser: Any, text: str, filename: str, *, every_path: bool = False) -> Document:
    """Build the data from libyaml's events, recording the positions the pure-Python
    walk records. Anchors and aliases are read as PyYAML's constructor reads them (an
    alias is its anchor's very value), counting what aliases repeat as
    :func:`_check_aliases` counts it. Past :data:`ALIAS_VALUES_MAX` it raises
    :class:`_PastCap`; with ``every_path`` (the path of every value followed, none
    positioned), :class:`DomainError` with the problem."""
    get = parser.get_event
    ev: Any
    scalar = yaml.ScalarEvent
    mapping_start, mapping_end = yaml.MappingStartEvent, yaml.MappingEndEvent
    sequence_start, sequence_end = yaml.SequenceStartEvent, yaml.SequenceEndEvent
    alias = yaml.AliasEvent
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
    if every_path:
        doc.positions, doc.key_positions = _Discard(), _Discard()
    positions, key_positions, lazy = doc.positions, doc.key_positions, doc.lazy
    composed, spans = doc.composed, doc.anchors
    mark: Any = ev.start_mark
    positions[()] = Pos(mark.line + 1, mark.column + 1)
    # the nodes read (keys and values, each alias as many as its anchor stands for),
    # what aliases repeated, and each anchor's value with its number of nodes
    nodes = 1
    repeated = 0
    anchors: dict[str, tuple[Any, int]] = {}
    merged: set[int] = set()  # the mappings with a merge
    stack = [_Frame(doc.data, (), None, ev.start_mark, False)]
    while stack:
        top = stack[-1]
        ev = get()
        t = type(ev)
        path: PathTuple | None
        merging = False
        if t is mapping_end or t is sequence_end:
            stack.pop()
            own = list(top.data) if top.merges else []
            if top.merges:
                _merge(top, merged)
            if top.item is None and top.anchor is None and not top.composed:
                continue
            mark = top.mark
            span = (mark.index, ev.end_mark.index, mark.line, mark.column, top.in_flow)
            if top.anchor is not None:
                anchors[top.anchor] = (top.data, nodes - top.start)
                spans[top.anchor] = span
            if top.item is not None:
                if top.composed:
                    composed[top.item] = (span, True)
                else:
                    lazy[top.item] = span
            elif top.composed and top.path is not None:  # a mapping with a merge
                if top.merge_anchor is None:  # of a mapping written in it
                    composed[top.path] = (span, False)
                else:  # of an alias: the keys it brings in are the anchor's
                    for merged_key in top.data.keys() - set(own):
                        composed[(*top.path, merged_key)] = (top.merge_anchor, merged_key)
            continue
        if top.is_map:
            # a key, then its value
            if t is not scalar or ev.anchor is not None or ev.tag is not None:
                raise _GiveUp
            nodes += 1
            name: str = ev.value
            if ev.style in ("|", ">") or (top.flow and ev.implicit[0] and "?" in name):
                raise _GiveUp
            if ev.implicit[0] and name == "<<":
                # a merge: what it brings in is positioned from the file's nodes
                if top.merges:
                    raise _GiveUp  # a second `<<` in one mapping
                merging = True
                if top.path is not None:
                    top.composed = True
                elif top.owner is not None:
                    top.owner.composed = True
                path = (*top.path, name) if every_path and top.path is not None else None
            else:
                if ev.implicit[0] and (not name or name[0] in rules) and _plain(name) is not name:
                    raise _GiveUp  # a key that is not a string
                if name in top.data:
                    raise _GiveUp  # a duplicate key
                path = top.path
                if path is not None:
                    path = (*path, name)
                    mark = ev.start_mark
                    key_positions[path] = Pos(mark.line + 1, mark.column + 1)
            key: str | int = name
            ev = get()
            t = type(ev)
        else:
            key = len(top.data)
            path = None if top.path is None else (*top.path, key)
        value: Any
        if t is scalar:
            if ev.tag is not None or merging:
                raise _GiveUp
            nodes += 1
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
            if ev.anchor is not None:
                if ev.anchor in anchors:
                    raise _GiveUp  # an anchor defined again: the pure-Python path reads it
                anchors[ev.anchor] = (value, 1)
                mark = ev.start_mark
                spans[ev.anchor] = (mark.index, ev.end_mark.index, mark.line, mark.column, top.flow)
            if path is not None:
                mark = ev.start_mark
                positions[path] = Pos(mark.line + 1, mark.column + 1)
        elif t is mapping_start or t is sequence_start:
            if ev.tag is not None or len(stack) >= _FAST_MAX_DEPTH:
                raise _GiveUp
            value = {} if t is mapping_start else []
            frame = _Frame(value, path, top.owner, ev.start_mark, top.flow)
            frame.flow = bool(ev.flow_style)
            if ev.anchor is not None:
                if ev.anchor in anchors:
                    raise _GiveUp
                frame.anchor, frame.start = ev.anchor, nodes
            nodes += 1
            if path is not None:
                mark = ev.start_mark
                if top.is_map:
                    positions[path] = Pos(mark.line + 1, mark.column + 1)
                elif not every_path:
                    # an item of a list (a seed row, a tool, a task): where it is and
                    # what is inside it are positioned when a problem asks
                    frame.path = None
                    frame.owner = frame
                    frame.item = path
            stack.append(frame)
            if merging:
                top.merges.append(value)
                continue
        elif t is alias:
            # the anchor's own value (PyYAML shares it too), positioned where the
            # anchor is; an anchor not yet complete is a recursive alias
            found = anchors.get(ev.anchor)
            if found is None:
                raise _GiveUp
            value, size = found
            nodes += size
            repeated += size
            if repeated > ALIAS_VALUES_MAX:
                if not every_path:
                    raise _PastCap
                raise DomainError([_past_cap(filename, ev.start_mark, path or (), ev.anchor, size)])
            if merging:
                top.merges.append(value)
                top.merge_anchor = ev.anchor
                continue
            if path is not None:
                composed[path] = ev.anchor
            elif top.owner is not None:
                top.owner.composed = True
        else:
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
