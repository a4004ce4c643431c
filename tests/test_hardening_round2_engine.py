"""The engine survives what agents send and what handlers do (issue 21, items 3, 12, 13
and 15): huge tool arguments are clipped when a call is recorded, whatever a handler
raises errors its trial as the domain's fault, a handler cannot change the seed later
trials start from, and a handler that never returns errors its trial at the trial
timeout while the run goes on."""

from __future__ import annotations

import json
import textwrap
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.report import safe

MB = 1_000_000
RECORDED_LIMIT = 20_000  # characters of one argument the call log keeps (report.safe's VALUE_LIMIT)

ECHO = """
world:
  notes: { key: id, fields: [text] }
tools:
  - name: echo
    params: { text: { type: string }, data: { type: object, required: false } }
    ops:
      - respond: { ok: true }
  - name: take_note
    params: { text: { type: string } }
    ops:
      - create: { table: notes, row: { text: "short" } }
invariants:
  - { id: note-first, kind: before, then: echo, first: take_note, same: [text], soft: true }
tasks:
  - id: one
    user: { opening: "Hi." }
    expect:
      called: [{ tool: echo }]
"""


# -- item 3: an agent's huge arguments ----------------------------------------------------------


def test_the_call_logs_cap_is_the_reports() -> None:
    from pytest_sandtable.engine import tools
    from pytest_sandtable.engine.tools import recorded_arguments

    assert tools.RECORDED_LIMIT == RECORDED_LIMIT == safe.VALUE_LIMIT == safe.TEXT_LIMIT
    text = "x" * (3 * RECORDED_LIMIT)
    recorded, cut = recorded_arguments({"text": text, "data": {"rows": [text]}})
    assert cut
    # what the log keeps is what results.json shows: clipping it again there changes nothing
    assert safe.clip_value(recorded["text"]) == recorded["text"] == safe.clip_value(text)
    assert safe.clip_value(recorded["data"]) == recorded["data"] == safe.clip_value({"rows": [text]})
    assert recorded_arguments({"text": "short", "n": 1}) == ({"text": "short", "n": 1}, False)
    assert recorded_arguments({"data": {"rows": ["a" * 100] * 10}})[1] is False


def test_huge_arguments_are_clipped_when_the_call_is_recorded(make_domain: Any) -> None:
    domain = make_domain(ECHO)
    seen: list[int] = []

    def agent(turn: st.Turn) -> str:
        for i in range(12):
            text = chr(97 + i) * (50 * MB)
            r = turn.call_tool("take_note" if i == 0 else "echo", {"text": text})
            seen.append(len(text) if r.ok else -1)
        turn.call_tool("echo", {"text": "y", "data": {"blob": "z" * (50 * MB)}})
        turn.call_tool("e" * (50 * MB), {})  # an unknown tool's "name"
        return "done"

    tracemalloc.start()
    try:
        r = st.run_trial(domain, "one", agent, st.ScriptedUser())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.verdict == "passed", (r.error, r.failed_checks)
    assert seen == [50 * MB] * 12
    marker = "… [clipped: 50,000,000 characters]"
    texts = [c["args"]["text"] for c in r.calls[:12]]
    assert [(len(t), t[0], t.endswith(marker)) for t in texts] == [(RECORDED_LIMIT, chr(97 + i), True)
                                                                    for i in range(12)]
    assert r.calls[12]["args"]["data"].endswith("… [clipped: 50,000,012 characters of JSON]")
    assert len(r.calls[13]["tool"]) == RECORDED_LIMIT and r.calls[13]["error"]["code"] == 404
    # the rule ran on the whole argument: echo's texts were never a note's (the first call's was)
    assert [v.invariant for v in r.violations] == ["note-first"] * 12
    # the trial held one agent argument at a time (50 MB, and the rule's text quoting it),
    # never the twelve (600 MB)
    assert peak < 320 * MB, f"{peak / MB:.0f} MB"


