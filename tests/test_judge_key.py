"""The `judge:` criteria of a domain and of its tasks (docs/spec.md, "Judged criteria";
docs/judges.md): checked at load like every key (the exact lines `validate` prints),
built into the model with each entry's position, and carried through the domain cache."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from _domains import DESK

from pytest_sandtable.__main__ import main
from pytest_sandtable.domain import cache
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.domain.model import Criterion, Pos

TOP = """\
judge:
  explains-fee: "Did the agent state the $35 fee and why it applies?"
  apologises: { question: "Did the agent apologise for the delay?", scope: final }
"""
TASK = """\
tasks:
  - id: book
    user: { opening: "About L-1001." }
    expect:
      state:
        - { table: loads, key: L-1001, fields: { status: booked } }
    judge:
      names-load: { question: "Did the agent name the load?", after_tool: verify_carrier }
      greets:
        question: Did the agent greet the user?
        turns: [1, 2]
"""
GOOD = DESK + TOP + TASK
HINT = "; ask a yes/no question about the agent's messages"


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


def with_task_entries(entries: str) -> str:
    return GOOD + entries


def test_the_criteria_are_built_with_their_positions() -> None:
    domain = load_domain_text(GOOD)
    fee, apology = domain.judge
    assert fee == Criterion(id="explains-fee", question="Did the agent state the $35 fee and why it applies?")
    assert apology == Criterion(id="apologises", question="Did the agent apologise for the delay?", scope="final")
    assert fee.pos == Pos(*map(int, at(GOOD, '"Did the agent state').split(":")))
    task = domain.tasks[0]
    assert task.judge == (
        Criterion(id="names-load", question="Did the agent name the load?", after_tool="verify_carrier"),
        Criterion(id="greets", question="Did the agent greet the user?", turns=(1, 2)),
    )
    assert [c.id for c in domain.criteria_for(task)] == ["explains-fee", "apologises", "names-load", "greets"]


def test_a_file_without_judge_has_no_criteria() -> None:
    domain = load_domain_text(DESK + TASK.replace(TASK[TASK.index("    judge:"):], ""))
    assert domain.judge == () and domain.tasks[0].judge == ()


def test_valid_criteria_validate_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, GOOD, capsys) == (0, [f"ok: {tmp_path / 'sandtable.yaml'} (1 task, 2 tools, "
                                                    "1 invariant)"])


def test_a_criterion_without_a_question(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_task_entries('      bare: { scope: final }\n      empty: ""\n')
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, '{ scope: final }')}: tasks[0].judge.bare: missing required key 'question'"
        + HINT,
        f"sandtable.yaml:{at(text, chr(34) * 2)}: tasks[0].judge.empty: found an empty string, expected text" + HINT,
    ])


def test_a_domain_criterion_without_a_question(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = DESK + TOP.replace('"Did the agent state the $35 fee and why it applies?"', "{ scope: all }") + TASK
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, '{ scope: all }')}: judge.explains-fee: missing required key 'question'" + HINT,
    ])


def test_an_unknown_scope_and_an_unknown_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_task_entries('      odd: { question: "Q?", scope: middle }\n'
                             '      typo: { question: "Q?", scop: final }\n')
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, 'middle')}: tasks[0].judge.odd.scope: found 'middle', expected one of all, final",
        f"sandtable.yaml:{at(text, 'scop:')}: tasks[0].judge.typo.scop: unknown key 'scop'; did you mean 'scope'?",
    ])


def test_a_task_criterion_repeating_a_domain_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_task_entries('      explains-fee: "Did the agent say $35?"\n')
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, 'explains-fee', 1)}: tasks[0].judge.explains-fee: criterion 'explains-fee' "
        f"is already a domain criterion (line {at(text, 'explains-fee').split(':')[0]}); give this one its own id",
    ])


def test_an_id_twice_in_one_mapping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_task_entries('      greets: "Hello?"\n')
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, 'greets', 1)}: tasks[0].judge.greets: duplicate key 'greets' "
        f"(first at line {at(text, 'greets').split(':')[0]})",
    ])


def test_the_part_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_task_entries('      two: { question: "Q?", scope: final, turns: [1, 2] }\n'
                             '      backwards: { question: "Q?", turns: [3, 1] }\n'
                             '      notool: { question: "Q?", after_tool: refund }\n'
                             '      zero: { question: "Q?", turns: [0, 2] }\n')
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, 'turns', 1)}: tasks[0].judge.two.turns: give one of 'scope', 'turns' and "
        "'after_tool', not both 'scope' and 'turns'",
        f"sandtable.yaml:{at(text, '[3, 1]')}: tasks[0].judge.backwards.turns: turns [3, 1]: the first is after "
        "the last",
        f"sandtable.yaml:{at(text, 'refund')}: tasks[0].judge.notool.after_tool: unknown tool 'refund'; "
        "expected one of: verify_carrier, book_load",
        f"sandtable.yaml:{at(text, '0, 2')}: tasks[0].judge.zero.turns[0]: found 0, expected at least 1",
    ])


def test_a_criterion_that_is_neither_text_nor_a_mapping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = with_task_entries("      num: 5\n")
    assert validate(tmp_path, text, capsys) == (2, [
        f"sandtable.yaml:{at(text, '5' + chr(10))}: "
        "tasks[0].judge.num: found integer 5, expected string or object",
    ])


def test_the_criteria_survive_the_domain_cache(tmp_path: Path) -> None:
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
    assert again.judge == built.judge and again.tasks[0].judge == built.tasks[0].judge
    assert [c.pos for c in again.judge] == [c.pos for c in built.judge] != [None, None]
