"""Honest aggregates (issue 10): every pass^j with its 95% interval and pass@j beside it,
the interval of each task's pass rate, the tasks each j counts, scores per domain and
domain-scoped tags, failure clusters by likely owner, and provisional runs. Summaries
are built from TrialResult objects; the exact numbers and terminal lines are asserted."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from pytest_sandtable import TrialResult, summarize
from pytest_sandtable.engine.results import Check
from pytest_sandtable.report import stats
from pytest_sandtable.report.html import render_report
from pytest_sandtable.report.merge import merge_results
from pytest_sandtable.report.results_json import RunMeta, build_results, read_results, validate_results, write_run
from pytest_sandtable.report.summary import MIN_RESAMPLES, find_tag, task_verdict
from pytest_sandtable.report.terminal import render_terminal

NAMES = {"p": "passed", "f": "failed", "e": "errored"}


def runs(task: str, verdicts: str, *, domain: str = "shop", tags: tuple[str, ...] = (),
         shared: tuple[str, ...] = (), owners: str = "", pending: tuple[tuple[str, str], ...] = (),
         line: int = 1) -> list[TrialResult]:
    """One trial per letter (p passed, f failed, e errored); ``owners`` gives each failed
    trial's likely owner in turn (a: agent, t: task, u: user, -: none)."""
    who = iter(owners)
    out = []
    for i, v in enumerate(verdicts, 1):
        verdict = NAMES[v]
        attribution = None
        checks = []
        if verdict == "failed":
            checks = [Check("state", f"state:{task}#1", False, f"{task} did not happen")]
            owner = {"a": "agent", "t": "task", "u": "user"}.get(next(who, "-"))
            attribution = {"owner": owner, "evidence": f"{owner}: evidence of {task}[{i}]"} if owner else None
        out.append(TrialResult(
            domain=domain, task=task, trial=i, k=len(verdicts), seed=i, verdict=verdict, tags=list(tags),
            shared_tags=list(shared), checks=checks, attribution=attribution,
            pending=[{"kind": kind, "id": ident} for kind, ident in pending],
            error="simulated user failed" if verdict == "errored" else None,
            agent="desk", user="scripted", location=f"{domain}.sandtable.yaml:{line}"))
    return out


# --------------------------------------------------------------------------- 1. intervals, pass@k


def test_a_tasks_intervals_come_from_its_own_counts() -> None:
    (task,) = summarize(runs("a", "ppfp"), k=4)["tasks"]
    lo, hi = stats.wilson(3, 4) or (0.0, 0.0)
    assert (round(lo, 4), round(hi, 4)) == (0.3006, 0.9544)
    assert task["rate"] == 0.75 and task["rate_ci"] == [lo, hi]
    assert task["pass_hat"] == {"1": 0.75, "2": 0.5, "3": 0.25, "4": 0.0}
    assert task["pass_hat_ci"] == {"1": [lo, hi], "2": [lo**2, hi**2], "3": [lo**3, hi**3],
                                   "4": [0.0, hi**4]}  # lo^4 = 0.8%, stretched to hold pass^4 = 0
    # pass@j = 1 - C(n - c, j) / C(n, j): one failure in four cannot fill two draws
    assert task["pass_at"] == {"1": 0.75, "2": 1.0, "3": 1.0, "4": 1.0}
    assert task["pass_at_ci"]["2"] == [1 - (1 - lo) ** 2, 1.0]


def test_overall_and_tag_intervals_are_the_bootstrap_over_tasks_with_a_fixed_seed() -> None:
    trials = [t for i in range(10) for t in runs(f"t{i}", ["pppp", "ppfp", "pfff", "ffff"][i % 4], line=i,
                                                  tags=("even",) if i % 2 == 0 else ())]
    s = summarize(trials, k=4)
    counts = [(4, 4), (3, 4), (1, 4), (0, 4)] * 2 + [(4, 4), (3, 4)]
    table = stats.bootstrap_table(counts, [1, 2, 3, 4])
    assert s["pass_hat"]["1"] == pytest.approx(0.575)
    assert s["pass_hat_ci"] == {j: [min(iv[0], s["pass_hat"][j]), max(iv[1], s["pass_hat"][j])]
                                for j, iv in ((str(j), table["pass_hat"][j]) for j in (1, 2, 3, 4))}
    assert s["pass_hat_ci"]["1"] == [pytest.approx(0.3384, abs=1e-4), pytest.approx(0.8134, abs=1e-4)]
    # pass@j per task: 4/4 and 3/4 are 1 from j = 2; 1/4 is 0.5, 0.75, 1 at j = 2, 3, 4; 0/4 is 0
    assert s["pass_at"] == {"1": pytest.approx(0.575), "2": pytest.approx(0.7), "3": pytest.approx(0.75),
                            "4": pytest.approx(0.8)}
    assert summarize(list(reversed(trials)), k=4) == s  # same counts, same intervals
    even = s["tags"]["even"]
    assert even["tasks"] == 5 and even["pass_hat_tasks"] == {"1": 5, "2": 5, "3": 5, "4": 5}
    assert even["pass_hat"]["1"] == pytest.approx(0.7)
    assert even["pass_hat_ci"]["1"] == [pytest.approx(0.3372, abs=1e-4), pytest.approx(0.9872, abs=1e-4)]
    assert s["intervals"] == {"level": 0.95, "task": "wilson", "aggregate": "two-level bootstrap",
                              "resamples": 2000, "seed": 0}


