"""Request matching leaves out a request's volatile parts (adapters.recording.Volatile):
the Anthropic Messages ``metadata.user_id`` the Claude Code CLI fills with its session id,
the CLI's notes of the machine and the day, and whatever a run adds with the ini's
``sandtable_record_ignore``; the recording keeps the request as it was sent."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import anthropic
import pytest
from fakes import SHOP, FakeAnthropic, FakeOpenAI, claude_text, openai_text

from pytest_sandtable.adapters.recording import VOLATILE, Settings, Volatile, matching_key
from pytest_sandtable.proxy import ModelProxy

ENVIRONMENT = ("<system-reminder>\n# Environment\nYou have been invoked in the following environment: \n"
               " - Primary working directory: {cwd}\n - Platform: linux\n - OS Version: {os}\n</system-reminder>")


def cli_request(session: str, cwd: str, day: str) -> dict[str, Any]:
    """A Messages request as the Claude Code CLI sends it (the parts that change between runs)."""
    return {"model": "claude-sonnet-4-6", "max_tokens": 64,
            "metadata": {"user_id": json.dumps({"device_id": "d" + session, "session_id": session})},
            "system": [{"type": "text", "text": "You are a desk."}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": ENVIRONMENT.format(cwd=cwd, os=f"Linux {session}")},
                {"type": "text", "text": f"<system-reminder>\nToday's date is {day}.\n</system-reminder>\n"},
                {"type": "text", "text": "Where is my order O-1001?"}]}]}


def stored(body: dict[str, Any], path: str = "/v1/messages") -> dict[str, Any]:
    return {"method": "POST", "path": path, "body": body}


def test_the_built_in_rules_leave_out_the_cli_s_session_machine_and_day_on_the_messages_wire() -> None:
    a = stored(cli_request("1a5def83", "/home/ada/desk", "2026-12-01"))
    b = stored(cli_request("be28e522", "/builds/ci/desk", "2027-01-15"))
    assert matching_key(a, VOLATILE) == matching_key(b, VOLATILE)
    assert matching_key(a, ()) != matching_key(b, ())
    # what the customer said still counts
    said = cli_request("1a5def83", "/home/ada/desk", "2026-12-01")
    said["messages"][0]["content"][2]["text"] = "Where is my order O-1002?"
    assert matching_key(stored(said), VOLATILE) != matching_key(a, VOLATILE)
    # on another wire (an OpenAI chat completion) the Messages rules do not apply
    other = {"model": "gpt-4.1", "metadata": {"user_id": "u1"}}
    assert matching_key(stored(other, "/v1/chat/completions"), VOLATILE) != matching_key(
        stored({**other, "metadata": {"user_id": "u2"}}, "/v1/chat/completions"), VOLATILE)


def test_a_rule_s_path_and_pattern() -> None:
    body = {"user": "run-7f3a", "messages": [{"content": "id 7f3a, ok"}, {"content": "id 99, ok"}],
            "deep": {"x": [{"stamp": "at 12:01"}]}}
    rules = tuple(Volatile.parse(line) for line in ("user", "messages.*.content ~ id \\w+", "** .stamp ~ \\d\\d:\\d\\d"
                                                    .replace(" ", "")))
    assert json.loads(matching_key(stored(body, "/x"), rules))["body"] == {
        "messages": [{"content": "~, ok"}, {"content": "~, ok"}], "deep": {"x": [{"stamp": "at ~"}]}}
    assert body["user"] == "run-7f3a"  # the request itself is left as it is
    assert Volatile.parse("messages.1") == Volatile("messages.1")
    assert json.loads(matching_key(stored(body, "/x"), (Volatile("messages.1"),)))["body"]["messages"] == [
        {"content": "id 7f3a, ok"}, None]


@pytest.mark.parametrize(("line", "message"), [
    ("~ x", "'~ x': expected PATH or PATH ~ REGEX (e.g. metadata.user_id)"),
    ("metadata..user_id", "'metadata..user_id': an empty key in the path (keys are joined by single dots)"),
    ("user ~", "'user ~': nothing after '~' (expected a regular expression)"),
    ("user ~ (", "'(': not a regular expression (missing ), unterminated subpattern at position 0)"),
])
def test_a_bad_rule_says_what_is_wrong(line: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        Volatile.parse(line)
    assert str(e.value) == message


def test_the_cli_s_requests_replay_through_the_proxy_on_another_machine_and_day(tmp_path: Path) -> None:
    domain_file = tmp_path / "shop.sandtable.yaml"

    def ask(proxy: ModelProxy, settings: Settings, session: str, cwd: str, day: str) -> tuple[str, Any]:
        tape = settings.open("shop", domain_file, "refund", 1)
        trial = proxy.open_trial("shop/refund/1", tape)
        client = anthropic.Anthropic(base_url=trial.base_url("anthropic"), api_key="sk-ant-test-0123456789",
                                     max_retries=0)
        try:
            reply = client.messages.create(**cli_request(session, cwd, day))
            text = reply.content[0].text
        except anthropic.APIStatusError as e:
            text = f"{e.status_code}"
        tape.write(trial_errored=False)
        return text, tape

    with FakeAnthropic([claude_text("Delivered.")]) as srv, ModelProxy({"anthropic": srv.base_url}) as proxy:
        text, tape = ask(proxy, Settings("once", folder=tmp_path / "c"), "1a5def83", "/home/ada/desk", "2026-12-01")
    assert (text, tape.live) == ("Delivered.", 1)
    recorded = json.loads((tmp_path / "c" / "shop" / "refund.json").read_text(encoding="utf-8"))
    assert '"session_id": "1a5def83"' in recorded["trials"]["1"][0]["request"]["body"]["metadata"]["user_id"]
    with ModelProxy({"anthropic": "http://127.0.0.1:9"}) as proxy:  # nothing listens: all from the recording
        text, tape = ask(proxy, Settings("none", folder=tmp_path / "c"), "be28e522", "/builds/ci/desk", "2027-01-15")
        assert (text, tape.replayed, tape.miss) == ("Delivered.", 1, None)
        # without the rules, the recording of another run is a miss naming what differs
        text, tape = ask(proxy, Settings("none", folder=tmp_path / "c", volatile=()), "be28e522", "/home/ada/desk",
                         "2026-12-01")
    assert text == "412"
    assert tape.miss is not None and tape.miss.endswith(
        "(--sandtable-record=none; model call 1 differs from the recording in 'messages', 'metadata'); "
        "record it again with --sandtable-record=all")


# the shop with its one scripted task
DOMAIN = SHOP[: SHOP.index("  - id: refund-delivered")] + SHOP[SHOP.index("  - id: opening-fixed"):]
AGENT = """\
import uuid

