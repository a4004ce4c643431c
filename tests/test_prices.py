"""Prices, cost estimates and the usage table, against hand-computed figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import pytest_sandtable as st
from pytest_sandtable.report.prices import (
    PRICE_FIELDS,
    PricesError,
    all_prices,
    builtin_prices,
    builtin_prices_as_of,
    estimate_cost,
    load_prices,
    price_for,
)
from pytest_sandtable.report.usage import USAGE_HEADERS, format_cost, usage_rows


def test_builtin_claude_prices_are_dated_and_complete() -> None:
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", builtin_prices_as_of())
    prices = builtin_prices()
    assert prices["claude-sonnet-4-5"] == {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
    assert prices["claude-haiku-4-5"] == {"input": 1.0, "output": 5.0, "cache_read": 0.1, "cache_write": 1.25}
    assert prices["claude-opus-4-1"] == {"input": 15.0, "output": 75.0, "cache_read": 1.5, "cache_write": 18.75}
    for model, p in prices.items():
        assert model.startswith("claude-")
        assert sorted(p) == sorted(PRICE_FIELDS)
        # Anthropic's published ratios: 5-minute cache writes 1.25x input (Haiku 3: $0.30 for $0.25),
        # cache reads at most 0.1x input (Haiku 3: $0.03, rounded)
        assert p["cache_write"] == pytest.approx(p["input"] * 1.25, abs=0.02), model
        assert p["cache_read"] <= p["input"] * 0.1 + 0.01, model
    prices["claude-sonnet-4-5"]["input"] = 0
    assert builtin_prices()["claude-sonnet-4-5"]["input"] == 3.0  # a fresh copy each time


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-opus-4-9", None),  # never a guess from a shorter name
        ("gpt-test", None),
    ],
)
def test_price_for(model: str, expected: str | None) -> None:
    prices = builtin_prices()
    assert price_for(model, prices) == (prices[expected] if expected else None)


def test_estimate_cost_by_hand() -> None:
    usage = {
        "claude-sonnet-4-5-20250929": {"input": 12_000, "output": 3_000, "cache_read": 40_000, "cache_write": 8_000,
                                       "calls": 6},
        "claude-haiku-4-5": {"input": 1_000, "output": 500, "cache_read": 0, "cache_write": 0, "calls": 2},
        "qwen2.5:7b": {"input": 5_000, "output": 700, "cache_read": 0, "cache_write": 0, "calls": 3},
    }
    cost = estimate_cost(usage, builtin_prices())
    # 12,000 x $3 + 3,000 x $15 + 40,000 x $0.30 + 8,000 x $3.75 = $123,000 per million tokens
    assert cost["claude-sonnet-4-5-20250929"] == pytest.approx(0.123)
    # 1,000 x $1 + 500 x $5 = $3,500 per million
    assert cost["claude-haiku-4-5"] == pytest.approx(0.0035)
    assert cost["qwen2.5:7b"] is None


def test_load_prices_yaml_plain_and_json_wrapped(tmp_path: Path) -> None:
    yaml_file = tmp_path / "prices.yaml"
    yaml_file.write_text("gpt-test: {input: 2, output: 8, cache_read: 0.5}\nqwen2.5:7b: {input: 0, output: 0}\n")
    assert load_prices(yaml_file) == {
        "gpt-test": {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 2.0},  # write defaults to input
        "qwen2.5:7b": {"input": 0.0, "output": 0.0, "cache_read": 0.0, "cache_write": 0.0},
    }
    json_file = tmp_path / "prices.json"
    json_file.write_text(json.dumps({"as_of": "2026-11-01", "source": "our contract",
                                     "models": {"claude-sonnet-4-5": {"input": 2.4, "output": 12}}}))
    merged = all_prices(json_file)
    assert merged["claude-sonnet-4-5"] == {"input": 2.4, "output": 12.0, "cache_read": 2.4, "cache_write": 2.4}
    assert merged["claude-haiku-4-5"] == builtin_prices()["claude-haiku-4-5"]
    assert all_prices(None) == builtin_prices()


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("p.yaml", None, "prices file p.yaml: no such file"),
        ("p.yaml", "gpt-x: {input: 1, output: [", "prices file p.yaml, line 1: not valid YAML: "
                                                  "expected the node content, but found '<stream end>'"),
        ("p.json", '{"gpt-x": {"input": 1,}}', "prices file p.json, line 1: not valid JSON: "
                                               "Expecting property name enclosed in double quotes"),
        ("p.yaml", "", "prices file p.yaml: empty; expected a mapping of model name to prices, "
                       "e.g. gpt-4.1: {input: 2.0, output: 8.0}"),
        ("p.yaml", "- gpt-x\n", "prices file p.yaml: expected a mapping of model name to prices, "
                                "e.g. gpt-4.1: {input: 2.0, output: 8.0}; got a list"),
        ("p.yaml", "gpt-x: 2.5\n", "prices file p.yaml, line 1: model 'gpt-x': expected a mapping with input and "
                                   "output prices, got 2.5"),
        ("p.yaml", "gpt-y: {input: 1, output: 2}\ngpt-x: {input: 1, output: 2, cached_input: 0.5}\n",
         "prices file p.yaml, line 2: model 'gpt-x': unknown key 'cached_input' (allowed: input, output, cache_read, "
         "cache_write, note)"),
        ("p.yaml", "gpt-x: {input: 1}\n",
         "prices file p.yaml, line 1: model 'gpt-x': missing 'output' (USD per million tokens)"),
        ("p.yaml", "gpt-x: {input: 1, output: -2}\n",
         "prices file p.yaml, line 1: model 'gpt-x': 'output' must be a number >= 0 (USD per million tokens), "
         "got -2"),
        ("p.yaml", "gpt-x: {input: '$2', output: 8}\n",
         "prices file p.yaml, line 1: model 'gpt-x': 'input' must be a number >= 0 (USD per million tokens), "
         "got '$2'"),
        ("p.yaml", "gpt-x: {input: true, output: 8}\n",
         "prices file p.yaml, line 1: model 'gpt-x': 'input' must be a number >= 0 (USD per million tokens), "
         "got True"),
        ("p.yaml", "models: [gpt-x]\n",
         "prices file p.yaml, line 1: 'models' must be a mapping of model name to prices, got a list"),
        ("p.yaml", "models: {}\ncurrency: USD\nvalid_from: 2026-01-01\n",
         "prices file p.yaml, line 3: unknown key 'valid_from' next to 'models' (allowed: models, as_of, source, "
         "currency, unit, notes)"),
        ("p.json", '{"models": {\n  "gpt-x": {"input": 1, "output": 2},\n  "gpt-y": {"input": 1}\n}}',
         "prices file p.json, line 3: model 'gpt-y': missing 'output' (USD per million tokens)"),
        ("p.yaml", "gpt-x: {input: 1, output: '" + "9" * 300 + "'}\n",
         "prices file p.yaml, line 1: model 'gpt-x': 'output' must be a number >= 0 (USD per million tokens), "
         "got '" + "9" * 76 + "..."),
    ],
)
def test_load_prices_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str | None,
                            message: str) -> None:
    monkeypatch.chdir(tmp_path)
    if text is not None:
        Path(name).write_text(text)
    with pytest.raises(PricesError) as e:
        load_prices(name)
    assert str(e.value) == message
    assert isinstance(e.value, ValueError)


JUNIT_PASSED = (
    '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0" '
    'failures="0" skipped="0" tests="2" time="0.031" timestamp="2026-03-01T09:30:12.123456+00:00" hostname="ci">'
    '<testcase classname="test_x" name="test_a" time="0.001" /><testcase classname="test_x" name="test_b" '
    'time="0.001" /></testsuite></testsuites>\n'
)
JUNIT_FAILED = JUNIT_PASSED.replace(
    'name="test_b" time="0.001" />',
    'name="test_b" time="0.001"><failure message="assert 1 == 2">def test_b():\n&gt;       assert 1 == 2\n'
    "E       assert 1 == 2\n\ntest_x.py:4: AssertionError</failure></testcase>",
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (JUNIT_PASSED, "prices file junit.xml: expected a mapping of model name to prices, e.g. gpt-4.1: "
                       "{input: 2.0, output: 8.0}; got the text "
                       "'<?xml version=\"1.0\" encoding=\"utf-8\"?><testsuites name=\"pytest tests\"><tests..."),
        (JUNIT_FAILED, "prices file junit.xml, line 2: not valid YAML: expected alphabetic or numeric character, "
                       "but found ';'"),
    ],
    ids=["passing-run", "failing-run"],
)
def test_a_file_of_another_kind_gives_a_short_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    """A junit.xml given as --sandtable-prices: a short line, never the whole file's text."""
    monkeypatch.chdir(tmp_path)
    Path("junit.xml").write_text(text)
    with pytest.raises(PricesError) as e:
        load_prices("junit.xml")
    assert str(e.value) == message
    assert "\n" not in str(e.value) and "testcase" not in str(e.value)  # never the whole file


