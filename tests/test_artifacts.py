"""results.json and report.html: what a run leaves behind, its schema, reading it back,
atomic writes, secrets, the run folder the terminal names, JUnit XML properties and
the same results under xdist."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_sandtable import __version__
from pytest_sandtable.engine.results import Check, TrialResult, Violation
from pytest_sandtable.report.results_json import (
    REDACTED,
    ResultsError,
    RunMeta,
    build_results,
    default_run_dir,
    read_results,
    results_schema,
    safe_url,
    secret_values,
    validate_results,
    write_run,
)

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import (
    PLUGIN_ARGS,
    make_shop,
    only_results,
    run_dirs,
    strip_timings,
)

REPO = Path(__file__).resolve().parents[1]
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture
def shop(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("SHOP_FAIL", "SHOP_CRASH", "SHOP_SAY"):
        monkeypatch.delenv(var, raising=False)
    return make_shop(pytester)


# --------------------------------------------------------------------------- a run's results.json


def test_a_run_writes_results_json_and_report_html_and_names_the_folder(
    pytester: pytest.Pytester, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_FAIL", "greet:2")
    result = pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=2")
    result.assert_outcomes(passed=5, failed=1)
    (folder,) = run_dirs(pytester.path)
    assert re.fullmatch(r"\d{8}T\d{6}Z-shop", folder.name)
    assert sorted(p.name for p in folder.iterdir()) == ["report.html", "results.json"]
    result.stdout.fnmatch_lines([f"sandtable: results in .sandtable/runs/{folder.name}{os.sep}"])
    assert "sandtable gate" not in result.stdout.str()  # no gate set, and the critical task passed


def test_every_field_of_results_json(pytester: pytest.Pytester, shop: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_FAIL", "greet:2,refund:1")
    pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=2", "--sandtable-seed=7", "--sandtable-timeout=30")
    doc = only_results(pytester.path)
    jsonschema.Draft202012Validator(results_schema()).validate(doc)  # read_results did too; say it plainly

    assert doc["schema_version"] == "1.6"
    assert doc["writer"] == {"name": "pytest-sandtable", "version": __version__, "command": "pytest"}
    run = doc["run"]
    assert run["domains"] == [
        {"name": "shop", "path": "sandtable.yaml", "sha256": hashlib.sha256(shop.read_bytes()).hexdigest()}
    ]
    assert (run["agent"], run["user"], run["k"], run["run_seed"]) == ("reference", "scripted", 2, 7)
    assert run["options"] == {
        "agent_base_url": None, "user_base_url": None, "temperature": None, "timeout": 30.0,
        "trial_timeout": 900.0, "retries": 4, "concurrency": 1, "prices": None, "fail_under": None, "floors": {},
    }
    assert ISO.match(run["started_at"]) and ISO.match(run["finished_at"])
    assert run["started_at"] <= run["finished_at"]
    assert "shards" not in run
    assert run["collection_errors"] == []  # every domain file loaded

    # trials: in task order (file order), then trial number
    assert [(t["task"], t["trial"], t["verdict"]) for t in doc["trials"]] == [
        ("refund", 1, "failed"), ("refund", 2, "passed"),
        ("greet", 1, "passed"), ("greet", 2, "failed"),
        ("order-status", 1, "passed"), ("order-status", 2, "passed"),
    ]
    refund = doc["trials"][1]
    assert refund["domain"] == "shop" and refund["k"] == 2 and refund["critical"] is True
    assert refund["tags"] == ["refunds"] and refund["error"] is None and isinstance(refund["seed"], int)
    assert refund["agent"] == "shop-agent" and refund["user"] == "scripted"
    assert refund["location"] == "sandtable.yaml:41"
    assert refund["transcript"] == [
        {"role": "user", "text": "Hi, I'm customer C-1. Please refund 20 for my broken mug.", "turn": 0},
        {"role": "tool", "call": 0},
        {"role": "tool", "call": 1},
        {"role": "agent", "text": "Done: refund R-1 of 20 is on its way.", "turn": 1},
    ]
    assert refund["calls"][1] == {
        "index": 1, "turn": 1, "tool": "issue_refund", "args": {"customer_id": "C-1", "amount": 20.0},
        "ok": True, "result": {"customer_id": "C-1", "amount": 20.0, "refund_id": "R-1"}, "error": None,
        "violations": [],
    }
    assert refund["diff"] == {
        "created": [{"table": "refunds", "key": "R-1", "row": {"customer_id": "C-1", "amount": 20.0,
                                                                 "refund_id": "R-1"}}],
        "changed": [],
    }
    assert refund["checks"] == [{"kind": "state", "id": "state:refunds[where]#1", "passed": True, "detail": ""}]
    assert refund["usage"] == {"agent": {}, "user": {}}
    assert len(refund["latency"]) == 1 and refund["duration"] >= 0
    failed = doc["trials"][0]
    assert failed["checks"][0]["passed"] is False
    assert failed["checks"][0]["detail"] == 'refunds where customer_id="C-1", amount=20: 0 rows, expected 1'

    # the Wilson 95% interval of a success rate: 1 of 2 is 9.5-90.5%, 2 of 2 still 34.2-100%
    half, whole = [pytest.approx(0.0945312, abs=1e-6), pytest.approx(0.9054688, abs=1e-6)], \
        [pytest.approx(0.3423802, abs=1e-6), 1.0]
    assert doc["tasks"] == [
        {"domain": "shop", "task": "refund", "verdict": "flaky", "critical": True, "tags": ["refunds"],
         "trials": 2, "graded": 2, "passed": 1, "errored": 0, "rate_ci": half},
        {"domain": "shop", "task": "greet", "verdict": "flaky", "critical": False, "tags": ["chat"],
         "trials": 2, "graded": 2, "passed": 1, "errored": 0, "rate_ci": half},
        {"domain": "shop", "task": "order-status", "verdict": "passed", "critical": False, "tags": ["chat"],
         "trials": 2, "graded": 2, "passed": 2, "errored": 0, "rate_ci": whole},
    ]
    s = doc["summary"]
    assert s["pass_hat"] == {"1": pytest.approx(4 / 6), "2": pytest.approx(1 / 3)}
    assert s["pass_hat_tasks"] == {"1": 3, "2": 3}
    assert s["pass_at"] == {"1": pytest.approx(4 / 6), "2": 1.0}
    assert set(s["pass_hat_ci"]) == set(s["pass_at_ci"]) == {"1", "2"}
    assert s["intervals"] == {"level": 0.95, "task": "wilson", "aggregate": "two-level bootstrap",
                              "resamples": 2000, "seed": 0}
    assert s["provisional"] == [] and "domain_scores" not in s  # nothing pending; one domain
    assert s["tags"]["chat"]["pass_hat"] == {"1": 0.75, "2": 0.5}
    assert [m["id"] for m in s["failure_modes"]] == ["reply:Hello", "state:refunds[where]#1"]
    assert doc["gate"] == {
        "set": False, "passed": False, "fail_under": None, "floors": {},
        "lines": ["sandtable gate failed: critical tasks fail the run even with no gate set: "
                  "critical task refund failed 1 of 2 trials ([1])"],
        "checks": [{"passed": False, "text": "critical task refund failed 1 of 2 trials ([1])"}],
    }


def test_a_violation_is_recorded_on_its_call_and_the_trial() -> None:
    cap = Violation("refund-cap", "limit", False, "issue_refund amount=500 exceeds 100", 1, 0)
    doc = build_results([_trial(verdict="failed", violations=[cap])], _meta())
    validate_results(doc)
    assert doc["trials"][0]["violations"][0] == {
        "invariant": "refund-cap", "kind": "limit", "soft": False, "detail": "issue_refund amount=500 exceeds 100",
        "turn": 1, "call": 0, "quote": None,
    }


def test_no_domain_files_means_nothing_written(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=1)
    assert not (pytester.path / ".sandtable").exists()
    assert "sandtable: results in" not in result.stdout.str()


def test_sandtable_out_names_the_folder(pytester: pytest.Pytester, shop: Path) -> None:
    result = pytester.runpytest(*PLUGIN_ARGS, "--sandtable-out", "ci/artefacts")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"sandtable: results in ci{os.sep}artefacts{os.sep}"])
    doc = read_results(pytester.path / "ci" / "artefacts" / "results.json")
    assert doc["summary"]["pass_hat"] == {"1": 1.0}
    assert (pytester.path / "ci" / "artefacts" / "report.html").is_file()
    assert not (pytester.path / ".sandtable").exists()


def test_a_folder_that_cannot_be_written_fails_the_run_saying_why(pytester: pytest.Pytester, shop: Path) -> None:
    (pytester.path / "taken").write_text("a file, not a folder", encoding="utf-8")
    result = pytester.runpytest(*PLUGIN_ARGS, "--sandtable-out", "taken")
    result.assert_outcomes(passed=3)
    assert result.ret == 1
    result.stdout.re_match_lines(
        [r"^sandtable: could not write results\.json and report\.html: \[Errno 17\] File exists"]
    )


def test_two_runs_in_the_same_second_get_two_folders(tmp_path: Path) -> None:
    from datetime import datetime, timezone

    now = datetime(2026, 3, 1, 9, 30, 12, tzinfo=timezone.utc)
    a = default_run_dir(tmp_path, ["shop"], now)
    b = default_run_dir(tmp_path, ["shop"], now)
    c = default_run_dir(tmp_path, ["shop", "clinic"], now)
    assert [a.name, b.name, c.name] == ["20260301T093012Z-shop", "20260301T093012Z-shop-2", "20260301T093012Z-multi"]


# --------------------------------------------------------------------------- domain files that did not load

BROKEN = "version: 1\nname: broken\ntasks:\n  - id: x\n    tags: [billing]\n"


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("gate", [(), ("--sandtable-fail-under", "50")], ids=["no-gate", "fail-under"])
def test_a_domain_file_that_did_not_load_is_in_results_json_report_html_and_the_gate(
    pytester: pytest.Pytester, shop: Path, workers: str, gate: tuple[str, ...]
) -> None:
    pytest.importorskip("xdist")
    (pytester.path / "suite").mkdir()
    (pytester.path / "suite" / "broken.sandtable.yaml").write_text(BROKEN, encoding="utf-8")
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=2", "-n", workers, *gate)
    result.assert_outcomes(passed=6, errors=1)
    assert result.ret == 1  # a missing domain never looks like a pass, gate or no gate
    doc = only_results(pytester.path)
    assert doc["run"]["collection_errors"] == [
        {"path": "suite/broken.sandtable.yaml",
         "message": "suite/broken.sandtable.yaml:1:1: missing required key 'tools'"},
    ]
    assert doc["summary"]["pass_hat"] == {"1": 1.0, "2": 1.0}  # the figures cover the loaded domain only...
    assert doc["gate"]["passed"] is False  # ...so the outcome says what is missing
    missing = ("domain file suite/broken.sandtable.yaml did not load (a collection error), so none of its tasks "
               "ran")
    no_gate = "" if gate else "a domain file that did not load fails the run even with no gate set: "
    lines = [f"sandtable gate failed: {no_gate}{missing}"]
    if gate:
        lines += [f"  failed: {missing}",
                  "  passed: pass^2 100.0% meets --sandtable-fail-under 50% with 50.0 points to spare"]
    assert doc["gate"]["lines"] == lines
    result.stdout.fnmatch_lines([
        "sandtable: 1 domain file did not load, so its tasks are not in these results: suite/broken.sandtable.yaml",
        *lines,
    ], consecutive=True)

    html = (run_dirs(pytester.path)[0] / "report.html").read_text(encoding="utf-8")
    banner = html.index('<section id="not-loaded"')
    assert banner < html.index('id="overview"')  # at the top, before the score
    assert "1 domain file did not load: suite/broken.sandtable.yaml</h2>" in html
    assert "suite/broken.sandtable.yaml:1:1: missing required key &#x27;tools&#x27;" in html
    assert "(1 domain file did not load)</title>" in html


def test_a_run_whose_only_domain_did_not_load_still_writes_what_happened(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    (pytester.path / "broken.sandtable.yaml").write_text(BROKEN, encoding="utf-8")
    result = pytester.runpytest(*PLUGIN_ARGS, "--sandtable-fail-under", "50")
    assert result.ret == 1
    (folder,) = run_dirs(pytester.path)
    assert folder.name.endswith("-run")
    doc = read_results(folder)
    assert doc["trials"] == [] and doc["run"]["domains"] == []
    assert [c["path"] for c in doc["run"]["collection_errors"]] == ["broken.sandtable.yaml"]
    assert doc["gate"]["lines"][0] == (
        "sandtable gate failed: domain file broken.sandtable.yaml did not load (a collection error), so none of its "
        "tasks ran (and 1 more failure)"
    )


def test_a_broken_plain_test_file_is_not_a_domain_collection_error(pytester: pytest.Pytester, shop: Path) -> None:
    pytester.makepyfile(test_broken="import nowhere_to_be_found\n")
    result = pytester.runpytest(*PLUGIN_ARGS, "--continue-on-collection-errors")
    result.assert_outcomes(passed=3, errors=1)
    doc = only_results(pytester.path)
    assert doc["run"]["collection_errors"] == []
    assert doc["gate"]["passed"] is True


# --------------------------------------------------------------------------- xdist: same results


@pytest.mark.parametrize("workers", ["2", "4"])
def test_xdist_gives_the_same_results_json_but_timings(pytester: pytest.Pytester, workers: str) -> None:
    shutil.copytree(REPO / "example_domains" / "freight", pytester.path / "freight")
    make_shop(pytester, folder="shop")
    args = (*PLUGIN_ARGS, "--sandtable-k=3")
    serial = pytester.runpytest_subprocess(*args, "-n", "0", "--sandtable-out", "serial")
    parallel = pytester.runpytest_subprocess(*args, "-n", workers, "--sandtable-out", "parallel")
    assert serial.ret == parallel.ret == 1  # the freight desk agent slips in some trials
    a = read_results(pytester.path / "serial")
    b = read_results(pytester.path / "parallel")
    assert len(a["trials"]) == 3 * (17 + 3)
    assert strip_timings(a) == strip_timings(b)
    assert a != b  # the timings do differ; they are all that does


# --------------------------------------------------------------------------- JUnit XML


def test_junit_xml_carries_task_trial_tags_and_verdict(
    pytester: pytest.Pytester, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_FAIL", "greet:2")
    pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=2", "--junitxml=junit.xml")
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    assert props["greet[2-2]"] == {
        "sandtable.domain": "shop", "sandtable.task": "greet", "sandtable.trial": "2", "sandtable.tags": "chat",
        "sandtable.verdict": "failed", "sandtable.critical": "false",
    }
    assert props["refund[1-2]"]["sandtable.verdict"] == "passed"
    assert props["refund[1-2]"]["sandtable.critical"] == "true"
    assert len(props) == 6


# --------------------------------------------------------------------------- secrets


def test_secret_env_values_never_reach_the_files(
    pytester: pytest.Pytester, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-fake-0123456789abcdef"
    monkeypatch.setenv("SHOP_API_KEY", secret)
    monkeypatch.setenv("SHOP_SAY", f" (my key is {secret})")
    result = pytester.runpytest(*PLUGIN_ARGS, "--sandtable-agent-base-url", "https://bob:hunter22@llm.example/v1?key=x")
    assert result.ret == 0
    (folder,) = run_dirs(pytester.path)
    for name in ("results.json", "report.html"):
        text = (folder / name).read_text(encoding="utf-8")
        assert secret not in text
        assert REDACTED in text
        assert "hunter22" not in text
    doc = read_results(folder)
    assert doc["trials"][0]["transcript"][-1]["text"] == "Done: refund R-1 of 20 is on its way. (my key is [redacted])"
    assert doc["run"]["options"]["agent_base_url"] == "https://llm.example/v1"


def test_scrubber_reaches_keys_numbers_and_escaped_forms(tmp_path: Path) -> None:
    env = {
        "ANTHROPIC_API_KEY": 'key"with\\quote<&>',
        "OPENAI_API_KEY": "31415926535",
        "GH_TOKEN": "ghp_fake_token_value",
        "APP_SECRET": "s3cr3t-value",
        "SHORT_TOKEN": "abc",  # too short to be a secret: left alone
        "NOT_A_KEY": "plain-value-here",
    }
    t = _trial()
    t.transcript = [{"role": "agent", "text": f"{env['ANTHROPIC_API_KEY']} and ghp_fake_token_value", "turn": 1}]
    t.calls = [{"index": 0, "turn": 1, "tool": "lookup_customer", "args": {"s3cr3t-value": 31415926535},
                "ok": True, "result": {"abc": "plain-value-here"}, "error": None, "violations": []}]
    t.transcript.append({"role": "tool", "call": 0})
    out = write_run(build_results([t], _meta()), tmp_path, env=env)
    for name in ("results.json", "report.html"):
        text = (out / name).read_text(encoding="utf-8")
        for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GH_TOKEN", "APP_SECRET"):
            for form in (env[var], json.dumps(env[var])[1:-1]):
                assert form not in text, (name, var)
        assert "plain-value-here" in text and '"abc"' in text.replace("&quot;", '"')
    doc = read_results(out)
    call = doc["trials"][0]["calls"][0]
    assert call["args"] == {REDACTED: REDACTED}
    assert doc["trials"][0]["transcript"][0]["text"] == f"{REDACTED} and {REDACTED}"
    assert secret_values(env) == ["ghp_fake_token_value", 'key"with\\quote<&>', "s3cr3t-value", "31415926535"]


def test_safe_url_drops_credentials_query_and_fragment() -> None:
    assert safe_url("https://user:pw@api.example:8443/v1?api-key=1#x") == "https://api.example:8443/v1"
    assert safe_url(None) is None


# --------------------------------------------------------------------------- atomic writes


def test_writes_are_atomic_and_leave_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = build_results([_trial()], _meta())
    write_run(first, tmp_path)
    before = (tmp_path / "results.json").read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        write_run(build_results([_trial(verdict="failed")], _meta()), tmp_path)
    assert (tmp_path / "results.json").read_bytes() == before  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "results.json"]


# --------------------------------------------------------------------------- reading back


def _write(tmp_path: Path, content: Any) -> Path:
    p = tmp_path / "results.json"
    p.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return p


def _good() -> dict[str, Any]:
    return build_results([_trial()], _meta())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "not valid JSON (the file is empty): Expecting value at line 1 column 1"),
        ('{"schema_version": "1.0",', "not valid JSON: Expecting property name enclosed in double quotes at line 1 "
                                      "column 26"),
        ([1, 2], "expected a JSON object at the top, got list"),
        ({"trials": []}, "no schema_version: this is not a pytest-sandtable results.json"),
        ({"schema_version": 1}, "schema_version 1 is not MAJOR.MINOR, e.g. '1.6'"),
        ({"schema_version": "2.0", "writer": {"name": "pytest-sandtable", "version": "9.0.0"}},
         f"written with results schema 2.0 by pytest-sandtable 9.0.0; this pytest-sandtable ({__version__}) reads "
         "schema 1.x only: upgrade pytest-sandtable to read it"),
    ],
)
def test_a_bad_file_is_one_clear_error(tmp_path: Path, content: Any, message: str) -> None:
    p = _write(tmp_path, content)
    with pytest.raises(ResultsError) as info:
        read_results(p)
    assert str(info.value) == f"{p}: {message}"


def test_a_missing_file_and_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match=r"results\.json: no such file$"):
        read_results(tmp_path)  # a folder means its results.json
    write_run(_good(), tmp_path)
    assert read_results(tmp_path)["schema_version"] == "1.6"


def test_schema_problems_name_the_field(tmp_path: Path) -> None:
    doc = _good()
    doc["trials"][0]["verdict"] = "maybe"
    del doc["summary"]["pass_hat"]
    p = _write(tmp_path, doc)
    with pytest.raises(ResultsError) as info:
        read_results(p)
    assert str(info.value) == (
        f"{p}: does not match the results schema 1.5 (2 problems):\n"
        "  summary: 'pass_hat' is a required property\n"
        "  trials[0].verdict: 'maybe' is not one of ['passed', 'failed', 'errored']"
    )


def test_a_newer_minor_version_with_new_fields_is_read(tmp_path: Path) -> None:
    doc = _good()
    doc["schema_version"] = "1.7"
    doc["run"]["something_new"] = {"x": 1}
    doc["trials"][0]["owner_of_it"] = "agent"
    assert read_results(_write(tmp_path, doc))["run"]["something_new"] == {"x": 1}
    doc["schema_version"] = "1.2"
    with pytest.raises(ResultsError, match="Additional properties are not allowed"):
        read_results(_write(tmp_path, doc))


def test_a_file_of_the_older_minor_version_1_0_is_read_and_rendered(tmp_path: Path) -> None:
    """Schema 1.0 had no run.collection_errors and no gate.checks."""
    doc = build_results([_trial(verdict="failed")], _meta(), fail_under=50)
    doc["schema_version"] = "1.0"
    assert "collection_errors" not in doc["run"]  # RunMeta without them: not recorded
    del doc["gate"]["checks"]
    doc["gate"]["lines"] = ["sandtable gate failed: pass^1 0.0% is below --sandtable-fail-under 50% by 50.0 points"]
    back = read_results(_write(tmp_path, doc))
    assert back["schema_version"] == "1.0"
    html = write_run(back, tmp_path / "again") / "report.html"
    text = html.read_text(encoding="utf-8")
    assert "did not load" not in text
    assert "pass^1 0.0% is below --sandtable-fail-under 50% by 50.0 points" in text


def _required_paths(schema: dict[str, Any]) -> list[tuple[str, ...]]:
    """(path to an object, required key) for the top level, run, one trial, one call and the summary."""
    defs = schema["$defs"]
    out = [("", k) for k in schema["required"]]
    out += [("run", k) for k in defs["run"]["required"]]
    out += [("trials.0", k) for k in defs["trial"]["required"]]
    out += [("trials.0.calls.0", k) for k in defs["call"]["required"]]
    out += [("trials.0.checks.0", k) for k in defs["check"]["required"]]
    out += [("trials.0.violations.0", k) for k in defs["violation"]["required"]]
    out += [("tasks.0", k) for k in defs["task_verdict"]["required"]]
    out += [("summary", k) for k in defs["summary"]["required"]]
    out += [("gate", k) for k in defs["gate"]["required"]]
    return out


def _full() -> dict[str, Any]:
    t = _trial(verdict="failed", violations=[Violation("refund-cap", "limit", False, "too much", 1, 0)])
    t.calls = [{"index": 0, "turn": 1, "tool": "issue_refund", "args": {"amount": 500}, "ok": False, "result": None,
                "error": {"code": 400, "message": "no"}, "violations": ["refund-cap"]}]
    return build_results([t], _meta())


@pytest.mark.parametrize(("where", "key"), _required_paths(results_schema()), ids=lambda x: x or "top")
def test_every_required_field_is_checked(where: str, key: str) -> None:
    doc = _full()
    validate_results(doc)
    node: Any = doc
    for part in filter(None, where.split(".")):
        node = node[int(part)] if part.isdigit() else node[part]
    del node[key]
    expected = "no schema_version" if key == "schema_version" else f"'{re.escape(key)}' is a required property"
    with pytest.raises(ResultsError, match=expected):
        validate_results(doc)


@pytest.mark.parametrize(
    ("path", "bad"),
    [
        ("writer.name", "someone-else"), ("run.k", 0), ("run.started_at", "yesterday"),
        ("run.domains.0.sha256", "abc"), ("run.options.api_key", "x"), ("trials.0.trial", 0),
        ("trials.0.transcript.0.role", "system"), ("trials.0.calls.0.error.code", "400"),
        ("trials.0.diff.changed", [{"table": "t", "key": 1}]), ("trials.0.latency", [-1]),
        ("tasks.0.verdict", "errored"), ("summary.pass_hat.1", 1.5), ("summary.pass_hat.j", 0.5),
        ("gate.fail_under", 101), ("summary.soft_rules", [{"id": "x"}]),
    ],
)
def test_wrong_values_are_refused(path: str, bad: Any) -> None:
    doc = _full()
    node: Any = doc
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[int(last) if last.isdigit() else last] = bad
    with pytest.raises(ResultsError, match="does not match the results schema"):
        validate_results(doc)


def test_cost_in_the_summary_is_allowed() -> None:
    doc = _good()
    doc["summary"]["cost"] = {"total_usd": 0.42, "agent": {"model-x": 0.4}}
    validate_results(doc)


# --------------------------------------------------------------------------- helpers


def _trial(verdict: str = "passed", violations: list[Violation] | None = None) -> TrialResult:
    checks = [Check("state", "state:refunds[where]#1", verdict == "passed", "" if verdict == "passed" else "0 rows")]
    return TrialResult(
        domain="shop", task="refund", trial=1, k=1, seed=11, verdict=verdict, tags=["refunds"], ended_by="script_end",
        turns=1, agent="shop-agent", user="scripted", checks=checks, violations=violations or [],
        transcript=[{"role": "user", "text": "Hi", "turn": 0}, {"role": "agent", "text": "Hello", "turn": 1}],
        usage={"agent": {}, "user": {}}, latency=[0.001], duration=0.002, location="sandtable.yaml:41",
    )


def _meta() -> RunMeta:
    return RunMeta(domains=[{"name": "shop", "path": "sandtable.yaml", "sha256": "0" * 64}], agent="reference",
                   user="scripted", k=1, run_seed=0, started_at="2026-03-01T09:30:12.000000Z",
                   finished_at="2026-03-01T09:30:13.000000Z")
