"""The terminal summary of a big suite (issue 13): a run of more than 20 tasks lists the
tasks that did not pass and counts the passed ones (``-v``, ``--sandtable-all-tasks`` and
the commands' ``--all-tasks`` list them all), a k above 8 shows pass^j for 1, 2, 4, ...
up to 64 and k (every j stays in results.json and report.html), and the failure modes
are capped at the 15 most frequent. Small runs print as before."""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

import pytest
from _domains import BOOKS_L1001, DESK

from pytest_sandtable import TrialResult, summarize
from pytest_sandtable.cli.regrade import add_subcommands as add_regrade
from pytest_sandtable.cli.runs import add_subcommands
from pytest_sandtable.engine.results import Check
from pytest_sandtable.report.fmt import pct, pct_range
from pytest_sandtable.report.results_json import RunMeta, build_results, write_run
from pytest_sandtable.report.terminal import (
    DOUBLING_UP_TO,
    EVERY_J_UP_TO,
    FAILURE_MODES_SHOWN,
    LIST_EVERY_TASK_UP_TO,
    render_terminal,
    shown_js,
)

pytest_plugins = ["pytester"]


def runs(task: str, verdicts: str, *, tags: tuple[str, ...] = (), critical: bool = False,
         fails: Any = None, owner: str | None = None) -> list[TrialResult]:
    """One trial per letter (p passed, f failed, e errored); ``fails(n)`` gives the failed
    trial n's check as (kind, id)."""
    names = {"p": "passed", "f": "failed", "e": "errored"}
    out = []
    for n, v in enumerate(verdicts, 1):
        checks = []
        if v == "f":
            kind, cid = fails(n) if fails else ("state", f"state:{task}#1")
            checks = [Check(kind, cid, False, f"{cid} did not hold")]
        out.append(TrialResult(
            domain="retail", task=task, trial=n, k=len(verdicts), seed=n, verdict=names[v], tags=list(tags),
            critical=critical, checks=checks, error="simulated user failed" if v == "e" else None,
            attribution={"owner": owner, "evidence": f"{owner} did it"} if owner and v == "f" else None,
            agent="desk", user="scripted"))
    return out


def big_run() -> list[TrialResult]:
    """60 tasks x 16 trials: a critical task that always fails and one that always passes,
    5 failing and 4 flaky tasks, 49 steady ones (one with an errored trial); 17 failure
    modes (refund-cap, one per failing task, 11 among the flaky tasks' failures)."""
    trials = runs("vital-refund", "f" * 16, tags=("refunds",), critical=True,
                  fails=lambda n: ("invariant", "refund-cap"), owner="agent")
    trials += runs("vital-greet", "p" * 16, tags=("refunds",), critical=True)
    for i in range(5):
        trials += runs(f"broken-{i}", "f" * 16, tags=("returns",), fails=lambda n, i=i: ("state", f"state:returns#{i}"))
    for i in range(4):
        trials += runs(f"shaky-{i}", "pf" * 8, tags=("exchanges",),
                       fails=lambda n, i=i: ("reply", f"reply:exchange-{(i * 8 + n // 2) % 11}"))
    trials += runs("steady-00", "p" * 15 + "e", tags=("orders",))
    for i in range(1, 49):
        trials += runs(f"steady-{i:02d}", "p" * 16, tags=("orders",))
    return trials


BIG = [
    "960 trials of 60 tasks: 831 passed, 128 failed, 1 errored (left out of pass^k)   agent: desk   user: scripted",
    "",
    "pass^k         tasks    pass^1    pass^2    pass^4    pass^8    pass^16    pass@16",
    "-------------  -------  --------  --------  --------  --------  ---------  ---------",
    "all tasks      60       86.7%     84.9%     83.6%     83.3%     83.1%*     89.8%*",
    "95% CI                  79-94%    76-93%    75-92%    73-93%    70-96%     83-95%",
    "tag exchanges  4        50.0%     23.3%     3.8%      0.0%      0.0%       100.0%",
    "95% CI                  34-67%    9-43%     0-20%     0-7%      0-0%       100-100%",
    "tag orders     49       100.0%    100.0%    100.0%    100.0%    100.0%*    100.0%*",
    "95% CI                  98-100%   97-100%   95-100%   91-100%   86-100%    100-100%",
    "tag refunds    2        50.0%     50.0%     50.0%     50.0%     50.0%      50.0%",
    "95% CI                  0-99%     2-100%    4-100%    8-100%    14-100%    0-84%",
    "tag returns    5        0.0%      0.0%      0.0%      0.0%      0.0%       0.0%",
    "95% CI                  0-7%      0-1%      0-0%      0-0%      0-0%       0-51%",
    "* counts fewer tasks than pass^1: a task with fewer than j graded trials (errored ones are not graded) "
    "is left out of pass^j",
    "pass^j for j = 1, 2, 4, 8, 16; every j in results.json and report.html",
    "",
]


