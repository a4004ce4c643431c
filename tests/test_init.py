"""``init``: draft a domain from SOP notes against local fake model servers (the real
anthropic SDK and httpx on 127.0.0.1), with canned drafts: valid, invalid then
repaired, never valid, prose. Exact messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeAnthropic, FakeOpenAI, claude_error, claude_text, openai_text

from pytest_sandtable import load_domain
from pytest_sandtable.cli import main
from pytest_sandtable.report.prices import builtin_prices_as_of

NOTES = """\
# Refunds desk SOP

Look up an order before refunding it.
Refund at most the order total.
"""

DRAFT = """\
version: 1
name: refunds
description: Refund desk of Juniper Lane Books, a fictional bookshop.
policy: |
  Look up an order before refunding it.
  Refund at most the order total.
world:
  orders:
    key: order_id
    rows:
      - { order_id: O-1001, customer: Ada Quill, total: 42.5, status: delivered }
  refunds:
    key: refund_id
    key_format: "R-{n}"
    fields: [order_id, amount]
tools:
  - name: get_order
    description: Look up an order by id.
    params:
      order_id: { type: string }
    ops:
      - get: { table: orders, key: $order_id }
  - name: refund_order
    description: Refund an order.
    params:
      order_id: { type: string }
      amount: { type: number }
    ops:
      - create: { table: refunds, row: { order_id: $order_id, amount: $amount } }
invariants:
  - id: lookup-before-refund
    pending: true
    kind: before
    first: get_order
    then: refund_order
    same: [order_id]
    source: { quote: "Look up an order before refunding it." }
  - { id: refund-at-most-total, kind: limit, tool: refund_order, arg: amount,
      lte: { table: orders, key: $order_id, field: total }, source: { quote: "Refund at most the order total." } }
tasks:
  - id: refund-delivered
    description: A customer gets a refund.
    user:
      persona: Ada Quill, a regular customer.
      instructions: You want a refund of 42.50 for order O-1001.
      opening: "Hi, I'd like a refund for order O-1001."
      script: ["Yes, all of it."]
    expect:
      state:
        - { table: refunds, where: { order_id: O-1001, amount: 42.5 }, count: 1 }
    reference:
      - call: get_order
        args: { order_id: O-1001 }
      - call: refund_order
        args: { order_id: O-1001, amount: 42.5 }
      - say: "Done."
