"""A task's faults and events (docs/spec.md, "Faults and events"): loading and checking
them, what agents see (in-process, Claude, OpenAI, HTTP step), the world they change,
results.json, the failure text, lint and regrade."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import (
    FakeAnthropic,
    FakeOpenAI,
    FakeStepService,
    claude_text,
    claude_tools,
    openai_text,
    openai_tools,
    step_calls,
    step_reply,
)

import pytest_sandtable as st
from pytest_sandtable.adapters.claude import ClaudeAgent
from pytest_sandtable.adapters.http_agent import HttpStepAgent
from pytest_sandtable.adapters.openai import OpenAIAgent
from pytest_sandtable.adapters.options import AdapterOptions
from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.domain.model import Event, Fault, Pos
from pytest_sandtable.engine.trial import regrade_trial
from pytest_sandtable.report.regrade import changes_given
from pytest_sandtable.report.results_json import validate_results
from pytest_sandtable.serve import serve_world

DESK = """\
version: 1
name: desk
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1, status: available }
      - { load_id: L-2, status: available }
  bookings:
    key: booking_id
    key_format: "B-{n}"
    rows: []
tools:
  - name: search_loads
    params: { load_id: { type: string, required: false } }
    ops:
      - list: { table: loads, where: { load_id: $load_id, status: available } }
  - name: find_booking
    params: { load_id: { type: string } }
    ops:
      - list: { table: bookings, where: { load_id: $load_id } }
  - name: book_load
    params: { load_id: { type: string } }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
      - create: { table: bookings, row: { load_id: $load_id } }
invariants:
  - id: book-available-loads-only
    kind: require
    tool: book_load
    record: { table: loads, key: $load_id }
    where: { status: available }
tasks:
  - id: book
    user: { opening: "Book L-1.", script: ["Thanks."] }
    faults:
      - { tool: book_load, kind: timeout, calls: 1, after_commit: true }
    expect:
      state: [{ table: bookings, where: { load_id: L-1 }, count: 1 }]
    reference:
      - call: book_load
        args: { load_id: L-1 }
      - call: find_booking
        args: { load_id: L-1 }
      - say: "Booked: B-1."