def test_the_fast_bootstrap_agrees_with_resampling_tasks_then_trials() -> None:
    """bootstrap_table draws (trials, count) from the mixture of the tasks' predictive
    distributions: the same distribution as drawing a task, then its rate from the
    Jeffreys posterior Beta(c + 1/2, n - c + 1/2), then its count; the resamples are then
    centred on the estimate. A direct two-level resampling with another seed, centred
    the same way, lands on the same interval within resampling noise."""
    tasks = [(4, 4)] * 6 + [(3, 4)] * 5 + [(1, 4)] * 3 + [(0, 4)] * 2 + [(2, 3)]
    rng = random.Random(7)
    means = []
    for _ in range(4000):
        vals = []
        for _ in tasks:
            c, n = tasks[rng.randrange(len(tasks))]
            rate = rng.betavariate(c + 0.5, n - c + 0.5)
            x = sum(rng.random() < rate for _ in range(n))
            vals.append(stats.pass_hat(x, n, 2) or 0.0)
        means.append(sum(vals) / len(vals))
    # centred on the estimate, as bootstrap_table centres its resamples
    shift = (stats.mean_pass_hat(tasks, 2) or 0.0) - sum(means) / len(means)
    means = sorted(m + shift for m in means)
    direct = (means[100], means[3900])
    fast = stats.bootstrap_interval(tasks, 2)
    assert fast is not None
    assert fast[0] == pytest.approx(direct[0], abs=0.03) and fast[1] == pytest.approx(direct[1], abs=0.03)
    # a j only some tasks reach counts those tasks only
    # (the (1, 2) task would pull the low end down to 0: it cannot pass 3 of 2 trials)
    assert stats.bootstrap_intervals([(1, 2), (5, 5)], [3])[3] == (pytest.approx(0.3026, abs=1e-4), 1.0)


def test_large_runs_get_fewer_resamples_and_every_j() -> None:
    rng = random.Random(1)
    trials = []
    for i in range(115):
        p = rng.choice([1.0, 1.0, 0.0, rng.random()])
        trials += runs(f"t{i}", "".join("p" if rng.random() < p else "f" for _ in range(174)), line=i,
                       tags=(f"tag{i % 6}", f"group{i % 3}"))
    s = summarize(trials, k=174)
    assert s["intervals"]["resamples"] == MIN_RESAMPLES == 500  # 115 tasks x 174 trials, 9 tags
    assert len(s["pass_hat_ci"]) == len(s["pass_at_ci"]) == 174
    assert all(iv is not None and iv[0] <= s["pass_hat"][j] <= iv[1] for j, iv in s["pass_hat_ci"].items())
    small = summarize([t for i in range(50) for t in runs(f"t{i}", "ppfp", line=i)], k=4)
    assert small["intervals"]["resamples"] == 2000


# --------------------------------------------------------------------------- 2. flaky, and how flaky a pass may be


def test_flaky_means_a_pass_and_a_fail_were_seen_and_every_task_has_its_rate_interval() -> None:
    assert [task_verdict(8, c) for c in (8, 5, 0)] == ["passed", "flaky", "failed"]
    s = summarize(runs("steady", "pppppppp") + runs("shaky", "ppfppfpp"), k=8)
    steady, shaky = sorted(s["tasks"], key=lambda t: t["task"], reverse=True)
    assert (steady["verdict"], shaky["verdict"]) == ("passed", "flaky")
    assert steady["rate_ci"] == [pytest.approx(0.6756, abs=1e-4), 1.0]  # 8 of 8: may still fail 1 in 3
    assert shaky["rate_ci"] == [pytest.approx(0.4093, abs=1e-4), pytest.approx(0.9285, abs=1e-4)]
    lines = render_terminal(s)
    i = lines.index("task    verdict    passed    pass rate 95% CI    tags")
    assert lines[i + 2:i + 4] == ["shaky   flaky      6/8       41-93%",
                                  "steady  passed     8/8"]


# --------------------------------------------------------------------------- 3. pass^j over a changing task set