BIG_AGENT = """
import resource
# the whole run in 700 MB of address space: the twelve arguments alone are 600 MB
resource.setrlimit(resource.RLIMIT_AS, (700 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
import pytest

def big_agent(turn):
    for i in range(12):
        turn.call_tool("echo", {"text": chr(97 + i) * 50_000_000})
    return "done"

@pytest.fixture
def sandtable_agent():
    return big_agent
"""


def test_a_run_of_an_agent_sending_600_mb_of_arguments_writes_its_results(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", sandtable="version: 1\nname: big\n" + textwrap.dedent(ECHO).lstrip())
    pytester.makeconftest(BIG_AGENT)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--sandtable-out=out")
    assert "INTERNALERROR" not in result.stdout.str()
    result.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "out" / "results.json").read_text(encoding="utf-8"))
    (trial,) = doc["trials"]
    assert [len(c["args"]["text"]) for c in trial["calls"]] == [RECORDED_LIMIT] * 12
    assert trial["calls"][11]["args"]["text"].endswith("l… [clipped: 50,000,000 characters]")


# -- handler domains (items 12, 13 and 15) ------------------------------------------------------

HANDLERS = '''
import asyncio, signal, time


class Meltdown(BaseException):
    """A handler's own BaseException subclass."""


RAISED = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
    "Meltdown": lambda: Meltdown("reactor core"),
    "CancelledError": asyncio.CancelledError,
    "SystemExit": lambda: SystemExit(3),
}


def raise_it(args, world, ctx):
    raise RAISED[args["kind"]]()


def ctrl_c(args, world, ctx):
    signal.raise_signal(signal.SIGINT)  # as the terminal does on Ctrl-C
    return "not reached"


def spin(args, world, ctx):
    while True:
        pass


def nap(args, world, ctx):
    time.sleep(3600)


def poke(args, world, ctx):
    world._world.get("tickets", "T1")["status"] = "poked"  # the private world, past the handle's copies
    world._world.get("tickets", "T1")["tags"].append("poked")
    return "poked"


def look(args, world, ctx):
    return world.get("tickets", "T1")
'''

DESK = """\
version: 1
name: desk
world:
  tickets:
    key: id
    rows:
      - { id: T1, status: open, tags: [first] }
tools:
  - name: raise_it
    params: { kind: { type: string } }
    handler: r2_handlers:raise_it
  - { name: ctrl_c, handler: "r2_handlers:ctrl_c" }
  - { name: spin, handler: "r2_handlers:spin" }
  - { name: nap, handler: "r2_handlers:nap" }
  - { name: poke, handler: "r2_handlers:poke" }
  - { name: look, handler: "r2_handlers:look" }
tasks:
"""

DESK_TASKS = {
    **{f"raise-{kind}": [{"call": "raise_it", "args": {"kind": kind}}]
       for kind in ("KeyboardInterrupt", "GeneratorExit", "Meltdown", "CancelledError", "SystemExit")},
    "ctrl-c": [{"call": "ctrl_c"}],
    "spin": [{"call": "spin"}],
    "nap": [{"call": "nap"}],
    "poke": [{"call": "poke"}],
    "look": [{"call": "look"}],
}


def desk_text() -> str:
    tasks = "".join(
        f"  - id: {task}\n    user: {{ opening: \"Hi.\" }}\n    reference: {json.dumps([*calls, {'say': 'Done.'}])}\n"
        for task, calls in DESK_TASKS.items()
    )
    return DESK + tasks


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[st.Domain]:
    import sys

    (tmp_path / "r2_handlers.py").write_text(HANDLERS, encoding="utf-8")
    (tmp_path / "sandtable.yaml").write_text(desk_text(), encoding="utf-8")
    yield st.load_domain(tmp_path / "sandtable.yaml")
    sys.modules.pop("r2_handlers", None)


