"""Issue 22, part B: tasks that start mid-way: `setup` steps, a `history` the conversation
starts from, and `solo` tasks worked from a `ticket` with no simulated user."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pytest_sandtable as st
from conftest import Playbook
from pytest_sandtable.report.text import transcript_text

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

WORLD = """
world:
  lines:
    key: line
    rows:
      - { line: L-1, status: active, apn: good }
tools:
  - name: suspend_line
    params: { line: { type: string } }
    checks:
      - require: { table: lines, key: $line, where: { status: active } }
        error: 409
        message: "{line} is not active"
    ops:
      - update: { table: lines, key: $line, set: { status: suspended } }
  - name: resume_line
    params: { line: { type: string } }
    ops:
      - update: { table: lines, key: $line, set: { status: active } }
  - name: get_line
    params: { line: { type: string } }
    ops:
      - get: { table: lines, key: $line }
invariants:
  - id: no-suspend
    kind: never
    tool: suspend_line
"""

HANDLERS = """
from pytest_sandtable import ToolError

def break_apn(args, world, ctx):
    world.update("lines", "L-1", {"apn": args["apn"]})

def refuse(args, world, ctx):
    raise ToolError(409, "no APN to break")

def crash(args, world, ctx):
    return {}["x"]
"""


def problems(make: Make, body: str) -> list[str]:
    with pytest.raises(st.DomainError) as info:
        make(body)
    return [f"{p.line}:{p.col}: {p.path}: {p.message}" for p in info.value.problems]


def domain(make: Make, tmp_path: Path, task: str, module: str = "start_h0") -> st.Domain:
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(HANDLERS), encoding="utf-8")
    return make(WORLD + "tasks:\n" + textwrap.indent(textwrap.dedent(task).strip("\n"), "  ") + "\n")


class Seen:
    """An agent that keeps what each of its turns was given, and plays a Playbook."""

    def __init__(self, *turns: Any) -> None:
        self.play = Playbook(*turns)
        self.messages: list[list[dict[str, str]]] = []

    def __call__(self, turn: st.Turn) -> str:
        self.messages.append([dict(m) for m in turn.messages])
        return self.play(turn)


# -- setup ------------------------------------------------------------------------------------


def test_setup_calls_and_handlers_run_before_the_first_message(make_domain: Make, play: Play,
                                                                tmp_path: Path) -> None:
    d = domain(make_domain, tmp_path, """
    - id: t
      setup:
        - { call: suspend_line, args: { line: L-1 } }
        - { handler: start_h1:break_apn, args: { apn: bad } }
      user: { opening: "My data is down.", script: [Thanks.] }
      expect:
        state: [{ table: lines, key: L-1, fields: { status: active, apn: bad } }]
        not_called: [suspend_line]
    """, "start_h1")
    agent = Seen([("resume_line", {"line": "L-1"}), "Resumed."])
    r = play(d, agent=agent)
    assert (r.verdict, r.violations) == ("passed", [])  # the setup's suspend breaks no rule, matches no matcher
    assert [(c["tool"], c["turn"], c.get("by")) for c in r.calls] == [
        ("suspend_line", 0, "setup"), ("resume_line", 1, None)]
    assert r.transcript[0] == {"role": "tool", "call": 0}
    assert [c["fields"] for c in r.diff["changed"]] == [{"status": {"before": "suspended", "after": "active"}}]
    assert agent.messages[0] == [{"role": "user", "content": "My data is down."}]
    assert "[0] setup -> suspend_line(line=\"L-1\")" in transcript_text(r)


@pytest.mark.parametrize(("step", "why"), [
    ("{ call: suspend_line, args: { line: L-1 } }\n        - { call: suspend_line, args: { line: L-1 } }",
     "the domain failed starting the trial: setup step 2 (suspend_line) failed: error 409: L-1 is not active"),
    ("{ handler: start_h2:refuse }",
     "the domain failed starting the trial: setup step 1 (start_h2:refuse) failed: error 409: no APN to break"),
    ("{ handler: start_h2:crash }",
     "the domain failed starting the trial: setup step 1 (start_h2:crash) raised KeyError: 'x'"),
])
def test_a_failed_setup_step_errors_the_trial_as_the_domains_fault(make_domain: Make, play: Play, tmp_path: Path,
                                                                   step: str, why: str) -> None:
    d = domain(make_domain, tmp_path, f"""
    - id: t
      setup:
        - {step}
      user: {{ opening: Hi. }}
    """, "start_h2")
    r = play(d, "Hello.")
    assert (r.verdict, r.error, r.turns, r.attribution) == ("errored", why, 0, None)


def test_setup_load_errors(make_domain: Make, tmp_path: Path) -> None:
    (tmp_path / "start_h3.py").write_text("def two(a, b):\n    pass\n", encoding="utf-8")
    body = WORLD + """tasks:
  - id: t
    user: { opening: Hi. }
    setup:
      - { call: suspend_lin, args: { line: L-1 } }
      - { call: suspend_line, args: { lin: L-1 } }
      - { call: get_line, args: { line: L-1 }, by: user }
      - { handler: start_h3:two }
      - { handler: start_h3:nope }
