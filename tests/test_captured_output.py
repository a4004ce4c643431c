"""What a trial's agent prints, writes to stderr or logs reaches pytest's "Captured ..."
sections and JUnit XML as safely as results.json: secrets redacted (an SDK logging its
request at DEBUG is common, and CI logs are often public), and a flood clipped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

pytest_plugins = ["pytester"]

FAKE_KEY = "sk-ant-api03-fictional-0123456789abcdef"  # a made-up key, in the test's environment only

DOMAIN = """\
version: 1
name: loud
world:
  notes:
    key: id
    rows:
      - { id: N-1, text: hello }
tools:
  - name: read_note
    description: Read a note.
    params: { id: { type: string } }
    ops:
      - get: { table: notes, key: $id }
tasks:
  - id: hello
    user: { opening: "Hello" }
    expect: { reply_includes: ["Hello"] }
"""

# the agent fails its trial (its reply lacks "Hello") after printing, writing to stderr
# and logging its key, or, with LOUD_FLOOD, printing 30 MB
CONFTEST = """\
import logging
import os
import sys

import pytest


@pytest.fixture(scope="session")
def sandtable_agent():
    def agent(turn):
        if os.environ.get("LOUD_FLOOD"):
            print("first line of the flood")
            print("x" * (30 * 1024 * 1024))
            print("last line of the flood")
            return "Nope."
        key = os.environ["ANTHROPIC_API_KEY"]
        print(f"calling the model with key {key}")
        print(f"stderr: key={key}", file=sys.stderr)
        logging.getLogger("some_sdk").warning("request headers: {'x-api-key': '%s'}", key)
        return "Nope."
    return agent
"""


@pytest.fixture
def loud(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("conftest.py").write_text(CONFTEST, encoding="utf-8")
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.delenv("LOUD_FLOOD", raising=False)
    return pytester


# one process; trials in flight (their output is routed to each item's "call" sections);
# an xdist worker (the controller prints and writes what the worker sent)
@pytest.mark.parametrize(("args", "when"), [([], "setup"), (["--sandtable-concurrency=2"], "call"),
                                            (["-n", "1"], "setup")],
                         ids=["one-process", "concurrency-2", "xdist"])
def test_captured_output_of_a_trial_has_its_secrets_redacted(
    loud: pytest.Pytester, args: list[str], when: str
) -> None:
    if "-n" in args:
        pytest.importorskip("xdist")
    result = loud.runpytest("-p", "no:cacheprovider", "-rA", "--junitxml=junit.xml",
                            "-o", "junit_logging=all", "--sandtable-out=out", *args)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert FAKE_KEY not in out
    result.stdout.fnmatch_lines([
        f"*- Captured stdout {when} -*",
        "calling the model with key [[]redacted[]]",
        f"*- Captured stderr {when} -*",
        "stderr: key=[[]redacted[]]",
        f"*- Captured log {when} -*",
        "WARNING  some_sdk:*request headers: {'x-api-key': '[[]redacted[]]'}",
    ])
    junit = (loud.path / "junit.xml").read_text(encoding="utf-8")
    assert FAKE_KEY not in junit
    case = next(ET.parse(loud.path / "junit.xml").getroot().iter("testcase"))
    system_out = case.findtext("system-out") or ""
    assert "calling the model with key [redacted]" in system_out
    assert "request headers: {'x-api-key': '[redacted]'}" in system_out
    assert "stderr: key=[redacted]" in (case.findtext("system-err") or "")


def test_a_flood_of_captured_output_is_clipped(loud: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOUD_FLOOD", "1")
    result = loud.runpytest("-p", "no:cacheprovider", "--junitxml=junit.xml", "-o", "junit_logging=all",
                            "--sandtable-out=out")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert len(out) < 100_000, len(out)  # 30 MB printed
    result.stdout.fnmatch_lines([
        "*- Captured stdout setup -*",
        "first line of the flood",
        "… [[]clipped: 31,457,328 characters of captured output; its start and end shown[]] …",
    ])
    assert out.count("last line of the flood") == 1
    assert (loud.path / "junit.xml").stat().st_size < 100_000
