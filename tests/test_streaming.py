"""A run's trials stream to disk as they finish (``report.spool``): the recorder keeps
only what the summary reads, pytest's reports drop the trial once it is spooled, and
results.json and report.html are written from the spool one trial at a time, the same
bytes the in-memory writer gives for the same trials. Nothing of the spool is left behind."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.engine.results import Check, TrialResult
from pytest_sandtable.report.results_json import RunMeta, build_results, build_spooled, read_results, write_run
from pytest_sandtable.report.spool import SpooledTrials, TrialSpool, summary_view
from pytest_sandtable.report.terminal import render_terminal

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS

FREIGHT = Path(__file__).resolve().parent.parent / "example_domains" / "freight"
TASKS = len(st.load_domain(FREIGHT / "sandtable.yaml").tasks)

# a conftest beside the domain: after the run, says whether any report or item still
# holds a trial (pytest keeps every report to the end; the items live as long)
HOLDERS = """
def pytest_terminal_summary(terminalreporter):
    reports = [r for key in ("passed", "failed", "error") for r in terminalreporter.stats.get(key, [])]
    carried = sum(hasattr(r, "sandtable") for r in reports)
    held = sum(getattr(it, "sandtable_result", None) is not None for it in terminalreporter._session.items)
    terminalreporter.write_line(f"HOLDERS reports={len(reports)} carrying={carried} items-holding={held}")
"""


@pytest.fixture
def freight(pytester: pytest.Pytester) -> pytest.Pytester:
    """The freight example (its domain, its desk agent, which slips in a quarter of the trials)."""
    for name in ("sandtable.yaml", "desk_agent.py"):
        shutil.copy(FREIGHT / name, pytester.path / name)
    conftest = (FREIGHT / "conftest.py").read_text(encoding="utf-8")
    (pytester.path / "conftest.py").write_text(conftest + HOLDERS, encoding="utf-8")
    return pytester


def _run_dir(root: Path) -> Path:
    (run,) = (root / ".sandtable" / "runs").iterdir()  # the run's folder, and no spool beside it
    return run


def _meta(doc: dict[str, Any]) -> RunMeta:
    """The run of a results.json as the writer takes it."""
    run = doc["run"]
    return RunMeta(domains=list(run["domains"]), agent=run["agent"], user=run["user"], k=run["k"],
                   run_seed=run["run_seed"], options=dict(run["options"]), started_at=run["started_at"],
                   finished_at=run["finished_at"], collection_errors=run.get("collection_errors"),
                   stopped_early=run.get("stopped_early"))


def _assert_in_memory_writer_agrees(run: Path, tmp: Path, stdout: list[str]) -> dict[str, Any]:
    """The files written from the spool are, byte for byte, those the in-memory path
    writes for the same trials and run; the terminal showed the summary's lines."""
    doc = read_results(run)
    again = build_results(doc["trials"], _meta(doc))
    again["coverage"] = doc["coverage"]  # the run's policy coverage, computed at its end (1.4)
    write_run(again, tmp / "again")
    for name in ("results.json", "report.html"):
        assert (tmp / "again" / name).read_bytes() == (run / name).read_bytes(), name
    lines = render_terminal(again["summary"])
    start = stdout.index(lines[0])
    assert stdout[start:start + len(lines)] == lines
    return doc


def test_a_run_of_hundreds_of_trials_writes_from_the_spool_what_the_in_memory_writer_does(
    freight: pytest.Pytester, tmp_path: Path
) -> None:
    result = freight.runpytest(*PLUGIN_ARGS, "--sandtable-k=20", "--sandtable-seed=3")
    assert result.ret == 1  # the desk agent slips
    run = _run_dir(freight.path)
    assert sorted(p.name for p in run.iterdir()) == ["report.html", "results.json"]
    doc = _assert_in_memory_writer_agrees(run, tmp_path, result.outlines)
    n = TASKS * 20  # 340 for the example's 17 tasks
    assert len(doc["trials"]) == n
    s = doc["summary"]
    assert s["trials"] == n and s["failed"] > 0 and s["passed"] + s["failed"] + s["errored"] == n
    assert any(t["transcript"] and t["calls"] for t in doc["trials"])  # whole trials, not the light ones
    # no report and no item holds a trial at the end of the run: the spool has them
    result.stdout.fnmatch_lines([f"HOLDERS reports={n} carrying=0 items-holding=0"])