class SyncAgent:
    """Plays the task's reference as a sync agent, which runs in a thread of its own."""

    def __init__(self, domain: st.Domain) -> None:
        self.domain = domain

    def __call__(self, turn: st.Turn) -> str:
        return st.ReferenceAgent(self.domain.task(turn.trial.task_id).reference)(turn)


def agents(domain: st.Domain) -> dict[str, Any]:
    return {"sync": SyncAgent(domain), "reference": st.ReferenceAgent()}


# -- item 12: whatever a handler raises is the domain's fault -----------------------------------

RAISED_TEXT = {
    "KeyboardInterrupt": "KeyboardInterrupt",
    "GeneratorExit": "GeneratorExit",
    "Meltdown": "Meltdown: reactor core",
    "CancelledError": "CancelledError",
    "SystemExit": "SystemExit: 3",
}


@pytest.mark.parametrize("agent", ["sync", "reference"])
@pytest.mark.parametrize("kind", list(RAISED_TEXT))
def test_a_handler_raising_a_base_exception_errors_its_trial(desk: st.Domain, kind: str, agent: str) -> None:
    r = st.run_trial(desk, f"raise-{kind}", agents(desk)[agent], st.ScriptedUser())
    assert (r.verdict, r.ended_by, r.failed_checks) == ("errored", "domain_error", [])
    assert r.error is not None
    head, _, trace = r.error.partition("\n")
    assert head == f"the domain failed running raise_it: its handler r2_handlers:raise_it raised {RAISED_TEXT[kind]}"
    assert "in raise_it" in trace
    # and the next trial runs as ever
    assert st.run_trial(desk, "look", agents(desk)[agent], st.ScriptedUser()).verdict == "passed"


def test_a_real_ctrl_c_during_a_handler_call_on_the_main_thread_stops_the_run(desk: st.Domain) -> None:
    with pytest.raises(KeyboardInterrupt):
        st.run_trial(desk, "ctrl-c", st.ReferenceAgent(), st.ScriptedUser())


def test_ctrl_c_in_a_handler_stops_a_pytest_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", sandtable=desk_text())
    pytester.makepyfile(r2_handlers=HANDLERS)
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-rN",
                                           "--sandtable-agent=reference", "--sandtable-trial-timeout=5", timeout=120)
    result.stdout.fnmatch_lines([
        "*: KeyboardInterrupt: Ctrl-C while the handler r2_handlers:ctrl_c of tool ctrl_c ran",
        "*= 5 errors in *",  # the five raise-* trials before it; none after it ran
    ])
    assert result.ret == pytest.ExitCode.INTERRUPTED


# -- item 13: a handler cannot change the seed every later trial starts from --------------------


@pytest.mark.parametrize("agent", ["sync", "reference"])
def test_a_handler_reaches_no_engine_object_so_the_seed_stays(desk: st.Domain, agent: str) -> None:
    r = st.run_trial(desk, "poke", agents(desk)[agent], st.ScriptedUser())
    assert r.verdict == "errored"
    assert r.error is not None and r.error.startswith(
        "the domain failed running poke: its handler r2_handlers:poke raised AttributeError: ")
    # the next trial starts from the seed as written
    after = st.run_trial(desk, "look", agents(desk)[agent], st.ScriptedUser())
    assert after.calls[0]["result"] == {"id": "T1", "status": "open", "tags": ["first"]}
    assert desk.tables["tickets"].rows == [{"id": "T1", "status": "open", "tags": ["first"]}]


