"""Recording model calls and replaying them: --sandtable-record and --sandtable-cassettes.

The servers are the fakes of tests/fakes.py, spoken to by the real anthropic SDK and
httpx; a replayed run has them stopped, so any call that went out would fail.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from fakes import (
    SHOP,
    FakeAnthropic,
    FakeOpenAI,
    FakeStepService,
    Reply,
    Request,
    claude_text,
    claude_tools,
    claude_usage,
    openai_text,
    step_calls,
    step_reply,
)

CLAUDE_KEY = "sk-ant-recording-test-key-0123456789"
OPENAI_KEY = "sk-openai-recording-test-key-0123456789"
AGENT = "--sandtable-agent=claude:claude-sonnet-4-6"
USER = "--sandtable-user=openai:gpt-4.1-mini"
REFUND_ONLY = SHOP[: SHOP.index("  - id: opening-fixed")]
CASSETTE = "cassettes/shop/refund-delivered.json"


class Desk:
    """A Claude agent for the refund task that words each answer differently (a counter),
    as a sampled model would: a replay must give each trial its own answers."""

    def __init__(self) -> None:
        self.n = itertools.count(1)

    def __call__(self, req: Request) -> Reply:
        messages = req.json["messages"]
        results = sum(1 for m in messages if m["role"] == "user" for b in m["content"]
                      if isinstance(b, dict) and b.get("type") == "tool_result")
        usage = claude_usage(1000, 200)
        if results == 0:
            return claude_tools(("toolu_1", "get_order", {"order_id": "O-1001"}), usage=usage)
        if results == 1:
            return claude_tools(("toolu_2", "refund_order", {"order_id": "O-1001", "amount": 42.5}), usage=usage)
        return claude_text(f"Refunded 42.50 (note {next(self.n)}).", usage=usage)


class Caller:
    """An OpenAI-compatible model playing the customer."""

    def __init__(self) -> None:
        self.n = itertools.count(1)

    def __call__(self, req: Request) -> Reply:
        if len(req.json["messages"]) <= 2:
            return openai_text(f"Hi, I'd like a refund of 42.50 for order O-1001 (call {next(self.n)}).")
        return openai_text("Thank you!\n###GOAL_MET###")


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CLAUDE_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, claude: str, oai: str,
        *args: str) -> pytest.RunResult:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", claude)
    return pytester.runpytest(AGENT, USER, f"--sandtable-user-base-url={oai}", "-p", "no:cacheprovider", *args)


def results(pytester: pytest.Pytester, out: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / out / "results.json").read_text(encoding="utf-8"))
    return data


VOLATILE = {"started_at", "finished_at", "duration", "latency", "replayed"}


def stable(value: Any) -> Any:
    """A results.json without what differs between two runs of the same conversations:
    timestamps, durations, latencies, where it was written, and the replayed marks."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def record_k2(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
              *args: str) -> tuple[pytest.RunResult, str, str]:
    """A k=2 run of the refund task against both servers; the result and the servers'
    base URLs (nothing listens there any more once this returns)."""
    pytester.makefile(".sandtable.yaml", shop=REFUND_ONLY)
    with FakeAnthropic(responder=Desk()) as claude, FakeOpenAI(responder=Caller()) as oai:
        result = run(pytester, monkeypatch, claude.base_url, oai.base_url, "--sandtable-k=2", *args)
        assert len(claude.requests) == 8 and len(oai.requests) == 4
    return result, claude.base_url, oai.base_url


# -- record, then replay with the servers stopped ------------------------------------------------


def test_replay_gives_the_recorded_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys: None) -> None:
    recorded, claude, oai = record_k2(pytester, monkeypatch, "--sandtable-record=once", "--sandtable-out=live")
    recorded.assert_outcomes(passed=2)
    text = (pytester.path / CASSETTE).read_text(encoding="utf-8")
    doc = json.loads(text)
    assert (doc["format"], doc["domain"], doc["task"], sorted(doc["trials"])) == (1, "shop", "refund-delivered",
                                                                                  ["1", "2"])
    assert [e["request"]["path"] for e in doc["trials"]["1"]] == [
        "/v1/chat/completions", "/v1/messages", "/v1/messages", "/v1/messages", "/v1/chat/completions",
        "/v1/messages"]
    assert CLAUDE_KEY not in text and OPENAI_KEY not in text and "127.0.0.1" not in text
    assert text == json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n"  # stable, reviewable

    # the servers are gone: every answer comes from the recording
    replay = run(pytester, monkeypatch, claude, oai, "--sandtable-k=2", "--sandtable-record=none",
                 "--sandtable-out=replayed")
    replay.assert_outcomes(passed=2)
    live, replayed = results(pytester, "live"), results(pytester, "replayed")
    assert stable(replayed) == stable(live)
    assert [t["replayed"] for t in live["trials"]] == [False, False]
    assert [t["replayed"] for t in replayed["trials"]] == [True, True]
    notes = [[e["text"] for e in t["transcript"] if "(note" in e.get("text", "")] for t in replayed["trials"]]
    # each trial gets its own answers back, although both trials sent the same first requests
    assert notes == [[f"Refunded 42.50 (note {n})." for n in pair] for pair in ((1, 2), (3, 4))]
    assert (pytester.path / CASSETTE).read_text(encoding="utf-8") == text  # replaying writes nothing