def test_a_junit_xml_as_prices_file_is_a_one_line_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile("def test_plain():\n    assert True\n")
    (pytester.path / "junit.xml").write_text(JUNIT_PASSED)
    result = pytester.runpytest("--sandtable-prices", "junit.xml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [ln for ln in result.stderr.lines if ln.strip()]
    assert errors == [
        "ERROR: --sandtable-prices: prices file junit.xml: expected a mapping of model name to prices, e.g. gpt-4.1: "
        "{input: 2.0, output: 8.0}; got the text "
        "'<?xml version=\"1.0\" encoding=\"utf-8\"?><testsuites name=\"pytest tests\"><tests..."
    ]


def test_a_binary_file_as_prices_file(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(PricesError) as e:
        load_prices(tmp_path / "p.yaml")
    assert str(e.value) == (f"prices file {tmp_path / 'p.yaml'}: not a text file (not UTF-8); expected a mapping "
                            "of model name to prices, e.g. gpt-4.1: {input: 2.0, output: 8.0}")


@pytest.mark.parametrize(
    ("cost", "text"),
    [(None, "n/a"), (0.0, "$0.00"), (0.00004, "<$0.0001"), (0.0035, "$0.0035"), (0.123, "$0.1230"),
     (1234.5, "$1,234.50")],
)
def test_format_cost(cost: float | None, text: str) -> None:
    assert format_cost(cost) == text


def _trial(task: str, usage: dict[str, dict[str, dict[str, int]]]) -> st.TrialResult:
    return st.TrialResult(domain="shop", task=task, trial=1, k=1, seed=1, verdict="passed", usage=usage)


def test_usage_rows_from_a_summary(tmp_path: Path) -> None:
    agent_a = {"claude-sonnet-4-5-20250929": {"input": 8_000, "output": 2_000, "cache_read": 30_000,
                                              "cache_write": 8_000, "calls": 4}}
    agent_b = {"claude-sonnet-4-5-20250929": {"input": 4_000, "output": 1_000, "cache_read": 10_000,
                                              "cache_write": 0, "calls": 2}}
    user = {"gpt-test": {"input": 150_000, "output": 20_000, "cache_read": 50_000, "cache_write": 0, "calls": 9}}
    trials = [_trial("a", {"agent": agent_a, "user": user}), _trial("b", {"agent": agent_b, "user": {}})]
    summary = st.summarize(trials, k=1)
    prices_file = tmp_path / "prices.yaml"
    prices_file.write_text("gpt-test: {input: 0.4, output: 1.6, cache_read: 0.1}\n")

    rows = usage_rows(summary["usage"], all_prices(prices_file))
    assert USAGE_HEADERS == ["side", "model", "input", "output", "cache read", "cache write", "cost"]
    # agent: (12,000 x 3 + 3,000 x 15 + 40,000 x 0.30 + 8,000 x 3.75) / 1e6 = $0.123
    # user:  (150,000 x 0.4 + 20,000 x 1.6 + 50,000 x 0.1) / 1e6 = $0.097
    assert rows == [
        ["agent", "claude-sonnet-4-5-20250929", "12,000", "3,000", "40,000", "8,000", "$0.1230"],
        ["user", "gpt-test", "150,000", "20,000", "50,000", "0", "$0.0970"],
        ["total", "", "162,000", "23,000", "90,000", "8,000", "$0.2200"],
    ]
    # without the prices file the user model has no price
    rows = usage_rows(summary["usage"], builtin_prices())
    assert rows[1][-1] == "n/a"
    assert rows[2][-1] == "$0.1230 + n/a"
    assert usage_rows({"agent": {}, "user": {}}, builtin_prices()) == []
    assert usage_rows({"agent": {"m": {"input": 1}}, "user": {"u": {"input": 2}}}, {}) == [
        ["agent", "m", "1", "0", "0", "0", "n/a"], ["user", "u", "2", "0", "0", "0", "n/a"],
        ["total", "", "3", "0", "0", "0", "n/a"]]
