"""Hostile domain files (issue 8): each is a problem at its file, line and column, in
the usual form, never an exception out of ``validate`` or pytest's collection.

Wrong-kind YAML tags, control characters, lone surrogates, huge integers, files and
values over the documented limits, alias bombs, and tags that are pytest markers.
The property-based fuzz over mutated files is in test_fuzz_domain.py.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

import pytest
from _domains import BOOKS_L1001, DESK

from pytest_sandtable.__main__ import main
from pytest_sandtable.domain import yaml_reader as _yaml
from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import MAX_FILE_BYTES, load_domain, load_domain_text
from pytest_sandtable.domain.model import RESERVED_TAGS

pytest_plugins = ["pytester"]

DOMAIN = DESK + """\
tasks:
  - id: book-happy-path
    tags: [booking]
    user: { opening: "Hi, MC 100101 about L-1001.", script: ["Deal."] }
""" + BOOKS_L1001

ROOT = Path(__file__).resolve().parent.parent
FREIGHT = ROOT / "example_domains" / "freight" / "sandtable.yaml"


def edit(old: str, new: str, text: str = DOMAIN) -> str:
    """``text`` with one exact piece replaced."""
    assert text.count(old) == 1, old
    return text.replace(old, new)


def where(text: str, piece: str) -> str:
    """``LINE:COL`` of the first ``piece`` in ``text``, 1-based."""
    at = text.index(piece)
    line = text.count("\n", 0, at) + 1
    return f"{line}:{at - (text.rfind(chr(10), 0, at) + 1) + 1}"


def problems(text: str) -> list[str]:
    """The problem lines a user sees for a domain text."""
    with pytest.raises(DomainError) as info:
        load_domain_text(text, "sandtable.yaml")
    return str(info.value).splitlines()


def both_paths(text: str) -> list[str]:
    """The problem lines of the YAML step alone, which must be the same whether the
    libyaml fast path is tried first (as loading does) or the pure-Python path reads
    the file; the fast path takes none of these files (past the alias cap it words the
    problem itself, and load_yaml's lines are its)."""
    with suppress(DomainError):
        assert _yaml._fast_load(text, "sandtable.yaml") is None
    lines = []
    for read in (_yaml.load_yaml, _yaml._slow_load):
        with pytest.raises(DomainError) as info:
            read(text, "sandtable.yaml")
        lines.append(str(info.value).splitlines())
    assert lines[0] == lines[1]
    return lines[0]


# --------------------------------------------------------------------------- 1. tags on values of the wrong kind

_TAGGED = {
    "!!bool mini": "found !!bool 'mini', expected true or false",
    "!!bool ''": "found !!bool '', expected true or false",
    "!!int x": "found !!int 'x', expected an integer",
    "!!int ''": "found !!int '', expected an integer",
    "!!float x": "found !!float 'x', expected a number",
    "!!float ''": "found !!float '', expected a number",
    "!!timestamp x": "found !!timestamp 'x', expected a date or time such as 2026-05-04",
    "!!timestamp 2026-02-30": "found !!timestamp '2026-02-30', expected a date or time such as 2026-05-04",
}


@pytest.mark.parametrize("tagged", list(_TAGGED))
def test_a_tag_on_a_value_of_the_wrong_kind_is_a_problem_at_the_value(tagged: str) -> None:
    text = edit("name: freight", f"name: {tagged}")
    want = f"sandtable.yaml:2:7: name: {_TAGGED[tagged]}; remove the tag to read the value as written"
    assert both_paths(text) == [want]
    assert problems(text) == [want]


def test_a_wrongly_tagged_value_in_a_seed_row_and_a_key() -> None:
    text = edit("name: Blue Ridge Haulers }", "name: !!int Blue Ridge Haulers, !!bool on-time: 1 }")
    assert problems(text) == [
        f"sandtable.yaml:{where(text, '!!int')}: world.carriers.rows[0].name: found !!int 'Blue Ridge Haulers', "
        "expected an integer; remove the tag to read the value as written",
        f"sandtable.yaml:{where(text, '!!bool')}: world.carriers.rows[0]: found !!bool 'on-time', "
        "expected true or false; remove the tag to read the value as written",
    ]


def test_validate_words_the_issues_reproduction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # sed 's/^name: freight/name: !!bool mini/' example_domains/freight/sandtable.yaml
    freight = FREIGHT.read_text(encoding="utf-8")
    path = tmp_path / "t.sandtable.yaml"
    path.write_text(edit("\nname: freight\n", "\nname: !!bool mini\n", freight), encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    line = freight.splitlines().index("name: freight") + 1
    assert capsys.readouterr().out.splitlines() == [
        f"{path}:{line}:7: name: found !!bool 'mini', expected true or false; "
        "remove the tag to read the value as written"
    ]


def test_an_integer_of_more_than_4300_digits_is_a_problem() -> None:
    too_many = (
        "found an integer of more than 4,300 digits, expected at most 4,300; put it in quotes to keep it as text"
    )
    for written in ("1" * 4301, "-" + "9" * 5000, "0x" + "f" * 3600, "!!int " + "1" * 4301, "!!int 1_" + "0" * 4300):
        text = edit("max_rate: 2350", f"max_rate: {written}")
        assert problems(text) == [f"sandtable.yaml:{where(text, written)}: world.loads.rows[0].max_rate: {too_many}"]
    # the longest integer Python turns into text loads
    assert load_domain_text(edit("max_rate: 2350", "max_rate: " + "9" * 4300)).tables["loads"].rows[0]["max_rate"]


# --------------------------------------------------------------------------- 2. control characters


@pytest.mark.parametrize(
    ("char", "kind", "escape"),
    [
        ("\x00", "control character U+0000", "\\x00"),
        ("\x0c", "control character U+000C", "\\x0c"),
        ("\x1b", "control character U+001B", "\\x1b"),
        ("\x7f", "control character U+007F", "\\x7f"),
        ("\x9b", "control character U+009B", "\\x9b"),
        ("\ufffe", "character U+FFFE", "\\ufffe"),
    ],
)
def test_a_control_character_is_a_problem_at_its_line_and_column(char: str, kind: str, escape: str) -> None:
    text = edit("name: Blue Ridge Haulers", f"name: Blue Ridge{char} Haulers")
    want = (
        f"sandtable.yaml:{where(text, char)}: invalid YAML: found {kind}, which YAML does not allow in a file; "
        f'to put it in a value, write it as an escape in a double-quoted string: "{escape}"'
    )
    assert both_paths(text) == [want]
    assert problems(text) == [want]


def test_a_control_character_written_as_an_escape_loads() -> None:
    d = load_domain_text(edit("name: Blue Ridge Haulers", 'name: "Blue Ridge\\e Haulers"'))
    assert d.tables["carriers"].rows[0]["name"] == "Blue Ridge\x1b Haulers"


def test_validate_and_pytest_report_a_control_character_and_run_the_other_domains(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.path.joinpath("good").mkdir()
    pytester.path.joinpath("good", "sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    for name, text in {
        "nul": edit("name: freight", "name: fr\x00eight"),
        "tagged": edit("name: freight", "name: !!bool mini"),
        "surrogate": edit("name: freight", 'name: "fr\\ud800eight"'),
    }.items():
        pytester.path.joinpath(name).mkdir()
        pytester.path.joinpath(name, "sandtable.yaml").write_text(text, encoding="utf-8")
    lines = [
        "nul/sandtable.yaml:2:9: invalid YAML: found control character U+0000, which YAML does not allow in a file; "
        'to put it in a value, write it as an escape in a double-quoted string: "\\x00"',
        "surrogate/sandtable.yaml:2:7: name: found \\ud800, half of a UTF-16 surrogate pair and not a character "
        '(it cannot be written to results.json); write the character itself, or a \\U escape such as "\\U0001F600"',
        "tagged/sandtable.yaml:2:7: name: found !!bool 'mini', expected true or false; "
        "remove the tag to read the value as written",
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(pytester.path)
        assert main(["validate", "."]) == 2
    assert capsys.readouterr().out.splitlines() == [
        f"ok: {Path('good', 'sandtable.yaml')} (1 task, 2 tools, 1 invariant)",
        *lines,
    ]
    result = pytester.runpytest("--sandtable-agent=reference")
    result.assert_outcomes(passed=1, errors=3)
    for line in lines:
        folder = line.split("/")[0]
        result.stdout.fnmatch_lines([f"*_ ERROR collecting {folder}/sandtable.yaml _*", line], consecutive=True)
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*Interrupted*")


# --------------------------------------------------------------------------- 3. surrogates


def test_a_lone_surrogate_is_a_problem_at_its_line() -> None:
    want = (
        "half of a UTF-16 surrogate pair and not a character (it cannot be written to results.json); "
        'write the character itself, or a \\U escape such as "\\U0001F600"'
    )
    text = edit("name: Blue Ridge Haulers", 'name: "Blue Ridge \\udc00 Haulers"')
    line_col = where(text, '"Blue')
    assert both_paths(text) == [f"sandtable.yaml:{line_col}: world.carriers.rows[0].name: found \\udc00, {want}"]
    text = edit("name: Blue Ridge Haulers", '"\\ud800": Blue Ridge Haulers')
    key = '"\\ud800"'
    assert problems(text) == [f"sandtable.yaml:{where(text, key)}: world.carriers.rows[0]: found \\ud800, {want}"]


def test_a_surrogate_pair_is_the_character_it_stands_for() -> None:
    d = load_domain_text(edit("name: Blue Ridge Haulers", 'name: "Blue Ridge \\ud83d\\ude9a Haulers"'))
    assert d.tables["carriers"].rows[0]["name"] == "Blue Ridge \U0001f69a Haulers"


def test_an_escape_past_the_last_unicode_character_is_a_problem() -> None:
    for escape in ("\\UFFFFFFFF", "\\U00110000"):
        text = edit("name: Blue Ridge Haulers", f'name: "Blue {escape}"')
        line = text.count("\n", 0, text.index(escape)) + 1
        digits = where(text, escape[2:])  # the scanner stops at the escape's digits
        assert both_paths(text) == [
            f"sandtable.yaml:{digits}: invalid YAML: found an escape past the last Unicode character, "
            f"\\U0010FFFF (while scanning a double-quoted scalar that starts at line {line})"
        ]


def test_a_lone_surrogate_in_text_given_as_a_string_is_a_problem() -> None:
    # load_domain_text takes a str, which may hold one raw (a file, read as UTF-8, cannot)
    assert problems(edit("name: freight", "name: fr\ud800eight")) == [
        "sandtable.yaml:2:9: invalid YAML: found \\ud800, half of a UTF-16 surrogate pair and not a character "
        '(it cannot be written to results.json); write the character itself, or a \\U escape such as "\\U0001F600"'
    ]


def test_a_problem_line_escapes_what_a_terminal_line_cannot_hold() -> None:
    # a key written with escapes for a newline, ESC and a right-to-left override
    text = edit("    key: mc_number\n", '    key: mc_number\n    "a\\nb\\e[2J\\u202e": 1\n')
    key = '"a'
    assert problems(text) == [
        f"sandtable.yaml:{where(text, key)}: world.carriers[\"a\\x0ab\\x1b[2J\\u202e\"]: "
        "unknown key 'a\\x0ab\\x1b[2J\\u202e'; expected one of: key, key_format, rows, fields"
    ]


# --------------------------------------------------------------------------- 9. limits


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "sandtable.yaml"
    with path.open("wb") as f:  # sparse: it costs no disk, and reading it would cost 64 MB
        f.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(DomainError) as info:
        load_domain(path)
    assert str(info.value) == (
        f"{path}: the file is 67,108,865 bytes; a domain file may be at most 64 MB (67,108,864 bytes)"
    )


def _bomb(levels: int, width: int = 10) -> str:
    """A seed row field holding ``levels`` nested levels of ``width`` aliases each."""
    lines = [f"        a0: &a0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        lines.append(f"        a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines)


def test_an_alias_bomb_is_refused_at_the_alias_that_passes_the_cap() -> None:
    text = edit(
        '      - { mc_number: "100101", name: Blue Ridge Haulers }',
        '      - mc_number: "100101"\n' + _bomb(7),
    )
    assert len(text.encode()) - len(DOMAIN.encode()) < 800
    # the aliases in a1, a2 and a3 repeat 110 + 1,110 + 11,110 values, and each of a3 in
    # a4 11,111 more: the eighth takes the file past 100,000
    at = text.index("a4: &a4 [") + len("a4: &a4 [") + 7 * len("*a3, ")
    line = text.count("\n", 0, at) + 1
    col = at - text.rfind("\n", 0, at)
    assert both_paths(text) == [
        f"sandtable.yaml:{line}:{col}: world.carriers.rows[0].a4[7]: alias *a3 repeats 11,111 values and takes "
        "the file past 100,000 values repeated by aliases, the most a domain file may have; "
        "write the values out, or use fewer aliases"
    ]


def test_light_alias_use_loads() -> None:
    row = "      - { <<: *base, load_id: L-%d }"
    rows = "\n".join(row % i for i in range(2000, 4000))
    text = edit(
        "      - { load_id: L-1001, max_rate: 2350, status: available }",
        "      - &base { load_id: L-1001, max_rate: 2350, status: available }\n" + rows,
    )
    d = load_domain_text(text)
    assert len(d.tables["loads"].rows) == 2001
    assert d.tables["loads"].rows[-1] == {"load_id": "L-3999", "max_rate": 2350, "status": "available"}
    # a nest of three levels of ten loads too (12,330 values repeated)
    load_domain_text(
        edit('      - { mc_number: "100101", name: Blue Ridge Haulers }', '      - mc_number: "100101"\n' + _bomb(3))
    )


def test_a_problem_never_repeats_a_10_mb_value_in_full() -> None:
    big = "Z" * 10_000_000
    text = edit("version: 1", f"version: {big}")
    assert problems(text) == [
        "sandtable.yaml:1:10: version: found string 'ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ...' "
        "(10,000,000 characters), expected integer"
    ]
    # names are clipped longer; 1 MB of them, as the pure-Python path reads them at 1 s a MB
    big = "Z" * 1_000_000
    clipped = "Z" * 100 + "... (1,000,000 characters)"
    text = edit("  - get: { table: carriers, key: $mc_number }", f"  - get: {{ table: {big}, key: $mc_number }}")
    assert problems(text) == [
        f"sandtable.yaml:{where(text, big)}: tools[0].ops[0].get.table: unknown table '{clipped}'; "
        "expected one of: carriers, loads"
    ]
    text = edit("    key: mc_number\n", f"    key: mc_number\n    ? {big}\n    : 1\n")  # a plain key: 1,024 at most
    assert problems(text) == [
        f"sandtable.yaml:{where(text, big)}: world.carriers[\"{clipped}\"]: unknown key '{clipped}'; "
        "expected one of: key, key_format, rows, fields"
    ]


# --------------------------------------------------------------------------- 11. smaller


@pytest.mark.parametrize(("written", "shown"), [(".nan", "nan"), (".inf", "inf"), ("-.inf", "-inf")])
def test_nan_or_inf_for_a_string_param_in_a_reference_is_a_problem(written: str, shown: str) -> None:
    # as at run time, where such an argument is refused, not turned into the text "nan"
    text = edit('args: { mc_number: "100101" }', f"args: {{ mc_number: {written} }}")
    assert problems(text) == [
        f"sandtable.yaml:{where(text, written + ' }')}: tasks[0].reference[0].args.mc_number: "
        f"found number {shown}, expected string; put it in quotes to make it a string"
    ]




@pytest.mark.parametrize("marker", sorted(RESERVED_TAGS))
def test_a_tag_that_is_a_pytest_marker_is_a_problem(marker: str) -> None:
    text = edit("tags: [booking]", f"tags: [booking, {marker}]")
    assert problems(text) == [
        f"sandtable.yaml:{where(text, marker + ']')}: tasks[0].tags[1]: "
        f"'{marker}' is a pytest marker with its own meaning; rename the tag"
    ]


def test_a_declared_tag_that_is_a_pytest_marker_is_a_problem() -> None:
    text = edit("tasks:\n", "tags:\n  booking: Booking loads.\n  skip: Not yet.\ntasks:\n")
    text = edit("tags: [booking]", "tags: [skip]", text)
    assert problems(text) == [
        f"sandtable.yaml:{where(text, 'skip:')}: tags.skip: 'skip' is a pytest marker with its own meaning; "
        "rename the tag",
        f"sandtable.yaml:{where(text, 'skip]')}: tasks[0].tags[0]: 'skip' is a pytest marker with its own meaning; "
        "rename the tag",
    ]


def test_validate_and_pytest_refuse_a_marker_tag_with_the_same_line(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    text = edit("tags: [booking]", "tags: [skip]")
    pytester.path.joinpath("sandtable.yaml").write_text(text, encoding="utf-8")
    line = (
        f"sandtable.yaml:{where(text, 'skip]')}: tasks[0].tags[0]: 'skip' is a pytest marker with its own meaning; "
        "rename the tag"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(pytester.path)
        assert main(["validate", "sandtable.yaml"]) == 2
        assert main(["lint", "sandtable.yaml"]) == 2
    assert capsys.readouterr().out.splitlines() == [line, line]
    result = pytester.runpytest("--sandtable-agent=reference")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*_ ERROR collecting sandtable.yaml _*", line], consecutive=True)
    result.stdout.no_fnmatch_line("*Traceback*")
