"""Dual control (issue 22, part A): the caller's own world (`user_world`), the tools only
the simulated user calls (`user_tools`), a task's `user_given`, the scripted user's call
lines and conditions, `UserTurn.call`, and the `sync` hook (docs/spec.md, "The caller's
world (dual control)")."""

from __future__ import annotations

import io
import json
import pickle
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import pytest_sandtable as st
from conftest import Playbook, write_domain
from pytest_sandtable.domain.cache import _ModelOnly
from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.report.results_json import validate_results
from pytest_sandtable.report.text import transcript_text

Play = Callable[..., st.TrialResult]

DESK = """
world:
  lines:
    key: id
    rows: [{ id: L-1, status: active, data: true }]
user_world:
  device:
    key: id
    rows: [{ id: phone, airplane_mode: true, mobile_data: true }]
tools:
  - name: get_line
    params: { line: { type: string } }
    ops: [{ get: { table: lines, key: $line } }]
user_tools:
  - name: check_status_bar
    description: Look at the phone's status bar.
    ops: [{ get: { table: device, key: phone } }]
  - name: toggle_airplane_mode
    description: Turn airplane mode on or off.
    params: { on: { type: boolean } }
    ops: [{ update: { table: device, key: phone, set: { airplane_mode: $on } } }]
tasks:
  - id: airplane
    user:
      opening: My phone has no data.
      script:
        - { call: check_status_bar, when: { reply_includes: status bar } }
        - { say: "It shows a little plane.", when: { result_includes: '"airplane_mode": true' } }
        - { call: toggle_airplane_mode, args: { on: false }, when: { reply_includes: airplane mode off } }
        - { say: "Done, data works.", when: { user_called: toggle_airplane_mode }, end: true }
    expect:
      state: [{ table: device, key: phone, fields: { airplane_mode: false } }]
"""


PLAIN = """
world:
  lines: { key: id, rows: [{ id: L-1 }] }
tools:
  - name: get_line
    params: { line: { type: string } }
    ops: [{ get: { table: lines, key: $line } }]
tasks:
  - id: t
    user: { opening: Hi }
"""


def problems(text: str) -> list[str]:
    with pytest.raises(DomainError) as e:
        load_domain_text("version: 1\nname: desk\n" + textwrap.dedent(text).lstrip("\n"), "d.yaml")
    return [str(p) for p in e.value.problems]


# --------------------------------------------------------------------------- the format


def test_a_dual_domain_loads_with_both_worlds_and_both_tool_lists(make_domain: Callable[[str], st.Domain]) -> None:
    d = make_domain(DESK)
    assert (list(d.tables), list(d.user_tables)) == (["lines"], ["device"])
    assert (list(d.tools), list(d.user_tools)) == (["get_line"], ["check_status_bar", "toggle_airplane_mode"])
    lines = d.tasks[0].user.script
    assert [(line.call, line.args, line.say) for line in lines[:3]] == [
        ("check_status_bar", {}, ""), (None, None, "It shows a little plane."),
        ("toggle_airplane_mode", {"on": False}, "")]
    assert lines[3].when == {"user_called": ["toggle_airplane_mode"]}


def test_a_built_dual_domain_survives_the_domain_caches_unpickler(make_domain: Callable[[str], st.Domain]) -> None:
    d = make_domain(DESK.replace("    user:\n", "    user_given: [{ update: { table: device, key: phone, "
                                                 "set: { mobile_data: false } } }]\n    user:\n"))
    again = _ModelOnly(io.BytesIO(pickle.dumps(d))).load()
    assert (again.user_tables, again.user_tools, again.tasks[0].user_given) == (
        d.user_tables, d.user_tools, d.tasks[0].user_given)
    assert again.tasks[0].user.script == d.tasks[0].user.script


