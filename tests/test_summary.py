"""The run summary: pass^j, verdicts per task, failure modes, soft rules."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_sandtable import TrialResult, summarize
from pytest_sandtable.engine.results import Check
from pytest_sandtable.report.summary import pass_hat
from pytest_sandtable.report.terminal import render_terminal


def trial(task: str, n: int, verdict: str, *, k: int = 4, tags: tuple[str, ...] = (), critical: bool = False,
          failed: tuple[tuple[str, str, str], ...] = (), soft: dict[str, Any] | None = None,
          error: str | None = None) -> TrialResult:
    return TrialResult(
        domain="freight", task=task, trial=n, k=k, seed=n, verdict=verdict, tags=list(tags), critical=critical,
        checks=[Check(kind, cid, False, detail) for kind, cid, detail in failed], soft=soft or {}, error=error,
        agent="desk", user="scripted",
    )


def runs(task: str, verdicts: str, **kw: Any) -> list[TrialResult]:
    """One trial per letter: p passed, f failed, e errored."""
    names = {"p": "passed", "f": "failed", "e": "errored"}
    return [trial(task, i, names[v], k=len(verdicts), **kw) for i, v in enumerate(verdicts, 1)]


def test_the_worked_example_four_trials_three_passed() -> None:
    s = summarize(runs("book-happy-path", "ppfp"), k=4)
    assert s["pass_hat"] == {"1": 0.75, "2": 0.5, "3": 0.25, "4": 0.0}


@pytest.mark.parametrize(
    ("c", "n", "j", "value"),
    [(3, 4, 1, 3 / 4), (3, 4, 2, 3 / 6), (3, 4, 3, 1 / 4), (3, 4, 4, 0.0), (4, 4, 4, 1.0), (0, 4, 1, 0.0),
     (2, 3, 4, None)],
)
def test_the_estimator(c: int, n: int, j: int, value: float | None) -> None:
    assert pass_hat(c, n, j) == value


def test_pass_hat_is_averaged_over_tasks() -> None:
    s = summarize(runs("a", "pppp") + runs("b", "ppfp") + runs("c", "ffff"), k=4)
    assert s["pass_hat"] == {"1": pytest.approx(1.75 / 3), "2": 0.5, "3": pytest.approx(1.25 / 3),
                             "4": pytest.approx(1 / 3)}


def test_errored_trials_are_left_out_of_pass_hat() -> None:
    s = summarize(runs("a", "ppep"), k=4)
    (task,) = s["tasks"]
    assert (task["trials"], task["graded"], task["passed"], task["errored"]) == (4, 3, 3, 1)
    assert s["pass_hat"] == {"1": 1.0, "2": 1.0, "3": 1.0, "4": None}
    assert (s["passed"], s["failed"], s["errored"]) == (3, 0, 1)
    assert s["errored_trials"] == [{"task": "a", "domain": "freight", "trial": 3, "error": None}]


def test_per_tag_scores() -> None:
    s = summarize(runs("a", "pp", tags=("booking",)) + runs("b", "pf", tags=("booking", "negotiation")), k=2)
    assert {tag: (e["tasks"], e["pass_hat"], e["pass_at"], e["pass_hat_tasks"]) for tag, e in s["tags"].items()} == {
        "booking": (2, {"1": 0.75, "2": 0.5}, {"1": 0.75, "2": 1.0}, {"1": 2, "2": 2}),
        "negotiation": (1, {"1": 0.5, "2": 0.0}, {"1": 0.5, "2": 1.0}, {"1": 1, "2": 1}),
    }
    # a tag of one task has the task's own intervals: Wilson 1 of 2 is 9.5-90.5%, to the power j
    (task_b,) = [t for t in s["tasks"] if t["task"] == "b"]
    assert s["tags"]["negotiation"]["pass_hat_ci"] == task_b["pass_hat_ci"]
    assert task_b["pass_hat_ci"]["2"] == [0.0, pytest.approx(0.9054688**2, abs=1e-6)]  # stretched to hold 0.0


def test_task_verdicts_with_critical_tasks_first() -> None:
    trials = (runs("steady", "pp") + runs("broken", "ff") + runs("shaky", "pf") + runs("gone", "ee")
              + runs("vital", "pp", critical=True) + runs("vital-flaky", "fp", critical=True))
    s = summarize(trials, k=2)
    assert [(t["task"], t["verdict"], t["critical"]) for t in s["tasks"]] == [
        ("vital-flaky", "flaky", True),
        ("vital", "passed", True),
        ("broken", "failed", False),
        ("shaky", "flaky", False),
        ("gone", "skipped", False),
        ("steady", "passed", False),
    ]


def test_failure_modes_are_clustered_by_check_most_frequent_first() -> None:
    ceiling = ("invariant", "rate-ceiling", "book_load rate=2600 exceeds the limit 2350")
    verify = ("called", "called:verify_carrier", "verify_carrier was never called successfully")
    trials = [
        trial("a", 1, "failed", failed=(verify,)),
        trial("a", 2, "failed", failed=(ceiling, verify)),
        trial("b", 1, "failed", failed=(ceiling,)),
        trial("b", 2, "failed", failed=(ceiling,)),
        trial("b", 3, "errored", failed=(verify,), error="simulated user failed"),
    ]
    modes = summarize(trials, k=4)["failure_modes"]
    assert [(m["kind"], m["id"], m["trials"], m["tasks"]) for m in modes] == [
        ("invariant", "rate-ceiling", 3, ["a", "b"]),
        ("called", "called:verify_carrier", 2, ["a"]),
    ]
    assert modes[0]["example"] == {"task": "a", "domain": "freight", "trial": 2,
                                   "detail": "book_load rate=2600 exceeds the limit 2350"}


def _soft(applied: bool, broken: bool) -> dict[str, Any]:
    return {"counter-at-ceiling": {"tool": "log_offer", "applied": applied, "broken": broken}}


def test_soft_rule_rate_among_trials_where_it_applied() -> None:
    flags = [(True, True)] * 3 + [(True, False)] * 5 + [(False, False)] * 2
    trials = [trial("t", i, "passed", k=10, soft=_soft(*f)) for i, f in enumerate(flags, 1)]
    trials.append(trial("t", 11, "errored", k=10, soft=_soft(True, True), error="simulated user failed: boom"))
    s = summarize(trials, k=10)
    assert s["soft_rules"] == [
        {"id": "counter-at-ceiling", "tool": "log_offer", "applied": 8, "broken": 3, "rate": 0.375}
    ]
    assert render_terminal(s)[-7:] == [
        "t       passed     10/10 +1 errored",
        "",
        "Soft rules (reported, never fail a trial)",
        "counter-at-ceiling  37.5%  3 of 8 trials that called log_offer",
        "",
        "Errored trials (left out of pass^k)",
        "  t[11]: simulated user failed: boom",
    ]


def test_the_terminal_summary() -> None:
    booked = ("state", "state:loads[L-1001]#1", 'loads L-1001: status is "available", expected "booked"')
    trials = [
        *runs("book-happy-path", "pp", tags=("booking",), critical=True),
        trial("book-happy-path", 3, "failed", tags=("booking",), critical=True, failed=(booked,)),
        trial("book-happy-path", 4, "passed", tags=("booking",), critical=True),
        *runs("caller-asks-for-the-max", "pppp", tags=("negotiation",)),
    ]
    assert render_terminal(summarize(trials, k=4)) == [
        "8 trials of 2 tasks: 7 passed, 1 failed, 0 errored (left out of pass^k)   agent: desk   user: scripted",
        "",
        "pass^k           tasks    pass^1    pass^2    pass^3    pass^4    pass@4",
        "---------------  -------  --------  --------  --------  --------  --------",
        "all tasks        2        87.5%     75.0%     62.5%     50.0%     100.0%",
        "95% CI                    45-100%   15-100%   3-100%    0-96%     52-100%",
        "tag booking      1        75.0%     50.0%     25.0%     0.0%      100.0%",
        "95% CI                    30-95%    9-91%     3-87%     0-83%     76-100%",
        "tag negotiation  1        100.0%    100.0%    100.0%    100.0%    100.0%",
        "95% CI                    51-100%   26-100%   13-100%   7-100%    94-100%",
        "",
        "task                        verdict    passed    pass rate 95% CI    tags",
        "--------------------------  ---------  --------  ------------------  -----------",
        "book-happy-path (critical)  flaky      3/4       30-95%              booking",
        "caller-asks-for-the-max     passed     4/4                           negotiation",
        "",
        "Failure modes (failed checks across trials, most frequent first)",
        "kind    check                  trials    example",
        "------  ---------------------  --------  " + "-" * 74,
        'state   state:loads[L-1001]#1  1         book-happy-path[3]: '
        'loads L-1001: status is "available", expected "booked"',
    ]


def test_the_summary_does_not_depend_on_the_order_trials_finished() -> None:
    trials = runs("a", "pfpp") + runs("b", "fpfp", tags=("x",))
    assert summarize(trials, k=4) == summarize(list(reversed(trials)), k=4)


def test_two_domain_files_with_the_same_name_are_not_merged() -> None:
    trials = [
        TrialResult(domain="freight", task="book", trial=1, k=1, seed=1, verdict=verdict, location=location)
        for verdict, location in [("passed", "a/sandtable.yaml:20"), ("failed", "b/sandtable.yaml:20")]
    ]
    s = summarize(trials, k=1)
    assert list(s["pass_hat"]) == ["1"]
    assert [(t["verdict"], t["graded"]) for t in s["tasks"]] == [("failed", 1), ("passed", 1)]