"""
    assert problems(make_domain, body) == [
        "33:17: tasks[0].setup[0].call: unknown tool 'suspend_lin'; did you mean 'suspend_line'?",
        "34:37: tasks[0].setup[1].args: missing required param 'line' of tool suspend_line",
        "34:39: tasks[0].setup[1].args.lin: unknown param 'lin' of tool suspend_line; did you mean 'line'?",
        "35:17: tasks[0].setup[2].call: 'get_line' is an agent tool; a `by: user` setup step calls a user tool, "
        "and this domain declares none (the top-level user_tools)",
        "36:20: tasks[0].setup[3].handler: handler 'start_h3:two' takes (a, b), expected a function called as "
        "function(args, world, ctx)",
        "37:20: tasks[0].setup[4].handler: unknown function 'nope' in module 'start_h3'; expected one of: two",
    ]


# -- history ------------------------------------------------------------------------------------


HISTORY = """
- id: t
  history:
    - { role: user, say: "My data stopped working." }
    - role: agent
      say: "Let me look."
      calls: [{ call: get_line, args: { line: L-1 } }, { call: suspend_line, args: { line: L-9 } }]
    - { role: user, say: "Thanks, any news?" }
  user: { opening: "Never said.", script: ["Great, thanks."] }
  expect:
    called: [get_line]
"""


def test_history_is_the_prefix_the_agent_and_user_see(make_domain: Make, play: Play, tmp_path: Path) -> None:
    d = domain(make_domain, tmp_path, HISTORY)
    agent = Seen("Your line is active.", "Bye.")
    r = play(d, agent=agent)
    assert [(c["tool"], c["ok"], c.get("by")) for c in r.calls] == [("get_line", True, "history"),
                                                                    ("suspend_line", False, "history")]
    # the history's calls are nobody's the matchers read, and break no rule
    assert (r.verdict, [c.detail for c in r.checks], r.violations) == (
        "failed", ["get_line was never called successfully"], [])
    assert agent.messages[0] == [
        {"role": "user", "content": "My data stopped working."},
        {"role": "assistant", "content": '[called get_line({"line": "L-1"}) -> {"line": "L-1", "status": "active", '
                                         '"apn": "good"}]\n[called suspend_line({"line": "L-9"}) -> error 409: '
                                         'L-9 is not active]\nLet me look.'},
        {"role": "user", "content": "Thanks, any news?"},
    ]
    # the agent spoke next; the scripted user's opening was never said
    assert [(e["role"], e.get("text"), e.get("turn")) for e in r.transcript] == [
        ("user", "My data stopped working.", 0), ("tool", None, None), ("tool", None, None),
        ("agent", "Let me look.", 0), ("user", "Thanks, any news?", 0),
        ("agent", "Your line is active.", 1), ("user", "Great, thanks.", 1), ("agent", "Bye.", 2)]


def test_a_history_that_ends_with_the_agent_lets_the_user_speak_next(make_domain: Make, play: Play,
                                                                      tmp_path: Path) -> None:
    d = domain(make_domain, tmp_path, """
    - id: t
      history:
        - { role: agent, say: "Hello, how can I help?" }
      user: { opening: "My line L-1 is down.", script: ["Thanks."] }
    """)
    agent = Seen("Looking.", "Bye.")
    r = play(d, agent=agent)
    assert [(e["role"], e["text"]) for e in r.transcript] == [
        ("agent", "Hello, how can I help?"), ("user", "My line L-1 is down."), ("agent", "Looking."),
        ("user", "Thanks."), ("agent", "Bye.")]
    assert agent.messages[0] == [{"role": "assistant", "content": "Hello, how can I help?"},
                                 {"role": "user", "content": "My line L-1 is down."}]


def test_history_load_errors(make_domain: Make) -> None:
    body = WORLD + """tasks:
  - id: t
    user: { opening: Hi. }
    history:
      - { role: customer, say: Hi. }
      - { role: agent, say: "" }
      - { role: agent, say: Ok., calls: [{ call: get_lin, args: { line: L-1 } }] }
      - { role: user, say: Ok., calls: [{ call: get_line }] }
