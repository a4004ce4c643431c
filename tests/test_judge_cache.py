"""Judge verdicts cached by content (judge/cache.py): a second judging of identical
transcripts with the servers stopped makes no call; a changed transcript, criterion or
judge is asked again; replay-only runs never call; the judges' budget; judge usage kept
apart from the agent's and the user's."""

from __future__ import annotations

from pathlib import Path

import pytest
from _judges import CRITERIA, FEE, POLICY, answering, fake_judges, trial, verdict

from pytest_sandtable.domain.model import Criterion
from pytest_sandtable.judge.panel import BUDGET_REACHED, NOT_RECORDED, Panel, PanelOptions, judge_trial_sync
from pytest_sandtable.judge.spec import parse_panel

SCRIPT = {
    "judge-a": answering({"explains-fee": verdict("yes", "$35 late fee"), "apologises": verdict("yes", "sorry")}),
    "judge-c": answering({"explains-fee": verdict("no", ""), "apologises": verdict("yes", "I am sorry")}),
}
SPEC = "claude:judge-a,openai:judge-c"


def panel(cache: Path | None, spec: str = SPEC, **options: object) -> Panel:
    return Panel(parse_panel(spec), PanelOptions(cache_dir=cache, **options))  # type: ignore[arg-type]


def test_a_second_judging_with_the_servers_stopped_makes_no_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "judge-cache"
    with fake_judges(monkeypatch, SCRIPT) as fakes:
        first = panel(cache)
        judged, usage = judge_trial_sync(first, POLICY, CRITERIA, trial())
        assert fakes.calls == 4 == first.calls and first.cached == 0
    # the servers are stopped: a call would fail (connection refused) and void the verdict
    again = panel(cache)
    judged_again, usage_again = judge_trial_sync(again, POLICY, CRITERIA, trial())
    assert again.calls == 0 and again.cached == 4 and usage_again == {}
    assert [[{**j, "cached": False} for j in c["judges"]] for c in judged_again] == [c["judges"] for c in judged]
    assert all(j["cached"] for c in judged_again for j in c["judges"])
    assert [c["verdict"] for c in judged_again] == [c["verdict"] for c in judged] == ["split", "yes"]
    assert usage["judge-a"]["calls"] == 2


def test_what_changes_the_key_is_asked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "judge-cache"
    fee = CRITERIA[:1]
    with fake_judges(monkeypatch, SCRIPT) as fakes:
        judge_trial_sync(panel(cache, "claude:judge-a"), POLICY, fee, trial())
        assert fakes.calls == 1
        judge_trial_sync(panel(cache, "claude:judge-a"), POLICY, fee, trial(task="other", number=3))
        assert fakes.calls == 1  # another trial, the same transcript: its verdict is known
        judge_trial_sync(panel(cache, "claude:judge-a"), POLICY, fee, trial(f"{FEE} Anything else?"))
        assert fakes.calls == 2  # another transcript
        reworded = (Criterion(id="explains-fee", question="Did the agent give the $35 fee and its reason?"),)
        judge_trial_sync(panel(cache, "claude:judge-a"), POLICY, reworded, trial())
        assert fakes.calls == 3  # another question
        judge_trial_sync(panel(cache, "claude:judge-a"), POLICY + " Be brief.", fee, trial())
        assert fakes.calls == 4  # another policy
        judge_trial_sync(panel(cache, "openai:judge-c"), POLICY, fee, trial())
        assert fakes.calls == 5  # another judge


def test_replay_only_sends_nothing_that_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "judge-cache"
    with fake_judges(monkeypatch, SCRIPT) as fakes:
        judge_trial_sync(panel(cache), POLICY, CRITERIA[:1], trial())
        p = panel(cache, replay_only=True)
        judged, _ = judge_trial_sync(p, POLICY, CRITERIA, trial())
        assert fakes.calls == 2 and p.calls == 0
    assert [j["verdict"] for j in judged[0]["judges"]] == ["yes", "no"]
    assert [(j["verdict"], j["void"]) for j in judged[1]["judges"]] == [("void", NOT_RECORDED)] * 2
    assert NOT_RECORDED == "not in the judge cache (--sandtable-record=none replays only)"


def test_void_call_failures_are_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "judge-cache"
    p = panel(cache, "claude:judge-a", retries=0)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    (fee,), _ = judge_trial_sync(p, POLICY, CRITERIA[:1], trial())
    assert fee["judges"][0]["void"] == "claude judge judge-a: connection refused by 127.0.0.1:9"
    assert not list(cache.rglob("*.json"))
    with fake_judges(monkeypatch, SCRIPT) as fakes:
        (fee,), _ = judge_trial_sync(panel(cache, "claude:judge-a"), POLICY, CRITERIA[:1], trial())
        assert fakes.calls == 1 and fee["verdict"] == "yes"


def test_the_budget_refuses_further_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 1,000 input and 50 output tokens a call at $100 per million: $0.105 a call
    prices = {"judge-a": {"input": 100.0, "output": 100.0}}
    with fake_judges(monkeypatch, SCRIPT) as fakes:
        p = panel(None, "claude:judge-a", max_cost=0.2, prices=prices)
        first, _ = judge_trial_sync(p, POLICY, CRITERIA, trial())
        second, _ = judge_trial_sync(p, POLICY, CRITERIA, trial("Other words."))
        assert fakes.calls == 2
    assert [c["verdict"] for c in first] == ["yes", "yes"]
    assert [(c["verdict"], c["judges"][0]["void"]) for c in second] == [("void", BUDGET_REACHED)] * 2
    assert BUDGET_REACHED == "judge budget reached"
    assert p.cost() == pytest.approx(0.21)
    assert p.usage.to_dict() == {"judge-a": {"input": 2000, "output": 100, "cache_read": 0, "cache_write": 0,
                                             "calls": 2}}
