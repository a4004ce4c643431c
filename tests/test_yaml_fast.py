"""The fast YAML path (libyaml's events) reads every file it accepts exactly as the
pure-Python path does: the same data, the same YAML 1.2 plain scalars, the same
positions (also in big files, and in files with anchors, aliases and merges), and it
hands every other file over."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from pytest_sandtable.domain import loader as _loader
from pytest_sandtable.domain import yaml_reader as _yaml
from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import load_domain_text

pytestmark = pytest.mark.skipif(_yaml._CParser is None, reason="PyYAML without libyaml")

ROOT = Path(__file__).resolve().parent.parent


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types all the way down (nan equals nan)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def both(text: str) -> tuple[_yaml.Document, _yaml.Document]:
    """The fast and the pure-Python reading of a text, every lazy position resolved."""
    fast = _yaml._fast_load(text, "d.yaml")
    assert fast is not None, "the fast path gave up"
    for path in list(fast.lazy):
        fast.pos((*path, "?"))
    assert not fast.lazy
    return fast, _yaml._slow_load(text, "d.yaml")


def assert_same_reading(text: str) -> None:
    fast, slow = both(text)
    assert same(fast.data, slow.data)
    assert not fast.composed
    assert fast.positions == slow.positions
    assert fast.key_positions == slow.key_positions
    assert slow.problems == []


def assert_same_reading_with_aliases(text: str) -> _yaml.Document:
    """As :func:`assert_same_reading`, for a file whose aliases and merges are positioned
    from its composed nodes: every position the pure-Python walk records, asked for."""
    fast, slow = both(text)
    assert fast.composed
    assert same(fast.data, slow.data)
    assert slow.problems == []
    for path, pos in slow.positions.items():
        assert fast.pos(path) == pos, path
    for path, pos in slow.key_positions.items():
        assert fast.key_pos(path) == pos, path
    return fast


PLAIN = {
    "yes": "yes", "no": "no", "on": "on", "off": "off", "y": "y", "Yes": "Yes",
    "true": True, "True": True, "TRUE": True, "false": False, "False": False,
    "010": 10, "0o17": 15, "0x1F": 31, "+7": 7, "-0": 0, "-12": -12, "0b101": "0b101",
    "1_000": "1_000", "-0x1F": "-0x1F", "0o8": "0o8",
    "1.5": 1.5, ".5": 0.5, "1.": 1.0, "1e3": 1000.0, "-2.5E-3": -0.0025, ".inf": math.inf,
    "-.Inf": -math.inf, ".NaN": math.nan, "1:30": "1:30", "10:30": "10:30",
    "2026-05-04": "2026-05-04", "2026-05-04T10:00:00Z": "2026-05-04T10:00:00Z",
    "~": None, "null": None, "Null": None, "NULL": None, "nul": "nul", "": None,
    "<<x": "<<x", "L-1001": "L-1001", "Atlanta GA": "Atlanta GA", "$load_id": "$load_id",
}


@pytest.mark.parametrize("plain", list(PLAIN))
def test_yaml_1_2_plain_scalars_are_the_same_on_both_paths(plain: str) -> None:
    text = f"block: {plain}\nflow: [{{ v: {plain} }}]\nlist: [{plain}]\nquoted: '{plain}'\n"
    fast, slow = both(text)
    assert same(fast.data, slow.data)
    want = PLAIN[plain]
    in_list = fast.data["list"] if plain else [None]  # `[]` is an empty list
    for got in (fast.data["block"], fast.data["flow"][0]["v"], *in_list):
        assert same(got, want), (plain, got)
    assert fast.data["quoted"] == plain


def test_the_fast_path_uses_the_loaders_own_resolvers() -> None:
    assert None not in _yaml._Loader.yaml_implicit_resolvers  # no wildcard resolvers to apply
    assert set(_yaml._RULES) == set(_yaml._Loader.yaml_implicit_resolvers)


SHAPES = """\
# a comment
version: 1
name: "shapes é ü 中文"
policy: |
  Line one.
    Indented line.

  After a blank line.
folded: >-
  folded
  text
keep: |+
  kept

strip: |2-
    two spaces of indent kept
plain multi: this plain scalar
  goes on here