"""
    assert problems(make_domain, body) == [
        "33:17: tasks[0].history[0].role: found 'customer', expected one of user, agent; did you mean 'user'?",
        "34:29: tasks[0].history[1].say: found an empty string, expected text",
        "35:50: tasks[0].history[2].calls[0].call: unknown tool 'get_lin'; did you mean 'get_line'?",
        "36:33: tasks[0].history[3].calls: only the agent's messages have `calls` (the user's tools are not in "
        "this domain's history)",
    ]


# -- solo ------------------------------------------------------------------------------------------


def test_a_solo_task_gives_the_agent_the_ticket_and_ends_after_its_first_reply(make_domain: Make, play: Play,
                                                                               tmp_path: Path) -> None:
    d = domain(make_domain, tmp_path, """
    - id: t
      solo: true
      ticket: "Customer reports L-1 must be suspended."
      max_turns: 5
      expect:
        state: [{ table: lines, key: L-1, fields: { status: suspended } }]
    """)

    class NoUser:
        def __call__(self, turn: st.UserTurn) -> str:
            raise AssertionError("a solo task has no simulated user")

    agent = Seen([("get_line", {"line": "L-1"}), ("resume_line", {"line": "L-1"}), "Done."], "never")
    r = play(d, agent=agent, user=NoUser())
    assert (r.verdict, r.ended_by, r.turns) == ("failed", "solo", 1)
    assert agent.messages == [[{"role": "user", "content": "Customer reports L-1 must be suspended."}]]
    assert [(e["role"], e.get("text")) for e in r.transcript] == [
        ("user", "Customer reports L-1 must be suspended."), ("tool", None), ("tool", None), ("agent", "Done.")]


def test_solo_load_errors(make_domain: Make) -> None:
    body = WORLD + """tasks:
  - id: a
    solo: true
    user: { opening: Hi., script: [Ok.] }
  - id: b
    ticket: Do it.
    user: { opening: Hi. }
"""
    assert problems(make_domain, body) == [
        "31:5: tasks[0].solo: a solo task needs `ticket`: the agent's first message, what it works from",
        "32:13: tasks[0].user.opening: a solo task has no simulated user, so no user.opening: the agent works "
        "from the ticket alone",
        "32:27: tasks[0].user.script: a solo task has no simulated user, so no user.script: the agent works "
        "from the ticket alone",
        "34:5: tasks[1].ticket: 'ticket' is for a solo task: add `solo: true` (the agent then works from the "
        "ticket alone), or give the user an opening",
    ]


# -- the model agents' native histories -------------------------------------------------------------


def test_claude_and_openai_agents_send_the_history_as_prior_messages(make_domain: Make, play: Play,
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from fakes import FakeAnthropic, FakeOpenAI, claude_text, openai_text

    from pytest_sandtable.adapters.claude import ClaudeAgent
    from pytest_sandtable.adapters.openai import OpenAIAgent
    from pytest_sandtable.adapters.options import AdapterOptions

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    d = domain(make_domain, tmp_path, HISTORY)
    note = ('[called get_line({"line": "L-1"}) -> {"line": "L-1", "status": "active", "apn": "good"}]\n'
            '[called suspend_line({"line": "L-9"}) -> error 409: L-9 is not active]\nLet me look.')
    with FakeAnthropic() as claude:
        claude.push(claude_text("Active."), claude_text("Bye."))
        agent = ClaudeAgent("claude-test", AdapterOptions(timeout=5.0, retries=0), api_key="sk-ant-test-0",
                            base_url=claude.base_url)
        play(d, agent=agent)
        assert claude.bodies[0]["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "My data stopped working."}]},
            {"role": "assistant", "content": [{"type": "text", "text": note}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks, any news?",
                                          "cache_control": {"type": "ephemeral"}}]},
        ]
    with FakeOpenAI() as oai:
        oai.push(openai_text("Active."), openai_text("Bye."))
        agent2 = OpenAIAgent("gpt-test", AdapterOptions(timeout=5.0, retries=0, agent_base_url=oai.base_url))
        play(d, agent=agent2)
        assert oai.bodies[0]["messages"] == [  # (no system message: the domain has no policy)
            {"role": "user", "content": "My data stopped working."},
            {"role": "assistant", "content": note},
            {"role": "user", "content": "Thanks, any news?"},
        ]
        assert oai.bodies[1]["messages"][3:] == [{"role": "assistant", "content": "Active."},
                                                  {"role": "user", "content": "Great, thanks."}]


# -- regrade and the reference world ----------------------------------------------------------------


def test_a_trial_that_started_mid_way_regrades_and_its_reference_world_starts_there(
        make_domain: Make, play: Play, tmp_path: Path) -> None:
    from pytest_sandtable.engine.trial import regrade_trial

    d = domain(make_domain, tmp_path, """
    - id: t
      setup:
        - { call: suspend_line, args: { line: L-1 } }
      history:
        - { role: user, say: "My line is down." }
        - { role: agent, say: "Looking.", calls: [{ call: get_line, args: { line: L-1 } }] }
        - { role: user, say: "And?" }
      user: { script: ["Thanks."] }
      expect:
        world_matches_reference: true
      reference:
        - { call: resume_line, args: { line: L-1 } }
        - say: Resumed.
    """)
    r = play(d, agent=st.ReferenceAgent())
    assert (r.verdict, [(c.id, c.passed) for c in r.checks]) == ("passed", [("state:world_matches_reference", True)])
    stored = st.TrialResult.from_dict(r.to_dict())
    again = regrade_trial(d, d.tasks[0], stored, None)
    assert (again.verdict, again.calls, again.transcript) == ("passed", r.calls, r.transcript)
    idle = play(d, "Nothing to do.")  # the line stays as the setup left it: suspended
    assert [(c.id, c.passed) for c in idle.checks] == [("state:world_matches_reference", False)]