def test_a_big_run_lists_what_did_not_pass_shows_chosen_j_and_the_most_frequent_failure_modes() -> None:
    lines = render_terminal(summarize(big_run(), k=16), [])
    assert lines[:len(BIG)] == BIG
    assert lines[len(BIG):] == [
        "task                     verdict    passed    pass rate 95% CI    tags",
        "-----------------------  ---------  --------  ------------------  ---------",
        "vital-refund (critical)  failed     0/16                          refunds",
        "broken-0                 failed     0/16                          returns",
        "broken-1                 failed     0/16                          returns",
        "broken-2                 failed     0/16                          returns",
        "broken-3                 failed     0/16                          returns",
        "broken-4                 failed     0/16                          returns",
        "shaky-0                  flaky      8/16      28-72%              exchanges",
        "shaky-1                  flaky      8/16      28-72%              exchanges",
        "shaky-2                  flaky      8/16      28-72%              exchanges",
        "shaky-3                  flaky      8/16      28-72%              exchanges",
        "50 passed tasks not listed (-v or --sandtable-all-tasks lists them)",
        "",
        "Failure modes (failed checks across trials, most frequent first)",
        "kind       check              trials    example",
        "---------  -----------------  --------  ------------------------------------------",
        "invariant  refund-cap         16        vital-refund[1]: refund-cap did not hold",
        "state      state:returns#0    16        broken-0[1]: state:returns#0 did not hold",
        "state      state:returns#1    16        broken-1[1]: state:returns#1 did not hold",
        "state      state:returns#2    16        broken-2[1]: state:returns#2 did not hold",
        "state      state:returns#3    16        broken-3[1]: state:returns#3 did not hold",
        "state      state:returns#4    16        broken-4[1]: state:returns#4 did not hold",
        "reply      reply:exchange-1   3         shaky-0[2]: reply:exchange-1 did not hold",
        "reply      reply:exchange-10  3         shaky-1[4]: reply:exchange-10 did not hold",
        "reply      reply:exchange-2   3         shaky-0[4]: reply:exchange-2 did not hold",
        "reply      reply:exchange-3   3         shaky-0[6]: reply:exchange-3 did not hold",
        "reply      reply:exchange-4   3         shaky-0[8]: reply:exchange-4 did not hold",
        "reply      reply:exchange-5   3         shaky-0[10]: reply:exchange-5 did not hold",
        "reply      reply:exchange-6   3         shaky-0[12]: reply:exchange-6 did not hold",
        "reply      reply:exchange-7   3         shaky-0[14]: reply:exchange-7 did not hold",
        "reply      reply:exchange-8   3         shaky-0[16]: reply:exchange-8 did not hold",
        "... and 2 more failure modes (results.json lists all)",
        "likely owners of 128 failed trials: agent 16, not attributed 112",
        "",
        "Errored trials (left out of pass^k)",
        "  steady-00[16]: simulated user failed",
    ]


def test_the_chosen_j_are_the_runs_own_figures(tmp_path: Path) -> None:
    """Each pass^j and interval shown is the summary's at that j; the j left out are still
    in results.json and report.html."""
    trials = big_run()
    s = summarize(trials, k=16)
    header, _, row, ci = render_terminal(s, [])[2:6]
    assert header.split()[2:] == ["pass^1", "pass^2", "pass^4", "pass^8", "pass^16", "pass@16"]
    shown = ("1", "2", "4", "8", "16")
    assert row.split()[3:-1] == [pct(s["pass_hat"][j]) + ("*" if j == "16" else "") for j in shown]
    assert ci.split()[2:-1] == [pct_range(s["pass_hat_ci"][j]) for j in shown]
    doc = build_results(trials, RunMeta(
        domains=[{"name": "retail", "path": "retail.sandtable.yaml", "sha256": "0" * 64}], agent="desk",
        user="scripted", k=16, run_seed=0, started_at="2026-03-01T09:30:12.000000Z",
        finished_at="2026-03-01T09:30:13.000000Z"))
    assert list(doc["summary"]["pass_hat"]) == [str(j) for j in range(1, 17)]
    assert len(doc["summary"]["failure_modes"]) == 17
    assert [t["task"] for t in doc["summary"]["tasks"]].count("steady-48") == 1  # every task, passed ones too
    html = (write_run(doc, tmp_path / "run") / "report.html").read_text(encoding="utf-8")
    assert all(f"pass^{j} " in html for j in range(1, 17))