def test_the_two_sides_are_named_apart_and_see_only_their_own_tables() -> None:
    assert problems("""
        world:
          lines: { key: id, rows: [{ id: L-1 }] }
        user_world:
          lines: { key: id }
          device: { key: id, rows: [{ id: phone }] }
        tools:
          - name: get_line
            ops: [{ get: { table: device, key: phone } }]
          - name: check_status_bar
            ops: [{ get: { table: lines, key: L-1 } }]
        user_tools:
          - name: reset
            checks: [{ require: { table: lines, key: L-1 }, message: no line }]
            ops: [{ get: { table: device, key: phone } }]
          - name: check_status_bar
            ops: [{ get: { table: device, key: phone } }]
        invariants:
          - { id: no-reset, kind: never, tool: reset }
        tasks:
          - id: t
            given: [{ update: { table: device, key: phone, set: { on: true } } }]
            user_given: [{ update: { table: device, key: phon, set: { on: true } } },
                         { update: { table: lines, key: L-1, set: { on: true } } }]
            user: { opening: Hi }
        """) == [
        "d.yaml:6:3: user_world.lines: table lines is also a table of `world` (first at line 4); "
        "a table name is unique across world and user_world",
        "d.yaml:10:27: tools[0].ops[0].get.table: tool 'get_line': table device belongs to the user's world "
        "(user_world); an agent tool sees only `world`",
        "d.yaml:15:34: user_tools[0].checks[0].require.table: user tool 'reset': table lines belongs to the "
        "agent's world; a user tool sees only `user_world`",
        "d.yaml:17:11: user_tools[1].name: tool name 'check_status_bar' is also a tool of `tools` "
        "(first at line 11); a tool name is unique across tools and user_tools",
        "d.yaml:20:40: invariants[0].tool: 'reset' is a user tool (user_tools), which only the simulated user "
        "calls; invariants apply to the agent's tools only",
        "d.yaml:23:32: tasks[0].given[0].update.table: given: table device belongs to the user's world "
        "(user_world); it writes only `world`",
        "d.yaml:24:50: tasks[0].user_given[0].update.key: no row of table device has the key 'phon'; "
        "did you mean 'phone'?",
        "d.yaml:25:37: tasks[0].user_given[1].update.table: user_given: table lines belongs to the agent's "
        "world; it writes only `user_world`",
    ]


def test_script_call_lines_and_their_conditions_are_checked_like_calls() -> None:
    head = DESK.split("tasks:")[0]
    assert problems(head + """
        tasks:
          - id: t
            user:
              opening: Hi
              script:
                - { call: check_statusbar }
                - { call: get_line, args: { line: L-1 } }
                - { call: toggle_airplane_mode, args: { on: maybe } }
                - { say: Hi, call: check_status_bar }
                - { when: { reply_includes: x } }
                - { say: ok, when: { user_called: get_line, called: check_status_bar } }
        """.replace("\n        ", "\n")) == [
        "d.yaml:29:19: tasks[0].user.script[0].call: unknown user tool 'check_statusbar'; "
        "did you mean 'check_status_bar'?",
        "d.yaml:30:19: tasks[0].user.script[1].call: 'get_line' is an agent tool; a script line calls one of "
        "the user tools (user_tools): check_status_bar, toggle_airplane_mode",
        "d.yaml:31:53: tasks[0].user.script[2].args.on: found string 'maybe', expected boolean",
        "d.yaml:32:11: tasks[0].user.script[3]: a script line says or calls, not both: give `say` (what the "
        "user says) or `call` (a user tool the user calls)",
        "d.yaml:33:11: tasks[0].user.script[4]: a script line needs `say` (what the user says) or `call` "
        "(a user tool the user calls)",
        "d.yaml:34:43: tasks[0].user.script[5].when.user_called: 'get_line' is an agent tool; `user_called` "
        "names user tools (for the agent's calls write called)",
        "d.yaml:34:61: tasks[0].user.script[5].when.called: 'check_status_bar' is a user tool (user_tools), "
        "which only the simulated user calls; for the user's own calls write user_called / user_not_called",
    ]


# --------------------------------------------------------------------------- the engine


