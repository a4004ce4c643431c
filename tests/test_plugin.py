"""The pytest plugin, through real pytest runs (pytester)."""

from __future__ import annotations

import textwrap

import pytest
from _domains import BOOKS_L1001, DESK

pytest_plugins = ["pytester"]

DOMAIN = DESK + """\
tasks:
  - id: book-happy-path
    tags: [booking]
    critical: true
    user: { opening: "Hi, MC 100101 about L-1001.", script: ["Deal."] }
""" + BOOKS_L1001 + """\
  - id: over-the-ceiling
    tags: [negotiation]
    user: { opening: "I need 2,600 for L-1001." }
    expect:
      reply_includes: [confirmation]
    reference:
      - call: book_load
        args: { load_id: L-1001, rate: 2600 }
      - say: "Booked at 2,600."
"""

HAPPY_LINE = DOMAIN.splitlines().index("  - id: book-happy-path") + 1
CEILING_LINE = DOMAIN.splitlines().index("  - id: over-the-ceiling") + 1


@pytest.fixture
def domain(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project folder holding the freight domain above as sandtable.yaml."""
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    return pytester


def sandtable_section(lines: list[str]) -> list[str]:
    """The lines of the `sandtable` terminal summary section."""
    start = next(i for i, line in enumerate(lines) if line.startswith("=") and " sandtable " in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("="))
    # the run folder's name holds a timestamp (test_artifacts.py asserts that line) and
    # latency varies run to run (test_the_terminal_summary_shows_latency asserts it)
    section = lines[start + 1:end]
    section = [line for line in section if not line.startswith(("sandtable: results in ", "Agent turn latency: "))]
    while section and not section[-1]:
        section.pop()
    return section


# -- collection -----------------------------------------------------------------------------


def test_collects_sandtable_yaml_and_star_sandtable_yaml(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sub").mkdir()
    pytester.path.joinpath("sub", "sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("clinic.sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("other.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("sandtable.yml").write_text(DOMAIN, encoding="utf-8")
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "clinic.sandtable.yaml::book-happy-path[[]1-1]",
        "clinic.sandtable.yaml::over-the-ceiling[[]1-1]",
        "sub/sandtable.yaml::book-happy-path[[]1-1]",
        "sub/sandtable.yaml::over-the-ceiling[[]1-1]",
        "",
        "4 tests collected in *",
    ], consecutive=True)


def test_each_task_becomes_k_items_in_a_stable_order(domain: pytest.Pytester) -> None:
    result = domain.runpytest("--collect-only", "-q", "--sandtable-k=3")
    assert result.outlines[:6] == [
        "sandtable.yaml::book-happy-path[1-3]",
        "sandtable.yaml::book-happy-path[2-3]",
        "sandtable.yaml::book-happy-path[3-3]",
        "sandtable.yaml::over-the-ceiling[1-3]",
        "sandtable.yaml::over-the-ceiling[2-3]",
        "sandtable.yaml::over-the-ceiling[3-3]",
    ]


def test_k_defaults_to_one(domain: pytest.Pytester) -> None:
    domain.runpytest().assert_outcomes(passed=1, failed=1)


def test_k_from_the_ini_file(domain: pytest.Pytester) -> None:
    domain.makeini("[pytest]\nsandtable_k = 2\n")
    domain.runpytest().assert_outcomes(passed=2, failed=2)


def test_the_option_wins_over_the_ini_file(domain: pytest.Pytester) -> None:
    domain.makeini("[pytest]\nsandtable_k = 2\n")
    domain.runpytest("--sandtable-k=3").assert_outcomes(passed=3, failed=3)


def test_a_bad_k_is_a_usage_error(domain: pytest.Pytester) -> None:
    result = domain.runpytest("--sandtable-k=0")
    result.stderr.fnmatch_lines(["ERROR: --sandtable-k / sandtable_k: expected at least 1, got 0"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_k_no_results_json_could_hold_is_a_usage_error(domain: pytest.Pytester) -> None:
    result = domain.runpytest("--sandtable-k=100001")
    result.stderr.fnmatch_lines(["ERROR: --sandtable-k / sandtable_k: expected at most 100,000, got 100001 "
                                 "(results.json holds at most 100,000 trials of a task)"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_bad_ini_k_is_a_usage_error(domain: pytest.Pytester) -> None:
    domain.makeini("[pytest]\nsandtable_k = many\n")
    result = domain.runpytest()
    result.stderr.fnmatch_lines(["ERROR: --sandtable-k / sandtable_k: expected a whole number, got 'many'"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_tags_are_markers(domain: pytest.Pytester) -> None:
    result = domain.runpytest("-m", "booking", "--sandtable-k=2", "--strict-markers", "-v")
    result.assert_outcomes(passed=2, deselected=2)
    result.stdout.fnmatch_lines(["sandtable.yaml::book-happy-path[[]1-2] PASSED*"])


def test_minus_k_selects_task_ids(domain: pytest.Pytester) -> None:
    result = domain.runpytest("-k", "over-the-ceiling", "--sandtable-k=2")
    result.assert_outcomes(failed=2, deselected=2)
    domain.runpytest("-k", "not over-the-ceiling and 2-2", "--sandtable-k=2").assert_outcomes(passed=1, deselected=3)


def test_the_header_names_k_the_agent_and_the_user(domain: pytest.Pytester) -> None:
    result = domain.runpytest("--sandtable-k=4")
    result.stdout.fnmatch_lines([
        "sandtable: k=4, run seed=0",
        "collected 8 items",
        "sandtable: agent=reference, user=scripted",
        "sandtable: the reference agent replays each task's reference: this checks the suite, not an agent; "
        "point --sandtable-agent at yours (docs/agents.md)",
    ])


# -- a failing trial -------------------------------------------------------------------------------


def test_a_failing_trial_reads_like_an_assertion_failure(domain: pytest.Pytester) -> None:
    result = domain.runpytest("-k", "ceiling")
    result.stdout.fnmatch_lines([
        "*_ over-the-ceiling[[]1-1] _*",
        "over-the-ceiling trial 1 of 1 failed (seed *, ended by script_end after 1 agent turn)",
        "  invariant  rate-ceiling        book_load rate=2600 exceeds the limit 2350",
        "  reply      reply:confirmation  agent never said \"confirmation\"",
        "  likely owner: task — the task's own reference fails expectation reply:confirmation when replayed: "
        "agent never said \"confirmation\"",
        "*- Captured sandtable transcript call -*",
        "[[]0] user : I need 2,600 for L-1001.",
        '[[]1] agent -> book_load(load_id="L-1001", rate=2600)',
        '        = {"load_id": "L-1001", "max_rate": 2350, "status": "booked"}',
        "        !! VIOLATION rate-ceiling: book_load rate=2600 exceeds the limit 2350",
        "[[]1] agent: Booked at 2,600.",
    ], consecutive=True)
    result.stdout.fnmatch_lines(["FAILED sandtable.yaml::over-the-ceiling[[]1-1] - over-the-ceiling trial 1 of 1*"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_the_location_is_the_tasks_line(domain: pytest.Pytester) -> None:
    reprec = domain.inline_run("--sandtable-k=1")
    reports = [r for r in reprec.getreports("pytest_runtest_logreport") if r.when == "call"]
    assert [r.location for r in reports] == [
        ("sandtable.yaml", HAPPY_LINE - 1, "book-happy-path[1-1]"),
        ("sandtable.yaml", CEILING_LINE - 1, "over-the-ceiling[1-1]"),
    ]
    # the trials' own location, as results.json keeps it (a report drops its trial once it is spooled)
    from _sandtable_shop import only_results

    assert [t["location"] for t in only_results(domain.path)["trials"]] == [
        f"sandtable.yaml:{HAPPY_LINE}", f"sandtable.yaml:{CEILING_LINE}"
    ]


NO_OPENING = DOMAIN.replace(
    '    user: { opening: "I need 2,600 for L-1001." }\n', '    user: { persona: "A caller with nothing to say." }\n'
)
SCRIPT_ERROR = (
    "simulated user failed: ScriptError: task 'over-the-ceiling' has no user.opening and no user.script to say"
)
# The scripted user from a fixture: unknown at collection, so the trial is not skipped
# (as under --sandtable-user scripted, see test_pytest_habits.py) but runs, and errors.
SCRIPTED_USER_FIXTURE = """
import pytest
from pytest_sandtable import ScriptedUser

@pytest.fixture(scope="session")
def sandtable_user():
    return ScriptedUser()
"""


def test_an_errored_trial_is_a_pytest_error_and_left_out_of_pass_hat(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(NO_OPENING, encoding="utf-8")
    pytester.makeconftest(SCRIPTED_USER_FIXTURE)
    result = pytester.runpytest("-k", "ceiling")
    result.assert_outcomes(errors=1)
    assert sandtable_section(result.outlines) == [
        "1 trial of 1 task: 0 passed, 0 failed, 1 errored (left out of pass^k)   agent: reference   user: scripted",
        "",
        "pass^k           tasks    pass^1    pass@1",
        "---------------  -------  --------  --------",
        "all tasks        1        n/a       n/a",
        "tag negotiation  1        n/a       n/a",
        "",
        "task              verdict    passed          tags",
        "----------------  ---------  --------------  -----------",
        "over-the-ceiling  skipped    0/0 +1 errored  negotiation",
        "",
        "Errored trials (left out of pass^k)",
        f"  over-the-ceiling[1]: {SCRIPT_ERROR}",
        "",
        # the errored trial made no call: its task exercises no rule
        "policy coverage freight: 1 rule: 1 declared; 0 policy sentences quoted by no rule; "
        "1 task exercises no rule",
    ]


def test_an_errored_trial_reads_like_a_failing_one(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(NO_OPENING, encoding="utf-8")
    pytester.makeconftest(SCRIPTED_USER_FIXTURE)
    result = pytester.runpytest("-k", "ceiling")
    result.stdout.fnmatch_lines([
        "*_ ERROR at setup of over-the-ceiling[[]1-1] _*",
        "over-the-ceiling trial 1 of 1 errored (seed *, stopped before the first agent turn)",
        f"  errored: {SCRIPT_ERROR}",
    ], consecutive=True)
    result.stdout.no_fnmatch_line("*def setup(self)*")


def test_a_broken_rule_shows_the_policy_sentence_behind_it(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN.replace(
        "field: max_rate } }\n", "field: max_rate }, source: { quote: Never book above the ceiling. } }\n"
    ), encoding="utf-8")
    result = pytester.runpytest("-k", "over-the-ceiling")
    result.stdout.fnmatch_lines([
        "over-the-ceiling trial 1 of 1 failed *",
        "  invariant  rate-ceiling        book_load rate=2600 exceeds the limit 2350",
        '                                 policy: "Never book above the ceiling."',
        "  reply      reply:confirmation  agent never said \"confirmation\"",
    ], consecutive=True)


# -- the agent under test ------------------------------------------------------------------------

CONFTEST = """
import pytest

BUILT = []

@pytest.fixture(scope="session")
def desk_config():
    BUILT.append(1)
    return {"greeting": "Harborline desk, your confirmation is ready."}

@pytest.fixture(scope="session")
def sandtable_agent(desk_config):
    def agent(turn):
        return f"{desk_config['greeting']} (config built {len(BUILT)}x)"
    agent.name = "harborline-desk"
    return agent
"""


def test_a_conftest_overrides_the_agent_with_session_fixtures(domain: pytest.Pytester) -> None:
    domain.makeconftest(CONFTEST)
    result = domain.runpytest("--sandtable-k=3", "-k", "ceiling")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "sandtable: agent=fixture sandtable_agent (conftest.py), user=scripted",
        "*3 trials of 1 task: 3 passed, 0 failed, 0 errored (left out of pass^k)   agent: harborline-desk   "
        "user: scripted",
    ])


def test_a_conftest_agent_sees_each_trials_transcript(domain: pytest.Pytester) -> None:
    domain.makeconftest(CONFTEST)
    result = domain.runpytest("-k", "happy")
    result.stdout.fnmatch_lines([
        "[[]0] user : Hi, MC 100101 about L-1001.",
        "[[]1] agent: Harborline desk, your confirmation is ready. (config built 1x)",
        "[[]1] user : Deal.",
        "[[]2] agent: Harborline desk, your confirmation is ready. (config built 1x)",
    ], consecutive=True)


def test_sandtable_agent_module_attr(domain: pytest.Pytester) -> None:
    domain.makepyfile(desk_agent=textwrap.dedent("""
        class DeskAgent:
            def __call__(self, turn):
                turn.call_tool("book_load", {"load_id": "L-1001", "rate": 2000})
                return "Booked. Your confirmation is B-1."
    """))
    domain.syspathinsert()
    result = domain.runpytest("--sandtable-agent=desk_agent:DeskAgent")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "sandtable: agent=desk_agent:DeskAgent, user=scripted",
        "*agent: desk_agent:DeskAgent   user: scripted",
    ])


def test_an_unknown_agent_is_a_usage_error_before_any_trial_runs(domain: pytest.Pytester) -> None:
    result = domain.runpytest("--sandtable-agent=nowhere:Agent")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: --sandtable-agent: cannot import module 'nowhere' for agent 'nowhere:Agent': "
        "No module named 'nowhere' (looked on sys.path, then in ./; put it beside the domain file or in the "
        "rootdir, or set `pythonpath` in pytest's configuration)"
    ])
    result.stdout.no_fnmatch_line("sandtable: agent=*")
    result.stdout.no_fnmatch_line("*book-happy-path*")


def test_an_unknown_agent_under_xdist_is_a_usage_error_too(domain: pytest.Pytester) -> None:
    result = domain.runpytest_subprocess("-p", "xdist", "-n", "2", "--sandtable-agent=bogus")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sandtable-agent: unknown agent 'bogus'; expected *"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_an_agent_class_that_needs_arguments_is_a_clear_usage_error(domain: pytest.Pytester) -> None:
    domain.makepyfile(needy="class Agent:\n    def __init__(self, key):\n        self.key = key\n")
    domain.syspathinsert()
    result = domain.runpytest("-p", "no:cacheprovider", "--sandtable-agent=needy:Agent")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: --sandtable-agent: agent 'needy:Agent' is a class, and creating it without arguments failed: "
        "TypeError: *missing 1 required positional argument: 'key' (point at an instance or a factory instead, "
        "or override the sandtable_agent fixture)"
    ])


# -- broken domains ------------------------------------------------------------------------------------


def test_a_broken_domain_is_one_clean_collection_error_and_the_others_still_run(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("good").mkdir()
    pytester.path.joinpath("good", "sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("broken").mkdir()
    pytester.path.joinpath("broken", "sandtable.yaml").write_text(
        DOMAIN.replace("kind: limit, tool: book_load", "kind: limit, tool: book_loads"), encoding="utf-8"
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1, errors=1)
    line = DOMAIN.splitlines().index(next(x for x in DOMAIN.splitlines() if "id: rate-ceiling" in x)) + 1
    result.stdout.fnmatch_lines([
        "*_ ERROR collecting broken/sandtable.yaml _*",
        f"broken/sandtable.yaml:{line}:*: invariants[[]0].tool: unknown tool 'book_loads'*",
    ], consecutive=True)
    result.stdout.fnmatch_lines(["ERROR broken/sandtable.yaml"])
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*Interrupted*")
    assert result.ret == pytest.ExitCode.TESTS_FAILED


# -- the terminal summary ---------------------------------------------------------------------------------


def test_the_terminal_summary_shows_latency(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    result = pytester.runpytest("--sandtable-k=2")
    result.stdout.fnmatch_lines(["", "Agent turn latency: p50 * ms, p95 * ms over * turns"])


def test_the_terminal_summary(domain: pytest.Pytester) -> None:
    result = domain.runpytest("--sandtable-k=2")
    assert sandtable_section(result.outlines) == [
        "4 trials of 2 tasks: 2 passed, 2 failed, 0 errored (left out of pass^k)   agent: reference   user: scripted",
        "",
        "pass^k           tasks    pass^1    pass^2    pass@2",
        "---------------  -------  --------  --------  --------",
        "all tasks        2        50.0%     50.0%     50.0%",
        "95% CI                    0-99%     10-100%   0-88%",
        "tag booking      1        100.0%    100.0%    100.0%",
        "95% CI                    34-100%   12-100%   57-100%",
        "tag negotiation  1        0.0%      0.0%      0.0%",
        "95% CI                    0-66%     0-43%     0-88%",
        "",
        "task                        verdict    passed    tags",
        "--------------------------  ---------  --------  -----------",
        "book-happy-path (critical)  passed     2/2       booking",
        "over-the-ceiling            failed     0/2       negotiation",
        "",
        "Failure modes (failed checks across trials, most frequent first)",
        "kind       check               trials    example",
        "---------  ------------------  --------  ---------------------------------------------------------------",
        "invariant  rate-ceiling        2         over-the-ceiling[1]: book_load rate=2600 exceeds the limit 2350",
        'reply      reply:confirmation  2         over-the-ceiling[1]: agent never said "confirmation"',
        "likely owners of 2 failed trials: task 2",
        "",
        "",  # the latency line's place (left out above)
        "policy coverage freight: 1 rule: 1 both outcomes; 0 policy sentences quoted by no rule; "
        "0 tasks exercise no rule",
    ]


def test_no_summary_without_trials(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain(): pass")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*= sandtable =*")


def test_xdist_gives_the_same_summary_and_still_runs_next_to_a_broken_domain(domain: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    domain.path.joinpath("broken").mkdir()
    domain.path.joinpath("broken", "sandtable.yaml").write_text(DOMAIN.replace("version: 1", "version: one"),
                                                                encoding="utf-8")
    serial = domain.runpytest_subprocess("--sandtable-k=3", "-p", "xdist", "-n", "0")
    parallel = domain.runpytest_subprocess("--sandtable-k=3", "-p", "xdist", "-n", "2")
    parallel.assert_outcomes(passed=3, failed=3, errors=1)
    assert sandtable_section(parallel.outlines) == sandtable_section(serial.outlines)
    assert sandtable_section(parallel.outlines)[0].startswith("6 trials of 2 tasks: 3 passed, 3 failed")


def test_an_agent_that_raises_shows_where_in_its_own_code(domain: pytest.Pytester) -> None:
    domain.makepyfile(boom="def helper(d):\n    return d['booking_id']\n\n\ndef agent(turn):\n    return helper({})\n")
    domain.syspathinsert()
    result = domain.runpytest("-k", "happy", "--sandtable-agent=boom:agent")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["  runtime  runtime  *the agent raised KeyError: 'booking_id'"])
    result.stdout.fnmatch_lines([
        "*Captured sandtable agent traceback call*",
        '  File "*boom.py", line 6, in agent',
        "    return helper({})",
        "*",
        '  File "*boom.py", line 2, in helper',
        "    return d['booking_id']",
        "*",
        "KeyError: 'booking_id'",
    ], consecutive=True)
    result.stdout.no_fnmatch_line("*asyncio*")


def test_non_json_argument_values_travel_under_xdist(domain: pytest.Pytester) -> None:
    domain.makepyfile(odd_agent=(
        "import datetime, decimal\n"
        "def agent(turn):\n"
        "    if len(turn.messages) == 1:\n"
        "        turn.call_tool('verify_carrier', {'mc_number': '100101'})\n"
        "        turn.call_tool('book_load', {'load_id': 'L-1001', 'rate': decimal.Decimal('2100'),\n"
        "                                     'when': datetime.date(2026, 5, 1)})\n"
        "        turn.call_tool('book_load', {'load_id': 'L-1001', 'rate': decimal.Decimal('2100')})\n"
        "        return 'Verified. 2,100?'\n"
        "    return 'Booked.'\n"
    ))
    result = domain.runpytest_subprocess("-p", "xdist", "-n", "2", "-k", "happy",
                                         "--sandtable-agent=odd_agent:agent")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_credentials_in_an_agent_url_are_never_shown_or_stored(domain: pytest.Pytester) -> None:
    url = "http://bob:s3cretpass@127.0.0.1:9/step?api_key=KEY12345"
    result = domain.runpytest("-k", "happy", f"--sandtable-agent={url}", "--sandtable-out=out",
                              "--sandtable-timeout=0.2", "--sandtable-retries=0")
    text = result.stdout.str() + result.stderr.str()
    results = domain.path.joinpath("out", "results.json").read_text(encoding="utf-8")
    report = domain.path.joinpath("out", "report.html").read_text(encoding="utf-8")
    result.stdout.fnmatch_lines(["sandtable: agent=http://127.0.0.1:9/step, user=scripted"])
    for secret in ("s3cretpass", "KEY12345"):
        assert secret not in text
        assert secret not in results
        assert secret not in report


@pytest.mark.parametrize(("option", "message"), [
    ("--sandtable-concurrency=0", "ERROR: --sandtable-concurrency / sandtable_concurrency: expected at least 1, got 0"),
    ("--sandtable-max-tokens=0", "ERROR: --sandtable-max-tokens: expected at least 1, got 0"),
    ("--sandtable-temperature=5", "ERROR: --sandtable-temperature: expected 0 to 2, got 5"),
    ("--sandtable-timeout=nan", "ERROR: --sandtable-timeout / sandtable_timeout: expected at least 0.001, got nan"),
])
def test_a_bad_option_value_is_a_usage_error_before_collection(
    domain: pytest.Pytester, option: str, message: str
) -> None:
    result = domain.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_bad_ini_value_is_a_usage_error_too(domain: pytest.Pytester) -> None:
    domain.makeini("[pytest]\nsandtable_seed = abc\n")
    result = domain.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sandtable-seed / sandtable_seed: expected a whole number, got 'abc'"])
