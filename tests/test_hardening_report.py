"""What the user sees and keeps survives whatever an agent, a model or a world row holds
(issue 8): lone surrogates, a model without a name, API keys in replies and rows, values
of many megabytes, and values that are not JSON at all. results.json and report.html are
always written, the terminal never shows a key, and every size is capped (docs/results.md,
"Size caps")."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_sandtable.engine.results import Check, TrialResult
from pytest_sandtable.report.results_json import REPORT_FILE, RESULTS_FILE, RunMeta, build_results, write_run
from pytest_sandtable.report.safe import TEXT_LIMIT, clip_text, clip_value, utf8

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS, SHOP, only_results, run_dirs

ANTHROPIC_KEY = "sk-ant-fake-0123456789abcdef"
OPENAI_KEY = "sk-proj-fake-9876543210fedcba"
MB10 = 10 * 1024 * 1024


def _project(pytester: pytest.Pytester, conftest: str, domain: str = SHOP) -> None:
    """The shop domain with an agent of the test's own in conftest.py."""
    pytester.makeini("[pytest]\n")
    (pytester.path / "sandtable.yaml").write_text(domain, encoding="utf-8")
    (pytester.path / "conftest.py").write_text(conftest, encoding="utf-8")


def _only_folder(root: Path) -> Path:
    (folder,) = run_dirs(root)
    assert sorted(p.name for p in folder.iterdir()) == [REPORT_FILE, RESULTS_FILE]
    return folder


@pytest.fixture(autouse=True)
def _no_keys_but_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets of the machine running the tests would be redacted in the texts compared."""
    for name in list(os.environ):
        if name.upper().endswith(("_API_KEY", "_TOKEN", "_SECRET")):
            monkeypatch.delenv(name)


# --------------------------------------------------------------------------- lone surrogates (item 3)

SURROGATE_AGENT = """\
import pytest


@pytest.fixture(scope="session")
def sandtable_agent():
    def agent(turn):
        if turn.trial.task_id == "refund":
            turn.call_tool("lookup_customer", {"customer_id": "C-1\\udc00"})
            turn.call_tool("issue_refund", {"customer_id": "C-\\ud800", "amount": 5})
        return "Hello \\ud800, smile \\ud83d\\ude00"

    return agent
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_a_lone_surrogate_in_a_reply_an_argument_or_a_row_is_written_as_the_replacement_character(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    _project(pytester, SURROGATE_AGENT)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--junitxml=junit.xml", *workers)
    result.assert_outcomes(passed=1, failed=2)
    assert "UnicodeEncodeError" not in result.stdout.str() + result.stderr.str()
    folder = _only_folder(pytester.path)

    doc = only_results(pytester.path)
    refund = next(t for t in doc["trials"] if t["task"] == "refund")
    # a lone surrogate is U+FFFD; a high one followed by a low one is the character they encode
    assert refund["transcript"][-1]["text"] == "Hello \ufffd, smile \U0001f600"
    assert refund["calls"][0]["args"] == {"customer_id": "C-1\ufffd"}
    assert refund["calls"][0]["error"] == {"code": 404, "message": "customers C-1\ufffd not found"}
    row = {"customer_id": "C-\ufffd", "amount": 5.0, "refund_id": "R-1"}
    assert refund["calls"][1]["result"] == row
    assert refund["diff"] == {"created": [{"table": "refunds", "key": "R-1", "row": row}], "changed": []}
    html = (folder / REPORT_FILE).read_text(encoding="utf-8")
    assert "Hello \ufffd, smile \U0001f600" in html and "customers C-1\ufffd not found" in html

    result.stdout.fnmatch_lines([
        "[[]1] agent -> lookup_customer(customer_id=\"C-1\ufffd\")",
        "        ! error 404: customers C-1\ufffd not found",
        "[[]1] agent -> issue_refund(customer_id=\"C-\ufffd\", amount=5)",
        '        = {"customer_id": "C-\ufffd", "amount": 5, "refund_id": "R-1"}',
        "[[]1] agent: Hello \ufffd, smile \U0001f600",
    ])
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    assert sorted(c.get("name", "") for c in cases) == ["greet[1-1]", "order-status[1-1]", "refund[1-1]"]


def test_utf8_replaces_lone_surrogates_in_one_pass_and_leaves_other_text_alone() -> None:
    assert utf8("plain ascii and ünïcode 😀") == "plain ascii and ünïcode 😀".encode()
    assert utf8('{"a": "x\ud800y", "b": "\udfff", "c": "\ud83d\ude00"}').decode() == (
        '{"a": "x\ufffdy", "b": "\ufffd", "c": "\U0001f600"}'
    )


# --------------------------------------------------------------------------- a model without a name (item 7)

UNNAMED_MODEL_AGENT = """\
import pytest

from pytest_sandtable import ReferenceAgent


class CountingAgent(ReferenceAgent):
    def for_task(self, task):
        return CountingAgent(task.reference)

    def __call__(self, turn):
        turn.usage.add(None, 100, 20)  # a server that omitted `model`, passed on
        turn.usage.add("", 1, 1)
        turn.usage.add("claude-sonnet-4-5", 1000, 10)
        return super().__call__(turn)


@pytest.fixture(scope="session")
def sandtable_agent():
    return CountingAgent()
"""


def test_usage_of_a_model_without_a_name_shows_as_an_unknown_model_priced_n_a(pytester: pytest.Pytester) -> None:
    _project(pytester, UNNAMED_MODEL_AGENT)
    result = pytester.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "Usage (cost estimated at list prices)",
        "side    model                input    output    cache read    cache write           cost",
        "------  -----------------  -------  --------  ------------  -------------  -------------",
        "agent   (unknown model)        303        63             0              0            n/a",
        "agent   claude-sonnet-4-5    3,000        30             0              0        $0.0095",
        "total                        3,303        93             0              0  $0.0095 + n/a",
    ])
    doc = only_results(pytester.path)
    assert doc["trials"][0]["usage"]["agent"] == {
        "(unknown model)": {"input": 101, "output": 21, "cache_read": 0, "cache_write": 0, "calls": 2},
        "claude-sonnet-4-5": {"input": 1000, "output": 10, "cache_read": 0, "cache_write": 0, "calls": 1},
    }
    cost = doc["summary"]["cost"]
    assert cost["agent"]["(unknown model)"] is None and cost["unpriced"] == ["(unknown model)"]
    html = (_only_folder(pytester.path) / REPORT_FILE).read_text(encoding="utf-8")
    assert "No price for <code>(unknown model)</code>: its cost is n/a." in html