def test_the_scripted_user_calls_its_tools_and_the_agent_never_sees_them(
        make_domain: Callable[[str], st.Domain], play: Play) -> None:
    seen: list[list[str]] = []
    script = Playbook("What does the status bar show?", "Please turn airplane mode off.")

    def agent(turn: st.Turn) -> str:
        seen.append([t.name for t in turn.tools])
        refused = turn.call_tool("toggle_airplane_mode", {"on": False}) if len(seen) == 1 else None
        if refused is not None:
            assert (refused.ok, refused.error, refused.message) == (
                False, 404, "unknown tool 'toggle_airplane_mode'; the tools are get_line")
        return script(turn)

    r = play(make_domain(DESK), agent=agent)
    assert (r.verdict, r.ended_by, seen) == ("passed", "script_end", [["get_line"]] * 3)
    assert [(c["tool"], c.get("by"), c["ok"]) for c in r.calls] == [
        ("toggle_airplane_mode", None, False),  # the agent's try: the usual unknown tool
        ("check_status_bar", "user", True),
        ("toggle_airplane_mode", "user", True),
    ]
    assert r.diff == {"created": [], "changed": [], "user": {"created": [], "changed": [
        {"table": "device", "key": "phone", "fields": {"airplane_mode": {"before": True, "after": False}}}]}}
    assert transcript_text(r).splitlines()[4:] == [
        '[1] user called check_status_bar() -> {"id": "phone", "airplane_mode": true, "mobile_data": true}',
        "[1] user : It shows a little plane.",
        "[2] agent: Please turn airplane mode off.",
        '[2] user called toggle_airplane_mode(on=false) -> {"id": "phone", "airplane_mode": false, '
        '"mobile_data": true}',
        "[2] user : Done, data works.",
        "[3] agent: ",
    ]


def test_results_json_of_a_dual_trial_is_valid_and_a_plain_domains_calls_have_no_by(
        make_domain: Callable[[str], st.Domain], play: Play) -> None:
    from pytest_sandtable.report.results_json import results_schema

    r = play(make_domain(DESK), "What does the status bar show?", "Please turn airplane mode off.")
    trial_schema = {"$defs": results_schema()["$defs"], "$ref": "#/$defs/trial"}
    jsonschema.validate(json.loads(json.dumps(r.to_dict())), trial_schema)
    plain = play(make_domain(PLAIN), [("get_line", {"line": "L-1"})])
    assert [sorted(c) for c in plain.calls] == [
        ["args", "error", "index", "ok", "result", "tool", "turn", "violations"]]
    assert plain.diff == {"created": [], "changed": []}


def test_user_given_changes_the_fresh_user_world_of_each_trial(
        make_domain: Callable[[str], st.Domain], play: Play) -> None:
    d = make_domain(DESK.replace("    user:\n", "    user_given: [{ update: { table: device, key: phone, "
                                             "set: { airplane_mode: false } } }]\n    user:\n", 1))
    for _ in range(2):
        r = play(d, "What does the status bar show?", "Please turn airplane mode off.")
        # the plane never shows (the user's world started with airplane mode off): nothing to say
        assert [m["text"] for m in r.transcript if m["role"] == "user"] == ["My phone has no data."]
        assert ([(c["tool"], c["result"]["airplane_mode"]) for c in r.calls], r.ended_by) == (
            [("check_status_bar", False)], "script_end")


HANDLERS = '''
def check_status_bar(args, world, ctx):
    phone = world.get("device", "phone")
    return {"airplane_mode": phone["airplane_mode"], "sees_lines": _sees(world)}

def _sees(world):
    try:
        world.get("lines", "L-1")
    except ValueError as e:
        return str(e)
    return True

def broken(args, world, ctx):
    raise KeyError("sim")

def sync(world, ctx):
    phone = world.get("device", "phone")
    line = world.get("lines", "L-1")
    if line["data"] == phone["airplane_mode"]:  # data works only with airplane mode off
        world.update("lines", "L-1", {"data": not phone["airplane_mode"]})

def bad_sync(world, ctx):
    raise RuntimeError("out of sync")
'''


def _handler_domain(tmp_path: Path, sync: str = "", tool: str = "check_status_bar") -> st.Domain:
    (tmp_path / "desk_handlers.py").write_text(HANDLERS, encoding="utf-8")
    body = DESK.replace("    ops: [{ get: { table: device, key: phone } }]\n",
                        f"    handler: desk_handlers:{tool}\n", 1)
    return st.load_domain(write_domain(tmp_path, (f"sync: desk_handlers:{sync}\n" if sync else "") + body))