def test_listing_every_task_on_request() -> None:
    s = summarize(big_run(), k=16)
    default, every = render_terminal(s, []), render_terminal(s, [], all_tasks=True)
    assert every[:len(BIG)] == BIG
    end = every.index("Failure modes (failed checks across trials, most frequent first)") - 1
    assert every[len(BIG)] == "task                     verdict    passed            pass rate 95% CI    tags"
    rows = every[len(BIG) + 2:end]
    assert len(rows) == 60 and not any("not listed" in ln for ln in every)
    assert rows[:2] == ["vital-refund (critical)  failed     0/16                                  refunds",
                        "vital-greet (critical)   passed     16/16                                 refunds"]
    assert "steady-00                passed     15/15 +1 errored                      orders" in rows
    assert rows[-1] == "steady-48                passed     16/16                                 orders"
    assert every[end:] == default[default.index(every[end + 1]) - 1:]  # then the same failure modes and the rest
    hinted = render_terminal(s, [], all_tasks_hint="--all-tasks")
    assert "50 passed tasks not listed (--all-tasks lists them)" in hinted


def _steady(tasks: int, k: int = 2, failing: int = 0) -> list[TrialResult]:
    return [t for i in range(tasks) for t in runs(f"t{i:02d}", "f" * k if i < failing else "p" * k)]


def test_up_to_20_tasks_every_task_is_listed_as_before() -> None:
    assert LIST_EVERY_TASK_UP_TO == 20
    s = summarize(_steady(20, k=8, failing=1), k=8)
    lines = render_terminal(s, [])
    assert lines == render_terminal(s, [], all_tasks=True)
    assert lines[2] == ("pass^k     tasks    pass^1    pass^2    pass^3    pass^4    pass^5    pass^6    pass^7    "
                        "pass^8    pass@8")
    assert lines[6] == ""  # no footnote: every j up to 8 is shown
    assert lines[7:10] == ["task    verdict    passed    tags", "------  ---------  --------  ------",
                           "t00     failed     0/8"]
    assert lines[10:29] == [f"t{i:02d}     passed     8/8" for i in range(1, 20)]


def test_from_21_tasks_the_passed_ones_are_counted() -> None:
    one = render_terminal(summarize(_steady(21, failing=20), k=2), [])
    assert one[one.index("t19     failed     0/2") + 1] == (
        "1 passed task not listed (-v or --sandtable-all-tasks lists them)")
    # every task passed: no table, only the count
    assert render_terminal(summarize(_steady(21), k=2), [])[6:] == [
        "", "21 passed tasks not listed (-v or --sandtable-all-tasks lists them)"]


def test_a_skipped_task_is_listed() -> None:
    trials = _steady(21) + runs("gone", "ee")
    lines = render_terminal(summarize(trials, k=2), [])
    i = lines.index("task    verdict    passed          tags")
    assert lines[i + 2:i + 4] == ["gone    skipped    0/0 +2 errored",
                                  "21 passed tasks not listed (-v or --sandtable-all-tasks lists them)"]


@pytest.mark.parametrize(("k", "shown"), [
    (1, [1]),
    (8, [1, 2, 3, 4, 5, 6, 7, 8]),
    (9, [1, 2, 4, 8, 9]),
    (16, [1, 2, 4, 8, 16]),
    (64, [1, 2, 4, 8, 16, 32, 64]),
    (100, [1, 2, 4, 8, 16, 32, 64, 100]),
    (128, [1, 2, 4, 8, 16, 32, 64, 128]),
    (174, [1, 2, 4, 8, 16, 32, 64, 174]),
    (1000, [1, 2, 4, 8, 16, 32, 64, 1000]),
])
def test_the_j_shown(k: int, shown: list[int]) -> None:
    assert (EVERY_J_UP_TO, DOUBLING_UP_TO) == (8, 64)
    assert shown_js([str(j) for j in range(1, k + 1)]) == [str(j) for j in shown]


@pytest.mark.parametrize(("modes", "more"), [
    (15, None),
    (16, "... and 1 more failure mode (results.json lists all)"),
    (40, "... and 25 more failure modes (results.json lists all)"),
])
def test_the_failure_modes_are_capped(modes: int, more: str | None) -> None:
    assert FAILURE_MODES_SHOWN == 15
    trials = runs("a", "f" * modes, fails=lambda n: ("state", f"state:m{n:02d}"))
    lines = render_terminal(summarize(trials, k=modes), [])
    start = lines.index("Failure modes (failed checks across trials, most frequent first)") + 3
    assert lines[start:start + 15] == [f"state   state:m{n:02d}  1         a[{n}]: state:m{n:02d} did not hold"
                                       for n in range(1, 16)]
    assert lines[start + 15:] == ([more] if more else [])


