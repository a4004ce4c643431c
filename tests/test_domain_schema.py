"""The shipped JSON Schema of domain files: the `schema` command that points editors at
it, a description on every key and valid examples (what an editor shows on hover), and
that it still accepts every domain we ship and test with.

The schema is what the loader validates every domain file against (its first pass,
before the cross-reference checks), so the command must name that very file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]
import pytest
from _domains import BOOKS_L1001, DESK
from _sandtable_shop import SHOP

from pytest_sandtable.domain.loader import domain_schema, load_domain_text
from pytest_sandtable.domain.yaml_reader import load_yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "pytest_sandtable" / "schemas" / "domain.schema.json"

# the keys of issue 12: declared and shared tags, pending items, reactive script lines,
# say_unknown and expect_nothing
AUTHORED = DESK.replace("name: freight\n", """name: freight
tags:
  booking: Booking loads
  refusals: { description: Requests to refuse, shared: true }
""") + """\
tasks:
  - id: book
    tags: [booking]
    pending: true
    user:
      opening: "About L-1001."
      script:
        - { say: "MC 100101.", when: { reply_includes: "MC number" } }
        - { say: "Deal.", when: { called: verify_carrier } }
      say_unknown: "I don't have that."
""" + BOOKS_L1001 + """\
  - id: refuse
    tags: [refusals]
    expect_nothing: true
    user: { opening: "Book L-1001 at 3,000." }
    expect:
      not_called: [book_load]
"""


def run(cwd: Path, *args: str) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "pytest_sandtable", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def test_schema_prints_the_absolute_path_of_the_schema_the_loader_uses(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, "schema")
    assert (code, out, err) == (0, f"{SCHEMA}\n", "")
    path = Path(out.rstrip("\n"))
    assert path.is_absolute()
    assert json.loads(path.read_text(encoding="utf-8")) == domain_schema()


def test_schema_print_prints_the_file_as_it_is(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, "schema", "--print")
    assert (code, err) == (0, "")
    assert out == SCHEMA.read_text(encoding="utf-8")


def test_schema_takes_no_path(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, "schema", "sandtable.yaml")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == "python -m pytest_sandtable: error: unrecognized arguments: sandtable.yaml"


# --------------------------------------------------------------------------- hover text and examples


_ONE = ("items", "additionalProperties", "propertyNames", "if", "then", "else", "not", "contains")
_MAP = ("properties", "patternProperties", "$defs")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")


def _subschemas(node: Any, pointer: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema object in ``node`` (itself included) with its JSON pointer, following
    the keywords that hold schemas: never into `examples`, `default` or `enum` (values)."""
    if not isinstance(node, dict):
        return  # `true` / `false`
    yield pointer, node
    for key in _ONE:
        if key in node:
            yield from _subschemas(node[key], f"{pointer}/{key}")
    for key in _MAP:
        for name, sub in node.get(key, {}).items():
            yield from _subschemas(sub, f"{pointer}/{key}/{name}")
    for key in _LIST:
        for i, sub in enumerate(node.get(key, [])):
            yield from _subschemas(sub, f"{pointer}/{key}/{i}")


def _keys(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(pointer, schema) of every key a domain file can hold, each entry of a `properties`,
    and of every definition; not the properties of an `if`, which picks an invariant's
    kind (the `kind` a reader hovers is described where it is written)."""
    for pointer, node in _subschemas(schema):
        if not pointer.endswith("/if"):
            yield from ((f"{pointer}/properties/{name}", sub) for name, sub in node.get("properties", {}).items())
    yield from ((f"/$defs/{name}", sub) for name, sub in schema["$defs"].items())


def test_every_key_and_definition_has_a_description() -> None:
    keys = list(_keys(domain_schema()))
    assert len(keys) > 200  # the walk reaches every key
    assert [p for p, sub in keys if not (isinstance(sub.get("description"), str) and sub["description"])] == []


def test_ops_conditions_rules_and_expectations_carry_examples() -> None:
    defs = domain_schema()["$defs"]
    without = [name for name in ("op", "givenOp", "conditions", "operators", "check", "invariant", "invariant_before",
                                 "invariant_require", "invariant_limit", "invariant_match", "invariant_never",
                                 "invariant_never_disclose", "expect", "stateEntry", "callMatcher", "scriptLine",
                                 "scriptCondition", "referenceStep") if not defs[name].get("examples")]
    assert without == []


def test_every_example_is_valid_where_it_stands() -> None:
    """An example a reader copies from a hover must load: each is valid against the
    schema it is the example of (references resolved in the whole schema)."""
    root = jsonschema.Draft202012Validator(domain_schema())
    checked = 0
    for pointer, node in _subschemas(domain_schema()):
        for example in node.get("examples", []):
            errors = [e.message for e in root.evolve(schema=node).iter_errors(example)]
            assert (pointer, errors) == (pointer, [])
            checked += 1
    assert checked > 50


def test_an_example_that_breaks_its_schema_is_caught() -> None:
    """The check above can fail: a limit rule without a bound is no example of one."""
    root = jsonschema.Draft202012Validator(domain_schema())
    rule = domain_schema()["$defs"]["invariant"]
    bad = {"id": "rate-ceiling", "kind": "limit", "tool": "book_load", "arg": "rate"}
    assert list(root.evolve(schema=rule).iter_errors(bad)) != []


# --------------------------------------------------------------------------- the domains we ship and test with


def _domain_texts() -> list[Any]:
    examples = sorted((ROOT / "example_domains").rglob("*sandtable.yaml"))
    assert len(examples) >= 2
    texts = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in examples]
    texts += [("tests/_sandtable_shop.py:SHOP", SHOP), ("AUTHORED", AUTHORED)]
    return [pytest.param(name, text, id=name) for name, text in texts]


@pytest.mark.parametrize(("name", "text"), _domain_texts())
def test_the_schema_accepts_every_shipped_and_test_domain(name: str, text: str) -> None:
    data = load_yaml(text, name).data
    errors = [f"{e.json_path}: {e.message}" for e in jsonschema.Draft202012Validator(domain_schema()).iter_errors(data)]
    assert errors == []
    load_domain_text(text, name)  # and the loader, which validates with it first, takes them