def test_a_changed_policy_has_no_recording(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                           keys: None) -> None:
    recorded, claude, oai = record_k2(pytester, monkeypatch, "--sandtable-record=once")
    recorded.assert_outcomes(passed=2)
    text = (pytester.path / CASSETTE).read_text(encoding="utf-8")
    pytester.makefile(".sandtable.yaml", shop=REFUND_ONLY.replace("Refund at most", "Never refund more than"))
    replay = run(pytester, monkeypatch, claude, oai, "--sandtable-k=2", "--sandtable-record=none",
                 "--sandtable-out=changed")
    replay.assert_outcomes(errors=2)
    trials = results(pytester, "changed")["trials"]
    errors = [t["error"] for t in trials]
    assert [(t["verdict"], t["checks"], t["replayed"]) for t in trials] == [("errored", [], False)] * 2
    assert errors == [
        f"task 'refund-delivered' trial {n}: no recording for this request in {CASSETTE} "
        f"(--sandtable-record=none; model call 2 differs from the recording in 'system'); "
        f"record it again with --sandtable-record=all"
        for n in (1, 2)
    ]
    replay.stdout.fnmatch_lines([f"*task 'refund-delivered' trial 1: no recording for this request in {CASSETTE}*"])
    assert (pytester.path / CASSETTE).read_text(encoding="utf-8") == text


def test_the_summary_says_what_replays_saved(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                             keys: None) -> None:
    recorded, claude, oai = record_k2(pytester, monkeypatch, "--sandtable-record=once", "--sandtable-out=live")
    assert "replayed:" not in recorded.stdout.str()
    replay = run(pytester, monkeypatch, claude, oai, "--sandtable-k=2", "--sandtable-record=none",
                 "--sandtable-out=replayed")
    # 8 calls of 1,000 input and 200 output tokens at $3 and $15 per million
    replay.stdout.fnmatch_lines(["replayed: 2 of 2 trials from recordings; cost live $0.0480, cost now $0.00"])
    cost = results(pytester, "replayed")["summary"]["cost"]
    assert cost["replayed"] == {"trials": 2, "live": pytest.approx(0.048), "now": 0.0}
    assert cost["total"] == pytest.approx(0.048)  # the usage table shows the usage as recorded
    assert "replayed" not in results(pytester, "live")["summary"]["cost"]


# -- the HTTP step protocol ----------------------------------------------------------------------


OPENING_ONLY = SHOP[: SHOP.index("tasks:")] + "tasks:\n" + SHOP[SHOP.index("  - id: opening-fixed"):]


def step_desk(req: Request) -> Reply:
    body = req.json
    if body["turn"] > 1:
        return step_reply("Bye.", usage={"model": "desk-1", "input_tokens": 7, "output_tokens": 3})
    if body["tool_results"]:
        return step_reply(f"It was delivered ({body['tool_results'][0]['result']['status']}).")
    return step_calls(("c1", "get_order", {"order_id": "O-1001"}))


TOKEN = "step-token-0123456789"


