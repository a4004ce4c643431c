"""Misbehaving agents, users and tool calls (issue 8): whatever they raise or pass, the
trial ends with a verdict (failed with a `runtime` check naming what the agent did, or
errored with the user's reason), `call_tool` answers instead of raising, and the call log
can always be written as JSON."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fakes import FakeOpenAI, openai_text, openai_tools

import pytest_sandtable as st
from pytest_sandtable.adapters.openai import OpenAIAgent
from pytest_sandtable.adapters.options import AdapterOptions

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

DOMAIN = """
world:
  notes: { key: id, fields: [text] }
tools:
  - name: take_note
    params: { text: { type: string } }
    ops:
      - create: { table: notes, row: { text: $text } }
  - name: echo
    params:
      number: { type: number, required: false }
      count: { type: integer, required: false }
      text: { type: string, required: false }
      data: { type: object, required: false }
      items: { type: array, required: false }
      card: { type: object, required: false, properties: { holder: { type: string } } }
    ops:
      - respond: { number: $number, count: $count, text: $text, data: $data, items: $items, card: $card }
  - name: transfer_to_human
    params: { reason: { type: string, required: false } }
    ops:
      - respond: { transferred: true }
invariants:
  - { id: no-transfers, kind: never, tool: transfer_to_human }
tasks:
  - id: scripted
    user: { opening: "Hi.", script: ["Anything else?", "Bye."] }
  - id: one-turn
    user: { opening: "Hi." }
"""


class Meltdown(BaseException):
    """An agent's own BaseException subclass."""


@pytest.fixture
def domain(make_domain: Make) -> st.Domain:
    return make_domain(DOMAIN)


def runtime(result: st.TrialResult) -> list[str]:
    return [c.detail for c in result.failed_checks if c.kind == "runtime"]


# -- item 4: an agent or user raising a BaseException ------------------------------------------

RAISED = [
    (asyncio.CancelledError, "the agent raised CancelledError"),
    (GeneratorExit, "the agent raised GeneratorExit"),
    (lambda: Meltdown("reactor core"), "the agent raised Meltdown: reactor core"),
]


def raising_agent(make: Callable[[], BaseException], kind: str) -> Any:
    def sync_agent(turn: st.Turn) -> str:
        raise make()

    async def async_agent(turn: st.Turn) -> str:
        await asyncio.sleep(0)
        raise make()

    return sync_agent if kind == "sync" else async_agent


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(("make", "detail"), RAISED, ids=["CancelledError", "GeneratorExit", "own"])
def test_an_agent_raising_a_base_exception_fails_its_trial(
    domain: st.Domain, play: Play, make: Callable[[], BaseException], detail: str, kind: str
) -> None:
    result = play(domain, agent=raising_agent(make, kind), trial_timeout=30)
    assert (result.verdict, result.ended_by, result.error) == ("failed", "agent_error", None)
    assert runtime(result) == [detail]
    assert result.traceback is not None
    assert "raise make()" in result.traceback  # the agent's own frame, not the engine's
    assert result.traceback.endswith(detail.removeprefix("the agent raised "))
    json.dumps(result.to_dict())  # the trial travels and is written like any other


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_agent_raising_a_base_exception_through_arun_trial(domain: st.Domain, kind: str) -> None:
    async def main() -> st.TrialResult:
        return await st.arun_trial(domain, "scripted", raising_agent(asyncio.CancelledError, kind),
                                   st.ScriptedUser(), trial_timeout=30)

    assert runtime(asyncio.run(main())) == ["the agent raised CancelledError"]


def test_an_agent_awaiting_a_task_it_cancelled_itself_fails(domain: st.Domain, play: Play) -> None:
    async def agent(turn: st.Turn) -> str:
        lookup = asyncio.ensure_future(asyncio.sleep(10))
        lookup.cancel()
        await lookup  # raises CancelledError in the agent's call; the trial was not cancelled
        return "never"

    for timeout in (None, 30):
        result = play(domain, agent=agent, trial_timeout=timeout)
        assert runtime(result) == ["the agent raised CancelledError"]


HangingAgent = Callable[[threading.Event], Any]


def hanging_sync(release: threading.Event) -> Any:
    def agent(turn: st.Turn) -> str:
        release.wait(10)
        return "late"

    return agent


def hanging_async(release: threading.Event) -> Any:
    async def agent(turn: st.Turn) -> str:
        await asyncio.sleep(10)
        return "late"

    return agent