def test_a_task_with_fewer_than_j_graded_trials_is_counted_out_of_pass_j_and_the_table_says_so() -> None:
    s = summarize(runs("a", "ppep") + runs("b", "pfpf", line=2), k=4)
    assert s["pass_hat_tasks"] == {"1": 2, "2": 2, "3": 2, "4": 1}
    assert s["pass_hat"] == {"1": 0.75, "2": pytest.approx(7 / 12), "3": 0.5, "4": 0.0}
    lines = render_terminal(s)
    assert lines[2:7] == [
        "pass^k     tasks    pass^1    pass^2    pass^3    pass^4    pass@4",
        "---------  -------  --------  --------  --------  --------  --------",
        "all tasks  2        75.0%     58.3%     50.0%     0.0%*     100.0%*",
        "95% CI              24-100%   5-100%    5-100%    0-87%     13-100%",
        "* counts fewer tasks than pass^1: a task with fewer than j graded trials (errored ones are not graded) "
        "is left out of pass^j",
    ]
    assert "*" not in "".join(render_terminal(summarize(runs("a", "pppp") + runs("b", "pfpf", line=2), k=4)))


# --------------------------------------------------------------------------- 4. several domains


def _two_domains() -> list[TrialResult]:
    return (runs("refund", "ppfp", tags=("refunds", "money"), shared=("money",), owners="a")
            + runs("greet", "pppp", tags=("chat",), line=2)
            + runs("transfer", "pffp", domain="bank", tags=("money", "chat"), shared=("money",), owners="u-"))


def test_several_domains_are_scored_each_and_tags_are_scoped_unless_shared() -> None:
    s = summarize(_two_domains(), k=4)
    assert list(s["tags"]) == ["bank/chat", "money", "shop/chat", "shop/refunds"]
    assert s["tags"]["money"]["tasks"] == 2 and "domain" not in s["tags"]["money"]
    assert s["tags"]["shop/chat"]["domain"] == "shop"
    assert s["tags"]["money"]["pass_hat"]["1"] == pytest.approx((0.75 + 0.5) / 2)
    assert {d: (e["tasks"], e["pass_hat"]["1"]) for d, e in s["domain_scores"].items()} == {
        "bank": (1, 0.5), "shop": (2, 0.875)}
    lines = render_terminal(s)
    assert [ln.split("  ")[0] for ln in lines[4:18:2]] == [
        "all tasks", "domain bank", "domain shop", "tag bank/chat", "tag money", "tag shop/chat", "tag shop/refunds"]
    # one domain: tags as they are, no domain scores
    single = summarize(runs("greet", "pppp", tags=("chat",), shared=()), k=4)
    assert list(single["tags"]) == ["chat"] and "domain_scores" not in single


def test_a_tag_given_bare_finds_its_one_domain_scoped_form() -> None:
    tags = summarize(_two_domains(), k=4)["tags"]
    assert find_tag(tags, "money") == ("money", [])
    assert find_tag(tags, "refunds") == ("shop/refunds", [])
    assert find_tag(tags, "shop/refunds") == ("shop/refunds", [])
    assert find_tag(tags, "chat") == (None, ["bank/chat", "shop/chat"])
    assert find_tag(tags, "billing") == (None, [])


# --------------------------------------------------------------------------- 5. likely owners


def test_failed_trials_are_clustered_by_likely_owner() -> None:
    s = summarize(_two_domains() + runs("quote", "ffpf", line=3, owners="aat"), k=4)
    assert s["owners"] == [
        {"owner": "agent", "trials": 3, "tasks": ["shop/refund", "shop/quote"]},
        {"owner": "task", "trials": 1, "tasks": ["shop/quote"]},
        {"owner": "user", "trials": 1, "tasks": ["bank/transfer"]},
    ]
    modes = {m["id"]: m["owners"] for m in s["failure_modes"]}
    assert modes == {"state:quote#1": {"agent": 2, "task": 1}, "state:transfer#1": {"user": 1},
                     "state:refund#1": {"agent": 1}}
    lines = render_terminal(s)
    assert lines[lines.index("Failure modes (failed checks across trials, most frequent first)") + 6] == (
        "likely owners of 6 failed trials: agent 3, task 1, user 1, not attributed 1")
    assert not any("likely owners" in ln for ln in render_terminal(summarize(runs("a", "pf"), k=2)))


# --------------------------------------------------------------------------- 6. provisional runs