def test_a_run_of_115_tasks_at_k_174_fits_in_120_columns() -> None:
    """τ-bench retail's size at 20,010 trials, 9 tags: the pass^k table was 2,005
    characters wide and listed every task."""
    rng = random.Random(1)
    trials = []
    for i in range(115):
        p = rng.choice([1.0, 1.0, 0.0, rng.random()])
        trials += runs(f"task-{i:03d}", "".join("p" if rng.random() < p else "f" for _ in range(174)),
                       tags=(f"tag{i % 6}", f"group{i % 3}"))
    s = summarize(trials, k=174)
    lines = render_terminal(s, [])
    assert lines[2].split() == ["pass^k", "tasks", "pass^1", "pass^2", "pass^4", "pass^8", "pass^16", "pass^32",
                                "pass^64", "pass^174", "pass@174"]
    assert "pass^j for j = 1, 2, 4, 8, 16, 32, 64, 174; every j in results.json and report.html" in lines
    assert max(len(ln) for ln in lines) <= 120
    passed = sum(t["verdict"] == "passed" for t in s["tasks"])
    assert f"{passed} passed tasks not listed (-v or --sandtable-all-tasks lists them)" in lines
    assert "... and 53 more failure modes (results.json lists all)" in lines  # one per task that failed
    # 23 lines of pass^k, 68 tasks not passed and the count, 15 failure modes; 186 lines and
    # 2,011 characters wide (the pass^k table's) before
    assert len(lines) == 117


# --------------------------------------------------------------------------- pytest and the commands


def _many_tasks(n: int) -> str:
    tasks = "".join(f"""\
  - id: book-{i:02d}
    user: {{ opening: "Hi, MC 100101 about L-1001.", script: ["Deal."] }}
""" + BOOKS_L1001 for i in range(n))
    return DESK + "tasks:\n" + tasks


@pytest.mark.parametrize(("args", "listed"), [
    ((), False),
    (("--sandtable-all-tasks",), True),
    (("-v",), True),
])
def test_the_plugin_counts_passed_tasks_unless_asked(pytester: pytest.Pytester, args: tuple[str, ...],
                                                     listed: bool) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(_many_tasks(21), encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-agent=reference", "--sandtable-out=run", *args)
    assert result.ret == 0
    out = result.outlines
    assert ("21 passed tasks not listed (-v or --sandtable-all-tasks lists them)" in out) is not listed
    assert ("book-20  passed     1/1" in out) is listed


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_sandtable")
    sub = parser.add_subparsers(dest="command")
    add_subcommands(sub)
    add_regrade(sub)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


@pytest.mark.parametrize("command", [("report", "run"), ("merge", "run", "-o", "merged"),
                                     ("regrade", "run", "-o", "regraded")])
def test_the_commands_count_passed_tasks_unless_given_all_tasks(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], command: tuple[str, ...]) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(_many_tasks(21), encoding="utf-8")
    assert pytester.runpytest("-p", "no:cacheprovider", "--sandtable-agent=reference", "--sandtable-out=run").ret == 0
    capsys.readouterr()
    assert _cli(*command) == 0
    out = capsys.readouterr().out.splitlines()
    assert "21 passed tasks not listed (--all-tasks lists them)" in out and "book-20  passed     1/1" not in out
    assert _cli(*command, "--all-tasks") == 0
    out = capsys.readouterr().out.splitlines()
    assert "book-20  passed     1/1" in out and not any("not listed" in ln for ln in out)


def test_the_errored_trials_are_capped_with_a_count() -> None:
    # an endpoint that went down errors every trial: 16 listed would be one too many
    trials = runs("down", "e" * 16) + runs("fine", "pppp")
    lines = render_terminal(summarize(trials, k=16), [])
    start = lines.index("Errored trials (left out of pass^k)")
    assert lines[start + 1:start + 17] == [
        *(f"  down[{n}]: simulated user failed" for n in range(1, 16)),
        "  ... and 1 more errored trial (results.json lists all)",
    ]
    lines = render_terminal(summarize(runs("down", "e" * 15), k=15), [])
    start = lines.index("Errored trials (left out of pass^k)")
    assert lines[start + 15] == "  down[15]: simulated user failed"
    assert not any("more errored" in line for line in lines)