@pytest.mark.parametrize("timeout", [None, 30])
@pytest.mark.parametrize("hanging", [hanging_sync, hanging_async], ids=["sync", "async"])
def test_cancelling_the_trial_still_cancels_it(domain: st.Domain, hanging: HangingAgent,
                                               timeout: float | None) -> None:
    # what the pool does on -x, Ctrl-C or when xdist takes a trial away
    release = threading.Event()

    async def main() -> None:
        trial = asyncio.ensure_future(st.arun_trial(domain, "scripted", hanging(release), st.ScriptedUser(),
                                                    trial_timeout=timeout))
        await asyncio.sleep(0.2)
        trial.cancel()
        with pytest.raises(asyncio.CancelledError):
            await trial
        assert trial.cancelled()

    started = time.monotonic()
    try:
        asyncio.run(main())
    finally:
        release.set()
    assert time.monotonic() - started < 5  # not the 10 s the agent would hang


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(
    ("make", "error"),
    [
        (asyncio.CancelledError, "simulated user failed: _AgentExit: CancelledError()"),
        (GeneratorExit, "simulated user failed: _AgentExit: GeneratorExit()"),
        (lambda: Meltdown("reactor core"), "simulated user failed: _AgentExit: Meltdown('reactor core')"),
        (StopIteration, "simulated user failed: _AgentExit: StopIteration()"),
    ],
    ids=["CancelledError", "GeneratorExit", "own", "StopIteration"],
)
def test_a_user_raising_a_base_exception_errors_the_trial(
    domain: st.Domain, play: Play, make: Callable[[], BaseException], error: str, kind: str
) -> None:
    def sync_user(turn: st.UserTurn) -> str:
        if turn.messages:
            raise make()
        return "Hi."

    async def async_user(turn: st.UserTurn) -> str:
        return sync_user(turn)

    if kind == "async" and make is StopIteration:
        error = "simulated user failed: RuntimeError: coroutine raised StopIteration"  # Python's own rule (PEP 479)
    result = play(domain, "Hello.", user=sync_user if kind == "sync" else async_user, trial_timeout=30)
    assert (result.verdict, result.error, result.checks) == ("errored", error, [])


def test_an_async_agent_stuck_in_a_tool_loop_is_still_stopped(domain: st.Domain, play: Play) -> None:
    # the engine's own stop travels through the agent's task as itself, not as the agent's exception
    async def agent(turn: st.Turn) -> str:
        while True:
            try:
                turn.call_tool("take_note", {"text": "again"})
            except Exception:
                pass
            await asyncio.sleep(0)

    result = play(domain, agent=agent, trial_timeout=30)
    assert (len(result.calls), runtime(result)) == (100, ["the agent made more than 100 tool calls in one turn"])


# -- item 5: StopIteration out of a sync agent --------------------------------------------------


def test_a_sync_agent_raising_stopiteration_fails_at_once(domain: st.Domain, play: Play) -> None:
    def agent(turn: st.Turn) -> str:
        return str(next(iter([])))

    # before, the thread's StopIteration never reached the trial: it waited its whole timeout
    result = play(domain, agent=agent, trial_timeout=60)
    assert (result.verdict, runtime(result)) == ("failed", ["the agent raised StopIteration"])
    assert result.traceback is not None and "next(iter([]))" in result.traceback
    assert result.duration < 30


def test_an_async_agent_raising_stopiteration(domain: st.Domain, play: Play) -> None:
    async def agent(turn: st.Turn) -> str:
        return str(next(iter([])))

    result = play(domain, agent=agent, trial_timeout=60)
    # a coroutine cannot raise StopIteration: Python turns it into this RuntimeError (PEP 479)
    assert runtime(result) == ["the agent raised RuntimeError: coroutine raised StopIteration"]


# -- item 6: call_tool never raises ---------------------------------------------------------------

HUGE = 10**5000


def call_once(play: Play, domain: st.Domain, tool: str, args: Any, kind: str = "sync") -> tuple[Any, dict[str, Any]]:
    """One call from an agent (sync or async); what it got back, or what it raised, and
    what the call log says about it (after a round trip through JSON)."""
    got: list[Any] = []

    def call(turn: st.Turn) -> None:
        try:
            got.append(turn.call_tool(tool, args))
        except BaseException as e:  # the contract under test: this never happens
            got.append(e)

    def sync_agent(turn: st.Turn) -> str:
        call(turn)
        return "done"

    async def async_agent(turn: st.Turn) -> str:
        call(turn)
        return "done"

    result = play(domain, agent=sync_agent if kind == "sync" else async_agent, trial_timeout=30)
    (logged,) = json.loads(json.dumps(result.to_dict()))["calls"][:1]
    return got[0], logged


def bad(message: str) -> st.ToolResult:
    return st.ToolResult(False, error=400, message=f"invalid arguments for echo: {message}")


def nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def circular_dict() -> dict[str, Any]:
    d: dict[str, Any] = {"holder": "Ada"}
    d["self"] = d
    return d


def circular_list() -> list[Any]:
    items: list[Any] = [1]
    items.append(items)
    return items