"""

FAULTS = "      - { tool: book_load, kind: timeout, calls: 1, after_commit: true }\n"


def desk(faults: str = FAULTS, events: str = "") -> st.Domain:
    text = DESK.replace(FAULTS, faults)
    if events:
        text = text.replace("    expect:\n", "    events:\n" + events + "    expect:\n")
    return load_domain_text(text, "desk.yaml")


def problems(text: str) -> list[str]:
    with pytest.raises(DomainError) as e:
        load_domain_text(text, "desk.yaml")
    return [str(p) for p in e.value.problems]


def line_of(text: str, fragment: str) -> int:
    """The line of the last occurrence (tasks come after the tools they repeat words of)."""
    return max(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def replies(result: st.TrialResult) -> list[str]:
    return [e["text"] for e in result.transcript if e["role"] == "agent"]


def once(agent: Any) -> Any:
    """The agent for the first turn; later turns (the scripted user's thanks) get a goodbye."""
    def turn_once(turn: st.Turn) -> str:
        if turn.state.get("done"):
            return "You're welcome."
        turn.state["done"] = True
        return str(agent(turn))

    return turn_once


@once
def naive(turn: st.Turn) -> str:
    """Retries a failed booking blindly: the trap an after-commit timeout sets."""
    for _ in range(3):
        r = turn.call_tool("book_load", {"load_id": "L-1"})
        if r.ok:
            return f"Booked: {r.value['booking_id']}."
    return "Sorry, the booking system is down."


@once
def careful(turn: st.Turn) -> str:
    """Checks whether a booking that timed out landed before trying again."""
    r = turn.call_tool("book_load", {"load_id": "L-1"})
    if not r.ok and (r.error or 0) >= 500:
        found = turn.call_tool("find_booking", {"load_id": "L-1"})
        if found.ok and found.value:
            return f"Booked: {found.value[0]['booking_id']}."
        r = turn.call_tool("book_load", {"load_id": "L-1"})
    return f"Booked: {r.value['booking_id']}." if r.ok else f"Could not book: {r.message}"


@once
def searcher(turn: st.Turn) -> str:
    """Searches until the search answers (a rate limit is retried), then books L-2."""
    for _ in range(5):
        r = turn.call_tool("search_loads", {})
        if r.ok:
            break
    booked = turn.call_tool("book_load", {"load_id": "L-2"})
    return "Booked." if booked.ok else "No."


# --------------------------------------------------------------------------- loading


def test_faults_and_events_load_with_their_defaults() -> None:
    domain = desk(
        "      - { tool: book_load, kind: timeout, calls: 1, after_commit: true }\n"
        "      - { tool: search_loads, kind: rate_limit, calls: [1, 3] }\n"
        "      - { tool: search_loads, kind: server_error, calls: { fraction: 0.5 }, latency_ms: 250 }\n"
        "      - { tool: find_booking, kind: server_error, status: 502, message: upstream down }\n",
        "      - after: { tool: search_loads, call: 2 }\n"
        "        update: { table: loads, key: L-2, set: { status: booked } }\n"
        "      - after: { tool: find_booking }\n"
        "        delete: { table: loads, key: L-2 }\n",
    )
    task = domain.task("book")
    assert task.faults == [
        Fault("book_load", "timeout", calls=(1,), after_commit=True, status=504,
              message="the request to book_load timed out", index=1),
        Fault("search_loads", "rate_limit", calls=(1, 3), status=429, retry_after=1.0,
              message="rate limited: too many requests to search_loads; retry after 1 second", index=2),
        Fault("search_loads", "server_error", fraction=0.5, status=503, latency_ms=250,
              message="search_loads failed: 503 Service Unavailable", index=3),
        Fault("find_booking", "server_error", every=True, status=502, message="upstream down", index=4),
    ]
    assert task.faults[0].pos == Pos(line_of(DESK, "kind: timeout"), 9)
    assert task.events == [
        Event("search_loads", 2, "update", {"table": "loads", "key": "L-2", "set": {"status": "booked"}}, index=1),
        Event("find_booking", 1, "delete", {"table": "loads", "key": "L-2"}, index=2),
    ]


def test_bad_faults_and_events_say_where_and_what_was_expected() -> None:
    text = DESK.replace(FAULTS, (
        "      - { tool: book_lode, kind: timeout }\n"
        "      - { tool: book_load, kind: timout }\n"
        "      - { tool: book_load, kind: rate_limit, after_commit: true, status: 502, calls: 1 }\n"
        "      - { tool: search_loads, kind: server_error, calls: { fraction: 0 } }\n"
        "      - { tool: search_loads, kind: timeout, after_commit: true, retry_after: 3, calls: 1 }\n"
        "      - { tool: find_booking, latency_ms: 5, after_commit: true }\n"
        "      - { tool: find_booking, calls: 2 }\n"
        "      - { tool: book_load, kind: server_error, calls: 2 }\n"
        "      - { tool: book_load, kind: timeout, calls: [2, 3] }\n"
    )).replace("    expect:\n", (
        "    events:\n"
        "      - after: { tool: find_bookin }\n"
        "        update: { table: lodes, key: L-2, set: { status: booked } }\n"
        "      - after: { tool: find_booking, call: 0 }\n"
        "        delete: { table: loads, key: L-9 }\n"
        "      - after: { tool: find_booking }\n"
        "        create: { table: loads, row: { load_id: L-1 } }\n"
        "      - after: { tool: find_booking }\n"
        "        update: { table: loads, key: $load_id, set: { status: booked } }\n"
        "      - after: { tool: find_booking }\n"
        "        update: { table: loads, key: L-1, set: { status: booked } }\n"
        "        delete: { table: loads, key: L-1 }\n"
        "    expect:\n"
    ))
    at = {f: line_of(text, f) for f in (
        "book_lode", "timout", "rate_limit", "fraction: 0", "retry_after", "latency_ms: 5", "find_booking, calls: 2",
        "server_error, calls: 2", "calls: [2, 3]", "find_bookin }", "call: 0", "row: { load_id: L-1 }", "key: $load_id",
        "delete: { table: loads, key: L-1")}
    every_find, created = at["find_booking, calls: 2"], at["row: { load_id: L-1 }"]
    assert problems(text) == [
        f"desk.yaml:{at['book_lode']}:17: tasks[0].faults[0].tool: unknown tool 'book_lode'; did you mean 'book_load'?",
        f"desk.yaml:{at['timout']}:34: tasks[0].faults[1].kind: found 'timout', expected one of timeout, "
        "rate_limit, server_error; did you mean 'timeout'?",
        f"desk.yaml:{at['rate_limit']}:46: tasks[0].faults[2].after_commit: after_commit is for kinds timeout and "
        "server_error: a rate limit refuses the call before it runs",
        f"desk.yaml:{at['rate_limit']}:66: tasks[0].faults[2].status: 'status' is for kind server_error; this fault "
        "is kind rate_limit (error 429)",
        f"desk.yaml:{at['fraction: 0']}:70: tasks[0].faults[3].calls.fraction: found 0, expected more than 0",
        f"desk.yaml:{at['retry_after']}:46: tasks[0].faults[4].after_commit: after_commit: tool search_loads writes "
        "nothing (no create, update or delete op), so the call would change nothing before its error; drop "
        "after_commit",
        f"desk.yaml:{at['retry_after']}:66: tasks[0].faults[4].retry_after: 'retry_after' is for kind rate_limit; "
        "this fault is kind timeout",
        f"desk.yaml:{at['latency_ms: 5']}:46: tasks[0].faults[5].after_commit: after_commit needs a kind (timeout or "
        "server_error): latency alone is no error",
        f"desk.yaml:{every_find}:9: tasks[0].faults[6]: missing required key: at least one of 'kind', "
        "'latency_ms'",
        f"desk.yaml:{every_find}:9: tasks[0].faults[6]: this fault never applies: the fault at line "
        f"{at['latency_ms: 5']} already takes every call of find_booking",
        f"desk.yaml:{at['calls: [2, 3]']}:50: tasks[0].faults[8].calls: call 2 of book_load already fails by the "
        f"fault at line {at['server_error, calls: 2']}; a call gets the first fault that lists it",
        f"desk.yaml:{at['find_bookin }']}:24: tasks[0].events[0].after.tool: unknown tool 'find_bookin'; did you "
        "mean 'find_booking'?",
        f"desk.yaml:{at['find_bookin }'] + 1}:26: tasks[0].events[0].update.table: unknown table 'lodes'; did you "
        "mean 'loads'?",
        f"desk.yaml:{at['call: 0']}:44: tasks[0].events[1].after.call: found 0, expected at least 1",
        f"desk.yaml:{at['call: 0'] + 1}:38: tasks[0].events[1].delete.key: no row of table loads has the key "
        "'L-9', and no tool creates one; did you mean 'L-2'?",
        f"desk.yaml:{created}:49: tasks[0].events[2].create.row.load_id: table loads already has a row "
        "with key 'L-1'",
        f"desk.yaml:{at['key: $load_id']}:38: tasks[0].events[3].update.key: '$load_id' refers to a call argument, "
        "but an event has none; write $$ for a literal $",
        f"desk.yaml:{at['delete: { table: loads, key: L-1'] - 2}:9: tasks[0].events[4]: found 'update' and 'delete', "
        "expected only one of 'update', 'create', 'delete'",
    ]


# --------------------------------------------------------------------------- what a call meets


def test_a_timeout_after_commit_lands_the_write_and_a_blind_retry_books_twice() -> None:
    result = st.run_trial(desk(), "book", naive, st.ScriptedUser())
    assert result.verdict == "failed"
    first, second = result.calls
    assert (first["ok"], first["error"], first["fault"]) == (
        False, {"code": 504, "message": "the request to book_load timed out"},
        {"fault": 1, "kind": "timeout", "latency_ms": 0, "after_commit": True, "landed": True})
    assert (second["ok"], second["result"], second["violations"], "fault" in second) == (
        True, {"load_id": "L-1", "booking_id": "B-2"}, ["book-available-loads-only"], False)
    assert [(c.id, c.passed, c.detail) for c in result.failed_checks] == [
        ("book-available-loads-only", False, 'book_load: loads L-1 status is "booked", expected "available"'),
        ("state:bookings[where]#1", False, 'bookings where load_id="L-1": 2 rows, expected 1'),
    ]
    assert [c["key"] for c in result.diff["created"]] == ["B-1", "B-2"]


def test_an_agent_that_checks_before_retrying_passes() -> None:
    result = st.run_trial(desk(), "book", careful, st.ScriptedUser())
    assert result.verdict == "passed"
    assert [(c["tool"], c["ok"], c.get("fault", {}).get("kind")) for c in result.calls] == [
        ("book_load", False, "timeout"), ("find_booking", True, None)]
    assert replies(result) == ["Booked: B-1.", "You're welcome."]


def test_a_fault_without_after_commit_refuses_the_call_before_the_tool_runs() -> None:
    domain = desk("      - { tool: book_load, kind: server_error, status: 502, calls: 1 }\n")
    result = st.run_trial(domain, "book", careful, st.ScriptedUser())
    assert [(c["tool"], c["ok"], c["error"]) for c in result.calls] == [
        ("book_load", False, {"code": 502, "message": "book_load failed: 502 Bad Gateway"}),
        ("find_booking", True, None),
        ("book_load", True, None),
    ]
    assert result.calls[0]["fault"] == {"fault": 1, "kind": "server_error", "latency_ms": 0}
    assert result.verdict == "passed"
    assert [c["key"] for c in result.diff["created"]] == ["B-1"]


def test_a_rate_limit_tells_the_wait_and_a_retry_goes_through() -> None:
    domain = desk("      - { tool: search_loads, kind: rate_limit, calls: [1, 2], retry_after: 2.5 }\n")
    result = st.run_trial(domain, "book", searcher, st.ScriptedUser())
    assert [(c["tool"], c["ok"], c["error"]) for c in result.calls] == [
        ("search_loads", False, {"code": 429, "message": "rate limited: too many requests to search_loads; "
                                                          "retry after 2.5 seconds"}),
        ("search_loads", False, {"code": 429, "message": "rate limited: too many requests to search_loads; "
                                                          "retry after 2.5 seconds"}),
        ("search_loads", True, None),
        ("book_load", True, None),
    ]
    assert result.calls[0]["fault"] == {"fault": 1, "kind": "rate_limit", "latency_ms": 0, "retry_after": 2.5}


def test_rules_are_checked_on_a_faulted_call() -> None:
    domain = desk("      - { tool: book_load, kind: timeout }\n")
    result = st.run_trial(domain, "book", searcher, st.ScriptedUser(), trial=1)
    assert result.calls[-1]["violations"] == []
    domain = desk("      - { tool: book_load, kind: timeout }\n",
                  "      - after: { tool: search_loads }\n"
                  "        update: { table: loads, key: L-2, set: { status: booked } }\n")
    result = st.run_trial(domain, "book", searcher, st.ScriptedUser())
    assert (result.calls[-1]["ok"], result.calls[-1]["violations"]) == (False, ["book-available-loads-only"])


def test_a_call_with_bad_arguments_is_not_counted() -> None:
    @once
    def sloppy(turn: st.Turn) -> str:
        turn.call_tool("book_load", {"load_id": 1, "extra": True})
        r = turn.call_tool("book_load", {"load_id": "L-1"})
        return "ok" if r.ok else str(r.error)

    result = st.run_trial(desk(), "book", sloppy, st.ScriptedUser())
    assert [(c["error"] or {}).get("code") for c in result.calls] == [400, 504]


def test_a_fraction_of_calls_is_drawn_from_the_trials_seed() -> None:
    domain = desk("      - { tool: search_loads, kind: server_error, calls: { fraction: 0.5 } }\n")

    @once
    def searches(turn: st.Turn) -> str:
        return "".join("x" if not turn.call_tool("search_loads", {}).ok else "." for _ in range(40))

    def faulted(seed: int, trial: int) -> str:
        r = st.run_trial(domain, "book", searches, st.ScriptedUser(), run_seed=seed, trial=trial)
        return replies(r)[0]

    runs = [faulted(7, t) for t in (1, 2, 3)]
    assert runs == [faulted(7, t) for t in (1, 2, 3)]  # the same seed: the same faults
    assert len(set(runs)) == 3  # trials differ from one another
    assert faulted(8, 1) != runs[0]
    assert all(10 <= run.count("x") <= 30 for run in runs)


def test_an_event_changes_the_world_right_after_the_nth_call() -> None:
    domain = desk("      - { tool: find_booking, latency_ms: 1 }\n",
                  "      - after: { tool: search_loads, call: 2 }\n"
                  "        update: { table: loads, key: L-2, set: { status: booked } }\n"
                  "      - after: { tool: search_loads, call: 3 }\n"
                  "        create: { table: bookings, row: { booking_id: X-1, load_id: L-2 } }\n"
                  "      - after: { tool: search_loads, call: 3 }\n"
                  "        delete: { table: loads, key: L-1 }\n"
                  "      - after: { tool: search_loads, call: 4 }\n"
                  "        delete: { table: loads, key: L-1 }\n")

    @once
    def looks(turn: st.Turn) -> str:
        return " ".join(str(len(turn.call_tool("search_loads", {}).value)) for _ in range(4))

    result = st.run_trial(domain, "book", looks, st.ScriptedUser())
    assert replies(result)[0] == "2 2 1 0"
    events = [e for e in result.transcript if e["role"] == "event"]
    assert events == [
        {"role": "event", "turn": 1, "after_call": 1, "event": 1, "op": "update", "table": "loads", "key": "L-2",
         "values": {"status": "booked"}},
        {"role": "event", "turn": 1, "after_call": 2, "event": 2, "op": "create", "table": "bookings",
         "values": {"booking_id": "X-1", "load_id": "L-2"}},
        {"role": "event", "turn": 1, "after_call": 2, "event": 3, "op": "delete", "table": "loads", "key": "L-1"},
        {"role": "event", "turn": 1, "after_call": 3, "event": 4, "op": "delete", "table": "loads", "key": "L-1",
         "skipped": "loads L-1 not found"},
    ]
    assert [e["role"] for e in result.transcript[1:9]] == ["tool", "tool", "event", "tool", "event", "event",
                                                          "tool", "event"]
    assert result.diff["created"] == [{"table": "bookings", "key": "X-1", "row": {"booking_id": "X-1",
                                                                                   "load_id": "L-2"}}]


def test_latency_delays_a_threaded_agent_and_never_the_event_loop() -> None:
    domain = desk("      - { tool: book_load, latency_ms: 300 }\n")

    @once
    def books(turn: st.Turn) -> str:
        t0 = time.perf_counter()
        r = turn.call_tool("book_load", {"load_id": "L-1"})
        return f"{r.ok} {time.perf_counter() - t0 >= 0.3}"

    result = st.run_trial(domain, "book", books, st.ScriptedUser())  # a sync agent runs in a thread
    assert (replies(result)[0], result.calls[0]["fault"]) == (
        "True True", {"fault": 1, "kind": None, "latency_ms": 300})
    assert result.latency[0] >= 0.3
    t0 = time.perf_counter()
    reference = st.run_trial(domain, "book", st.ReferenceAgent(), st.ScriptedUser(), wait_latency=False)
    assert reference.calls[0]["fault"]["latency_ms"] == 300
    assert time.perf_counter() - t0 < 0.3  # the engine's own replays (lint, attribution) never wait


def test_latency_on_the_event_loop_is_awaited_and_holds_up_only_its_own_trial() -> None:
    domain = desk("      - { tool: book_load, latency_ms: 500 }\n")
    seen: list[float] = []

    async def books(turn: st.Turn) -> str:  # an async agent: on the trial's loop
        if turn.state.get("done"):
            return "You're welcome."
        turn.state["done"] = True
        t0 = time.perf_counter()
        r = await turn.acall_tool("book_load", {"load_id": "L-1"})
        seen.append(time.perf_counter() - t0)
        return f"booked: {r.ok}"

    async def both() -> list[st.TrialResult]:
        return list(await asyncio.gather(
            st.arun_trial(domain, "book", books, st.ScriptedUser()),
            st.arun_trial(domain, "book", st.ReferenceAgent(), st.ScriptedUser(), trial=2),
        ))

    t0 = time.perf_counter()
    acalled, reference = asyncio.run(both())
    wall = time.perf_counter() - t0
    # acall_tool waits where the agent called; the reference's plain call_tool after its turn
    assert seen[0] >= 0.5 and acalled.latency[0] >= 0.5 and reference.latency[0] >= 0.5
    assert [c["fault"] for c in reference.calls if c["tool"] == "book_load"] == [
        {"fault": 1, "kind": None, "latency_ms": 500}]
    assert wall < 0.9  # the two waits overlap (one after the other would take 1 s): neither blocked the loop
    assert (replies(acalled)[0], acalled.calls[0]["fault"]) == ("booked: True", {"fault": 1, "kind": None,
                                                                                   "latency_ms": 500})


# --------------------------------------------------------------------------- what model agents see


def test_claude_gets_a_fault_as_a_tool_result_marked_as_an_error() -> None:
    with FakeAnthropic() as claude:
        claude.push(claude_tools(("toolu_1", "book_load", {"load_id": "L-1"})), claude_text("It timed out."),
                    claude_text("Bye."))
        agent = ClaudeAgent("claude-test", AdapterOptions(timeout=5.0, retries=0), api_key="sk-ant-fake",
                            base_url=claude.base_url)
        result = st.run_trial(desk(), "book", agent, st.ScriptedUser())
        sent = [{k: v for k, v in block.items() if k != "cache_control"}  # the adapter's prompt caching
                for block in claude.bodies[1]["messages"][-1]["content"]]
    assert sent == [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                     "content": json.dumps({"error": 504, "message": "the request to book_load timed out"})}]
    assert result.calls[0]["fault"]["landed"] is True