def test_a_user_tools_handler_gets_a_handle_over_the_user_world_only(tmp_path: Path, play: Play) -> None:
    r = play(_handler_domain(tmp_path), "What does the status bar show?")
    assert r.calls[0]["result"] == {"airplane_mode": True,
                                    "sees_lines": "unknown table 'lines'; the tables are 'device'"}


def test_a_user_tool_that_raises_errors_the_trial_as_the_domains_fault(tmp_path: Path, play: Play) -> None:
    r = play(_handler_domain(tmp_path, tool="broken"), "What does the status bar show?")
    assert (r.verdict, r.ended_by) == ("errored", "domain_error")
    assert r.error is not None
    assert r.error.startswith("the domain failed running the user tool check_status_bar: its handler "
                              "desk_handlers:broken raised KeyError: 'sim'")


def test_sync_runs_after_every_step_and_its_writes_are_logged(tmp_path: Path, play: Play) -> None:
    r = play(_handler_domain(tmp_path, "sync"), [("get_line", {"line": "L-1"}), "What does the status bar show?"],
             "Please turn airplane mode off.")
    assert [(c["tool"], c.get("by")) for c in r.calls] == [
        ("get_line", None), ("sync", "sync"),  # airplane mode on: the line's data goes off
        ("check_status_bar", "user"), ("toggle_airplane_mode", "user"), ("sync", "sync")]  # and on again
    assert r.calls[1]["result"] == {"created": [], "changed": [
        {"table": "lines", "key": "L-1", "fields": {"data": {"before": True, "after": False}}}]}
    assert r.diff["changed"] == []  # off and on again: the agent's world is as it was


def test_a_sync_hook_that_raises_errors_the_trial_never_failing_the_agent(tmp_path: Path, play: Play) -> None:
    r = play(_handler_domain(tmp_path, "bad_sync"), [("get_line", {"line": "L-1"}), "Hello"])
    assert (r.verdict, r.ended_by, r.error) == (
        "errored", "domain_error", "the domain's sync desk_handlers:bad_sync raised RuntimeError: out of sync")
    assert [c.kind for c in r.checks] == []


def test_a_sync_that_cannot_take_world_and_ctx_is_a_load_error(tmp_path: Path) -> None:
    (tmp_path / "desk_handlers.py").write_text(HANDLERS, encoding="utf-8")
    path = write_domain(tmp_path, "sync: desk_handlers:broken\n" + DESK)
    with pytest.raises(DomainError) as e:
        st.load_domain(path)
    assert [str(p).split(": ", 1)[1] for p in e.value.problems] == [
        "sync: sync 'desk_handlers:broken' takes (args, world, ctx), expected a function called as "
        "function(world, ctx)"]


def test_a_python_user_sees_the_user_tools_and_calls_them(make_domain: Callable[[str], st.Domain], play: Play) -> None:
    got: list[Any] = []

    def user(turn: st.UserTurn) -> st.UserReply:
        if not turn.messages:
            return st.UserReply("No data.")
        got.append([t.name for t in turn.tools])
        got.append(turn.call("toggle_airplane_mode", {"on": False}).to_json())
        got.append(turn.call("get_line", {"line": "L-1"}).to_json())
        return st.UserReply("Fixed it.", "goal_met")

    r = play(make_domain(DESK), "Try airplane mode off.", user=user)
    assert got == [["check_status_bar", "toggle_airplane_mode"],
                   '{"id": "phone", "airplane_mode": false, "mobile_data": true}',
                   '{"error": 404, "message": "unknown user tool \'get_line\'; the user tools are '
                   'check_status_bar, toggle_airplane_mode"}']
    assert (r.verdict, [(c["tool"], c.get("by"), c["ok"]) for c in r.calls]) == (
        "passed", [("toggle_airplane_mode", "user", True), ("get_line", "user", False)])


AGENTS = '''
def asks(turn):
    return "What does the status bar show?"
'''


