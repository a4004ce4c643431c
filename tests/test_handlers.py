"""``handler: module:function`` tools and the simulated clock (docs/handlers.md): a Python
function in place of the ops, its writes recorded like theirs, its tool errors seen by the
agent, its bugs erroring the trial with its traceback; imported at load time, the domain
file's folder searched first, every way it can fail to import a problem with a line.
Everything runs through the real loader and engine; the handler modules are real files."""

from __future__ import annotations

import json
import random
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _sandtable_shop import only_results, run_dirs, strip_timings

import pytest_sandtable as st
from conftest import Playbook
from pytest_sandtable.cli import main
from pytest_sandtable.domain import cache
from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.report.results_json import read_results

HANDLERS = '''\
from pytest_sandtable import ToolError

CALLS = []  # what the handlers were given, for the tests to read


def refund(args, world, ctx):
    CALLS.append((dict(args), ctx.tool, ctx.call_index, ctx.seed, ctx.now.isoformat()))
    order = world.get("orders", args["order_id"])
    if order is None:
        raise ToolError(404, "no order " + args["order_id"])
    if order["status"] != "delivered":
        raise ToolError(409, "order " + order["order_id"] + " is " + order["status"])
    card = world.get("cards", order["card"])
    world.update("cards", card["card_id"], {"balance": card["balance"] + order["total"]})
    world.update("orders", order["order_id"], {"status": "refunded", "refunded_at": ctx.now.isoformat()})
    note = world.create("notes", {"order_id": order["order_id"], "text": args["reason"]})
    ctx.advance(90)
    return {"refunded": order["total"], "note": note["note_id"], "code": ctx.random.randint(1000, 9999)}


def half_then_fail(args, world, ctx):
    world.update("cards", "C1", {"balance": 0})
    world.create("notes", {"order_id": "O1", "text": "half"})
    raise ToolError(402, "declined after a write")


def broken(args, world, ctx):
    world.update("cards", "C1", {"balance": 0})
    totals = {}
    return totals[args["order_id"]]


def odd_result(args, world, ctx):
    return {"when": ctx.now}


def odd_write(args, world, ctx):
    world.update("orders", "O1", {"history": [{"at": ctx.now}]})


def orders_of(args, world, ctx):
    rows = world.list("orders", where={"user": args["user"], "total": {"gte": args["min_total"]}}, limit=2)
    rows[0]["status"] = "changed by the handler"  # a copy: the world does not change
    return [r["order_id"] for r in rows]


def close_note(args, world, ctx):
    return world.delete("notes", args["note_id"])


def leave(args, world, ctx):
    world.update("cards", "C1", {"balance": 0})
    raise SystemExit(3)


def clock(args, world, ctx):
    before = ctx.now.isoformat()
    ctx.advance(args["seconds"])
    return [before, ctx.now.isoformat()]


def conflicts(args, world, ctx):
    out = []
    for attempt in (lambda: world.create("notes", {"note_id": "N-1"}), lambda: world.update("cards", "C9", {"x": 1})):
        try:
            attempt()
        except ToolError as e:
            out.append([e.status, e.message])
    out.append(world.create("notes", {"text": "kept"})["note_id"])
    return out


def typo(args, world, ctx):
    return world.get("ordrs", "O1")
'''