def shared_everywhere() -> list[Any]:
    """40 levels, each holding the one below twice: 2**40 leaves once written out."""
    value: list[Any] = [0]
    for _ in range(40):
        value = [value, value]
    return value


TOO_LONG = "expected at most 4300 digits in an integer, got more"
UNREADABLE = '{"items": ' + "[" * 100_000 + "]" * 100_000 + "}"
"""Nested too deep for Python's JSON parser to read at all, on every Python version."""


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(
    ("args", "message", "recorded"),
    [
        ({"number": HUGE}, f"number: {TOO_LONG}", {"number": "<integer of more than 4300 digits>"}),
        ({"text": -HUGE}, f"text: {TOO_LONG}", {"text": "<integer of more than 4300 digits>"}),
        ({"data": {"a": [1, HUGE]}}, f"data: {TOO_LONG}", {"data": {"a": [1, "<integer of more than 4300 digits>"]}}),
        ({"data": {HUGE: 1}}, f"data: {TOO_LONG}", {"data": {"<integer of more than 4300 digits>": 1}}),
        ({"card": circular_dict()}, "card: expected JSON data, got an object that contains itself",
         {"card": {"holder": "Ada", "self": "<contains itself>"}}),
        ({"items": circular_list()}, "items: expected JSON data, got an array that contains itself",
         {"items": [1, "<contains itself>"]}),
        ({"items": nested(65)}, "items: expected at most 64 levels of nesting, got more", None),
    ],
    ids=["huge-number", "huge-for-a-string", "huge-nested", "huge-key", "circular-object", "circular-array",
         "65-levels"],
)
def test_arguments_that_are_no_json_data_are_a_400(
    domain: st.Domain, play: Play, args: dict[str, Any], message: str, recorded: Any, kind: str
) -> None:
    got, logged = call_once(play, domain, "echo", args, kind)
    assert got == bad(message)
    assert logged["error"] == {"code": 400, "message": f"invalid arguments for echo: {message}"}
    if recorded is not None:
        assert logged["args"] == recorded


def test_arguments_holding_themselves(domain: st.Domain, play: Play) -> None:
    args: dict[str, Any] = {}
    args["data"] = args
    got, logged = call_once(play, domain, "echo", args)
    assert got == bad("data: expected JSON data, got an object that contains itself")
    assert logged["args"] == {"data": "<contains itself>"}


def test_64_levels_of_nesting_are_accepted(domain: st.Domain, play: Play) -> None:
    got, logged = call_once(play, domain, "echo", {"items": nested(64)})
    assert got.ok
    assert logged["args"] == {"items": nested(64)}


def test_deep_nesting_is_cut_short_in_the_call_log(domain: st.Domain, play: Play) -> None:
    _, logged = call_once(play, domain, "echo", {"items": nested(1000)})
    cut: Any = "<nested more than 64 levels>"
    for _ in range(64):
        cut = [cut]
    assert logged["args"] == {"items": cut}


def test_at_most_100000_values_in_one_call(domain: st.Domain, play: Play) -> None:
    # the list itself counts: 99,999 numbers and their list are 100,000 values
    got, _ = call_once(play, domain, "echo", {"items": list(range(99_999))})
    assert got.ok
    got, logged = call_once(play, domain, "echo", {"items": list(range(100_000))})
    assert got == bad("arguments: expected at most 100000 values, got more")
    # the call log keeps the walk's copy (its last value "<more values>") clipped to the caps (issue 21 #3)
    walked = json.dumps([*range(99_999), "<more values>"])
    assert logged["args"]["items"] == walked[:20_000 - 39] + f"… [clipped: {len(walked):,} characters of JSON]"


def test_a_structure_shared_everywhere_is_refused_promptly(domain: st.Domain, play: Play) -> None:
    started = time.monotonic()
    got, _ = call_once(play, domain, "echo", {"items": shared_everywhere()})
    assert got == bad("arguments: expected at most 100000 values, got more")
    assert time.monotonic() - started < 20  # written out, it would be 2**40 leaves


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"count": ' + "9" * 5000 + "}", f"count: {TOO_LONG}"),
        ('{"data": {"n": -' + "1" * 4301 + "}}", f"data: {TOO_LONG}"),
        ('{"items": ' + "[" * 65 + "]" * 65 + "}", "items: expected at most 64 levels of nesting, got more"),
        (UNREADABLE, "arguments: expected at most 64 levels of nesting, got more"),
    ],
    ids=["huge", "huge-negative-nested", "65-levels", "unreadable-levels"],
)
def test_json_text_arguments_that_are_no_json_data_are_a_400(
    domain: st.Domain, play: Play, text: str, message: str
) -> None:
    got, logged = call_once(play, domain, "echo", text)
    assert got == bad(message)
    # kept as it came, within the call log's cap (issue 21 #3)
    marker = f"… [clipped: {len(text):,} characters]"
    kept = text if len(text) <= 20_000 else text[:20_000 - len(marker)] + marker
    assert logged["args"] == {"_raw": kept}