# --------------------------------------------------------------------------- keys in the terminal (item 8)

KEY_DOMAIN = SHOP.replace(
    "{ customer_id: C-1, name: Ada Example, tier: gold }",
    f"{{ customer_id: C-1, name: Ada Example, tier: gold, portal_token: {ANTHROPIC_KEY} }}",
)

KEY_AGENT = """\
import os

import pytest


@pytest.fixture(scope="session")
def sandtable_agent():
    def agent(turn):
        if turn.trial.task_id == "greet":
            raise RuntimeError("the model said: " + os.environ["OPENAI_API_KEY"])
        if turn.trial.task_id == "refund":
            turn.call_tool("lookup_customer", {"customer_id": "C-1"})
        return "Here is what I have: " + os.environ["OPENAI_API_KEY"]

    return agent
"""


def test_api_keys_in_a_reply_a_row_or_an_agent_error_never_reach_the_terminal(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    _project(pytester, KEY_AGENT, KEY_DOMAIN)
    result = pytester.runpytest(*PLUGIN_ARGS, "--junitxml=junit.xml", "-rA")
    result.assert_outcomes(failed=3)
    shown = result.stdout.str() + result.stderr.str()
    junit = (pytester.path / "junit.xml").read_text(encoding="utf-8")
    for key in (ANTHROPIC_KEY, OPENAI_KEY):
        assert key not in shown
        assert key not in junit
    # the transcript: the row a tool returned and the agent's reply
    result.stdout.fnmatch_lines([
        "[[]1] agent -> lookup_customer(customer_id=\"C-1\")",
        '        = {"customer_id": "C-1", "name": "Ada Example", "tier": "gold", "portal_token": "[[]redacted]"}',
        "[[]1] agent: Here is what I have: [[]redacted]",
    ])
    # the failure text, the agent's traceback and the summary's failure modes
    result.stdout.fnmatch_lines([
        "*runtime*the agent raised RuntimeError: the model said: [[]redacted]*",
    ])
    result.stdout.fnmatch_lines(["RuntimeError: the model said: [[]redacted]"])
    for name in (RESULTS_FILE, REPORT_FILE):
        text = (_only_folder(pytester.path) / name).read_text(encoding="utf-8")
        assert ANTHROPIC_KEY not in text and OPENAI_KEY not in text


# --------------------------------------------------------------------------- size caps (item 9)

BIG_AGENT = """\
import pytest

BIG = "x" * (10 * 1024 * 1024)
MANY = ["y"] * 50_000


@pytest.fixture(scope="session")
def sandtable_agent():
    def agent(turn):
        turn.call_tool("lookup_customer", {"customer_id": BIG})
        turn.call_tool("lookup_customer", {"customer_id": "C-1", "extra": MANY})
        return "Sorry. " + BIG

    return agent
"""


def test_a_10_mb_argument_and_reply_are_clipped_in_the_files_and_the_terminal_with_their_size(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, BIG_AGENT)
    result = pytester.runpytest(*PLUGIN_ARGS, "-k", "refund", "--sandtable-k=4")
    result.assert_outcomes(failed=4)
    folder = _only_folder(pytester.path)
    sizes = {name: (folder / name).stat().st_size for name in (RESULTS_FILE, REPORT_FILE)}
    terminal = len(result.stdout.str().encode())
    # four trials, each showing the 10 MB argument twice (the call, the error quoting it), the
    # 10 MB reply and the 250,000-character list once: 20,000 characters each (the list's JSON, quotes
    # escaped, grows to ~27,000 in results.json and ~47,000 in HTML), where each trial held
    # over 35 MB before the caps
    assert sizes[RESULTS_FILE] < 4 * 100_000, sizes
    assert sizes[REPORT_FILE] < 4 * 150_000, sizes
    assert terminal < 4 * 100_000, terminal

    marker = "… [clipped: 10,485,760 characters]"
    big_arg = "x" * (TEXT_LIMIT - len(marker)) + marker
    trial = only_results(pytester.path)["trials"][0]
    assert trial["calls"][0]["args"] == {"customer_id": big_arg}
    message = trial["calls"][0]["error"]["message"]
    assert len(message) == TEXT_LIMIT and message.endswith("… [clipped: 10,485,780 characters]")
    assert message.startswith("customers xxxx")
    many = trial["calls"][1]["args"]["extra"]
    json_marker = "… [clipped: 250,000 characters of JSON]"
    assert many == ('[' + '"y", ' * 4000)[: TEXT_LIMIT - len(json_marker)] + json_marker
    reply = trial["transcript"][-1]["text"]
    reply_marker = "… [clipped: 10,485,767 characters]"
    assert reply == ("Sorry. " + "x" * TEXT_LIMIT)[: TEXT_LIMIT - len(reply_marker)] + reply_marker

    out = result.stdout.str()
    assert f'[1] agent -> lookup_customer(customer_id="{big_arg}")' in out
    assert f"[1] agent: {reply}" in out
    assert out.count("… [clipped: 10,485,760 characters]") == 4


def test_clipping_is_idempotent_and_never_leaves_the_start_of_a_key() -> None:
    text = "a" * 19_950 + ANTHROPIC_KEY + "b" * 100  # the key spans the cut at 19,965
    once = clip_text(text, secrets=[ANTHROPIC_KEY])
    assert len(once) == TEXT_LIMIT and once.endswith(f"… [clipped: {len(text):,} characters]")
    assert "sk-ant" not in once and "[redacted]" in once
    assert clip_text(once) == once
    nested = {"rows": [{"id": i, "note": "n" * 50} for i in range(1000)]}
    capped = clip_value(nested)
    assert isinstance(capped, str) and len(capped) == TEXT_LIMIT
    assert capped.startswith('{"rows": [{"id": 0, "note": "nnn') and capped.endswith("characters of JSON]")
    assert clip_value(capped) == capped
    assert clip_value({"small": [1, 2, 3]}) == {"small": [1, 2, 3]}
    loop: dict[str, Any] = {}
    loop["self"] = loop
    assert clip_value(loop) == "[not shown: ValueError: Circular reference detected]"
    assert clip_value(10**5000).startswith("[not shown: ValueError: Exceeds the limit (4300 digits)")


# --------------------------------------------------------------------------- artefacts are always written

JUNK_AGENT = """\
import pytest

from pytest_sandtable import ReferenceAgent


class JunkAgent(ReferenceAgent):
    def for_task(self, task):
        return JunkAgent(task.reference)

    def __call__(self, turn):
        if turn.trial.task_id == "greet":
            # counters that are not numbers, a model that is not a name
            turn.usage.models["m-1"] = {"input": "lots", "output": float("nan"), "calls": 1}
            turn.usage.models[None] = {"input": 5}
            return "Hello \\ud800"
        return super().__call__(turn)


@pytest.fixture(scope="session")
def sandtable_agent():
    return JunkAgent()
"""


def test_one_bad_trial_never_costs_the_run_its_results(pytester: pytest.Pytester) -> None:
    _project(pytester, JUNK_AGENT)
    result = pytester.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=3)
    assert "INTERNALERROR" not in result.stdout.str()
    doc = only_results(pytester.path)
    assert [(t["task"], t["verdict"]) for t in doc["trials"]] == [
        ("refund", "passed"), ("greet", "passed"), ("order-status", "passed"),
    ]
    greet = doc["trials"][1]
    # the counters that were numbers are kept; the model without a name is named
    assert greet["usage"]["agent"] == {"m-1": {"calls": 1}, "(unknown model)": {"input": 5}}
    assert greet["transcript"][-1]["text"] == "Hello \ufffd"
    assert doc["summary"]["usage"]["agent"] == {
        "m-1": {"calls": 1}, "(unknown model)": {"input": 5},
    }