DOMAIN = """\
version: 1
name: shop
policy: Refund only delivered orders.
world:
  orders:
    key: order_id
    rows:
      - { order_id: O1, user: U1, total: 30, card: C1, status: delivered }
      - { order_id: O2, user: U1, total: 80, card: C1, status: shipped }
      - { order_id: O3, user: U1, total: 55, card: C1, status: delivered }
      - { order_id: O4, user: U2, total: 99, card: C1, status: delivered }
  cards:
    key: card_id
    rows:
      - { card_id: C1, balance: 10 }
  notes:
    key: note_id
    key_format: "N-{n}"
    rows:
      - { note_id: N-1, order_id: O2, text: first }
tools:
  - name: refund
    description: Refund a delivered order to its card.
    params: { order_id: { type: string }, reason: { type: string, default: none given } }
    checks:
      - require: { table: orders, key: $order_id }
        error: 404
        message: "order {order_id} does not exist"
    handler: shop_handlers:refund
  - name: half_then_fail
    handler: shop_handlers:half_then_fail
  - name: broken
    params: { order_id: { type: string } }
    handler: shop_handlers:broken
  - name: odd_result
    handler: shop_handlers:odd_result
  - name: odd_write
    handler: shop_handlers:odd_write
  - name: orders_of
    params: { user: { type: string }, min_total: { type: number } }
    handler: shop_handlers:orders_of
  - name: close_note
    params: { note_id: { type: string } }
    handler: shop_handlers:close_note
  - name: leave
    handler: shop_handlers:leave
  - name: conflicts
    handler: shop_handlers:conflicts
  - name: typo
    handler: shop_handlers:typo
  - name: clock
    params: { seconds: { type: number } }
    handler: shop_handlers:clock
invariants:
  - id: small-refunds
    kind: limit
    tool: refund
    arg: order_id
    lte: { table: orders, key: $order_id, field: total }
  - id: no-refund-o3
    kind: never
    tool: refund
    when: { order_id: O3 }
tasks:
  - id: refund-o1
    user: { opening: "Refund O1, it arrived broken." }
    expect:
      state:
        - { table: cards, key: C1, fields: { balance: 40 } }
        - { table: orders, key: O1, fields: { status: refunded } }
    reference:
      - call: refund
        args: { order_id: O1, reason: arrived broken }
      - say: Refunded.
  - id: clock-task
    clock: { now: "2024-05-15T15:00:00Z" }
    user: { opening: "What time is it?" }
"""


# Python 3.11 and later point at the expression that raised; 3.10 does not
CARETS = ["           ~~~~~~^^^^^^^^^^^^^^^^^^"] if sys.version_info >= (3, 11) else []


@pytest.fixture(autouse=True)
def fresh_modules() -> Iterator[None]:
    """Each test writes its own handler modules: forget those of the test before."""
    yield
    for name in [m for m in sys.modules if m.startswith(("shop_handlers", "h_"))]:
        del sys.modules[name]


@pytest.fixture
def shop(tmp_path: Path) -> Callable[..., st.Domain]:
    """The shop domain (``DOMAIN`` with ``old`` → ``new`` edits), its handlers next to it."""

    def make(*edits: tuple[str, str], handlers: str = HANDLERS) -> st.Domain:
        text = DOMAIN
        for old, new in edits:
            assert old in text
            text = text.replace(old, new)
        (tmp_path / "shop_handlers.py").write_text(handlers, encoding="utf-8")
        (tmp_path / "sandtable.yaml").write_text(text, encoding="utf-8")
        return st.load_domain(tmp_path / "sandtable.yaml")

    return make


def trial(domain: st.Domain, *turns: Any, task: str = "refund-o1", **kw: Any) -> st.TrialResult:
    return st.run_trial(domain, task, Playbook(*turns), st.ScriptedUser(), **kw)


def handler_calls() -> list[Any]:
    return sys.modules["shop_handlers"].CALLS  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- running


def test_a_handler_gets_coerced_args_and_its_writes_are_graded_and_diffed(shop: Callable[..., st.Domain]) -> None:
    domain = shop()
    r = trial(domain, [("refund", {"order_id": "O1"}), "Refunded."], run_seed=3)
    assert r.verdict == "passed", r.checks
    assert handler_calls() == [({"order_id": "O1", "reason": "none given"}, "refund", 0, r.seed,
                                "2025-01-01T00:00:00+00:00")]
    (call,) = r.calls
    assert (call["ok"], call["error"]) == (True, None)
    assert call["result"]["refunded"] == 30 and call["result"]["note"] == "N-2"
    assert call["result"]["code"] == random.Random(r.seed).randint(1000, 9999)
    assert r.diff == {
        "created": [{"table": "notes", "key": "N-2",
                     "row": {"order_id": "O1", "text": "none given", "note_id": "N-2"}}],
        "changed": [
            {"table": "orders", "key": "O1", "fields": {
                "refunded_at": {"before": None, "after": "2025-01-01T00:00:00+00:00"},
                "status": {"before": "delivered", "after": "refunded"}}},
            {"table": "cards", "key": "C1", "fields": {"balance": {"before": 10, "after": 40}}},
        ],
    }