def test_openai_gets_a_fault_as_the_tool_messages_error_text() -> None:
    with FakeOpenAI() as oai:
        oai.push(openai_tools(("call_1", "search_loads", {})), openai_text("Busy."), openai_text("Bye."))
        agent = OpenAIAgent("gpt-test", AdapterOptions(timeout=5.0, retries=0, agent_base_url=oai.base_url),
                            api_key="sk-fake")
        st.run_trial(desk("      - { tool: search_loads, kind: rate_limit, calls: 1 }\n"), "book", agent,
                     st.ScriptedUser())
        sent = oai.bodies[1]["messages"][-1]
    assert sent == {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(
        {"error": 429, "message": "rate limited: too many requests to search_loads; retry after 1 second"})}


def test_an_http_step_agent_gets_a_fault_as_a_failed_tool_result() -> None:
    with FakeStepService([step_calls(("c1", "book_load", {"load_id": "L-1"})), step_reply("Hm."),
                          step_reply("Bye.")]) as svc:
        agent = HttpStepAgent(svc.url, AdapterOptions(timeout=5.0, retries=0))
        st.run_trial(desk(), "book", agent, st.ScriptedUser())
        body = svc.bodies[1]
    assert body["tool_results"] == [{"id": "c1", "name": "book_load", "ok": False,
                                     "error": {"code": 504, "message": "the request to book_load timed out"}}]