def test_a_run_under_drafted_items_is_provisional() -> None:
    trials = (runs("refund", "pppp", pending=(("rule", "refund-cap"),))
              + runs("greet", "pppp", line=2, pending=(("rule", "refund-cap"), ("task", "greet"))))
    s = summarize(trials, k=4)
    assert s["provisional"] == [{"domain": "shop", "kind": "rule", "id": "refund-cap", "trials": 8},
                                {"domain": "shop", "kind": "task", "id": "greet", "trials": 4}]
    assert render_terminal(s)[0] == (
        "sandtable: PROVISIONAL: 2 drafted items are pending review (rule refund-cap, task greet)")
    many = summarize(runs("a", "p", pending=tuple(("rule", f"r{i}") for i in range(7))), k=1)
    assert render_terminal(many)[0] == ("sandtable: PROVISIONAL: 7 drafted items are pending review "
                                        "(rule r0, rule r1, rule r2, rule r3, rule r4, and 2 more)")
    assert summarize(runs("a", "p"), k=1)["provisional"] == []


# --------------------------------------------------------------------------- results.json: new fields, old files


def _meta(k: int = 4) -> RunMeta:
    return RunMeta(domains=[{"name": "shop", "path": "shop.sandtable.yaml", "sha256": "0" * 64}], agent="desk",
                   user="scripted", k=k, run_seed=0, started_at="2026-03-01T09:30:12.000000Z",
                   finished_at="2026-03-01T09:30:13.000000Z")


def test_the_new_fields_match_the_schema() -> None:
    trials = _two_domains() + runs("quote", "ffpe", line=3, owners="at", pending=(("task", "quote"),))
    doc = build_results(trials, _meta())
    validate_results(doc)
    assert doc["tasks"][0]["rate_ci"] is not None
    doc["summary"]["pass_hat_ci"]["1"] = [0.2, 1.5]
    with pytest.raises(Exception, match="does not match the results schema"):
        validate_results(doc)


def _old(doc: dict[str, Any], version: str) -> dict[str, Any]:
    """The document as schema ``version`` (1.0 or 1.1) wrote it: none of 1.2's fields."""
    old = json.loads(json.dumps(doc))
    old["schema_version"] = version
    s = old["summary"]
    for key in ("pass_hat_ci", "pass_hat_tasks", "pass_at", "pass_at_ci", "domain_scores", "owners",
                "provisional", "intervals"):
        s.pop(key, None)
    s["tags"] = {tag: {"tasks": e["tasks"], "pass_hat": e["pass_hat"]} for tag, e in s["tags"].items()}
    for t in s["tasks"]:
        for key in ("rate", "rate_ci", "pass_hat_ci", "pass_at", "pass_at_ci"):
            t.pop(key)
    for m in s["failure_modes"]:
        m.pop("owners")
    for t in old["tasks"]:
        t.pop("rate_ci")
    for t in old["trials"]:
        for key in ("shared_tags", "pending", "attribution"):
            t.pop(key)
    return old


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_an_older_file_reads_renders_and_merges(tmp_path: Path, version: str) -> None:
    doc = build_results(runs("a", "ppep") + runs("b", "pfpf", line=2, owners="aa"), _meta())
    old = _old(doc, version)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    back = read_results(path)
    lines = render_terminal(back["summary"])
    assert lines[2:5] == [
        "pass^k     tasks    pass^1    pass^2    pass^3    pass^4",
        "---------  -------  --------  --------  --------  --------",
        "all tasks  2        75.0%     58.3%     50.0%     0.0%",
    ]
    assert not any("95% CI" in ln or "likely owners" in ln or "PROVISIONAL" in ln for ln in lines)
    html = (write_run(back, tmp_path / "again") / "report.html").read_text(encoding="utf-8")
    assert "95% CI" not in html.split('id="overview"')[1].split("</section>")[0]
    assert "pass@" not in html and 'id="provisional"' not in html
    merged = merge_results([("old", back)])
    validate_results(merged)
    assert merged["summary"]["pass_hat_tasks"] == {"1": 2, "2": 2, "3": 2, "4": 1}
    assert merged["summary"]["owners"] == []  # the old trials carry no attribution


# --------------------------------------------------------------------------- report.html


def test_the_report_shows_intervals_owners_domains_and_the_provisional_banner() -> None:
    trials = _two_domains()
    for t in trials:
        if t.domain == "shop":
            t.pending = [{"kind": "rule", "id": "refund-cap"}]
    html = render_report(build_results(trials, _meta()))
    assert "<title>sandtable: pass^4 33.3% · shop (provisional)</title>" in html
    assert ('<h2>Provisional: 1 drafted item is pending review</h2>' in html
            and "rule <code>shop/refund-cap</code>" in html)
    assert '<div class="ci" id="headline-ci">95% CI 0-93%</div>' in html
    assert "domain <b>bank</b>" in html and "shop/refunds" in html
    assert "<h3 class=\"sub-h\">Likely owners of 3 failed trials</h3>" in html
    assert ('likely owner: <span class="who-owns">user</span></b> <span class="evidence">'
            "user: evidence of transfer[2]</span>") in html
