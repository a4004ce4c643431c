"""Stage 1 of loading: the JSON Schema's errors, worded for a person.

jsonschema reports a mistake in the schema's terms (``'tabel' does not match any of
the regexes``, ``{...} is not valid under any of the given schemas``) and often
reports one mistake several times. :func:`translate` turns each into a
:class:`~pytest_sandtable.domain.errors.Problem` that points at the node and says
what was found and what was expected, and drops the echoes: a misspelt key is
reported once, not also as the key it was meant to be missing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from .errors import PathTuple, Problem
from .model import OPERATORS
from .wording import bare, found, joined_or, quoted, quoted_and, show, suggest, unknown
from .yaml_reader import Document

# What a schema `pattern` means, for people.
_PATTERNS = {
    "^[A-Za-z_][A-Za-z0-9_]*$": "a name of letters, digits and _ that does not start with a digit",
    "^[A-Za-z0-9][A-Za-z0-9_.-]*$": "an id of letters, digits, _, . and - that starts with a letter or digit",
    "^[A-Za-z_][A-Za-z0-9_-]{0,63}$": (
        "a tool name of letters, digits, _ and - that does not start with a digit (at most 64 characters)"
    ),
    "^\\$[A-Za-z_][A-Za-z0-9_]*$": "a $name argument",
    "^-?[^-]": "a field name, or -field to sort descending",
}

# A key with spaces is almost always the tail of a text cut at a comma in `{ ... }`.
_COMMA_HINT = "inside { }, a comma ends a value; put text that contains commas in quotes"

# The keys of a tool param (the schema's `$defs/param`): the subset of JSON Schema
# the engine coerces and checks arguments with.
PARAM_KEYS = ("type", "description", "required", "default", "enum", "properties", "items")
# JSON Schema keywords a param does not take. Someone porting a tool's JSON Schema
# writes them; "did you mean 'items'" for `maxItems` would send them the wrong way.
_JSON_SCHEMA_KEYWORDS = frozenset(
    """$ref $schema $id $defs definitions title examples const format nullable minimum maximum
    exclusiveMinimum exclusiveMaximum multipleOf minLength maxLength pattern minItems maxItems
    uniqueItems contains minContains maxContains prefixItems additionalItems unevaluatedItems
    minProperties maxProperties additionalProperties patternProperties propertyNames
    unevaluatedProperties dependentRequired dependentSchemas dependencies oneOf anyOf allOf not
    if then else readOnly writeOnly deprecated""".split()
)
_PARAM_HINT = (
    "a param takes this subset of JSON Schema: {keys}; state any other limit in the param's "
    "description, which the agent reads"
)
# A record reference where a condition on a field (a value or an operator object) was expected.
_RECORD_REF_HINT = (
    "found a {table, key, field} record reference, expected a value or an operator object: to compare "
    "with a record's field, make it an operator's value, e.g. { eq: {table, key, field} }"
)


def translate(doc: Document, errors: Iterable[Any], base: PathTuple = ()) -> list[Problem]:
    """The problems that jsonschema ``errors`` about ``doc`` stand for.

    ``base`` is the path of the validated value in ``doc`` when that is not the whole
    document (the checker validates single values against a param's schema).
    """
    return _Translator(doc, base).translate(errors)


def _hint(path: PathTuple) -> str:
    """What to write, for a key missing or empty at ``path`` whose purpose the bare
    problem does not say: an accepted mutant's reason."""
    if len(path) == 5 and path[0] == "tasks" and path[2] == "accept" and path[4] == "reason":
        return "; say why the policy allows this mutant"
    if _is_criterion(path) or (path[-1:] == ("question",) and _is_criterion(path[:-1])):
        return "; ask a yes/no question about the agent's messages"
    return ""


def _is_criterion(path: PathTuple) -> bool:
    """Whether ``path`` is a ``judge:`` criterion's, of the domain or of a task."""
    return (len(path) == 2 and path[0] == "judge") or (
        len(path) == 4 and path[0] == "tasks" and path[2] == "judge")


def _json_schema_keyword(key: str, allowed: list[str]) -> bool:
    """Whether ``key``, unknown in a mapping that takes ``allowed``, is a JSON Schema
    keyword written in a tool param."""
    return key in _JSON_SCHEMA_KEYWORDS and set(allowed) == set(PARAM_KEYS)


def _is_record_ref(value: Any) -> bool:
    """``{table, key, field}`` (or part of it): a record reference where a condition was expected."""
    return isinstance(value, dict) and "table" in value and bool({"key", "field"} & set(value))


def _describe(pattern: Any) -> str:
    return _PATTERNS.get(str(pattern), f"text matching {pattern}")


def _schema(e: Any) -> dict[str, Any]:
    """The schema that failed, as a mapping (``true`` and ``false`` are schemas too)."""
    return e.schema if isinstance(e.schema, dict) else {}


class _Translator:
    """Turns jsonschema errors into problems a person can act on."""

    def __init__(self, doc: Document, base: PathTuple) -> None:
        self.doc = doc
        self.base = base
        # path -> keys that a misspelt key there was meant to be ({tabel: x} -> table)
        self.typos: dict[PathTuple, set[str]] = {}

    def translate(self, errors: Iterable[Any]) -> list[Problem]:
        out: list[Problem] = []
        errors = list(errors)
        # an unknown key explains a wrong key count (an op `{gett: ...}`) or a
        # missing key (`{tabel: x}`); say it once
        unknown_at = self._note_typos(errors)
        # a value of the wrong type is not also "not one of" the allowed values
        wrong_type_at = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
        for e in errors:
            if e.validator in ("minProperties", "maxProperties") and tuple(e.absolute_path) in unknown_at:
                continue
            if e.validator in ("enum", "const") and tuple(e.absolute_path) in wrong_type_at:
                continue
            out += self._one(e)
        return out

    def _note_typos(self, errors: list[Any]) -> set[PathTuple]:
        """Records which allowed key each unknown key was probably meant to be;
        returns the paths of the mappings with an unknown key."""
        unknown_at = set()
        for e in errors:
            if e.validator == "additionalProperties" and isinstance(e.instance, dict):
                path = tuple(e.absolute_path)
                unknown_at.add(path)
                allowed = list(_schema(e).get("properties", {}))
                for k in e.instance:
                    if k not in allowed and not _json_schema_keyword(k, allowed):
                        self.typos.setdefault(path, set()).update(difflib.get_close_matches(k, allowed, 1, 0.6))
        return unknown_at

    def _problem(self, path: PathTuple, message: str, *, at_key: bool = False) -> Problem:
        return self.doc.problem(self.base + path, message, at_key=at_key)

    def _one(self, e: Any) -> list[Problem]:
        path: PathTuple = tuple(e.absolute_path)
        inst = e.instance
        v = e.validator
        if "propertyNames" in e.absolute_schema_path and isinstance(inst, str):
            return [self._key_name(e, path)]
        if v in ("anyOf", "oneOf"):
            return self._alternatives(e, path)
        if v == "additionalProperties" and isinstance(inst, dict):
            return self._unknown_keys(e, path)
        if v == "required" and isinstance(inst, dict):
            typos = self.typos.get(path, set())
            return [
                self._problem(path, f"missing required key '{k}'" + _hint((*self.base, *path, k)))
                for k in e.validator_value
                if k not in inst and k not in typos
            ]
        if v == "uniqueItems" and isinstance(inst, list):
            seen: list[Any] = []
            for i, item in enumerate(inst):
                if item in seen:
                    return [self._problem((*path, i), f"{show(item)} is listed twice")]
                seen.append(item)
        return [self._problem(path, self._message(e, path))]

    def _key_name(self, e: Any, path: PathTuple) -> Problem:
        """A key that is not a name (``propertyNames``): pointed at the key itself."""
        key = e.instance
        expected = _describe(e.validator_value) if e.validator == "pattern" else "a non-empty name"
        return self._problem((*path, key), f"found key {show(key)}, expected {expected}", at_key=True)

    def _unknown_keys(self, e: Any, path: PathTuple) -> list[Problem]:
        allowed = list(_schema(e).get("properties", {}))
        if set(OPERATORS).issubset(allowed) and _is_record_ref(e.instance):
            return [self._problem(path, _RECORD_REF_HINT)]
        return [
            self._problem((*path, k), self._unknown_key(k, allowed), at_key=True)
            for k in e.instance
            if k not in allowed
        ]

    @staticmethod
    def _unknown_key(key: str, allowed: list[str]) -> str:
        if _json_schema_keyword(key, allowed):
            return f"unknown key '{key}'; " + _PARAM_HINT.format(keys=", ".join(PARAM_KEYS))
        return unknown("key", key, allowed, hint=_COMMA_HINT if " " in key else "")

    def _message(self, e: Any, path: PathTuple) -> str:
        """What is wrong with the one value at ``path``."""
        inst = e.instance
        v = e.validator
        vv = e.validator_value
        if v == "type":
            types = [vv] if isinstance(vv, str) else list(vv)
            msg = f"{found(inst)}, expected {joined_or(types)}"
            if not path and not self.base:
                msg += "; a domain file is a mapping that starts with 'version: 1'"
            if "string" in types and isinstance(inst, (int, float)):
                msg += "; put it in quotes to make it a string"
            return msg
        if v == "enum":
            msg = f"found {show(inst)}, expected "
            msg += f"one of {', '.join(bare(x) for x in vv)}" if len(vv) > 1 else bare(vv[0])
            suggestion = suggest(inst, [x for x in vv if isinstance(x, str)]) if isinstance(inst, str) else None
            return f"{msg}; {suggestion}" if suggestion else msg
        if v == "const":
            if path == ("version",):
                return f"found {show(inst)}, expected {vv} (the spec version pytest-sandtable reads)"
            return f"found {show(inst)}, expected {bare(vv)}"
        if v == "pattern":
            return f"found {show(inst)}, expected {_describe(vv)}"
        if v == "minLength":
            return "found an empty string, expected text" + _hint(self.base + path)
        if v == "minItems":
            what = "an empty array" if not inst else f"{len(inst)} item{'s' if len(inst) > 1 else ''}"
            return f"found {what}, expected at least {vv} item{'s' if vv > 1 else ''}"
        if v in ("minProperties", "maxProperties"):
            return self._key_count(e)
        if v == "minimum":
            return f"found {show(inst)}, expected at least {vv}"
        if v == "exclusiveMinimum":
            return f"found {show(inst)}, expected more than {vv}"
        if v == "maximum":
            return f"found {show(inst)}, expected at most {vv}"
        return str(e.message)

    def _key_count(self, e: Any) -> str:
        """Too few or too many keys; for a mapping of exactly one key (an op), which keys."""
        schema = _schema(e)
        props = list(schema.get("properties", {}))
        if schema.get("maxProperties") == 1 and props:
            keys = list(e.instance) if isinstance(e.instance, dict) else []
            what = quoted_and(keys) if keys else "an empty mapping"
            return f"found {what}, expected exactly one of {', '.join(props)}"
        return f"found an empty mapping, expected at least {e.validator_value} key"

    def _alternatives(self, e: Any, path: PathTuple) -> list[Problem]:
        """A value that fits none (``anyOf``) or not exactly one (``oneOf``) of the shapes."""
        if all(isinstance(b, dict) and set(b) == {"required"} for b in e.validator_value):
            return self._one_of_keys(e, path)
        inst = e.instance
        by_branch: dict[int, list[Any]] = {}
        for sub in e.context:
            by_branch.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
        fitting: list[list[Any]] = []
        expected: list[str] = []
        # a shape the value is not even the type of was not meant: it only names a type
        for _, errs in sorted(by_branch.items()):
            wrong_type = [s for s in errs if s.validator == "type" and not s.relative_path]
            if wrong_type:
                for s in wrong_type:
                    for t in [s.validator_value] if isinstance(s.validator_value, str) else s.validator_value:
                        if t not in expected:
                            expected.append(t)
            else:
                fitting.append(errs)
        if not fitting:
            return [self._problem(path, f"{found(inst)}, expected {joined_or(expected)}")]
        # the alternative the value went furthest into explains it best
        best = max(fitting, key=lambda errs: max(len(s.relative_path) for s in errs))
        return self.translate(best)

    def _one_of_keys(self, e: Any, path: PathTuple) -> list[Problem]:
        """Alternatives that each require one key: too few or too many of those keys."""
        inst = e.instance
        names = [str(b["required"][0]) for b in e.validator_value]
        present = [n for n in names if isinstance(inst, dict) and n in inst]
        if not present and self.typos.get(path, set()) & set(names):
            return []
        if not present:
            qualifier = "at least one" if e.validator == "anyOf" else "one"
            return [self._problem(path, f"missing required key: {qualifier} of {quoted(names)}")]
        return [self._problem(path, f"found {quoted_and(present)}, expected only one of {quoted(names)}")]