def test_an_http_step_agent_is_recorded_and_replayed(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDTABLE_HTTP_AGENT_TOKEN", TOKEN)  # sent as a bearer token
    # a policy that happens to hold the token: the stored request must not, and still match
    pytester.makefile(".sandtable.yaml", shop=OPENING_ONLY.replace("Look up an order", f"Look up ({TOKEN}) an order"))
    with FakeStepService(responder=step_desk) as service:
        live = pytester.runpytest(f"--sandtable-agent={service.url}", "--sandtable-record=all",
                                  "--sandtable-cassettes=recorded", "-p", "no:cacheprovider", "--sandtable-out=live")
        assert len(service.requests) == 3
    live.assert_outcomes(passed=1)
    text = (pytester.path / "recorded/shop/opening-fixed.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    assert [e["request"]["body"]["step"] for e in doc["trials"]["1"]] == [1, 2, 1]
    assert TOKEN not in text
    assert "Look up ([redacted]) an order" in doc["trials"]["1"][0]["request"]["body"]["system_prompt"]
    replay = pytester.runpytest(f"--sandtable-agent={service.url}", "--sandtable-record=none",
                                "--sandtable-cassettes=recorded", "-p", "no:cacheprovider", "--sandtable-out=replay")
    replay.assert_outcomes(passed=1)
    assert stable(results(pytester, "replay")) == stable(results(pytester, "live"))
    assert results(pytester, "replay")["trials"][0]["replayed"] is True


# -- the modes -----------------------------------------------------------------------------------


def test_once_records_only_the_trials_without_a_recording(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sandtable.yaml", shop=OPENING_ONLY)
    with FakeStepService(responder=step_desk) as service:
        # the step protocol tells the service k: both runs have the same one
        args = (f"--sandtable-agent={service.url}", "--sandtable-record=once", "--sandtable-k=3",
                "-p", "no:cacheprovider")
        pytester.runpytest(*args, "shop.sandtable.yaml::opening-fixed[1-3]").assert_outcomes(passed=1)
        assert len(service.requests) == 3
        pytester.runpytest(*args, "--sandtable-out=second").assert_outcomes(passed=3)
        assert len(service.requests) == 3 + 6  # trials 2 and 3 only
    assert [t["replayed"] for t in results(pytester, "second")["trials"]] == [True, False, False]
    doc = json.loads((pytester.path / "cassettes/shop/opening-fixed.json").read_text(encoding="utf-8"))
    assert sorted(doc["trials"]) == ["1", "2", "3"]


def test_new_episodes_adds_what_has_no_recording(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sandtable.yaml", shop=OPENING_ONLY)
    with FakeStepService(responder=step_desk) as service:
        args = (f"--sandtable-agent={service.url}", "-p", "no:cacheprovider")
        pytester.runpytest(*args, "--sandtable-record=once").assert_outcomes(passed=1)
        path = pytester.path / "cassettes/shop/opening-fixed.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        del doc["trials"]["1"][2]  # as if the second turn had never been recorded
        path.write_text(json.dumps(doc), encoding="utf-8")
        pytester.runpytest(*args, "--sandtable-record=new_episodes", "--sandtable-out=o").assert_outcomes(passed=1)
        assert len(service.requests) == 3 + 1
    assert results(pytester, "o")["trials"][0]["replayed"] is False  # one call went live
    assert [e["request"]["body"]["turn"] for e in json.loads(path.read_text(encoding="utf-8"))["trials"]["1"]] == [
        1, 1, 2]


def test_all_records_everything_again(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sandtable.yaml", shop=OPENING_ONLY)
    with FakeStepService(responder=step_desk) as service:
        args = (f"--sandtable-agent={service.url}", "--sandtable-record=all", "-p", "no:cacheprovider")
        pytester.runpytest(*args).assert_outcomes(passed=1)
        path = pytester.path / "cassettes/shop/opening-fixed.json"
        first = path.read_text(encoding="utf-8")
        pytester.runpytest(*args).assert_outcomes(passed=1)
        assert len(service.requests) == 6
    assert path.read_text(encoding="utf-8") == first  # the same conversation: the same file


# -- many writers --------------------------------------------------------------------------------


def test_trials_in_flight_and_xdist_workers_write_one_file(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sandtable.yaml", shop=OPENING_ONLY)
    with FakeStepService(responder=step_desk) as service:
        base = (f"--sandtable-agent={service.url}", "--sandtable-record=once", "-p", "no:cacheprovider")
        pytester.runpytest(*base, "--sandtable-k=6", "--sandtable-concurrency=4").assert_outcomes(passed=6)
        path = pytester.path / "cassettes/shop/opening-fixed.json"
        assert sorted(json.loads(path.read_text(encoding="utf-8"))["trials"], key=int) == [str(n) for n in range(1, 7)]
        path.unlink()
        pytester.runpytest(*base, "--sandtable-k=8", "-n", "2").assert_outcomes(passed=8)
    assert sorted(json.loads(path.read_text(encoding="utf-8"))["trials"], key=int) == [str(n) for n in range(1, 9)]
    assert [p.name for p in path.parent.iterdir()] == ["opening-fixed.json"]  # no temporary file left


# -- bad input -----------------------------------------------------------------------------------


def _cut_short(text: str) -> str:
    return text[: len(text) // 2]


def _json_error(text: str) -> str:
    try:
        json.loads(text)
    except ValueError as e:
        return str(e)
    raise AssertionError("valid JSON")


BROKEN = {  # domain -> (what is done to its recording, the problem its trial reports)
    "cut": (_cut_short, None),
    "listed": (lambda text: "[]",
               "not a recording: expected a JSON object; record it again with --sandtable-record=all"),
    "newer": (lambda text: text.replace('"format": 1', '"format": 7'),
              "recording format 7; this pytest-sandtable reads format 1: upgrade it"),
    "moved": (lambda text: text.replace('"domain": "moved"', '"domain": "clinic"'),
              'recorded for domain "clinic" task "opening-fixed", not domain "moved" task "opening-fixed"; '
              "record it again with --sandtable-record=all"),
    "edited": (lambda text: text.replace('"status": 200', '"status": "ok"', 1),
               "trials.1[0]: response.status must be an HTTP status; record it again with --sandtable-record=all"),
}


def test_a_broken_recording_errors_its_trial_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    for name in [*BROKEN, "fine"]:
        pytester.makefile(".sandtable.yaml", **{name: OPENING_ONLY.replace("name: shop", f"name: {name}")})
    with FakeStepService(responder=step_desk) as service:
        agent = f"--sandtable-agent={service.url}"
        pytester.runpytest(agent, "-p", "no:cacheprovider", "--sandtable-record=once").assert_outcomes(passed=6)
    broken = {}
    for name, (edit, _) in BROKEN.items():
        path = pytester.path / f"cassettes/{name}/opening-fixed.json"
        broken[name] = edit(path.read_text(encoding="utf-8"))
        path.write_text(broken[name], encoding="utf-8")
    replay = pytester.runpytest(agent, "-p", "no:cacheprovider", "--sandtable-out=o", "--sandtable-record=none")
    replay.assert_outcomes(passed=1, errors=5)
    errors = {t["domain"]: t["error"] for t in results(pytester, "o")["trials"]}
    expected = {name: f"cassettes/{name}/opening-fixed.json: " + (
        problem or f"not a recording: invalid JSON ({_json_error(broken[name])}); delete it, or record it again "
                   "with --sandtable-record=all") for name, (_, problem) in BROKEN.items()}
    assert errors == {**expected, "fine": None}
    for name, text in broken.items():  # left as they were
        assert (pytester.path / f"cassettes/{name}/opening-fixed.json").read_text(encoding="utf-8") == text


def test_option_values_are_checked(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sandtable.yaml", shop=OPENING_ONLY)
    result = pytester.runpytest("--sandtable-record=sometimes", "-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["ERROR: --sandtable-record: expected none, once, new_episodes or all, "
                                 "got 'sometimes'"])
    result = pytester.runpytest("--sandtable-cassettes=rec", "-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["ERROR: --sandtable-cassettes needs --sandtable-record=MODE (none, once, "
                                 "new_episodes or all)"])


def test_reference_runs_need_no_recording(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sandtable.yaml", shop=OPENING_ONLY)
    # the reference agent and the scripted user make no model call: nothing to replay, nothing written
    pytester.runpytest("--sandtable-record=none", "-p", "no:cacheprovider", "--sandtable-out=o")
    assert [t["error"] for t in results(pytester, "o")["trials"]] == [None]
    assert not (pytester.path / "cassettes").exists()


def test_a_replay_needs_no_api_key(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys: None) -> None:
    # docs/recording.md: "replay (every pull request): no key, no network"
    recorded, claude, oai = record_k2(pytester, monkeypatch, "--sandtable-record=once", "--sandtable-out=live")
    recorded.assert_outcomes(passed=2)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY")
    replay = run(pytester, monkeypatch, claude, oai, "--sandtable-k=2", "--sandtable-record=none",
                 "--sandtable-out=replayed")
    replay.assert_outcomes(passed=2)
    assert [t["replayed"] for t in results(pytester, "replayed")["trials"]] == [True, True]
    # recording needs the key as ever
    again = run(pytester, monkeypatch, claude, oai, "--sandtable-k=2", "--sandtable-record=all")
    again.stderr.fnmatch_lines(["ERROR: --sandtable-agent: claude:<model> needs an API key in the "
                                "ANTHROPIC_API_KEY environment variable"])
    assert again.ret == pytest.ExitCode.USAGE_ERROR