def test_a_run_shows_the_users_calls_in_the_failure_results_json_and_report(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", sandtable="version: 1\nname: desk\n" + textwrap.dedent(DESK).lstrip("\n"))
    pytester.makepyfile(agents=AGENTS)
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-agent=agents:asks", "--sandtable-out=out")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "[[]0[]] user : My phone has no data.",
        "[[]1[]] agent: What does the status bar show?",
        '[[]1[]] user called check_status_bar() -> {"id": "phone", "airplane_mode": true, "mobile_data": true}',
        "[[]1[]] user : It shows a little plane.",
        "[[]2[]] agent: What does the status bar show?",
    ], consecutive=True)
    doc = json.loads((pytester.path / "out" / "results.json").read_text(encoding="utf-8"))
    validate_results(doc)
    trial = doc["trials"][0]
    assert [(c["tool"], c.get("by")) for c in trial["calls"]] == [("check_status_bar", "user")]
    assert trial["diff"]["user"] == {"created": [], "changed": []}
    html = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    assert '<span class="who">user called</span>' in html
    assert "<h4>User world diff</h4>" in html


def test_world_matches_reference_compares_the_agents_world_only(
        make_domain: Callable[[str], st.Domain], play: Play) -> None:
    d = make_domain(DESK.replace("    expect:\n", "    reference:\n      - { call: get_line, args: { line: L-1 } }\n"
                                             "    expect:\n      world_matches_reference: true\n"))
    r = play(d, "What does the status bar show?", "Please turn airplane mode off.")
    assert (r.verdict, [(c.id, c.passed) for c in r.checks]) == (
        "passed", [("state:device[phone]#1", True), ("state:world_matches_reference", True)])


def test_a_dual_trial_regrades_to_what_it_recorded(tmp_path: Path, play: Play) -> None:
    from pytest_sandtable.engine.trial import regrade_trial

    d = _handler_domain(tmp_path, "sync")
    r = play(d, [("get_line", {"line": "L-1"}), "What does the status bar show?"], "Please turn airplane mode off.")
    again = regrade_trial(d, d.tasks[0], r, None)
    assert (again.verdict, again.calls, again.diff) == (r.verdict, r.calls, r.diff)


def test_the_served_world_serves_the_agents_tools_only(make_domain: Callable[[str], st.Domain], play: Play) -> None:
    from contextlib import asynccontextmanager

    served: list[list[str]] = []

    @asynccontextmanager
    async def serve(tools: list[st.ToolSpec], call: Any, trial_id: str) -> Any:
        served.append([t.name for t in tools])
        assert call("check_status_bar", {}).message == "unknown tool 'check_status_bar'; the tools are get_line"
        yield "http://127.0.0.1:9/tools", "http://127.0.0.1:9/mcp"

    r = play(make_domain(DESK), "What does the status bar show?", serve=serve)
    assert (served, [(c["tool"], c.get("by")) for c in r.calls]) == (
        [["get_line"]], [("check_status_bar", None), ("check_status_bar", "user")])


# ------------------------------------------------- setup on the user's side, sync after the setup


def test_a_setup_step_by_the_user_calls_a_user_tool_and_sync_runs_after_each_step(
    tmp_path: Path, play: Play
) -> None:
    """``setup: [{call, args, by: user}]`` runs a user tool on the user's world before the
    first message, logged ``by: setup`` with ``side: user``; the sync hook runs after each
    setup step, as after every step of the conversation (and as τ² does)."""
    (tmp_path / "desk_handlers.py").write_text(HANDLERS, encoding="utf-8")
    body = DESK.replace("  - id: airplane\n", "  - id: airplane\n    setup:\n"
                        "      - { call: toggle_airplane_mode, args: { on: false }, by: user }\n"
                        "      - { call: toggle_airplane_mode, args: { on: true }, by: user }\n"
                        "      - { call: get_line, args: { line: L-1 } }\n")
    d = st.load_domain(write_domain(tmp_path, "sync: desk_handlers:sync\n" + body))
    r = play(d, "Hello")
    assert [(c["tool"], c.get("by"), c.get("side"), c["turn"]) for c in r.calls[:4]] == [
        ("toggle_airplane_mode", "setup", "user", 0),  # off: the line's data stays on, nothing to sync
        ("toggle_airplane_mode", "setup", "user", 0),
        ("sync", "sync", None, 0),  # on again: the line's data goes off, synced after that step
        ("get_line", "setup", None, 0)]
    assert r.calls[2]["result"]["changed"] == [
        {"table": "lines", "key": "L-1", "fields": {"data": {"before": True, "after": False}}}]
    from pytest_sandtable.report.results_json import results_schema

    trial_schema = {"$defs": results_schema()["$defs"], "$ref": "#/$defs/trial"}
    jsonschema.validate(json.loads(json.dumps(r.to_dict())), trial_schema)