'quoted key': {a: 1, "b c": [1, 2, {d: e}, {f: }]}
empty map: {}
empty list: []
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1, origin: Atlanta GA, max_rate: 2375,
          tags: [a, b], note: "x, y" }
      - load_id: L-2
        origin: Memphis TN
        nested:
          - [1, 2]
          - {k: v}
          -
            deep: yes
        text: |
          a block scalar
          inside a row
      - [not, a, mapping]
      - just a scalar
      -   { load_id: L-3 }   # a comment after
      - { a: , b, c: [d: ], "e": {f: } }
      -
      - - x
        - - y
          - {z: }
tasks:
- id: t1
  reference:
  - {call: x, args: {a: 1}}
  - say: "hi"
- id: t2
  x:
  y: {a, b}
  z: [a: b]
"""


def test_shapes_read_the_same_on_both_paths() -> None:
    assert_same_reading(SHAPES)


def test_crlf_and_explicit_document_markers() -> None:
    assert_same_reading("---\r\n" + SHAPES.replace("\n", "\r\n") + "...\r\n")


def test_the_example_domains_read_the_same_on_both_paths() -> None:
    files = sorted((ROOT / "example_domains").glob("*/sandtable.yaml"))
    assert files
    for f in files:
        assert_same_reading(f.read_text(encoding="utf-8"))


def test_positions_inside_list_items_are_found_when_asked_for() -> None:
    rows = "\n".join(f"      - {{ id: r{i}, a: {i}, b: [x, {{c: {i}}}] }}" for i in range(30))
    text = f"version: 1\nworld:\n  t:\n    key: id\n    rows:\n{rows}\ntools: [{{name: a}}, {{name: b}}]\n"
    assert_same_reading(text)
    fast = _yaml._fast_load(text, "d.yaml")
    assert fast is not None
    deep = ("world", "t", "rows", 29, "b", 1, "c")
    assert deep not in fast.positions  # not recorded until asked for
    assert fast.pos(deep) == _yaml._slow_load(text, "d.yaml").pos(deep) == _yaml.Pos(35, 38)


ALIASES = """\
version: 1
defaults: &defaults {status: available, equipment: dry_van}
one: &one 1
nested: &nested
  a: [1, &two 2, {b: *one}]
  c: *two
world:
  loads:
    key: id
    rows:
      - {id: L-1, <<: *defaults, rate: 10}
      - <<: [{status: booked, extra: [x, *one]}]
        id: L-2
        status: held
      - &row3 {id: L-3, ref: *nested}
      - *row3
      - - &inner {deep: [1, 2, {x: y}]}
        - *inner
copy: *nested
merged:
  <<: *nested
  c: own
  d: [*defaults, *one]