# --------------------------------------------------------------------------- the plugin, lint, regrade

AGENTS = '''\
def naive(turn):
    for _ in range(3):
        r = turn.call_tool("book_load", {"load_id": "L-1"})
        if r.ok:
            return "Booked: " + r.value["booking_id"] + "."
    return "Sorry."
'''


def test_a_run_shows_the_fault_and_the_event_in_the_failure_and_results_json(pytester: pytest.Pytester) -> None:
    text = DESK.replace("    expect:\n", "    events:\n      - after: { tool: book_load, call: 2 }\n"
                                        "        update: { table: loads, key: L-2, set: { status: booked } }\n"
                                        "    expect:\n")
    pytester.makefile(".yaml", sandtable=text)
    pytester.makepyfile(agents=AGENTS)
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-agent=agents:naive", "--sandtable-out=out")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        '[[]1[]] agent -> book_load(load_id="L-1")',
        "        ! error 504: the request to book_load timed out",
        "        ~ fault 1: timeout after commit: the call ran and its writes landed",
        '[[]1[]] agent -> book_load(load_id="L-1")',
        '        = {"load_id": "L-1", "booking_id": "B-2"}',
        '        !! VIOLATION book-available-loads-only: book_load: loads L-1 status is "booked", expected "available"',
        '[[]1[]] world: event 1 after call 2: update loads "L-2" set status="booked"',
        "[[]1[]] agent: Booked: B-2.",
    ], consecutive=True)
    doc = json.loads((pytester.path / "out" / "results.json").read_text(encoding="utf-8"))
    validate_results(doc)
    trial = doc["trials"][0]
    assert trial["calls"][0]["fault"]["after_commit"] is True
    assert trial["transcript"][3]["role"] == "event"
    html = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    assert "fault 1: timeout after commit: the call ran and its writes landed" in html
    assert "event 1 after call 2: update loads &quot;L-2&quot; set status=&quot;booked&quot;" in html