def _meta() -> RunMeta:
    return RunMeta(domains=[{"name": "shop", "path": "sandtable.yaml", "sha256": "0" * 64}], agent="reference",
                   user="scripted", k=1, run_seed=0, started_at="2026-03-01T09:30:12.000000Z",
                   finished_at="2026-03-01T09:30:13.000000Z")


def _trial(task: str, **kw: Any) -> TrialResult:
    return TrialResult(domain="shop", task=task, trial=1, k=1, seed=1, verdict="failed", ended_by="script_end",
                       turns=1, agent="a", user="scripted", location="sandtable.yaml:41",
                       checks=[Check("reply", "reply:Hello", False, 'agent never said "Hello"')],
                       transcript=[{"role": "agent", "text": "Hi", "turn": 1}], **kw)


def test_a_trial_with_a_value_that_cannot_be_written_loses_that_field_only(tmp_path: Path) -> None:
    loop: list[Any] = []
    loop.append(loop)
    bad = _trial("refund", soft={"polite": {"tool": None, "applied": True, "broken": False, "why": loop}})
    good = _trial("greet")
    out = write_run(build_results([bad, good], _meta()), tmp_path)
    doc = json.loads((out / RESULTS_FILE).read_text(encoding="utf-8"))
    stored_good, stored_bad = doc["trials"]  # greet, then refund
    assert stored_bad["soft"] == {}
    assert stored_bad["error"].startswith("left out of this trial's record, as it could not be written: "
                                          "soft (RecursionError: maximum recursion depth exceeded")
    assert stored_bad["verdict"] == "failed" and stored_bad["checks"] == stored_good["checks"]
    assert stored_good["error"] is None and stored_good["soft"] == {}
    html = (out / REPORT_FILE).read_text(encoding="utf-8")
    assert "<b>note</b>: left out of this trial&#x27;s record, as it could not be written: soft" in html


