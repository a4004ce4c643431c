"""Property: whatever a domain file holds, loading it gives a Domain or a list of
problems (DomainError), never another exception, and every problem is one line of
printable text.

The files are the bundled example domains, mutated the ways a hostile or careless
user would: bytes flipped, characters and lines inserted, deleted, repeated and
re-indented, YAML tags on values of the wrong kind, control characters, surrogate and
out-of-range escapes, huge integers and strings, deep nesting, anchors, aliases and
alias bombs. Several mutations are stacked on one file.

CI runs a bounded, derandomized number of examples (the same ones every run). A longer
run: ``SANDTABLE_FUZZ_EXAMPLES=20000 python -m pytest tests/test_fuzz_domain.py``
(tests/README.md has what it measured).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import load_domain
from pytest_sandtable.domain.model import Domain

ROOT = Path(__file__).resolve().parent.parent
SEEDS = [
    (ROOT / "example_domains" / name / "sandtable.yaml").read_text(encoding="utf-8") for name in ("freight", "clinic")
]
UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# CI: a bounded number of examples, the same on every run (derandomized), so that CI
# never fails by chance; a longer run (the variable set) draws new examples each time.
LONG_RUN = "SANDTABLE_FUZZ_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("SANDTABLE_FUZZ_EXAMPLES", "200"))

# characters with a meaning to YAML, to a terminal, or to nobody
CHARS = [
    *"\x00\x01\x07\x08\x0b\x0c\x0e\x1b\x7f\x80\x85\x9b\x9f\xa0",
    *"\t\r\n \u2028\u2029\ufeff\ufffe\uffff\U0001f600",
    *":-?,[]{}#&*!|>'\"%@`\\",
]
TAGS = [
    "!!bool", "!!int", "!!float", "!!timestamp", "!!binary", "!!null", "!!str", "!!seq",
    "!!map", "!!set", "!!omap", "!!pairs", "!!merge", "!!value", "!!yaml",
    "!!python/object:os.system", "!foo", "!<tag:yaml.org,2002:int>", "!", "!!",
]  # fmt: skip
SCALARS = [
    '"\\ud800"', '"\\udfff x"', '"\\ud83d\\ude00"', '"\\ud83d"', '"\\UFFFFFFFF"', '"\\U00110000"',
    '"\\x00\\e\\x7f"', '"\\q"', "'", '"', "1" * 5000, "0x" + "f" * 4000, "0o" + "7" * 5000,
    "-" + "9" * 4301, "1e99999", ".nan", "-.inf", "0b101", "1_000", "~", "", "{}", "[]",
    "x" * 200_000, "*nope", "&a", "&a x", "<<", "? x", "--- x", "... x", "%YAML 1.1",
    "2026-13-45", "!!timestamp 2026-02-30", "!!int 1:30", "!!float 1:30.5", "!!binary ü",
    "!!set {a, b}", "!!omap [a]", "!!pairs [{a: 1, b: 2}]", "!!str [a]", "!!int {}",
]  # fmt: skip


def _at(draw: st.DrawFn, text: str) -> int:
    return draw(st.integers(0, len(text)))


def _insert_char(draw: st.DrawFn, text: str) -> str:
    i = _at(draw, text)
    c = draw(st.sampled_from(CHARS) | st.characters(codec="utf-8"))
    return text[:i] + c * draw(st.integers(1, 3)) + text[i:]


def _delete_span(draw: st.DrawFn, text: str) -> str:
    i = _at(draw, text)
    return text[:i] + text[i + draw(st.integers(1, 40)) :]


def _line_op(draw: st.DrawFn, text: str) -> str:
    lines = text.split("\n")
    i = draw(st.integers(0, len(lines) - 1))
    j = draw(st.integers(0, len(lines) - 1))
    op = draw(st.sampled_from(["delete", "repeat", "move", "indent", "dedent"]))
    if op == "delete":
        del lines[i]
    elif op == "repeat":
        lines.insert(j, lines[i])
    elif op == "move":
        lines.insert(j, lines.pop(i))
    elif op == "indent":
        lines[i] = " " * draw(st.integers(1, 5)) + lines[i]
    else:
        lines[i] = lines[i].lstrip(" ")
    return "\n".join(lines)


def _value_starts(text: str) -> list[int]:
    """Where the values of `key: value` pairs and list items start."""
    out = []
    start = text.find(": ")
    while start >= 0:
        out.append(start + 2)
        start = text.find(": ", start + 2)
    start = text.find("- ")
    while start >= 0:
        out.append(start + 2)
        start = text.find("- ", start + 2)
    return out or [0]


def _tag_value(draw: st.DrawFn, text: str) -> str:
    i = draw(st.sampled_from(_value_starts(text)))
    return text[:i] + draw(st.sampled_from(TAGS)) + " " + text[i:]


def _replace_value(draw: st.DrawFn, text: str) -> str:
    i = draw(st.sampled_from(_value_starts(text)))
    end = text.find("\n", i)
    end = len(text) if end < 0 else end
    if draw(st.booleans()):  # within a flow mapping, up to the next comma
        comma = text.find(",", i, end)
        end = comma if comma >= 0 else end
    value = draw(st.sampled_from(SCALARS) | st.text(max_size=20))
    return text[:i] + value + text[end:]


def _value_at(text: str, i: int) -> tuple[int, int]:
    """The span of the value that starts at ``i``: to the end of its line, or of its
    flow item (the next `,` or closing bracket)."""
    end = i
    while end < len(text) and text[end] not in "\n,}]":
        end += 1
    return i, end


def _swap_values(draw: st.DrawFn, text: str) -> str:
    """Two values trade places: a list where a table name was, a number for a tool."""
    starts = _value_starts(text)
    a = _value_at(text, draw(st.sampled_from(starts)))
    b = _value_at(text, draw(st.sampled_from(starts)))
    if a[0] > b[0]:
        a, b = b, a
    if a[1] > b[0]:  # overlapping: leave the text as it is
        return text
    return text[: a[0]] + text[b[0] : b[1]] + text[a[1] : b[0]] + text[a[0] : a[1]] + text[b[1] :]


def _alias_bomb(draw: st.DrawFn, text: str) -> str:
    """A nest of `depth` levels of `width` aliases each, as a new value."""
    depth, width = draw(st.integers(1, 8)), draw(st.integers(1, 10))
    lines = [f"b0: &b0 [{', '.join(['lol'] * width)}]"]
    for d in range(1, depth + 1):
        lines.append(f"b{d}: &b{d} [{', '.join([f'*b{d - 1}'] * width)}]")
    bomb = "{ " + ", ".join(lines) + " }"
    i = draw(st.sampled_from(_value_starts(text)))
    end = text.find("\n", i)
    return text[:i] + bomb + text[end if end >= 0 else len(text) :]


def _anchor_and_alias(draw: st.DrawFn, text: str) -> str:
    """An anchor on one value and an alias (or a merge) of it in place of another."""
    starts = _value_starts(text)
    i, j = sorted((draw(st.sampled_from(starts)), draw(st.sampled_from(starts))))
    use = draw(st.sampled_from(["*a", "<<: *a", "*a, *a", "[*a, *a]"]))
    return text[:i] + "&a " + text[i:j] + use + " " + text[j:]


def _nest(draw: st.DrawFn, text: str) -> str:
    depth = draw(st.integers(1, 3000))
    nested = "[" * depth + "x" + "]" * depth if draw(st.booleans()) else "{a: " * depth + "x" + "}" * depth
    i = draw(st.sampled_from(_value_starts(text)))
    end = text.find("\n", i)
    return text[:i] + nested + text[end if end >= 0 else len(text) :]


Mutation = Callable[[st.DrawFn, str], str]
MUTATIONS: list[Mutation] = [
    _insert_char,
    _delete_span,
    _line_op,
    _tag_value,
    _replace_value,
    _swap_values,
    _alias_bomb,
    _anchor_and_alias,
    _nest,
]


@st.composite
def domain_files(draw: st.DrawFn) -> bytes:
    """An example domain with one to four mutations, then perhaps a few bytes changed."""
    text = draw(st.sampled_from(SEEDS))
    for mutation in draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=4)):
        text = mutation(draw, text)
    data = bytearray(text.encode("utf-8"))
    for _ in range(draw(st.integers(0, 2)) if draw(st.integers(0, 3)) == 0 else 0):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


@pytest.fixture(scope="module")
def domain_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "sandtable.yaml"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG_RUN,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=domain_files())
def test_a_mutated_domain_file_is_a_domain_or_problems(domain_path: Path, data: bytes) -> None:
    domain_path.write_bytes(data)
    try:
        domain = load_domain(domain_path)
    except DomainError as e:
        assert e.problems
        for problem in e.problems:
            line = str(problem)
            assert not UNPRINTABLE.search(line), line  # one line, no terminal control
            line.encode("utf-8")  # no lone surrogate: the terminal and results.json can take it
    else:
        assert isinstance(domain, Domain)