def test_rules_are_checked_and_checks_run_before_the_handler(shop: Callable[..., st.Domain]) -> None:
    domain = shop()
    r = trial(domain, [("refund", {"order_id": "O3"}), ("refund", {"order_id": "O9"})])
    assert [v.invariant for v in r.violations] == ["no-refund-o3"]
    assert r.calls[0]["violations"] == ["no-refund-o3"]
    assert r.calls[0]["ok"] is True  # a rule is graded, not enforced: the call ran
    # the failing check answered; the handler was never called for O9
    assert r.calls[1]["error"] == {"code": 404, "message": "order O9 does not exist"}
    assert r.verdict == "failed"
    # O3 by the agent, then O1 by the task's reference, replayed for the failed trial's owner
    assert [c[0]["order_id"] for c in handler_calls()] == ["O3", "O1"]


def test_a_tool_error_reaches_the_agent_and_undoes_the_calls_writes(shop: Callable[..., st.Domain]) -> None:
    domain = shop()
    seen: list[Any] = []

    def agent(turn: st.Turn) -> str:
        seen.append(turn.call_tool("refund", {"order_id": "O2"}))
        seen.append(turn.call_tool("half_then_fail", {}))
        return "Sorry."

    r = st.run_trial(domain, "refund-o1", agent, st.ScriptedUser())
    assert [(x.ok, x.error, x.message) for x in seen] == [
        (False, 409, "order O2 is shipped"),
        (False, 402, "declined after a write"),
    ]
    assert [c["error"] for c in r.calls] == [{"code": 409, "message": "order O2 is shipped"},
                                             {"code": 402, "message": "declined after a write"}]
    assert r.diff == {"created": [], "changed": []}
    assert r.verdict == "failed"


def test_a_handler_that_raises_errors_the_trial_with_its_traceback(
    shop: Callable[..., st.Domain], tmp_path: Path
) -> None:
    r = trial(shop(), [("broken", {"order_id": "O1"}), "Done."])
    assert r.verdict == "errored"
    assert r.ended_by == "domain_error"
    assert r.error == (
        "the domain failed running broken: its handler shop_handlers:broken raised KeyError: 'O1'\n"
        "Traceback (most recent call last):\n"
        f'  File "{tmp_path / "shop_handlers.py"}", line 30, in broken\n'
        "    return totals[args[\"order_id\"]]\n"
        + "".join(f"{line}\n" for line in CARETS)
        + "KeyError: 'O1'"
    )
    assert r.diff == {"created": [], "changed": []}  # its write was undone


def test_a_handler_that_exits_errors_the_trial_and_the_run_goes_on(shop: Callable[..., st.Domain]) -> None:
    r = trial(shop(), [("leave", {})])
    assert (r.verdict, r.diff) == ("errored", {"created": [], "changed": []})
    assert r.error is not None and r.error.startswith(
        "the domain failed running leave: its handler shop_handlers:leave raised SystemExit: 3\n"
    )


def test_a_result_or_a_write_that_is_not_json_errors_the_trial(shop: Callable[..., st.Domain]) -> None:
    r = trial(shop(), [("odd_result", {})])
    assert r.verdict == "errored"
    assert r.error == ("the domain failed running odd_result: its handler shop_handlers:odd_result returned "
                       "a datetime at result.when, expected a JSON value")
    r = trial(shop(), [("odd_write", {})])
    assert r.error is not None and r.error.startswith(
        "the domain failed running odd_write: its handler shop_handlers:odd_write raised ValueError: "
        "world.update('orders', key, values): a datetime at values.history[0].at, expected a JSON value\n"
    )


def test_the_world_handle_reads_copies_lists_with_conditions_and_deletes(shop: Callable[..., st.Domain]) -> None:
    r = trial(shop(), [("orders_of", {"user": "U1", "min_total": "40"}), ("close_note", {"note_id": "N-1"}),
                       ("close_note", {"note_id": "N-1"})])
    assert [c["result"] for c in r.calls] == [["O2", "O3"], {"note_id": "N-1", "order_id": "O2", "text": "first"},
                                              None]
    assert r.calls[2]["error"] == {"code": 404, "message": "notes N-1 not found"}
    assert r.diff["changed"] == []  # the listed row the handler changed was a copy


def test_the_world_handle_answers_conflicts_and_missing_rows_as_the_ops_do(shop: Callable[..., st.Domain]) -> None:
    r = trial(shop(), [("conflicts", {}), ("typo", {})])
    assert r.calls[0]["result"] == [[409, "notes N-1 already exists"], [404, "cards C9 not found"], "N-2"]
    assert [c["key"] for c in r.diff["created"]] == ["N-2"]  # a caught ToolError undoes nothing else
    assert r.error is not None and r.error.startswith(
        "the domain failed running typo: its handler shop_handlers:typo raised ValueError: unknown table 'ordrs'; "
        "the tables are 'orders', 'cards', 'notes'\n"
    )


