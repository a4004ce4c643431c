"""Deadlines of a domain's own code (issue 37, items 7 and 8): no alarm the engine sets
outlives its trial (a run that outlasts its trial timeout ends with its own exit status
and its artefacts), and a `sync:` hook, a user tool's handler, a `setup` step and an
`expect.assert` function that never return error their trial, naming the hook, while the
run goes on."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pytest_sandtable as st

pytest_plugins = ["pytester"]

# `hang` in the phone's row says which hook never returns (each task's user_given sets it)
DOMAIN = """\
version: 1
name: hooks
world:
  lines: { key: id, rows: [{ id: L-1, status: active }] }
user_world:
  device: { key: id, rows: [{ id: phone, hang: none, bars: 0 }] }
sync: hook_code:sync
tools:
  - name: get_line
    params: { line: { type: string } }
    ops: [{ get: { table: lines, key: $line } }]
user_tools:
  - name: look
    description: Look at the phone.
    handler: hook_code:look
tasks:
  - id: fine
    user:
      opening: My phone has no data.
      script:
        - { call: look, when: { reply_includes: look } }
        - { say: "Thanks.", when: { user_called: look }, end: true }
    expect:
      state: [{ table: device, key: phone, fields: { bars: 4 } }]
      assert: [hook_code:has_bars]
    reference:
      - { call: get_line, args: { line: L-1 } }
      - { say: "Please look at your phone." }
      - { say: "Good." }
TASKS
"""

_HUNG = {
    "sync": "",
    "look": "",
    "assert": "",
    "setup": "    setup: [{ handler: hook_code:prepare }]\n",
}


def domain_text() -> str:
    tasks = "".join(
        f"  - id: stuck-{hook}\n"
        f"    user_given: [{{ update: {{ table: device, key: phone, set: {{ hang: {hook} }} }} }}]\n"
        f"{setup}"
        "    user:\n      opening: My phone has no data.\n      script:\n"
        "        - { call: look, when: { reply_includes: look } }\n"
        "        - { say: \"Thanks.\", when: { user_called: look }, end: true }\n"
        "    expect: { assert: [hook_code:has_bars] }\n"
        "    reference:\n      - { call: get_line, args: { line: L-1 } }\n"
        "      - { say: \"Please look at your phone.\" }\n      - { say: \"Good.\" }\n"
        for hook, setup in _HUNG.items()
    )
    return DOMAIN.replace("TASKS\n", tasks)


CODE = """\
import time


def _hang_if(world, hook):
    if world.get("device", "phone")["hang"] == hook:
        while True:
            time.sleep(0.01)


def sync(world, ctx):
    _hang_if(world, "sync")


def look(args, world, ctx):
    _hang_if(world, "look")
    world.update("device", "phone", {"bars": 4})
    return "4 bars"


def prepare(args, world, ctx):
    _hang_if(world, "setup")


def has_bars(world):
    _hang_if(world, "assert")
    return world.get("device", "phone")["bars"] == 4
"""

WHY = {
    "sync": "the domain's sync hook_code:sync did not return before the trial timeout of 1s",
    "look": "the domain failed running the user tool look: its handler hook_code:look did not return before the "
            "trial timeout of 1s",
    "setup": "the domain failed starting the trial: setup step 1 (hook_code:prepare) did not return before the "
             "trial timeout of 1s",
    "assert": "the domain failed grading the trial: assertion hook_code:has_bars did not return within 1s of the "
              "start of grading (the trial timeout)",
}

SYNC_AGENT = """\
import pytest_sandtable as st


def sync_agent(turn):  # a sync agent: it runs in a thread of its own, and so do its calls' hooks
    task = st.load_domain("sandtable.yaml").task(turn.trial.task_id)
    return st.ReferenceAgent(task.reference)(turn)
