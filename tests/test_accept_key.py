"""A task's `accept:` list (docs/spec.md, "Accepted mutants"): the mutants of its
reference the policy allows, each with its reason. Checked at load like every key (the
exact lines `validate` prints), kept in the model with each entry's position, and
carried through the domain cache."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from _domains import DESK

from pytest_sandtable.__main__ import main
from pytest_sandtable.domain import cache
from pytest_sandtable.domain.loader import load_domain, load_domain_text
from pytest_sandtable.domain.model import Accept, Pos

TASK = """\
tasks:
  - id: book
    user: { opening: "About L-1001." }
    expect:
      state:
        - { table: loads, key: L-1001, fields: { status: booked } }
    reference:
      - { call: verify_carrier, args: { mc_number: "100101" } }
      - { call: book_load, args: { load_id: L-1001, rate: 1900 } }
      - say: Booked.
    accept:
      - { mutant: "drop-read@0", reason: "the carrier was verified on the previous call" }
      - mutant: repeat-read@0
        reason: verifying twice changes nothing
"""
GOOD = DESK + TASK
EMPTY = '""'
DROP = '"drop-read@0"'


def at(text: str, needle: str, nth: int = 0) -> str:
    """``line:col`` of the ``nth`` occurrence of ``needle`` in ``text`` (both 1-based)."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(needle, start + 1)
    line = text.count("\n", 0, start) + 1
    return f"{line}:{start - (text.rfind(chr(10), 0, start) + 1) + 1}"


def validate(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    path = tmp_path / "sandtable.yaml"
    path.write_text(text, encoding="utf-8")
    code = main(["validate", str(path)])
    out = capsys.readouterr().out.replace(f"{path}:", "sandtable.yaml:")
    return code, out.splitlines()


def with_accept(entries: str) -> str:
    head, _, _ = GOOD.partition("    accept:\n")
    return head + "    accept:\n" + entries


# --------------------------------------------------------------------------- problems


def test_an_entry_without_a_reason_says_to_give_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_accept('      - { mutant: "drop-read@0" }\n')
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, '{ mutant')}: tasks[0].accept[0]: missing required key 'reason'; "
        "say why the policy allows this mutant",
    ])


def test_an_empty_reason_says_to_give_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_accept('      - { mutant: "drop-read@0", reason: "" }\n')
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, EMPTY)}: tasks[0].accept[0].reason: found an empty string, expected text; "
        "say why the policy allows this mutant",
    ])


def test_an_empty_or_missing_mutant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_accept('      - { mutant: "", reason: allowed }\n      - { reason: allowed }\n')
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, EMPTY)}: tasks[0].accept[0].mutant: found an empty string, expected text",
        f"sandtable.yaml:{at(text, '{ reason')}: tasks[0].accept[1]: missing required key 'mutant'",
    ])


def test_an_unknown_key_gets_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_accept('      - { mutant: "drop-read@0", reasn: "verified before" }\n')
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, 'reasn')}: tasks[0].accept[0].reasn: unknown key 'reasn'; did you mean 'reason'?",
    ])
    text = GOOD.replace("    accept:\n", "    acept:\n")
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, 'acept')}: tasks[0].acept: unknown key 'acept'; did you mean 'accept'?",
    ])


def test_a_mutant_accepted_twice_is_a_problem_at_the_second(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = with_accept('      - { mutant: "drop-read@0", reason: a }\n'
                       '      - { mutant: "repeat-read@0", reason: b }\n'
                       '      - { mutant: "drop-read@0", reason: c }\n')
    first_line = at(text, '{ mutant: "drop-read@0"').split(":")[0]
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, DROP, 1)}: tasks[0].accept[2].mutant: "
        f"mutant 'drop-read@0' is accepted twice in this task (first at line {first_line})",
    ])


def test_the_same_mutant_in_two_tasks_is_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    second = TASK.removeprefix("tasks:\n").replace("- id: book\n", "- id: book-again\n")
    assert validate(tmp_path, GOOD + second, capsys) == (0, [f"ok: {tmp_path / 'sandtable.yaml'} (2 tasks, "
                                                             "2 tools, 1 invariant)"])


def test_accept_is_a_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_accept("      drop-read@0\n")
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, 'drop-read@0')}: tasks[0].accept: found string 'drop-read@0', expected array",
    ])


# --------------------------------------------------------------------------- the model


def test_a_valid_file_loads_the_entries_with_their_positions() -> None:
    task = load_domain_text(GOOD, "sandtable.yaml").task("book")
    first, second = (int(at(GOOD, s).split(":")[0]) for s in ('{ mutant: "drop', "mutant: repeat"))
    assert task.accept == (
        Accept("drop-read@0", "the carrier was verified on the previous call"),
        Accept("repeat-read@0", "verifying twice changes nothing"),
    )
    assert [a.pos for a in task.accept] == [Pos(first, 9), Pos(second, 9)]


def test_a_task_without_accept_has_none() -> None:
    text = GOOD.partition("    accept:\n")[0]
    assert load_domain_text(text, "sandtable.yaml").task("book").accept == ()


def test_the_domain_cache_keeps_the_entries_and_their_positions(tmp_path: Path) -> None:
    # the cache holds files from 64 KB: a comment block takes this one there
    pad = "".join(f"# padding line {i:05d} {'-' * 40}\n" for i in range(cache.MIN_CACHED_BYTES // 50 + 1))
    path = tmp_path / "sandtable.yaml"
    path.write_text(GOOD + pad, encoding="utf-8")
    store = tmp_path / "cache"
    built = cache.load_domain_cached(path, store)  # a miss: built, then stored
    (entry,) = store.glob("*.domain")
    assert entry.name == cache.entry_name(hashlib.sha256(path.read_bytes()).hexdigest())
    again = cache.load_domain_cached(path, store)  # a hit: unpickled
    assert again is not built
    assert again == built == load_domain(path)
    accepted = again.task("book").accept
    assert [(a.mutant, a.reason, a.pos) for a in accepted] == [
        (a.mutant, a.reason, a.pos) for a in built.task("book").accept
    ]
    assert [a.pos for a in accepted] == [Pos(int(at(GOOD, s).split(":")[0]), 9)
                                         for s in ('{ mutant: "drop', "mutant: repeat")]
