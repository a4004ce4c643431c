"""Agents that misbehave in every way we know of, under pytest: sync and async, one trial
at a time and four in flight, and under pytest-xdist. Whatever an agent does, every
trial ends with a verdict in results.json, the summary counts every trial, pytest
never shows an INTERNALERROR or a traceback of this package, and no trial waits for a
timeout its agent already answered by raising.

One domain has a task per misbehaviour; the agent (``mayhem_agents.py`` in the test
project) looks at the task's id to know how to misbehave. Every task expects a reply
no misbehaving agent gives, so no trial passes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_sandtable.report.results_json import RESULTS_FILE, read_results

sys.path.insert(0, str(Path(__file__).parent))
import _sandtable_shop  # noqa: F401  (imports now what in-process runs would import each time)

K = 2
TRIAL_TIMEOUT = 1.5
# a trial whose agent raised or returned is over in milliseconds, and one that waited
# for the timeout takes at least the timeout: anything under it tells them apart (a
# machine at load 12 once stretched an answered trial to 0.93 s)
ANSWERED_WITHIN = TRIAL_TIMEOUT * 0.9

AGENTS = '''\
import asyncio
import time


class Meltdown(BaseException):
    """An agent's own BaseException."""


class Touchy(str):
    """A reply that raises when anyone asks whether it is empty."""

    def __bool__(self):
        raise Meltdown("touchy reply")

    def __len__(self):
        raise Meltdown("touchy reply")


def _raising(task_id):
    if task_id == "raises-value-error":
        raise ValueError("bad value")
    if task_id == "calls-sys-exit":
        raise SystemExit(3)
    if task_id == "raises-cancelled-error":
        raise asyncio.CancelledError()
    if task_id == "raises-generator-exit":
        raise GeneratorExit()
    if task_id == "raises-own-base-exception":
        raise Meltdown("core breach")
    if task_id == "raises-stop-iteration":
        next(iter([]))


def _misuses_tools(turn):
    task_id = turn.trial.task_id
    if task_id == "calls-an-unknown-tool":
        return turn.call_tool("launch_rockets", {})
    if task_id == "passes-a-huge-int":
        return turn.call_tool("look", {"id": 10**5000})
    if task_id == "passes-a-circular-argument":
        loop = []
        loop.append(loop)
        return turn.call_tool("look", {"id": loop})
    return None


def _reply(turn):
    task_id = turn.trial.task_id
    _raising(task_id)
    tool = _misuses_tools(turn)
    if tool is not None:
        return f"the tool said {tool.error}"
    if task_id == "returns-none":
        return None
    if task_id == "returns-an-int":
        return 42
    if task_id == "returns-a-touchy-str":
        return Touchy("hello")
    return "hello"


def sync_agent(turn):
    if turn.trial.task_id == "hangs":
        time.sleep(5)
    return _reply(turn)


async def async_agent(turn):
    if turn.trial.task_id == "hangs":
        await asyncio.sleep(5)
    return _reply(turn)