def lint(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "sandtable.yaml"
    path.write_text(text, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "pytest_sandtable", "lint", str(path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)


def findings(stdout: str) -> list[str]:
    """lint's lines before the policy coverage block that follows a file's findings."""
    lines = stdout.splitlines()
    return lines[: next((i for i, line in enumerate(lines) if line.startswith("policy coverage: ")), len(lines))]


def test_lint_replays_faults_and_events_and_warns_about_those_never_reached(tmp_path: Path) -> None:
    assert findings(lint(tmp_path, DESK).stdout) == [f"ok: {tmp_path / 'sandtable.yaml'} (1 task replayed)"]
    text = DESK.replace(FAULTS, FAULTS + "      - { tool: book_load, kind: timeout, calls: [2, 3] }\n"
                                         "      - { tool: search_loads, latency_ms: 10 }\n").replace(
        "    expect:\n", "    events:\n"
                        "      - after: { tool: find_booking, call: 2 }\n"
                        "        update: { table: loads, key: L-2, set: { status: booked } }\n"
                        "      - after: { tool: find_booking }\n"
                        "        update: { table: bookings, key: B-7, set: { load_id: L-2 } }\n"
                        "    expect:\n")
    r = lint(tmp_path, text)
    path = tmp_path / "sandtable.yaml"
    assert (r.returncode, findings(r.stdout)) == (1, [
        f"{path}:{line_of(text, 'calls: [2, 3]')}: warning: book: fault 2 (timeout of book_load, calls 2, 3) is "
        "never reached when the reference runs: it makes 1 call of book_load",
        f"{path}:{line_of(text, 'latency_ms: 10')}: warning: book: fault 3 (latency of search_loads) is never "
        "reached when the reference runs: it makes 0 calls of search_loads",
        f"{path}:{line_of(text, 'call: 2 }')}: warning: book: event 1 (update loads after call 2 of find_booking) "
        "never happens when the reference runs: it makes 1 call of find_booking",
        f"{path}:{line_of(text, 'call: 2 }') + 2}: warning: book: event 2 (update bookings after call 1 of "
        "find_booking) is skipped when the reference runs: bookings B-7 not found",
    ])


def test_regrade_refuses_when_a_tasks_faults_or_events_changed() -> None:
    original = desk()
    moved = load_domain_text(DESK.replace("tasks:\n", "tasks:\n\n\n"), "desk.yaml")
    assert changes_given(original, moved, {"book": False}, "desk.yaml") == []  # only lines moved
    edited = desk("      - { tool: book_load, kind: timeout, calls: 2, after_commit: true }\n",
                  "      - after: { tool: find_booking }\n        delete: { table: loads, key: L-2 }\n")
    line = original.task("book").pos.line  # type: ignore[union-attr]
    assert changes_given(original, edited, {"book": False}, "desk.yaml") == [
        f"tasks[book].faults changed (desk.yaml:{line}): the agent's calls met the old ones",
        f"tasks[book].events changed (desk.yaml:{line}): the agent's calls met the old ones",
    ]


def test_a_task_without_faults_records_calls_as_before() -> None:
    domain = load_domain_text(DESK.replace("    faults:\n" + FAULTS, ""), "desk.yaml")
    result = st.run_trial(domain, "book", naive, st.ScriptedUser())
    assert list(result.calls[0]) == ["index", "turn", "tool", "args", "ok", "result", "error", "violations"]
    assert all(e["role"] != "event" for e in result.transcript)


def test_regrade_replays_the_faults_and_events_a_trial_met() -> None:
    domain = desk(events="      - after: { tool: book_load, call: 2 }\n"
                         "        update: { table: loads, key: L-2, set: { status: booked } }\n")
    stored = st.run_trial(domain, "book", naive, st.ScriptedUser(), run_seed=3)
    again = regrade_trial(domain, domain.task("book"), stored, None)
    assert (again.verdict, again.calls, again.diff) == (stored.verdict, stored.calls, stored.diff)
    assert [c.id for c in again.failed_checks] == [c.id for c in stored.failed_checks]


def test_the_served_world_answers_a_fault_with_its_status_and_waits_its_latency() -> None:
    seen: dict[str, Any] = {}

    @once
    def over_rest(turn: st.Turn) -> str:
        t0 = time.perf_counter()
        search = httpx.post(f"{turn.tools_url}/search_loads", json={}, timeout=5)
        seen["search"] = (search.status_code, search.json(), time.perf_counter() - t0 >= 0.2)
        book = httpx.post(f"{turn.tools_url}/book_load", json={"load_id": "L-1"}, timeout=5)
        seen["book"] = (book.status_code, book.json())
        return "Done."

    domain = desk("      - { tool: search_loads, kind: rate_limit, calls: 1, latency_ms: 200 }\n"
                  "      - { tool: book_load, kind: server_error, status: 500 }\n")
    result = st.run_trial(domain, "book", over_rest, st.ScriptedUser(), serve=serve_world)
    assert seen == {
        "search": (429, {"error": 429, "message": "rate limited: too many requests to search_loads; "
                                                  "retry after 1 second"}, True),
        "book": (500, {"error": 500, "message": "book_load failed: 500 Internal Server Error"}),
    }
    assert [c["fault"]["fault"] for c in result.calls] == [1, 2]