def test_what_a_handler_is_given_leads_to_no_row_of_the_world(desk: st.Domain) -> None:
    from pytest_sandtable.engine.handlers import HandlerState
    from pytest_sandtable.engine.world import World, seed_for

    state = HandlerState(desk, desk.task("look"), 7)
    world = World(seed_for(desk))
    handle, ctx = state.handle(world), st.HandlerContext(state, "look", 0)
    seed_row = world.get("tickets", "T1")
    # nothing reachable through attributes (of the handle, of ctx, of what those hold) is the
    # world, the domain or a seed row
    seen: set[int] = set()
    todo: list[Any] = [handle, ctx]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (str, int, float, type(None))):
            continue
        seen.add(id(obj))
        assert obj is not world and obj is not desk and obj is not seed_row and obj is not state, obj
        for name in dir(obj):
            if not name.startswith("__"):
                try:
                    todo.append(getattr(obj, name))
                except Exception:
                    pass
    assert handle.get("tickets", "T1") == seed_row and handle.get("tickets", "T1") is not seed_row
    assert (ctx.seed, ctx.tool, ctx.call_index) == (7, "look", 0)


# -- item 15: a handler that never returns errors its trial at the trial timeout -----------------


@pytest.mark.parametrize(("agent", "task"), [("reference", "spin"), ("reference", "nap"), ("sync", "nap")])
def test_a_handler_that_never_returns_errors_its_trial_at_the_timeout(desk: st.Domain, agent: str, task: str) -> None:
    import signal
    import time

    started = time.monotonic()
    r = st.run_trial(desk, task, agents(desk)[agent], st.ScriptedUser(), trial_timeout=1)
    assert time.monotonic() - started < 5
    assert (r.verdict, r.ended_by, r.failed_checks) == ("errored", "domain_error", [])
    assert r.error == (f"the domain failed running {task}: its handler r2_handlers:{task} did not return before "
                       "the trial timeout of 1s")
    # the alarm is put back as it was, and the next trial runs
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert st.run_trial(desk, "look", agents(desk)[agent], st.ScriptedUser(), trial_timeout=1).verdict == "passed"


SYNC_DESK_AGENT = """
import pytest_sandtable as st

def sync_agent(turn):  # a sync agent: it runs in a thread of its own
    task = st.load_domain("sandtable.yaml").task(turn.trial.task_id)
    return st.ReferenceAgent(task.reference)(turn)
"""


@pytest.mark.parametrize("agent", ["reference", "desk_agent:sync_agent"])
def test_a_run_goes_on_past_handlers_that_never_return(pytester: pytest.Pytester, agent: str) -> None:
    pytester.makefile(".yaml", sandtable=desk_text())
    pytester.makepyfile(r2_handlers=HANDLERS, desk_agent=SYNC_DESK_AGENT)
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", f"--sandtable-agent={agent}", "--sandtable-trial-timeout=1",
        "--sandtable-out=out", "-k", "spin or nap or look", timeout=60)
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*spin* errored *",
        "*the domain failed running spin: its handler r2_handlers:spin did not return before the trial timeout of 1s*",
    ])
    doc = json.loads((pytester.path / "out" / "results.json").read_text(encoding="utf-8"))
    assert {t["task"]: (t["verdict"], t["error"]) for t in doc["trials"]} == {
        "spin": ("errored", "the domain failed running spin: its handler r2_handlers:spin did not return before "
                            "the trial timeout of 1s"),
        "nap": ("errored", "the domain failed running nap: its handler r2_handlers:nap did not return before "
                           "the trial timeout of 1s"),
        "look": ("passed", None),
    }


def test_an_alarm_of_someone_elses_is_left_alone(desk: st.Domain) -> None:
    import signal

    def theirs(signum: int, frame: Any) -> None:  # as pytest-timeout's signal method installs one
        raise AssertionError("not theirs to get")

    previous = signal.signal(signal.SIGALRM, theirs)
    try:
        r = st.run_trial(desk, "look", st.ReferenceAgent(), st.ScriptedUser(), trial_timeout=30)
        assert r.verdict == "passed"
        assert signal.getsignal(signal.SIGALRM) is theirs and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, 30)  # a timer of someone else's, running
        r = st.run_trial(desk, "look", st.ReferenceAgent(), st.ScriptedUser(), trial_timeout=5)
        assert r.verdict == "passed"
        assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL and 25 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