@pytest.mark.parametrize(
    ("clock", "start"),
    [
        ("", "2025-01-01T00:00:00+00:00"),
        ('clock: { now: "2030-02-03T04:05:06-05:00" }\n', "2030-02-03T04:05:06-05:00"),
    ],
)
def test_the_clock_starts_at_the_task_then_the_domain_then_the_default(
    shop: Callable[..., st.Domain], clock: str, start: str
) -> None:
    domain = shop(("world:\n", clock + "world:\n"))
    r = trial(domain, [("clock", {"seconds": 60}), ("clock", {"seconds": 1.5})], task="refund-o1")
    assert r.calls[0]["result"][0] == start
    assert [c["result"] for c in trial(domain, [("clock", {"seconds": 3600})], task="clock-task").calls] == [
        ["2024-05-15T15:00:00+00:00", "2024-05-15T16:00:00+00:00"]]
    assert r.calls[1]["result"][0] == r.calls[0]["result"][1]  # advanced for the rest of the trial


def test_the_clock_only_moves_forward(shop: Callable[..., st.Domain]) -> None:
    r = trial(shop(), [("clock", {"seconds": -5})])
    assert r.verdict == "errored"
    assert r.error is not None and r.error.startswith(
        "the domain failed running clock: its handler shop_handlers:clock raised ValueError: "
        "ctx.advance(seconds) only moves the clock forward, got -5\n"
    )


def test_the_same_seed_gives_the_same_results(shop: Callable[..., st.Domain]) -> None:
    domain = shop()
    turns = [("refund", {"order_id": "O1"}), ("refund", {"order_id": "O4"})]
    first, again, other = (trial(domain, turns, run_seed=s) for s in (7, 7, 8))
    assert first.calls == again.calls and first.diff == again.diff
    assert [c["result"]["code"] for c in first.calls] != [c["result"]["code"] for c in other.calls]


def test_the_public_names() -> None:
    with pytest.raises(ValueError, match=r"^ToolError status must be an integer from 400 to 599, got 200$"):
        st.ToolError(200, "fine")
    assert str(st.ToolError(402, "card declined")) == "402: card declined"
    assert st.WorldHandle.__module__ == st.HandlerContext.__module__ == "pytest_sandtable.engine.handlers"


# --------------------------------------------------------------------------- problems at load time


