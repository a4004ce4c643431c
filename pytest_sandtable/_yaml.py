"""Read a YAML file safely and remember where every node is.

Only PyYAML's ``SafeLoader`` is used (a subclass of it, never ``full_load``):
a domain file can build plain data and nothing else. The subclass resolves
plain scalars by the YAML 1.2 core schema, as editors do: only ``true`` and
``false`` are booleans (``yes``, ``no``, ``on``, ``off`` stay strings), dates
and times stay strings, ``010`` is the integer 10 and ``10:30`` is a string.

Every value is recorded by its path, e.g. ``("tools", 2, "params", "rate")``,
with the 1-based line and column of the value and of its key, so that the
loader can point at the exact place of a mistake.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from ._errors import DomainError, PathTuple, Problem, format_path
from ._model import Pos

__all__ = ["Document", "load_yaml"]

# Stop recording positions (not reading) after this many nodes: a file that
# expands aliases into millions of nodes is not a domain anyone wrote by hand.
_NODE_BUDGET = 200_000

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """SafeLoader with the YAML 1.2 core schema's plain-scalar resolution."""

    yaml_implicit_resolvers = {}  # noqa: RUF012 - only the resolvers added below


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    body = text.lstrip("+-")
    sign = -1 if text.startswith("-") else 1
    try:
        if body.startswith("0o"):
            return sign * int(body[2:], 8)
        if body.startswith("0x"):
            return sign * int(body[2:], 16)
        return sign * int(body, 10)
    except ValueError:
        # an explicit !!int in another notation (0b101, 1_000): YAML 1.1 rules
        return int(yaml.SafeLoader.construct_yaml_int(loader, node))


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
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


@dataclass
class Document:
    """A parsed YAML file: its data and where each value and key is."""

    data: Any
    filename: str
    positions: dict[PathTuple, Pos] = field(default_factory=dict)
    key_positions: dict[PathTuple, Pos] = field(default_factory=dict)
    # mistakes that do not stop the loader from checking the rest (duplicate keys)
    problems: list[Problem] = field(default_factory=list)

    def pos(self, path: Sequence[str | int]) -> Pos | None:
        """Where the value at ``path`` is, or its nearest recorded ancestor."""
        p = tuple(path)
        while True:
            found = self.positions.get(p)
            if found is not None or not p:
                return found
            p = p[:-1]

    def key_pos(self, path: Sequence[str | int]) -> Pos | None:
        """Where the key of the value at ``path`` is (falls back to :meth:`pos`)."""
        return self.key_positions.get(tuple(path)) or self.pos(path)

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
        if self.budget <= 0:
            return
        self.budget -= 1
        self.doc.positions[path] = _pos(node.start_mark)
        if isinstance(node, yaml.MappingNode) and isinstance(data, dict):
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
            if not isinstance(key, str):
                shown = "null" if key is None else str(key).lower() if isinstance(key, bool) else repr(key)
                self._fail(
                    key_node,
                    path,
                    f'key {shown} is {_article(key)}; keys must be strings (write it in quotes: "{shown}")',
                )
                continue
            if key not in data:
                continue
            child = (*path, key)
            self.doc.key_positions[child] = _pos(key_node.start_mark)
            self.walk(value_node, data[key], child)


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


def load_yaml(text: str, filename: str) -> Document:
    """Parse ``text`` (the contents of ``filename``) into a :class:`Document`.

    Raises :class:`DomainError` when the text is not YAML, is empty, or holds
    values JSON cannot (non-string keys, binary, sets). Duplicate keys are
    returned in ``Document.problems`` so that the rest can still be checked.
    """
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                raise DomainError(
                    [Problem(filename, None, None, "", "the file is empty; a domain starts with 'version: 1'")]
                )
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