def test_usage_read_from_elsewhere_with_a_model_without_a_name_is_priced_n_a() -> None:
    from pytest_sandtable.report.prices import builtin_prices, price_for
    from pytest_sandtable.report.usage import usage_rows

    assert price_for(None, builtin_prices()) is None and price_for("", builtin_prices()) is None
    counters = {"input": 10, "output": 2, "cache_read": 0, "cache_write": 0, "calls": 1}
    rows = usage_rows({"agent": {None: counters}, "user": {}}, builtin_prices())  # type: ignore[dict-item]
    assert rows == [["agent", "(unknown model)", "10", "2", "0", "0", "n/a"]]


def test_a_trial_the_report_cannot_show_is_named_and_the_page_still_written(tmp_path: Path) -> None:
    doc: dict[str, Any] = dict(build_results([_trial("refund"), _trial("greet")], _meta()))
    broken = dict(doc["trials"][1])
    broken["calls"] = [{"index": 0, "tool": "lookup_customer"}]  # no args, no ok: not a call
    broken["transcript"] = [{"role": "tool", "call": 0}]
    doc["trials"] = [doc["trials"][0], broken]
    out = write_run(doc, tmp_path)
    html = (out / REPORT_FILE).read_text(encoding="utf-8")
    assert ('<div class="box error">trial 1 of refund cannot be shown (KeyError: &#x27;args&#x27;); '
            "results.json holds what was recorded</div>") in html
    assert html.count('<details class="trial v-failed"') == 1  # greet, shown as usual
    assert json.loads((out / RESULTS_FILE).read_text(encoding="utf-8"))["trials"][1]["calls"] == broken["calls"]