'''

# task id -> what its trials end as: (verdict, the failed runtime check's detail, or
# the errored trial's error; None when the trial is graded on its reply alone)
OUTCOMES: dict[str, tuple[str, str | None]] = {
    "raises-value-error": ("failed", "the agent raised ValueError: bad value"),
    "calls-sys-exit": ("failed", "the agent called sys.exit(3)"),
    "raises-cancelled-error": ("failed", "the agent raised CancelledError"),
    "raises-generator-exit": ("failed", "the agent raised GeneratorExit"),
    "raises-own-base-exception": ("failed", "the agent raised Meltdown: core breach"),
    "raises-stop-iteration": ("failed", None),  # differs between sync and async: see below
    "returns-none": ("failed", None),
    "returns-an-int": ("failed", "the agent returned int, expected a str reply"),
    "returns-a-touchy-str": ("errored", "running the trial raised Meltdown: touchy reply; the trial was not graded"),
    "hangs": ("failed", f"the agent did not answer before the trial timeout of {TRIAL_TIMEOUT}s (turn 1)"),
    "calls-an-unknown-tool": ("failed", None),
    "passes-a-huge-int": ("failed", None),
    "passes-a-circular-argument": ("failed", None),
}
STOP_ITERATION = {
    "sync": "the agent raised StopIteration",
    # Python turns a StopIteration raised inside a coroutine into this RuntimeError
    "async": "the agent raised RuntimeError: coroutine raised StopIteration",
}
# the tool call's error code, for the tasks whose agent misuses a tool
TOOL_ERRORS = {"calls-an-unknown-tool": 404, "passes-a-huge-int": 400, "passes-a-circular-argument": 400}
ANSWERED = set(OUTCOMES) - {"hangs"}

DOMAIN = """\
version: 1
name: mayhem
description: A desk whose agent misbehaves.
policy: Be nice.
world:
  notes:
    key: id
    rows:
      - { id: n-1, text: hello }
tools:
  - name: look
    description: Read a note.
    params: { id: { type: string } }
    ops:
      - get: { table: notes, key: $id }
tasks:
""" + "".join(
    f"""  - id: {task}
    user: {{ opening: "Hi there." }}
    expect: {{ reply_includes: ["all good"] }}
"""
    for task in OUTCOMES
)

N_TRIALS = len(OUTCOMES) * K
N_ERRORED = sum(verdict == "errored" for verdict, _ in OUTCOMES.values()) * K


@pytest.fixture
def mayhem(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\n")
    pytester.makefile(".yaml", sandtable=DOMAIN)
    pytester.makepyfile(mayhem_agents=AGENTS)
    pytester.syspathinsert()
    return pytester


def _args(kind: str, *more: str) -> tuple[str, ...]:
    return (
        "-p", "no:cacheprovider", f"--sandtable-k={K}", f"--sandtable-agent=mayhem_agents:{kind}_agent",
        f"--sandtable-trial-timeout={TRIAL_TIMEOUT}", "--sandtable-out=out", *more,
    )


def told(trial: dict[str, Any]) -> str | None:
    """What a trial says went wrong: an errored trial's error, or its failed runtime check's detail."""
    if trial["verdict"] == "errored":
        return str(trial["error"])
    details = [c["detail"] for c in trial["checks"] if c["kind"] == "runtime" and not c["passed"]]
    assert len(details) <= 1, details
    return details[0] if details else None


def assert_every_trial_accounted_for(result: pytest.RunResult, root: Any, kind: str) -> None:
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    assert "/pytest_sandtable/" not in out, "a traceback through the package reached the terminal"
    result.stdout.fnmatch_lines([
        f"{N_TRIALS} trials of {len(OUTCOMES)} tasks: 0 passed, {N_TRIALS - N_ERRORED} failed, "
        f"{N_ERRORED} errored (left out of pass^k)*"
    ])
    result.assert_outcomes(failed=N_TRIALS - N_ERRORED, errors=N_ERRORED)

    doc = read_results(root / "out" / RESULTS_FILE)
    trials = doc["trials"]
    assert sorted((t["task"], t["trial"]) for t in trials) == sorted(
        (task, i) for task in OUTCOMES for i in range(1, K + 1)
    )
    assert doc["summary"]["trials"] == N_TRIALS
    assert doc["summary"]["errored"] == N_ERRORED
    assert sorted(e["task"] for e in doc["summary"]["tasks"]) == sorted(OUTCOMES)

    for t in trials:
        verdict, detail = OUTCOMES[t["task"]]
        if t["task"] == "raises-stop-iteration":
            detail = STOP_ITERATION[kind]
        assert (t["task"], t["verdict"], told(t)) == (t["task"], verdict, detail)
        if t["task"] in TOOL_ERRORS:
            assert [c["error"]["code"] for c in t["calls"]] == [TOOL_ERRORS[t["task"]]]
        if t["task"] in ANSWERED:
            assert t["duration"] < ANSWERED_WITHIN, (t["task"], t["duration"])


@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_every_trial_of_a_misbehaving_agent_gets_a_verdict(
    mayhem: pytest.Pytester, kind: str, concurrency: int
) -> None:
    result = mayhem.runpytest(*_args(kind, f"--sandtable-concurrency={concurrency}"))
    assert_every_trial_accounted_for(result, mayhem.path, kind)


@pytest.mark.parametrize(("kind", "concurrency"), [("sync", 1), ("async", 4)])
def test_every_trial_of_a_misbehaving_agent_gets_a_verdict_under_xdist(
    mayhem: pytest.Pytester, kind: str, concurrency: int
) -> None:
    result = mayhem.runpytest_subprocess(*_args(kind, "-p", "xdist", "-n", "2",
                                                f"--sandtable-concurrency={concurrency}"))
    assert_every_trial_accounted_for(result, mayhem.path, kind)


def test_an_escaped_exception_shows_where_the_agent_raised_it(mayhem: pytest.Pytester) -> None:
    result = mayhem.runpytest(*_args("sync", "-k", "touchy and 1-"))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of returns-a-touchy-str[[]1-2[]]*",
        "returns-a-touchy-str trial 1 of 2 errored (seed *",
        "  errored: running the trial raised Meltdown: touchy reply; the trial was not graded",
        "*Captured sandtable agent traceback setup*",
        '  File "*mayhem_agents.py", line *, in __bool__',
        '    raise Meltdown("touchy reply")',
        "mayhem_agents.Meltdown: touchy reply",
    ])