@pytest.mark.usefixtures("freight")
def test_under_xdist_the_controller_spools_and_drops_every_trial(freight: pytest.Pytester, tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    result = freight.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=8", "--sandtable-seed=3", "-n", "2")
    assert result.ret == 1
    run = _run_dir(freight.path)
    assert sorted(p.name for p in run.iterdir()) == ["report.html", "results.json"]
    doc = _assert_in_memory_writer_agrees(run, tmp_path, result.outlines)
    assert len(doc["trials"]) == TASKS * 8
    # the controller collects no item; its reports arrive from the workers, and keep no trial
    result.stdout.fnmatch_lines([f"HOLDERS reports={TASKS * 8} carrying=0 items-holding=0"])


def test_the_spool_goes_where_the_results_go_and_leaves_nothing(freight: pytest.Pytester) -> None:
    result = freight.runpytest(*PLUGIN_ARGS, "--sandtable-k=2", "--sandtable-out", "ci/out")
    assert result.ret == 1
    assert sorted(p.name for p in (freight.path / "ci" / "out").iterdir()) == ["report.html", "results.json"]
    assert not (freight.path / ".sandtable").exists()


# --------------------------------------------------------------------------- the spool itself


def _trial(task: str, trial: int, verdict: str = "passed", *, line: int = 1, **kw: Any) -> TrialResult:
    return TrialResult(domain="shop", task=task, trial=trial, k=2, seed=trial, verdict=verdict,
                       location=f"shop.yaml:{line}", agent=kw.pop("agent", "a"), user=kw.pop("user", "u"), **kw)


def test_spooled_trials_read_back_in_results_order_any_number_of_times(tmp_path: Path) -> None:
    spool = TrialSpool(tmp_path, secrets=[])
    talk = [{"role": "user", "text": "hi", "turn": 1}, {"role": "agent", "text": "hello", "turn": 1}]
    failed = Check("reply", "reply:includes#0", False, "the reply did not say 'booked'")
    spool.add(_trial("b", 2, "failed", line=9, transcript=talk, checks=[Check("state", "s#0", True, ""), failed]))
    spool.add(_trial("a", 1, line=5, transcript=talk))
    spool.add(_trial("b", 1, line=9))
    assert len(spool) == 3
    light, stored = spool.ordered()
    assert [(t.task, t.trial) for t in light] == [("a", 1), ("b", 1), ("b", 2)]
    assert isinstance(stored, SpooledTrials) and len(stored) == 3
    assert [(t["task"], t["trial"]) for t in stored] == [("a", 1), ("b", 1), ("b", 2)]
    assert list(stored) == list(stored)  # iterated again: read again
    assert stored[2]["transcript"] == talk and stored[2]["checks"][1]["detail"] == failed.detail
    assert [t["task"] for t in stored[1:]] == ["b", "b"]
    assert [json.loads(line)["trial"] for line in stored.lines()] == [1, 1, 2]
    # in memory, only what the summary reads: the failed check, not the passed one or the talk
    assert light[2].transcript == [] and light[2].checks == [failed] and light[2].verdict == "failed"
    spool.close()


def test_the_spool_file_has_no_name_and_holds_no_secret(tmp_path: Path) -> None:
    spool = TrialSpool(tmp_path / "runs", secrets=["sk-test-0123456789"])
    spool.add(_trial("a", 1, transcript=[{"role": "agent", "text": "key sk-test-0123456789", "turn": 1}]))
    assert list((tmp_path / "runs").iterdir()) == []  # made there, but anonymous: nothing to leave behind
    (stored,) = spool.ordered()[1]
    assert stored["transcript"][0]["text"] == "key [redacted]"
    spool.close()


def test_a_folder_that_cannot_hold_the_spool_falls_back_to_the_temporary_folder(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder", encoding="utf-8")
    spool = TrialSpool(blocked / "runs", secrets=[])
    spool.add(_trial("a", 1))
    assert [t["task"] for t in spool.ordered()[1]] == ["a"]
    spool.close()


def test_a_trial_that_never_reached_its_agent_is_stored_again_named(tmp_path: Path) -> None:
    spool = TrialSpool(tmp_path, secrets=[])
    spool.add(_trial("a", 1))
    spool.add(_trial("a", 2, "errored", agent="", user="", error="the worker died"))
    named = [t if t.agent else summary_view(TrialResult(**{**vars(t), "agent": "a", "user": "u"}))
             for t in spool.trials()]
    spool.rename_sides(named)
    light, stored = spool.ordered()
    assert [(t.agent, t.user) for t in light] == [("a", "u"), ("a", "u")]
    assert [(t["agent"], t["user"], t["error"]) for t in stored] == [("a", "u", None), ("a", "u", "the worker died")]
    spool.close()


def test_build_spooled_gives_the_document_build_results_gives(tmp_path: Path) -> None:
    domain = st.load_domain(FREIGHT / "sandtable.yaml")
    trials = [st.run_trial(domain, task.id, st.ReferenceAgent(), st.ScriptedUser(), trial=i, k=3,
                           location=f"sandtable.yaml:{task.pos.line if task.pos else 0}")
              for task in domain.tasks[:4] for i in (3, 1, 2)]
    meta = RunMeta(domains=[{"name": domain.name, "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="reference", user="scripted", k=3, run_seed=0, started_at="s", finished_at="f")
    spool = TrialSpool(tmp_path, secrets=[])
    for t in reversed(trials):
        spool.add(t)
    spooled = build_spooled(spool, meta, fail_under=50)
    in_memory = build_results(trials, meta, fail_under=50)
    assert {**spooled, "trials": list(spooled["trials"])} == json.loads(json.dumps(in_memory))
    write_run(spooled, tmp_path / "a")
    write_run(in_memory, tmp_path / "b")
    for name in ("results.json", "report.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    spool.close()


FULL_DISK = """
import json, resource, signal, sys, tempfile
from pathlib import Path
from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.report.spool import TrialSpool

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG) instead
resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
spool = TrialSpool(Path(tempfile.mkdtemp()), secrets=[])
talk = [{"role": "agent", "text": "x" * 900, "turn": 1}]
for i in range(1, 41):
    spool.add(TrialResult(domain="d", task="t", trial=i, k=40, seed=i, verdict="passed", location="d.yaml:1",
                          agent="a", user="u", transcript=talk))
stored = list(spool.ordered()[1])
print(json.dumps([len(stored), [t["trial"] for t in stored] == list(range(1, 41)),
                  all(t["transcript"] == talk for t in stored), type(spool._file).__name__]))
"""


def test_a_spool_whose_disk_fills_up_goes_on_in_memory(tmp_path: Path) -> None:
    """40 trials of about 1 KB each against a 20 KB limit on file size: the writes past it
    fail, and the spool moves what it has to memory and goes on; nothing is lost."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", FULL_DISK], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [40, True, True, "BytesIO"]