"""


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[st.Domain]:
    (tmp_path / "hook_code.py").write_text(CODE, encoding="utf-8")
    (tmp_path / "sandtable.yaml").write_text(domain_text(), encoding="utf-8")
    yield st.load_domain(tmp_path / "sandtable.yaml")
    sys.modules.pop("hook_code", None)


def _no_alarm_left() -> bool:
    return signal.getsignal(signal.SIGALRM) == signal.SIG_DFL and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


# -- item 7: no alarm outlives its trial -----------------------------------------------------


def test_a_user_tools_handler_leaves_no_alarm_behind(hooks: st.Domain) -> None:
    r = st.run_trial(hooks, "fine", st.ReferenceAgent(), st.ScriptedUser(), trial_timeout=30)
    assert (r.verdict, [c["tool"] for c in r.calls]) == ("passed", ["get_line", "look"])
    assert _no_alarm_left()


def test_a_run_that_outlasts_its_trial_timeout_ends_with_its_own_status(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", sandtable=domain_text())
    pytester.makepyfile(hook_code=CODE, test_after="import time\n\ndef test_after():\n    time.sleep(1.5)\n")
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--sandtable-agent=reference", "--sandtable-trial-timeout=1",
        "--sandtable-out=out", "-k", "fine or after", timeout=60)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK  # not 142 (SIGALRM) once pytest has printed its summary
    doc = json.loads((pytester.path / "out" / "results.json").read_text(encoding="utf-8"))
    assert [(t["task"], t["verdict"]) for t in doc["trials"]] == [("fine", "passed")]


# -- item 8: a hook that never returns errors its trial, naming it --------------------------


@pytest.mark.parametrize("hook", list(WHY))
def test_a_hook_that_never_returns_errors_its_trial(hooks: st.Domain, hook: str) -> None:
    r = st.run_trial(hooks, f"stuck-{hook}", st.ReferenceAgent(), st.ScriptedUser(), trial_timeout=1)
    assert (r.verdict, r.error) == ("errored", WHY[hook])
    # hung mid-conversation: the conversation ended by the domain's error (a setup step's and
    # an assertion's errors come before and after the conversation)
    assert r.ended_by == {"sync": "domain_error", "look": "domain_error", "setup": "", "assert": "script_end"}[hook]
    assert _no_alarm_left()
    # the next trial runs as ever
    assert st.run_trial(hooks, "fine", st.ReferenceAgent(), st.ScriptedUser(), trial_timeout=1).verdict == "passed"


class _SyncAgent:
    """Plays the task's reference as a sync agent: its calls, and the sync hook after
    each, run in the agent's thread, where no alarm reaches."""

    def __init__(self, domain: st.Domain) -> None:
        self.domain = domain

    def __call__(self, turn: st.Turn) -> str:
        return st.ReferenceAgent(self.domain.task(turn.trial.task_id).reference)(turn)


class _SyncUser:
    """A sync user that calls the user tool in its own thread."""

    def __call__(self, turn: Any) -> Any:
        if len(turn.messages) == 0:
            return "My phone has no data."
        turn.call("look", {})
        return st.UserReply("Thanks.", stop="done")


def test_a_sync_hook_hung_in_an_agents_thread_errors_its_trial(hooks: st.Domain) -> None:
    r = st.run_trial(hooks, "stuck-sync", _SyncAgent(hooks), st.ScriptedUser(), trial_timeout=1)
    assert (r.verdict, r.ended_by, r.error) == ("errored", "domain_error", WHY["sync"])


def test_a_user_tool_hung_in_a_users_thread_errors_its_trial(hooks: st.Domain) -> None:
    r = st.run_trial(hooks, "stuck-look", st.ReferenceAgent(), _SyncUser(), trial_timeout=1)
    assert (r.verdict, r.ended_by, r.error) == ("errored", "domain_error", WHY["look"])


@pytest.mark.parametrize("agent", ["reference", "hook_agent:sync_agent"])
def test_a_run_goes_on_past_hooks_that_never_return(pytester: pytest.Pytester, agent: str) -> None:
    pytester.makefile(".yaml", sandtable=domain_text())
    pytester.makepyfile(hook_code=CODE, hook_agent=SYNC_AGENT)
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", f"--sandtable-agent={agent}", "--sandtable-trial-timeout=1",
        "--sandtable-out=out", timeout=60)
    result.assert_outcomes(passed=1, errors=4)
    result.stdout.fnmatch_lines([f"*{WHY['sync']}*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = json.loads((pytester.path / "out" / "results.json").read_text(encoding="utf-8"))
    assert {t["task"]: (t["verdict"], t["error"]) for t in doc["trials"]} == {
        "fine": ("passed", None), **{f"stuck-{hook}": ("errored", why) for hook, why in WHY.items()}}