def problems(tmp_path: Path, tools: str, extra: str = "", **modules: str) -> list[str]:
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    text = (
        "version: 1\nname: bad\n" + extra
        + "world:\n  orders: { key: id, rows: [{ id: 1 }] }\ntools:\n" + textwrap.dedent(tools)
        + "tasks:\n  - id: t\n    user: { opening: hi }\n"
    )
    (tmp_path / "sandtable.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(DomainError) as e:
        st.load_domain(tmp_path / "sandtable.yaml")
    return [f"{p.line}:{p.col}: {p.path}: {p.message}" for p in e.value.problems]


def test_a_handler_that_cannot_be_imported_is_a_problem_at_its_line(tmp_path: Path) -> None:
    tools = """\
      - { name: a, handler: h_nothere:f }
      - { name: b, handler: h_syntax:f }
      - { name: c, handler: h_dep:f }
      - { name: d, handler: h_raises:f }
      - { name: e, handler: h_ok:refnd }
      - { name: f, handler: h_ok:LIMIT }
      - { name: g, handler: h_ok:two }
      - { name: h, handler: "h_ok refund" }
      - { name: i, handler: h_ok:later }
    """
    assert problems(
        tmp_path, tools,
        h_syntax="def f(:\n    pass\n",
        h_dep="import h_no_such_package\n",
        h_raises="X = 1\nY = X / 0\n",
        h_ok="LIMIT = 3\ndef refund(args, world, ctx):\n    return 1\ndef two(args, world):\n    return 2\n"
             "async def later(args, world, ctx):\n    return 3\n",
    ) == [
        f"6:23: tools[0].handler: cannot import module 'h_nothere' of handler 'h_nothere:f': no module named "
        f"'h_nothere' (looked in the domain file's folder {tmp_path}, then sys.path)",
        "7:23: tools[1].handler: module 'h_syntax' of handler 'h_syntax:f' has a syntax error: invalid syntax "
        "(h_syntax.py, line 1)",
        "8:23: tools[2].handler: importing module 'h_dep' of handler 'h_dep:f' raised ModuleNotFoundError: "
        "No module named 'h_no_such_package' (h_dep.py, line 1)",
        "9:23: tools[3].handler: importing module 'h_raises' of handler 'h_raises:f' raised ZeroDivisionError: "
        "division by zero (h_raises.py, line 2)",
        "10:23: tools[4].handler: unknown function 'refnd' in module 'h_ok'; did you mean 'refund'?",
        "11:23: tools[5].handler: handler 'h_ok:LIMIT' is int 3, expected a function",
        "12:23: tools[6].handler: handler 'h_ok:two' takes (args, world), expected a function called as "
        "function(args, world, ctx)",
        "13:23: tools[7].handler: expected module:function, such as my_handlers:refund, got 'h_ok refund'",
        "14:23: tools[8].handler: handler 'h_ok:later' is an async function; handlers are called synchronously, "
        "so make it a plain def",
    ]


def test_a_tool_has_ops_or_a_handler(tmp_path: Path) -> None:
    tools = """\
      - { name: a, handler: h_ok:f, ops: [{ get: { table: orders, key: 1 } }] }
      - { name: b }
    """
    assert problems(tmp_path, tools, h_ok="def f(args, world, ctx):\n    return 1\n") == [
        "6:3: tools[0]: found 'ops' and 'handler', expected only one of 'ops', 'handler'",
        "7:3: tools[1]: missing required key: one of 'ops', 'handler'",
    ]


def test_a_module_of_the_same_name_imported_from_elsewhere_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text("def f(args, world, ctx):\n    return 1\n", encoding="utf-8")
    assert problems(tmp_path, "  - { name: a, handler: json:f }\n") == [
        f"6:23: tools[0].handler: module 'json' is already imported from {json.__file__}, so the domain file's "
        "json.py cannot be; give the handler module a name of its own",
    ]


@pytest.mark.parametrize(
    ("now", "message"),
    [
        ('"2024-05-15T15:00:00"', "found string '2024-05-15T15:00:00' (a time without an offset)"),
        ("2024-05-15", "found string '2024-05-15' (a date without a time)"),
        ("tomorrow", "found string 'tomorrow'"),
        ("1715785200", "found integer 1715785200"),
    ],
)
def test_a_clock_needs_a_date_and_time_with_an_offset(tmp_path: Path, now: str, message: str) -> None:
    found = problems(tmp_path, "  - { name: a, ops: [{ get: { table: orders, key: 1 } }] }\n",
                     extra=f"clock: {{ now: {now} }}\n")
    assert found == [f"3:15: clock.now: {message}, expected an ISO 8601 date and time with an offset or Z, "
                     'such as "2024-05-15T15:00:00+00:00"']


# --------------------------------------------------------------------------- the plugin, the cache, the CLI


def _project(pytester: pytest.Pytester, pad: bool = False) -> Path:
    """The shop in a folder of its own (nothing on sys.path), padded to be cached when ``pad``."""
    folder = pytester.path / "domains" / "shop"
    folder.mkdir(parents=True)
    (folder / "shop_handlers.py").write_text(HANDLERS, encoding="utf-8")
    text = DOMAIN
    if pad:
        text += "".join(f"# padding line {i:05d} {'-' * 40}\n" for i in range(cache.MIN_CACHED_BYTES // 50 + 1))
    (folder / "sandtable.yaml").write_text(text, encoding="utf-8")
    return folder / "sandtable.yaml"


def _results(pytester: pytest.Pytester) -> dict[str, Any]:
    return strip_timings(read_results(run_dirs(pytester.path)[-1] / "results.json"))


def test_pytest_finds_the_handlers_next_to_the_domain_and_a_seed_repeats_the_run(pytester: pytest.Pytester) -> None:
    _project(pytester)
    assert pytester.runpytest_subprocess("--sandtable-k=2", "--sandtable-seed=5").ret == 0
    first = _results(pytester)
    assert pytester.runpytest_subprocess("--sandtable-k=2", "--sandtable-seed=5").ret == 0
    assert _results(pytester) == first
    assert pytester.runpytest_subprocess("--sandtable-k=2", "--sandtable-seed=6").ret == 0
    codes = [[t["calls"][0]["result"]["code"] for t in doc["trials"] if t["task"] == "refund-o1"]
             for doc in (first, _results(pytester))]
    assert codes[0] != codes[1]
    assert [t["diff"]["changed"][-1] for t in first["trials"] if t["task"] == "refund-o1"] == [
        {"table": "cards", "key": "C1", "fields": {"balance": {"before": 10, "after": 40}}}] * 2


def test_xdist_workers_resolve_handlers_of_a_cached_domain(pytester: pytest.Pytester) -> None:
    path = _project(pytester, pad=True)
    args = ("-p", "xdist", "--sandtable-k=2", "--sandtable-seed=1")
    assert pytester.runpytest_subprocess(*args, "-n", "0", "--sandtable-cache-dir=off").ret == 0
    serial = _results(pytester)
    assert pytester.runpytest_subprocess(*args, "-n", "2").ret == 0  # cold: a worker builds the entry
    (entry,) = (pytester.path / ".pytest_cache" / "d" / "sandtable-domains").glob("*.domain")
    assert b"shop_handlers:refund" in entry.read_bytes()  # the reference, not the function
    assert pytester.runpytest_subprocess(*args, "-n", "2").ret == 0  # warm: workers import on the first call
    assert serial == _results(pytester)
    assert path.is_file()


def test_regrade_replays_handler_calls_and_lint_replays_references(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _project(pytester)
    assert pytester.runpytest_subprocess("--sandtable-k=2").ret == 0
    run = run_dirs(pytester.path)[-1]
    capsys.readouterr()
    assert main(["regrade", str(run), "-o", "regraded"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "sandtable: regraded 4 trials of shop against domains/shop/sandtable.yaml: no verdict changed"
    # lint replays each reference through the handlers: refund-o1's passes; one that breaks errors
    path.write_text(path.read_text(encoding="utf-8") + BROKEN_TASK, encoding="utf-8")
    assert main(["lint", "domains/shop/sandtable.yaml"]) == 1
    shown = "domains/shop/sandtable.yaml"
    clock_at = DOMAIN.splitlines().index("  - id: clock-task") + 1
    broken_at = len(DOMAIN.splitlines()) + 1
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, text in enumerate(lines) if text.startswith("policy coverage: "))
    assert lines[:start] == [
        f"{shown}:{clock_at}: note: clock-task: no reference: the reference agent cannot rehearse this task and lint "
        "cannot check it",
        f"{shown}:{clock_at}: warning: clock-task: has no expectations: any agent that breaks no rule passes it",
        f"{shown}:{broken_at}: error: broken-ref: the reference trial errored: the domain failed running broken: "
        "its handler shop_handlers:broken raised KeyError: 'O1'",
        "Traceback (most recent call last):",
        f'  File "{path.parent / "shop_handlers.py"}", line 30, in broken',
        '    return totals[args["order_id"]]',
        *CARETS,
        "KeyError: 'O1'",
    ]


BROKEN_TASK = """\
  - id: broken-ref
    user: { opening: "Check O1." }
    expect: { called: [broken] }
    reference:
      - call: broken
        args: { order_id: O1 }
"""


def test_the_handler_example_passes_with_the_reference_agent(pytester: pytest.Pytester) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "handlers"
    for name in ("sandtable.yaml", "shop_handlers.py"):
        (pytester.path / name).write_text((example / name).read_text(encoding="utf-8"), encoding="utf-8")
    result = pytester.runpytest_subprocess("--sandtable-k=2")
    result.assert_outcomes(passed=6)
    trials = only_results(pytester.path)["trials"]
    order = next(t for t in trials if t["task"] == "order-split-payment")
    assert order["diff"]["created"][0]["row"] == {
        "user_id": "U1", "skus": ["LAMP", "PEN"], "total": 44.5, "paid_gift_card": 25.0, "paid_card": 19.5,
        "status": "placed", "placed_at": "2025-03-01T09:00:00+00:00", "refunds": [], "order_id": "O-2",
    }


def test_a_cached_domain_whose_handler_no_longer_imports_errors_its_trials(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _project(pytester, pad=True)
    assert pytester.runpytest_subprocess("-k", "refund").ret == 0  # builds the cache entry
    handlers = path.parent / "shop_handlers.py"
    handlers.write_text(HANDLERS.replace("def refund(", "def refund_order("), encoding="utf-8")
    result = pytester.runpytest_subprocess("-k", "refund")  # the domain comes from the cache, unchecked
    assert result.ret == 1
    (refund,) = _results(pytester)["trials"]
    assert refund["verdict"] == "errored"
    assert refund["error"] == (
        "the domain failed running refund: its handler shop_handlers:refund could not be loaded: "
        "unknown function 'refund' in module 'shop_handlers'; did you mean 'refund_order'?"
    )
    # the file itself, checked again, says the same with a line
    capsys.readouterr()
    assert main(["validate", "domains/shop/sandtable.yaml"]) == 2
    line = DOMAIN.splitlines().index("    handler: shop_handlers:refund") + 1
    assert capsys.readouterr().out.splitlines() == [
        f"domains/shop/sandtable.yaml:{line}:14: tools[0].handler: unknown function 'refund' in module "
        "'shop_handlers'; did you mean 'refund_order'?"
    ]


# ----------------------------------------------------------- the reference world, once per task

STAMPS = '''\
CALLS = []


def close(args, world, ctx):
    CALLS.append(("close", args["order_id"]))
    world.update("orders", args["order_id"], {"status": "closed"})
    return {"closed": args["order_id"]}


def stamp(args, world, ctx):
    CALLS.append(("stamp", args["order_id"]))
    world.update("orders", args["order_id"], {"stamp": ctx.random.randint(1, 10**9)})
    return {"stamped": args["order_id"]}
'''

STAMP_DOMAIN = """\
version: 1
name: stamps
world:
  orders:
    key: order_id
    rows: [{ order_id: O1, status: open }]
tools:
  - name: close
    params: { order_id: { type: string } }
    handler: h_stamps:close
  - name: stamp
    params: { order_id: { type: string } }
    handler: h_stamps:stamp
tasks:
  - id: close-o1
    user: { opening: Close O1. }
    expect: { world_matches_reference: true }
    reference: [{ call: close, args: { order_id: O1 } }, { say: Closed. }]
  - id: stamp-o1
    user: { opening: Stamp O1. }
    expect: { world_matches_reference: true }
    reference: [{ call: stamp, args: { order_id: O1 } }, { say: Stamped. }]
"""


@pytest.mark.parametrize(("task", "calls"), [("close-o1", 3 + 1), ("stamp-o1", 3 + 3)])
def test_the_reference_world_is_replayed_once_unless_a_handler_read_the_seed(
    tmp_path: Path, task: str, calls: int
) -> None:
    """A task whose reference replay read neither ``ctx.seed`` nor ``ctx.random`` has one
    reference world for every trial: replayed once (then 3 trials call the handler 3 times
    and the replay once). One that read the seed is replayed for each trial's seed, so each
    trial matches its own (a world kept from seed 1 would differ from seed 2's stamp)."""
    (tmp_path / "h_stamps.py").write_text(STAMPS, encoding="utf-8")
    (tmp_path / "sandtable.yaml").write_text(STAMP_DOMAIN, encoding="utf-8")
    domain = st.load_domain(tmp_path / "sandtable.yaml")
    steps = next(t for t in domain.tasks if t.id == task).reference
    results = [st.run_trial(domain, task, st.ReferenceAgent(steps), st.ScriptedUser(), trial=i, k=3)
               for i in (1, 2, 3)]
    assert [r.passed for r in results] == [True, True, True]
    assert len(sys.modules["h_stamps"].CALLS) == calls


def test_a_reference_after_a_seeded_setup_continues_the_trials_draws(tmp_path: Path) -> None:
    """The reference world starts as the trial did, its setup's draws from ``ctx.random``
    included: the reference's own draws come after them, as the agent's calls' do."""
    handlers = STAMPS + '''

def deal(args, world, ctx):
    world.update("orders", "O1", {"dealt": ctx.random.randint(1, 10**9)})
'''
    domain_text = STAMP_DOMAIN.replace(
        "  - id: stamp-o1\n",
        "  - id: stamp-o1\n    setup: [{ handler: 'h_stamps:deal' }]\n")
    (tmp_path / "h_stamps.py").write_text(handlers, encoding="utf-8")
    (tmp_path / "sandtable.yaml").write_text(domain_text, encoding="utf-8")
    domain = st.load_domain(tmp_path / "sandtable.yaml")
    steps = next(t for t in domain.tasks if t.id == "stamp-o1").reference
    results = [st.run_trial(domain, "stamp-o1", st.ReferenceAgent(steps), st.ScriptedUser(), trial=i, k=2)
               for i in (1, 2)]
    assert [(r.passed, [c.detail for c in r.checks if not c.passed]) for r in results] == [(True, []), (True, [])]
