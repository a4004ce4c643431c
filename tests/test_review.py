"""``review``: the pending items of a drafted file, accepted, edited and rejected in
place (every other line byte for byte), through stdin and $EDITOR as a person would,
or by ids for scripts. Exact messages."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_init import DRAFT

from pytest_sandtable import load_domain
from pytest_sandtable.cli import main

# the draft as init writes it: every item pending, with a comment above one of them
DRAFTED = (DRAFT.replace("  - { id: refund-at-most-total,", "  # copied from notes.md:4\n"
                                                              "  - { pending: true, id: refund-at-most-total,")
           .replace("  - id: refund-delivered\n", "  - pending: true\n    id: refund-delivered\n"))


@pytest.fixture
def domain(tmp_path: Path) -> Path:
    path = tmp_path / "sandtable.yaml"
    path.write_text(DRAFTED, encoding="utf-8")
    return path


def review(path: Path, stdin: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_sandtable", "review", str(path)], input=stdin,
                          capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})


def test_scripted_accept_and_reject_change_only_those_lines(domain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["review", str(domain), "--accept", "refund-delivered", "rule:lookup-before-refund",
                 "--reject", "refund-at-most-total"])
    assert (code, capsys.readouterr().out.splitlines()) == (0, [
        "accepted task refund-delivered",
        "accepted rule lookup-before-refund",
        "rejected rule refund-at-most-total (removed)",
        f"review: 2 accepted, 1 rejected, 0 edited, 0 skipped; 0 items still pending in {domain}",
    ])
    expected = (DRAFT.replace("    pending: true\n    kind: before", "    kind: before")
                .replace("  - { id: refund-at-most-total, kind: limit, tool: refund_order, arg: amount,\n"
                         "      lte: { table: orders, key: $order_id, field: total }, source: { quote: \"Refund at "
                         "most the order total.\" } }\n", ""))
    assert domain.read_text(encoding="utf-8") == expected
    assert [(i.id, i.pending) for i in load_domain(domain).invariants] == [("lookup-before-refund", False)]


def test_accept_all_and_then_nothing_is_pending(domain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["review", str(domain.parent), "--accept-all"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"review: 3 accepted, 0 rejected, 0 edited, 0 skipped; 0 items still pending in {domain}")
    assert "pending" not in domain.read_text(encoding="utf-8")
    assert main(["review", str(domain)]) == 0
    assert capsys.readouterr().out == f"{domain}: nothing pending review (2 rules, 1 task, none pending)\n"


def test_an_unknown_id_writes_nothing(domain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["review", str(domain), "--accept", "refund-delivered", "--reject", "nope"]) == 2
    assert capsys.readouterr().err == (
        f"error: {domain}: no pending rule or task 'nope' (pending: lookup-before-refund, refund-at-most-total, "
        "refund-delivered)\n")
    assert domain.read_text(encoding="utf-8") == DRAFTED


def test_interactive_review_through_stdin(domain: Path) -> None:
    proc = review(domain, "x\ns\na\nr\n")
    assert proc.returncode == 0, proc.stderr
    prompt = "[a]ccept [e]dit [r]eject [s]kip [q]uit? "
    out = proc.stdout
    assert out.startswith(f"{domain}: 3 items pending review\n\n[1/3] rule lookup-before-refund (line 31)\n"
                          "- id: lookup-before-refund\n  pending: true\n")
    assert f"{prompt}answer a, e, r, s or q\n" in out
    assert f"{prompt}skipped rule lookup-before-refund (still pending)\n" in out
    assert ("[2/3] rule refund-at-most-total (line 39)\n# copied from notes.md:4\n"
            "- { pending: true, id: refund-at-most-total,") in out
    assert f"{prompt}accepted rule refund-at-most-total\n" in out
    assert f"{prompt}rejected task refund-delivered (removed)\n" in out
    assert out.endswith(f"review: 1 accepted, 1 rejected, 0 edited, 1 skipped; 1 item still pending in {domain}\n")
    text = domain.read_text(encoding="utf-8")
    assert "  # copied from notes.md:4\n  - { id: refund-at-most-total," in text
    assert text.endswith("tasks: []\n")


def test_end_of_input_quits_and_keeps_what_was_decided(domain: Path) -> None:
    proc = review(domain, "a\n")
    assert proc.returncode == 0
    assert proc.stdout.endswith(f"review: 1 accepted, 0 rejected, 0 edited, 0 skipped; 2 items still pending in "
                                f"{domain}\n")
    assert [i.pending for i in load_domain(domain).invariants] == [False, True]


def editor(tmp_path: Path, body: str) -> str:
    script = tmp_path / "editor.py"
    script.write_text(textwrap.dedent(body), encoding="utf-8")
    return f"{sys.executable} {script}"


def test_edit_in_editor_then_accept(domain: Path, tmp_path: Path) -> None:
    # the "person" renames the task's opening line
    ed = editor(tmp_path, """\
        import sys
        p = sys.argv[1]
        t = open(p).read()
        open(p, "w").write(t.replace("I'd like a refund for order O-1001.", "Refund O-1001, please."))
        """)
    proc = review(domain, "s\ns\ne\na\n", {"EDITOR": ed})
    assert proc.returncode == 0, proc.stderr
    assert "edited task refund-delivered (still pending)\n" in proc.stdout
    assert proc.stdout.endswith(f"review: 1 accepted, 0 rejected, 1 edited, 2 skipped; 2 items still pending in "
                                f"{domain}\n")
    task = load_domain(domain).tasks[0]
    assert (task.user.opening, task.pending) == ("Hi, Refund O-1001, please.", False)


def test_an_edit_that_does_not_validate_is_not_applied(domain: Path, tmp_path: Path) -> None:
    ed = editor(tmp_path, """\
        import sys
        p = sys.argv[1]
        t = open(p).read()
        open(p, "w").write(t.replace("then: refund_order", "then: refund_ordr"))
        """)
    proc = review(domain, "e\nq\n", {"EDITOR": ed})
    assert proc.returncode == 0
    assert (f"{domain}:35:11: invariants[0].then: unknown tool 'refund_ordr'; did you mean 'refund_order'?\n"
            "the edit was not applied (the file would not validate)\n") in proc.stdout
    assert domain.read_text(encoding="utf-8") == DRAFTED


def test_a_file_edited_between_steps_stops_review(domain: Path, tmp_path: Path) -> None:
    # someone else saves the domain file while the reviewer is in the editor
    ed = editor(tmp_path, f"""\
        import sys
        with open({str(domain)!r}, "a") as f:
            f.write("# a colleague's note\\n")
        p = sys.argv[1]
        t = open(p).read()
        open(p, "w").write(t.replace("arg: amount,", "arg: amount, description: x,"))
        """)
    proc = review(domain, "a\ne\n", {"EDITOR": ed})
    assert proc.returncode == 2
    assert proc.stderr == (f"error: {domain} changed on disk since review read it (edited elsewhere?); editing "
                           "rule refund-at-most-total was not written, and decisions before it are saved; "
                           "run review again\n")
    text = domain.read_text(encoding="utf-8")
    assert text.endswith("# a colleague's note\n")  # their change is kept
    assert "description: x" not in text
    assert [i.pending for i in load_domain(domain).invariants] == [False, True]  # the accept before it is saved


def test_review_of_a_file_that_does_not_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sandtable.yaml"
    path.write_text(DRAFTED.replace("then: refund_order", "then: refund_ordr"), encoding="utf-8")
    assert main(["review", str(path), "--accept-all"]) == 2
    captured = capsys.readouterr()
    assert captured.out == (f"{path}:35:11: invariants[0].then: unknown tool 'refund_ordr'; "
                            "did you mean 'refund_order'?\n")
    assert captured.err == f"error: {path} does not validate; fix it before review\n"