tools: [{name: t, opts: *defaults}]
"""


def test_anchors_aliases_and_merges_take_the_fast_path_and_read_the_same() -> None:
    fast = assert_same_reading_with_aliases(ALIASES)
    # the values PyYAML shares are shared here too
    assert fast.data["copy"] is fast.data["nested"]
    assert fast.data["world"]["loads"]["rows"][3] is fast.data["world"]["loads"]["rows"][2]
    assert list(fast.data["world"]["loads"]["rows"][1]) == ["status", "extra", "id"]
    # a list item without aliases keeps being positioned lazily, not by composing the file
    plain = "version: 1\nd: &d {a: 1}\nrows:\n  - {x: 1}\n  - {y: *d}\n"
    fast = _yaml._fast_load(plain, "d.yaml")
    assert fast is not None
    assert set(fast.lazy) == {("rows", 0)} and set(fast.composed) == {("rows", 1)}
    assert fast.pos(("rows", 0, "x")) == _yaml.Pos(4, 9)
    assert not fast._nodes
    assert fast.pos(("rows", 1, "y", "a")) == _yaml.Pos(2, 11)  # at the anchor's value
    assert fast.key_pos(("rows", 1, "y", "a")) == _yaml.Pos(2, 8)
    assert fast.pos(("rows", 1, "y")) == _yaml.Pos(2, 4)  # the alias is its anchor
    assert fast.key_pos(("rows", 1, "y")) == _yaml.Pos(5, 6)
    assert fast.pos(("rows", 1, "y", "nothing")) == _yaml.Pos(2, 4)  # the deepest that is there
    # only the two pieces the path crosses were composed: the item and the anchored value
    assert [plain[s[0][0] : s[0][1]] for s in fast._nodes] == ["{y: *d}", "&d {a: 1}"]


def test_a_merge_into_a_big_mapping_costs_no_reading_of_the_mapping() -> None:
    # a table that merges its defaults: its rows are positioned as in any table, and
    # only the keys the merge brings in are looked for in the anchored mapping
    rows = "\n".join(f"      - {{ id: r{i}, v: {i} }}" for i in range(2000))
    text = f"defaults: &t {{key: id, key_format: 'R-{{n}}'}}\nworld:\n  loads:\n    <<: *t\n    rows:\n{rows}\n"
    fast = assert_same_reading_with_aliases(text)
    assert set(fast.composed) == {("world", "loads", "key"), ("world", "loads", "key_format")}
    fast = _yaml._fast_load(text, "d.yaml")
    assert fast is not None
    assert fast.pos(("world", "loads", "rows", 1999, "v")) == _yaml.Pos(2005, 25)
    assert fast.key_pos(("world", "loads", "key_format")) == _yaml.Pos(1, 24)
    assert [text[s[0][0] : s[0][1]] for s in fast._nodes] == ["&t {key: id, key_format: 'R-{n}'}"]


@pytest.mark.parametrize(
    "text",
    [
        "a: &x {b: 1}\nc: *x\nd: {<<: *x, b: 2}\n",
        "a: &x 1\nb: [*x, *x]\n",
        "a: &x [1, 2]\nb:\n  - *x\n  - [*x]\n",
        "a: &x {k: v}\nb: &y {k: w, z: 1}\nc: {<<: [*y], k: own}\nd: {z: 2, <<: *x}\n",
        "a: {<<: {k: v}, j: 1}\n",
    ],
)
def test_alias_shapes_read_the_same_on_both_paths(text: str) -> None:
    assert_same_reading_with_aliases(text)


def test_the_alias_cap_is_counted_on_the_fast_path_as_on_the_pure_python_one() -> None:
    def bomb(levels: int) -> str:
        lines = [f"a0: &a0 [{', '.join(['lol'] * 10)}]"]
        lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
        return "\n".join(lines) + "\n"

    assert _yaml._fast_load(bomb(3), "d.yaml") is not None  # 12,330 values repeated
    # 123,440: refused on the fast path, in the pure-Python path's words
    for read in (_yaml._fast_load, _yaml._slow_load):
        with pytest.raises(DomainError) as e:
            read(bomb(4), "d.yaml")
        assert str(e.value) == (
            "d.yaml:5:45: a4[7]: alias *a3 repeats 11,111 values and takes the file past 100,000 values "
            "repeated by aliases, the most a domain file may have; write the values out, or use fewer aliases"
        )


@pytest.mark.parametrize(
    "item",
    [
        "{ id: r{i}, s: *s }",  # in a row, positioned lazily
        "{ id: r{i}, <<: *m }",  # merged into a row
        "{ id: r{i}, l: [1, {<<: [*m]}] }",
        "*m",  # a row that is an alias
    ],
)
def test_the_alias_past_the_cap_is_named_alike_on_both_paths(item: str) -> None:
    # each alias repeats 1,001 or 1,003 values: the 100th passes the cap
    rows = "\n".join("    - " + item.replace("{i}", str(i)) for i in range(120))
    many = ", ".join(["x"] * 1000)
    text = f"version: 1\ns: &s [{many}]\nm: &m {{a: [{many}]}}\nrows:\n{rows}\n"
    with pytest.raises(DomainError) as fast:
        _yaml._fast_load(text, "d.yaml")
    with pytest.raises(DomainError) as slow:
        _yaml._slow_load(text, "d.yaml")
    assert str(fast.value) == str(slow.value)
    assert "takes the file past 100,000 values repeated by aliases" in str(fast.value)


@pytest.mark.parametrize(
    "text",
    [
        "a: &x [*x]\n",  # a recursive alias
        "a: *x\n",  # an undefined one
        "a: &x 1\nb: &x 2\n",  # an anchor defined twice
        "&x a: 1\n",  # an anchor on a key
        "a: 1\n*x : 2\n",
        "a: &x 1\nb: {<<: *x}\n",  # a merge of what is not a mapping
        "a: {<<: 1}\n",
        # several merges in one mapping, or a merge of a merge: PyYAML's versions differ
        "a: &x {kk: v}\nb: &y {kk: w}\nc: {<<: [*x, *y]}\n",
        "a: &x {kk: v}\nb: &y {kk: w}\nc: {<<: *x, <<: *y}\n",
        "a: &x {kk: v}\nb: &y {<<: *x, kk: w}\nc: {<<: *y}\n",
        "a: 1\na: 2\n",  # duplicate keys
        "1: a\n",  # a key that is not a string
        "true: a\n",
        "? [a]\n: b\n",
        "a: !!str 1\n",  # tags
        "a: !!binary aGVsbG8=\n",
        "%YAML 1.1\n---\na: 1\n",  # directives
        "a: 1\n---\nb: 2\n",  # two documents
        "- a\n- b\n",  # not a mapping
        "",  # empty
        "# only a comment\n",
        "a: [1, 2\n",  # syntax errors
        "a:\n\t- b\n",
        "a: b\t\n",  # libyaml takes a tab for a space, PyYAML does not
        "a\ufeff: b\n",  # nor does PyYAML count a byte order mark as a column
        "a: >#c\n  b\n",  # nor read a comment right after a block scalar's indicator
        "? |\n  k\n: v\n",
        "a: {b: why?}\n",  # nor end a plain scalar at `?` inside `{ }` and `[ ]`
        "a: [{b: why?}]\n",
        "a: {b?: c}\n",
        "a: " + "[" * 70 + "]" * 70 + "\n",  # nested deeper than the fast path goes
        "a: <<\n",
        "a: {b: }\n",  # libyaml places these empty values elsewhere
        "a: 1\n? b",
    ],
)
def test_the_fast_path_hands_over_what_it_does_not_handle(text: str) -> None:
    assert _yaml._fast_load(text, "d.yaml") is None


def test_problems_in_big_tables_are_worded_and_placed_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [f'      - {{ load_id: L-{i}, origin: "Town {i}", max_rate: {1000 + i} }}' for i in range(300)]
    rows[120] = "      - { load_id: L-5, origin: Elsewhere, max_rate: 1 }"  # duplicate key
    rows[200] = "      - { load_id: L-200, orign: Typo, max_rate: 1 }"  # not a field of a closed table
    rows[250] = "      - { origin: Nowhere }"  # no key
    rows[260] = "      - just text"
    rows[270] = '      - { load_id: L-270, "": 1 }'  # an empty field name
    text = (
        "version: 1\nname: big\nworld:\n  loads:\n    key: load_id\n"
        "    fields: [load_id, origin, max_rate]\n    rows:\n" + "\n".join(rows) + "\n"
    )

    def problems() -> list[str]:
        with pytest.raises(DomainError) as e:
            load_domain_text(text, "big.sandtable.yaml")
        return [str(p) for p in e.value.problems]

    fast = problems()
    # as before: the pure-Python YAML path, and the schema over every row
    monkeypatch.setattr(_yaml, "_fast_load", lambda text, filename: None)
    monkeypatch.setattr(_loader, "_without_plain_rows", lambda data: data)
    assert fast == problems()
    assert [p for p in fast if "rows[" in p] == [
        "big.sandtable.yaml:128:20: world.loads.rows[120].load_id: duplicate key 'L-5' in table loads"
        " (first at line 13)",
        "big.sandtable.yaml:208:27: world.loads.rows[200].orign: unknown field 'orign' of table loads;"
        " did you mean 'origin'?",
        "big.sandtable.yaml:258:9: world.loads.rows[250]: missing the key field 'load_id' of table loads",
        "big.sandtable.yaml:268:9: world.loads.rows[260]: found string 'just text', expected object",
        'big.sandtable.yaml:278:27: world.loads.rows[270][""]: found key \'\', expected a non-empty name',
        'big.sandtable.yaml:278:27: world.loads.rows[270][""]: unknown field \'\' of table loads;'
        " expected one of: load_id, origin, max_rate",
    ]
