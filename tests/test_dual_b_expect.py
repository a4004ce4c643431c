"""Issue 22, part B: expectations that call code (`expect.assert`), `called`/`not_called`
by whom (`by:`), and a task graded on the kinds its `basis` names."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import pytest_sandtable as st
from pytest_sandtable.engine.results import Check, TrialResult

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

WORLD = """
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1, status: available, rate: 1900 }
tools:
  - name: book_load
    params: { load_id: { type: string } }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
  - name: get_load
    params: { load_id: { type: string } }
    ops:
      - get: { table: loads, key: $load_id }
"""


def module(tmp_path: Path, name: str, body: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")


def task(make: Make, expect: str, extra: str = "") -> st.Domain:
    body = textwrap.indent(textwrap.dedent(expect).strip(), "      ")
    return make(WORLD + f"""
tasks:
  - id: t
    user: {{ opening: "Book L-1 please.", script: [Thanks.] }}
{extra}    expect:
{body}
""")


def rows(result: st.TrialResult) -> list[tuple[str, str, bool, str, bool]]:
    return [(c.kind, c.id, c.passed, c.detail, c.counted) for c in result.checks]


def problems(make: Make, body: str) -> list[str]:
    with pytest.raises(st.DomainError) as info:
        make(body)
    return [f"{p.line}:{p.col}: {p.path}: {p.message}" for p in info.value.problems]


BOOK = [("book_load", {"load_id": "L-1"}), "Booked."]

ASSERTS = """
    def booked(world, load="L-1"):
        return world.get("loads", load)["status"] == "booked"

    def rate_at_most(world, most):
        rate = world.get("loads", "L-1")["rate"]
        return rate <= most, f"rate {rate} is over {most}"

    def listed(world):
        return (len(world.list("loads", {"status": "booked"})) == 1, "no booked load")
"""


# -- assert -------------------------------------------------------------------------------


def test_assert_bare_and_mapping_forms_graded_on_the_final_world(make_domain: Make, play: Play,
                                                                 tmp_path: Path) -> None:
    module(tmp_path, "asserts_a1", ASSERTS)
    domain = task(make_domain, """
    assert:
      - asserts_a1:booked
      - { function: asserts_a1:rate_at_most, args: { most: 1000 }, id: cheap }
      - { function: asserts_a1:booked, args: { load: L-1 } }
      - asserts_a1:listed
    """)
    assert rows(play(domain, BOOK)) == [
        ("assert", "assert:booked", True, "", True),
        ("assert", "assert:cheap", False, "rate 1900 is over 1000", True),
        ("assert", "assert:booked#2", True, "", True),
        ("assert", "assert:listed", True, "", True),
    ]
    r = play(domain, "Hello.")
    assert r.verdict == "failed"
    assert [(c.id, c.detail) for c in r.failed_checks] == [
        ("assert:booked", "asserts_a1:booked returned False"),
        ("assert:cheap", "rate 1900 is over 1000"),
        ("assert:booked#2", "asserts_a1:booked returned False"),
        ("assert:listed", "no booked load"),
    ]


@pytest.mark.parametrize(("body", "why"), [
    ("def a(world):\n    return world.get('loads', 'L-1')['nope']\n",
     "the domain failed grading the trial: assertion asserts_{n}:a raised KeyError: 'nope'"),
    ("def a(world):\n    return 'yes'\n",
     "the domain failed grading the trial: assertion asserts_{n}:a returned \"yes\", expected True, False "
     "or (bool, message)"),
    ("def a(world):\n    world.update('loads', 'L-1', {'status': 'x'})\n    return True\n",
     "the domain failed grading the trial: assertion asserts_{n}:a tried to change the world (world.update)"),
    ("def a(world):\n    try:\n        world.delete('loads', 'L-1')\n    except Exception:\n        pass\n"
     "    return True\n",
     "the domain failed grading the trial: assertion asserts_{n}:a tried to change the world (world.delete)"),
])
def test_an_assertion_that_misbehaves_errors_the_trial_as_the_domains_fault(
        make_domain: Make, play: Play, tmp_path: Path, body: str, why: str, request: pytest.FixtureRequest) -> None:
    n = f"e{request.node.callspec.indices['body']}"
    module(tmp_path, f"asserts_{n}", body)
    r = play(task(make_domain, f"assert: [asserts_{n}:a]"), BOOK)
    assert (r.verdict, r.error, r.attribution) == ("errored", why.format(n=n), None)
    # the agent's write, and none of the assertion's
    assert [c["fields"] for c in r.diff["changed"]] == [{"status": {"before": "available", "after": "booked"}}]


def test_assert_load_errors_name_the_key(make_domain: Make, tmp_path: Path) -> None:
    module(tmp_path, "asserts_l1", "def two(world, a, b):\n    return True\n\nasync def later(world):\n"
                                   "    return True\n")
    body = WORLD + """
tasks:
  - id: t
    user: { opening: Hi. }
    expect:
      assert:
        - asserts_l1:missing
        - { function: asserts_l1:two, args: { a: 1 } }
        - nomodule_l1:f
        - asserts_l1:later
        - { function: asserts_l1:two, args: { a: 1, b: 2 }, id: x }
        - { function: asserts_l1:two, args: { a: 1, b: 2 }, id: x }