"""

# a typo'd tool in a rule (line 35) and a quote the notes never say
INVALID = DRAFT.replace("then: refund_order", "then: refund_ordr").replace(
    "Look up an order before refunding it.\" }", "Always look up orders.\" }")
PROSE = "I'd be happy to help! Here is how I would model your refunds desk: first, a table of orders."


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "refunds.md"
    path.write_text(NOTES, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-0001")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test-key-0001")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def init(*args: str) -> int:
    return main(["init", *args])


def test_a_valid_draft_is_written_pending_and_marked(notes: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    with FakeAnthropic([claude_text("```yaml\n" + DRAFT + "```")]) as server:
        code = init(str(notes), "-o", str(out), "--model", "claude:claude-test", "--base-url", server.base_url)
    captured = capsys.readouterr()
    assert (code, captured.err) == (0, "")
    assert captured.out.splitlines() == [
        f"wrote {out}/sandtable.yaml: 2 tables, 2 tools, 2 rules, 1 task, all pending review; "
        "3 values copied from the notes marked",
        "model calls: 1 (0 repair rounds)",
        "cost: n/a (claude-test: 1 call, 10 input + 5 output tokens; no list price: pass --prices FILE)",
        f"next: python -m pytest_sandtable review {out}",
    ]
    domain = load_domain(out / "sandtable.yaml")
    assert [(i.id, i.pending) for i in domain.invariants] == [("lookup-before-refund", True),
                                                             ("refund-at-most-total", True)]
    assert [(t.id, t.pending) for t in domain.tasks] == [("refund-delivered", True)]
    text = (out / "sandtable.yaml").read_text(encoding="utf-8")
    assert f"# copied from {notes}:3, 4\npolicy: |\n" in text
    assert f"    # copied from {notes}:3\n    source: {{ quote: \"Look up an order before refunding it.\" }}" in text
    assert f"  # copied from {notes}:4\n  - {{ pending: true, id: refund-at-most-total," in text
    assert "  - pending: true\n    id: refund-delivered\n" in text
    request = server.bodies[0]
    assert request["model"] == "claude-test"
    assert "Every invariant and every task carries pending: true" in request["system"]
    assert request["messages"] == [{"role": "user", "content": "Draft sandtable.yaml from these SOP notes.\n\n"
                                    f'<notes file="{notes}">\n{NOTES.strip()}\n</notes>'}]
    assert "sk-ant-test-key-0001" not in captured.out


def test_an_invalid_draft_is_repaired_over_openai(notes: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    with FakeOpenAI([openai_text(INVALID), openai_text(DRAFT)]) as server:
        code = init(str(notes), "-o", str(out), "--model", "openai:gpt-test", "--base-url", server.base_url)
    captured = capsys.readouterr()
    assert code == 0, captured
    assert captured.out.splitlines()[1:3] == [
        "model calls: 2 (1 repair round)",
        "cost: n/a (gpt-test: 2 calls, 40 input + 16 output tokens; no list price: pass --prices FILE)",
    ]
    repair = server.bodies[1]["messages"]
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
    draft = out / "sandtable.draft.yaml"
    # the quote is checked once the draft loads: the first round names the typo only
    assert repair[3]["content"].splitlines()[1:3] == [
        f"- {draft}:35:11: invariants[0].then: unknown tool 'refund_ordr'; did you mean 'refund_order'?", ""]
    assert load_domain(out / "sandtable.yaml").invariants[0].spec["then"] == "refund_order"
    assert not draft.exists()


def test_a_draft_that_never_validates_is_kept_aside(notes: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    with FakeAnthropic([claude_text(INVALID)] * 2) as server:
        code = init(str(notes), "-o", str(out), "--model", "claude:claude-test", "--base-url", server.base_url,
                    "--repairs", "1")
    captured = capsys.readouterr()
    draft = out / "sandtable.draft.yaml"
    assert code == 1
    assert len(server.requests) == 2
    assert not (out / "sandtable.yaml").exists()
    problems = [line for line in captured.out.splitlines() if line.startswith(str(draft))]
    assert problems and all(":" in p for p in problems)
    assert captured.out.splitlines()[len(problems):] == [
        "model calls: 2 (1 repair round)",
        "cost: n/a (claude-test: 2 calls, 20 input + 10 output tokens; no list price: pass --prices FILE)",
    ]
    assert captured.err == (f"error: the draft still has {len(problems)} problem{'s' if len(problems) > 1 else ''} "
                            f"after 1 repair round; kept it as {draft} (problems listed at its end); "
                            f"{out}/sandtable.yaml was not written\n")
    kept = draft.read_text(encoding="utf-8")
    assert kept.startswith(INVALID)  # the lines the problems name are where they were
    assert "# Problems:\n" in kept and problems[0] in kept


def test_prose_instead_of_yaml(notes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    with FakeAnthropic([claude_text(PROSE)]) as server:
        code = init(str(notes), "-o", str(out), "--model", "claude:claude-test", "--base-url", server.base_url,
                    "--repairs", "0")
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out.splitlines()[0] == (
        f"{out}/sandtable.draft.yaml: the model answered with prose, not a YAML domain file (it begins: "
        "\"I'd be happy to help! Here is how I would model your refunds\"); answer with the YAML file only")
    assert not (out / "sandtable.yaml").exists()


def test_dry_run_prints_the_plan_and_calls_nothing(notes: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = init(str(notes), "-o", str(out), "--model", "openai:gpt-test", "--base-url", "http://127.0.0.1:9/v1",
                "--dry-run")
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0] == f"plan: draft {out}/sandtable.yaml from 1 notes file: {notes} (90 bytes, 4 lines)"
    assert lines[1] == "  model:  openai:gpt-test at 127.0.0.1:9 (key from OPENAI_API_KEY: set)"
    assert lines[3] == "  calls:  1 model call, at most 3 (2 repair rounds when a draft does not validate)"
    assert lines[5] == ("  cost:   at most n/a for one call, at most n/a for 3 calls "
                        "(no list price for gpt-test; pass --prices FILE)")
    assert lines[-1] == "nothing was called (--dry-run)"
    assert not out.exists()


def test_dry_run_prices_a_claude_model(notes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = init(str(notes), "-o", str(tmp_path), "--model", "claude:claude-sonnet-4-5", "--dry-run")
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[1] == "  model:  claude:claude-sonnet-4-5 at api.anthropic.com (key from ANTHROPIC_API_KEY: set)"
    assert lines[5].startswith("  cost:   at most $0.")
    assert lines[5].endswith(f"for 3 calls (list prices of {builtin_prices_as_of()})")


def test_an_existing_domain_is_never_replaced_without_force(notes: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sandtable.yaml").write_text("mine\n", encoding="utf-8")
    with FakeAnthropic([claude_text(DRAFT)]) as server:
        code = init(str(notes), "-o", str(tmp_path), "--model", "claude:claude-test", "--base-url", server.base_url)
    assert (code, capsys.readouterr().err) == (2, f"error: {tmp_path}/sandtable.yaml exists; pass --force to "
                                                  "replace it\n")
    assert server.requests == []
    assert (tmp_path / "sandtable.yaml").read_text(encoding="utf-8") == "mine\n"


def test_a_failing_model_writes_nothing(notes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeAnthropic([claude_error(400, "invalid_request_error", "model not found")]) as server:
        code = init(str(notes), "-o", str(tmp_path), "--model", "claude:claude-test", "--base-url", server.base_url)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err == (f"error: claude drafter claude-test: HTTP 400 from {server.host}: model not found "
                            "(request-id req_err001); nothing was written\n")
    assert captured.out == "cost: n/a (no model calls)\n"
    assert list(tmp_path.iterdir()) == [notes]


def test_a_missing_key_is_named(notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    code = init(str(notes), "-o", str(tmp_path), "--model", "claude:claude-test")
    assert (code, capsys.readouterr().err) == (
        2, "error: claude:<model> needs an API key in the ANTHROPIC_API_KEY environment variable\n")


@pytest.mark.parametrize(("content", "message"), [
    (b"Refunds\n\nR\xe9fund at most the total.\n",
     "notes file {path}: not UTF-8 text (byte 0xE9 at offset 10, line 3); save it as UTF-8 and run again"),
    (b"\xff\xfeR\x00e\x00",
     "notes file {path}: not UTF-8 text (byte 0xFF at offset 0, line 1); it looks like UTF-16; "
     "save it as UTF-8 and run again"),
    (b"  \n\n", "notes file {path}: empty; expected SOP notes as text or markdown"),
    (b"abc\x00def", "notes file {path}: not a text file (a NUL byte at offset 3); "
                    "expected SOP notes as text or markdown"),
])
def test_bad_notes(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str) -> None:
    path = tmp_path / "sop.md"
    path.write_bytes(content)
    code = init(str(path), "-o", str(tmp_path / "out"), "--model", "claude:claude-test")
    assert (code, capsys.readouterr().err) == (2, "error: " + message.format(path=path) + "\n")
    assert not (tmp_path / "out").exists()


def test_a_missing_notes_file_and_a_bad_model(tmp_path: Path, notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert init(str(tmp_path / "nope.md"), "--model", "claude:claude-test") == 2
    assert capsys.readouterr().err == f"error: notes file {tmp_path}/nope.md: no such file\n"
    assert init(str(notes), "--model", "gemini:x") == 2
    assert capsys.readouterr().err == ("error: --model 'gemini:x': expected claude:<model> or openai:<model>, "
                                       "e.g. claude:claude-sonnet-4-5\n")


def test_a_quote_the_notes_never_say_is_sent_back(notes: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    invented = DRAFT.replace('quote: "Look up an order before refunding it."', 'quote: "Always look orders up."')
    with FakeAnthropic([claude_text(invented), claude_text(DRAFT)]) as server:
        code = init(str(notes), "-o", str(tmp_path), "--model", "claude:claude-test", "--base-url", server.base_url)
    assert code == 0, capsys.readouterr()
    repair = server.bodies[1]["messages"][2]["content"]
    assert repair.splitlines()[1] == (f"- {tmp_path}/sandtable.draft.yaml:31:5: invariants[0].source.quote: not found "
                                      "word for word in the notes; quote the sentence this rule enforces exactly")