def test_an_integer_of_4300_digits_is_an_ordinary_argument(domain: st.Domain, play: Play) -> None:
    got, logged = call_once(play, domain, "echo", {"data": {"n": 10**4299}})
    assert got.ok and got.value["data"] == {"n": 10**4299}
    assert logged["args"] == {"data": {"n": 10**4299}}


def test_a_models_tool_call_with_a_huge_integer_or_deep_nesting_is_a_tool_error(domain: st.Domain) -> None:
    # the OpenAI-compatible adapter passes JSON text it cannot read on to the engine, which names the problem
    texts = ['{"count": ' + "9" * 5000 + "}", UNREADABLE]
    with FakeOpenAI() as oai:
        oai.push(openai_tools(*((f"c{i}", "echo", text) for i, text in enumerate(texts))), openai_text("Done."))
        agent = OpenAIAgent("gpt-test", AdapterOptions(timeout=5.0, retries=0, agent_base_url=oai.base_url))
        result = st.run_trial(domain, "one-turn", agent, st.ScriptedUser(), trial_timeout=30)
        tool_messages = [m for m in oai.bodies[1]["messages"] if m["role"] == "tool"]
    assert result.verdict == "passed"
    expected = [
        {"error": 400, "message": f"invalid arguments for echo: count: {TOO_LONG}"},
        {"error": 400, "message": "invalid arguments for echo: arguments: expected at most 64 levels of nesting, "
                                  "got more"},
    ]
    assert [json.loads(m["content"]) for m in tool_messages] == expected
    assert [c["error"]["message"] for c in result.calls] == [e["message"] for e in expected]


def test_an_unknown_tool_name_that_is_no_text(domain: st.Domain, play: Play) -> None:
    got, logged = call_once(play, domain, HUGE, {})  # type: ignore[arg-type]
    assert got == st.ToolResult(False, error=404,
                                message="unknown tool '<int>'; the tools are take_note, echo, transfer_to_human")
    assert logged["tool"] == "<int>"


# -- item 7: usage without a model name ---------------------------------------------------------------


def test_usage_without_a_model_name_is_recorded_as_unknown(domain: st.Domain, play: Play) -> None:
    def agent(turn: st.Turn) -> str:
        turn.usage.add(None, 10, 5)  # a server that omits `model`, passed on
        turn.usage.add("", 1, 1)
        turn.usage.add("gpt-test", 2, 3)
        return "ok"

    result = play(domain, agent=agent, task="one-turn")
    usage = json.loads(json.dumps(result.to_dict()))["usage"]["agent"]
    assert usage == {
        "(unknown model)": {"input": 11, "output": 6, "cache_read": 0, "cache_write": 0, "calls": 2},
        "gpt-test": {"input": 2, "output": 3, "cache_read": 0, "cache_write": 0, "calls": 1},
    }


# -- item 11: NaN and inf for a string; a bad argument is not a violation -----------------------------


@pytest.mark.parametrize(
    ("value", "shown"), [(float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity")]
)
def test_nan_or_infinity_for_a_string_is_a_bad_argument(domain: st.Domain, play: Play, value: float,
                                                       shown: str) -> None:
    got, _ = call_once(play, domain, "take_note", {"text": value})
    assert got == st.ToolResult(False, error=400,
                                message=f"invalid arguments for take_note: text: expected a string, got number {shown}")
    got, _ = call_once(play, domain, "echo", {"card": {"holder": value}})
    assert got == bad(f"card.holder: {shown.lower().replace('infinity', 'inf')} is not of type 'string'")


def test_nan_in_json_text_for_a_string_is_a_bad_argument(domain: st.Domain, play: Play) -> None:
    got, _ = call_once(play, domain, "take_note", '{"text": NaN}')
    assert got == st.ToolResult(False, error=400,
                                message="invalid arguments for take_note: text: expected a string, got number NaN")


def test_a_call_with_a_bad_argument_is_not_a_violation(domain: st.Domain, play: Play) -> None:
    # docs/spec.md, Tools: arguments are validated and coerced first; a bad one is a 400, not a violation
    bad_call = ("transfer_to_human", {"reason": ["angry"]})
    result = play(domain, [bad_call, "One moment."])
    assert result.calls[0]["error"] == {
        "code": 400,
        "message": 'invalid arguments for transfer_to_human: reason: expected a string, got array ["angry"]',
    }
    assert (result.calls[0]["violations"], result.violations, result.verdict) == ([], [], "passed")
    # the same call with good arguments is checked against the rules
    result = play(domain, [("transfer_to_human", {"reason": "angry"}), "One moment."])
    assert [v.invariant for v in result.violations] == ["no-transfers"]