"""
    assert problems(make_domain, body) == [
        "23:11: tasks[0].expect.assert[0]: unknown function 'missing' in module 'asserts_l1'; "
        "expected one of: later, two",
        "24:23: tasks[0].expect.assert[1].function: assertion 'asserts_l1:two' takes (world, a, b), so it cannot "
        "be called as function(world, a=...): missing a required argument: 'b'",
        f"25:11: tasks[0].expect.assert[2]: cannot import module 'nomodule_l1' of assertion 'nomodule_l1:f': no "
        f"module named 'nomodule_l1' (looked in the domain file's folder {tmp_path}, then sys.path)",
        "26:11: tasks[0].expect.assert[3]: assertion 'asserts_l1:later' is an async function; assertions are "
        "called synchronously, so make it a plain def",
        "28:65: tasks[0].expect.assert[5].id: duplicate assert id 'x' in this task (first at line 27)",
    ]


# -- called / not_called by -------------------------------------------------------------------


def test_matchers_by_agent_and_user_read_only_their_own_calls(make_domain: Make) -> None:
    """A matcher reads one side's calls: ``by: agent`` (the default) the agent's, ``by:
    user`` the simulated user's own tools'; setup, history and sync calls match neither."""
    domain = make_domain(WORLD + """
user_world:
  phone: { key: id, rows: [{ id: p, on: false }] }
user_tools:
  - name: restart
    ops: [{ update: { table: phone, key: p, set: { on: true } } }]
  - name: look
    ops: [{ get: { table: phone, key: p } }]
tasks:
  - id: t
    user: { opening: "Book L-1 please.", script: [Thanks.] }
    expect:
      called: [book_load, { tool: restart, by: user }, { tool: get_load, by: agent }, { tool: look, by: user }]
      not_called: [{ tool: look, by: user }, get_load, { tool: restart, by: user }]
""")
    t = domain.tasks[0]
    from pytest_sandtable.engine.grading import grade
    from pytest_sandtable.engine.world import World, seed_for
    world = World(seed_for(domain))

    def call(tool: str, **extra: object) -> dict[str, object]:
        return {"index": 0, "turn": 1, "tool": tool, "args": {}, "ok": True, "result": {},
                "error": None, "violations": [], **extra}

    calls = [call("book_load"), call("look", by="user"), call("get_load", by="setup"),
             call("get_load", by="history"), call("restart", by="sync"), call("restart", by="setup", side="user")]
    assert [(c.id, c.passed, c.detail) for c in grade(t.expect, world, calls, [])] == [
        ("called:book_load", True, ""),
        ("called:user:restart", False, "restart was never called successfully (the user's calls)"),
        ("called:get_load", False, "get_load was never called successfully"),
        ("called:user:look", True, ""),
        ("not_called:user:look", False, "look was called 1x (the user's calls)"),
        ("not_called:get_load", True, ""),
        ("not_called:user:restart", True, ""),
    ]


# -- basis --------------------------------------------------------------------------------------


def test_basis_counts_only_its_kinds(make_domain: Make, play: Play, tmp_path: Path) -> None:
    module(tmp_path, "asserts_b1", ASSERTS)
    domain = task(make_domain, """
    state: [{ table: loads, key: L-1, fields: { status: booked } }]
    reply_includes: [confirmed]
    assert: [asserts_b1:booked]
    basis: [assert]
    """)
    r = play(domain, BOOK)
    assert r.verdict == "passed"
    assert rows(r) == [
        ("state", "state:loads[L-1]#1", True, "", False),
        ("reply", "reply:confirmed", False, 'agent never said "confirmed"', False),
        ("assert", "assert:booked", True, "", True),
    ]
    assert r.failed_checks == [] and [c.id for c in r.uncounted_failed_checks] == ["reply:confirmed"]
    d = r.to_dict()
    assert d["checks"][1] == {"kind": "reply", "id": "reply:confirmed", "passed": False,
                              "detail": 'agent never said "confirmed"', "counted": False}
    assert "counted" not in d["checks"][2]
    assert TrialResult.from_dict(json.loads(json.dumps(d))).checks[1].counted is False
    assert play(domain, "Hello.").verdict == "failed"


def test_basis_load_errors(make_domain: Make) -> None:
    body = WORLD + """
tasks:
  - id: t
    user: { opening: Hi. }
    expect:
      called: [book_load]
      basis: [called, asert, state, reply, assert]
"""
    assert problems(make_domain, body) == [
        "23:23: tasks[0].expect.basis[1]: found 'asert', expected one of state, called, not_called, reply, assert; "
        "did you mean 'assert'?",
        "23:30: tasks[0].expect.basis[2]: basis names `state` but the task has no `state` "
        "(nor world_matches_reference)",
        "23:37: tasks[0].expect.basis[3]: basis names `reply` but the task has no `reply_includes`",
        "23:44: tasks[0].expect.basis[4]: basis names `assert` but the task has no `assert`",
    ]


def test_invariants_always_count() -> None:
    from pytest_sandtable.engine.trial import _verdict

    assert _verdict([Check("state", "s", False, "x", counted=False)]) == "passed"
    assert _verdict([Check("state", "s", False, "x", counted=False), Check("invariant", "r", False, "y")]) == "failed"
