"""`python -m pytest_sandtable lint`: tasks that would mislead a score, found before any run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _domains import BOOKS_L1001, DESK

DOMAIN = DESK + """\
tasks:
  - id: book
    user: { opening: "MC 100101 about L-1001.", script: ["Deal."] }
""" + BOOKS_L1001


LINE = DOMAIN.splitlines().index("  - id: book") + 1


# the policy coverage of the references' replays, after each file's findings
COVERAGE = """\
policy coverage: 1 rule: 1 applied; 0 policy sentences quoted by no rule; 0 tasks exercise no rule
  rule          kind    level      calls    applied    held    broken    tasks
  ------------  ------  -------  -------  ---------  ------  --------  -------
  rate-ceiling  limit   applied        1          1       1         0        1
"""


def findings(stdout: str) -> list[str]:
    """lint's lines before the policy coverage block."""
    lines = stdout.splitlines()
    return lines[: next((i for i, line in enumerate(lines) if line.startswith("policy coverage: ")), len(lines))]


def lint(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "sandtable.yaml"
    path.write_text(text, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "pytest_sandtable", "lint", str(path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_a_sound_domain_is_ok(tmp_path: Path) -> None:
    r = lint(tmp_path, DOMAIN)
    assert (r.returncode, r.stdout) == (0, f"ok: {tmp_path / 'sandtable.yaml'} (1 task replayed)\n" + COVERAGE)


def test_a_reference_longer_than_the_script_is_an_error(tmp_path: Path) -> None:
    r = lint(tmp_path, DOMAIN.replace(', script: ["Deal."]', ""))
    assert r.returncode == 1
    assert r.stdout.splitlines()[0] == (
        f"{tmp_path / 'sandtable.yaml'}:{LINE}: error: book: the reference has 2 replies but the scripted user "
        "says 1 line (opening and script), so it gets 1 turn"
    )


def test_a_reference_that_breaks_a_rule_is_an_error(tmp_path: Path) -> None:
    r = lint(tmp_path, DOMAIN.replace("rate: 2100", "rate: 2600"))
    assert r.returncode == 1
    assert findings(r.stdout) == [
        f"{tmp_path / 'sandtable.yaml'}:{LINE}: error: book: the reference breaks rule rate-ceiling: "
        "book_load rate=2600 exceeds the limit 2350"
    ]


def test_a_task_a_silent_agent_passes_is_a_warning(tmp_path: Path) -> None:
    text = DOMAIN.replace("fields: { status: booked }", "fields: { status: available }").replace(
        "      - call: book_load\n        args: { load_id: L-1001, rate: 2100 }\n", "")
    text = text.replace("expect:\n", "expect:\n      called: [verify_carrier]\n")
    text = text.replace("      called: [verify_carrier]\n", "")
    r = lint(tmp_path, text.replace('state: [{ table: loads, key: L-1001, fields: { status: available } }]',
                                    'state: [{ table: loads, where: { status: available }, count: 1 }]'))
    assert r.returncode == 1
    assert findings(r.stdout) == [
        f"{tmp_path / 'sandtable.yaml'}:{LINE}: warning: book: passes when the agent does nothing: its expectations "
        "hold in the untouched world; expect something only a correct conversation reaches, or, when nothing "
        "should happen in this task, say so with `expect_nothing: true`"
    ]


def test_a_domain_that_does_not_load_exits_2(tmp_path: Path) -> None:
    r = lint(tmp_path, DOMAIN.replace("params: { mc_number", "parms: { mc_number"))
    assert r.returncode == 2
    assert "tools[0].parms: unknown key 'parms'; did you mean 'params'?" in r.stdout


# --------------------------------------------------------------------------- a task where nothing should happen


def test_expect_nothing_turns_the_silent_agent_warning_into_a_note(tmp_path: Path) -> None:
    # a refusal: nothing may be booked, and the reference books nothing
    text = DOMAIN.replace("fields: { status: booked }", "fields: { status: available }").replace(
        "      - call: book_load\n        args: { load_id: L-1001, rate: 2100 }\n", "")
    text = text.replace('state: [{ table: loads, key: L-1001, fields: { status: available } }]',
                        'state: [{ table: loads, where: { status: available }, count: 1 }]')
    r = lint(tmp_path, text.replace("  - id: book\n", "  - id: book\n    expect_nothing: true\n"))
    assert (r.returncode, findings(r.stdout)) == (0, [
        f"{tmp_path / 'sandtable.yaml'}:{LINE}: note: book: passes when the agent does nothing, as "
        "`expect_nothing: true` says it should"
    ])


def test_expect_nothing_on_a_task_silence_fails_is_noted(tmp_path: Path) -> None:
    r = lint(tmp_path, DOMAIN.replace("  - id: book\n", "  - id: book\n    expect_nothing: true\n"))
    assert (r.returncode, findings(r.stdout)) == (0, [
        f"{tmp_path / 'sandtable.yaml'}:{LINE}: note: book: fails when the agent does nothing, so "
        "`expect_nothing: true` changes nothing here"
    ])


# --------------------------------------------------------------------------- a scripted user that reacts

REACTING = DESK + """\
tasks:
  - id: book
    user:
      opening: "MC 100101 about L-1001."
      script:
        - { say: Deal., when: { reply_includes: "2,100" } }
        - { say: "Any refund?", when: { reply_includes: refund } }
""" + BOOKS_L1001


def test_a_reaction_the_reference_never_triggers_is_a_warning_at_its_line(tmp_path: Path) -> None:
    r = lint(tmp_path, REACTING)
    refund = REACTING.splitlines().index('        - { say: "Any refund?", when: { reply_includes: refund } }') + 1
    assert (r.returncode, findings(r.stdout)) == (1, [
        f"{tmp_path / 'sandtable.yaml'}:{refund}: warning: book: script line 2 ('Any refund?') is never said when "
        "the reference runs: its `when` never holds (a typo, or a branch the reference does not take)"
    ])


def test_a_reacting_user_that_ends_before_the_reference_is_an_error(tmp_path: Path) -> None:
    text = REACTING.replace('reply_includes: "2,100"', 'reply_includes: "2,200"').replace(
        '        - { say: "Any refund?", when: { reply_includes: refund } }\n', "")
    r = lint(tmp_path, text)
    deal = text.splitlines().index('        - { say: Deal., when: { reply_includes: "2,200" } }') + 1
    file = tmp_path / "sandtable.yaml"
    assert (r.returncode, findings(r.stdout)) == (1, [
        f"{file}:{LINE}: error: book: the scripted user ends the conversation after 1 reply of the reference's 2: "
        "no script line applies to reply 1 (or a line with `end: true` did), so the reference cannot finish",
        f"{file}:{LINE}: error: book: the reference fails its own expectation state:loads[L-1001]#1: loads L-1001: "
        'status is "available", expected "booked"',
        f"{file}:{deal}: warning: book: script line 1 ('Deal.') is never said when the reference runs: its `when` "
        "never holds (a typo, or a branch the reference does not take)",
    ])


def test_say_unknown_lets_the_reference_go_on(tmp_path: Path) -> None:
    text = REACTING.replace('reply_includes: "2,100"', 'reply_includes: "2,200"').replace(
        '        - { say: "Any refund?", when: { reply_includes: refund } }\n',
        "      say_unknown: I don't know.\n")
    r = lint(tmp_path, text)
    deal = text.splitlines().index('        - { say: Deal., when: { reply_includes: "2,200" } }') + 1
    assert (r.returncode, findings(r.stdout)) == (1, [
        f"{tmp_path / 'sandtable.yaml'}:{deal}: warning: book: script line 1 ('Deal.') is never said when the "
        "reference runs: its `when` never holds (a typo, or a branch the reference does not take)",
    ])