def test_a_setup_step_by_the_user_must_name_a_user_tool() -> None:
    assert problems(DESK.replace("  - id: airplane\n", "  - id: airplane\n    setup:\n"
                                 "      - { call: get_line, args: { line: L-1 }, by: user }\n"
                                 "      - { call: toggle_airplane_mod, by: user }\n"
                                 "      - { call: toggle_airplane_mode, args: { on: maybe }, by: user }\n")) == [
        "d.yaml:26:17: tasks[0].setup[0].call: 'get_line' is an agent tool; a `by: user` setup step calls one "
        "of the user tools (user_tools): check_status_bar, toggle_airplane_mode",
        "d.yaml:27:17: tasks[0].setup[1].call: unknown user tool 'toggle_airplane_mod'; did you mean "
        "'toggle_airplane_mode'?",
        "d.yaml:28:51: tasks[0].setup[2].args.on: found string 'maybe', expected boolean"]


def test_an_assertion_reads_both_worlds_and_a_user_matcher_the_users_calls(tmp_path: Path, play: Play) -> None:
    """``expect.assert`` functions see the user's tables beside the agent's, and
    ``called``/``not_called`` with ``by: user`` name user tools (checked against them)."""
    (tmp_path / "desk_asserts.py").write_text(
        "def plane_off(world, line):\n"
        "    return (not world.get('device', 'phone')['airplane_mode'] and world.get('lines', line) is not None,\n"
        "            'airplane mode is still on')\n", encoding="utf-8")
    body = DESK.replace("      state: [{ table: device, key: phone, fields: { airplane_mode: false } }]\n",
                        "      assert: [{ function: 'desk_asserts:plane_off', args: { line: L-1 } }]\n"
                        "      called: [{ tool: toggle_airplane_mode, args: { on: false }, by: user }]\n"
                        "      not_called: [{ tool: check_status_bar, by: user }]\n")
    d = st.load_domain(write_domain(tmp_path, body))
    r = play(d, "Please turn airplane mode off.")
    assert [(c.id, c.passed, c.detail) for c in r.checks] == [
        ("called:user:toggle_airplane_mode", True, ""), ("not_called:user:check_status_bar", True, ""),
        ("assert:plane_off", True, "")]
    r = play(d, "Hello?")
    assert [(c.id, c.passed) for c in r.checks] == [
        ("called:user:toggle_airplane_mode", False), ("not_called:user:check_status_bar", True),
        ("assert:plane_off", False)]
    assert r.checks[2].detail == "airplane mode is still on"
    assert problems(DESK.replace("      state: [{ table: device, key: phone, fields: { airplane_mode: false } }]\n",
                                 "      called: [{ tool: get_line, by: user }, { tool: toggle_airplane_mod, by: user },"
                                 " { tool: toggle_airplane_mode, args: { of: false }, by: user }]\n")) == [
        "d.yaml:33:24: tasks[0].expect.called[0].tool: 'get_line' is an agent tool; a `by: user` matcher names one "
        "of the user tools (user_tools): check_status_bar, toggle_airplane_mode",
        "d.yaml:33:54: tasks[0].expect.called[1].tool: unknown user tool 'toggle_airplane_mod'; did you mean "
        "'toggle_airplane_mode'?",
        "d.yaml:33:125: tasks[0].expect.called[2].args.of: unknown param 'of' of tool toggle_airplane_mode; "
        "expected one of: on"]