import openai


def agent(turn):
    turn.call_tool("get_order", {"order_id": "O-1001"})
    client = openai.OpenAI(base_url=turn.model_base_url("openai"), max_retries=0)
    # a field new on every run, as some clients send one
    reply = client.chat.completions.create(model="gpt-test", messages=turn.messages, user=f"run-{uuid.uuid4()}")
    return reply.choices[0].message.content
"""


def test_the_ini_adds_rules_of_its_own(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makefile(".sandtable.yaml", shop=DOMAIN)
    pytester.makepyfile(my_agent=AGENT)
    pytester.makeini(textwrap.dedent("""\
        [pytest]
        sandtable_record_ignore =
            user
        """))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-volatile-test-0123456789")
    args = ("--sandtable-agent=my_agent:agent", "--sandtable-user=scripted", "-p", "no:cacheprovider",
            "-p", "no:randomly")
    with FakeOpenAI(responder=lambda req: openai_text("Order O-1001 was delivered.")) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        pytester.runpytest(*args, "--sandtable-record=once").assert_outcomes(passed=1)
    replay = pytester.runpytest(*args, "--sandtable-record=none", "--sandtable-out=replayed")
    replay.assert_outcomes(passed=1)
    trial = json.loads((pytester.path / "replayed" / "results.json").read_text(encoding="utf-8"))["trials"][0]
    assert trial["replayed"] is True
    # a line that is not a rule: a usage error naming the ini key and the line
    pytester.makeini(textwrap.dedent("""\
        [pytest]
        sandtable_record_ignore =
            user
            messages..content
        """))
    bad = pytester.runpytest(*args, "--sandtable-record=none")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: sandtable_record_ignore (ini), line 2: 'messages..content': an empty key in "
                              "the path (keys are joined by single dots)"])
