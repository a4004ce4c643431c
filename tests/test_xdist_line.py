"""Under pytest-xdist a trial crosses from its worker to the controller as one string:
the line the spool stores, made on the worker (``report.spool.trial_line``, secrets
redacted there) and stored by the controller as it came (``TrialSpool.add_line``),
never decoded into a result and encoded again. The bytes on disk are those the process
that ran the trial stores itself (``add_fresh``), whatever the trial holds."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.report.spool import trial_line

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS, make_shop, only_results
from test_recorder_hot_path import CASES, SECRETS

Spooled = Callable[..., tuple[list[bytes], list[TrialResult]]]  # the spooled fixture (conftest.py)


@pytest.mark.parametrize(("case", "make", "one_pass"), CASES, ids=[c[0] for c in CASES])
def test_a_sent_line_is_stored_as_a_fresh_trial(
    freight_trials: list[TrialResult], spooled: Spooled, case: str, make: Callable[[TrialResult], None], one_pass: bool
) -> None:
    """The line a worker sends, stored by the controller, is byte for byte the line the
    worker's own spool would have stored, and the light trial read from it the one that
    spool keeps."""
    made = []
    for t in freight_trials:
        fresh = TrialResult.from_dict(copy.deepcopy(t.to_dict()))
        make(fresh)
        made.append(fresh)
    sent = [trial_line(t, SECRETS).decode("utf-8") for t in made]
    assert all(type(s) is str and "\n" not in s for s in sent)
    fresh = spooled("fresh", lambda s: [s.add_fresh(t) for t in made], SECRETS)
    # the controller's own secrets, the same or none: nothing is redacted twice, nothing missed
    for secrets in (SECRETS, ()):
        lines = spooled("sent", lambda s: [s.add_line(line) for line in sent], secrets)
        assert lines[0] == fresh[0]  # byte for byte on disk
        assert lines[1] == fresh[1]  # the same light trials, which the summary reads


def test_a_secret_only_the_controller_knows_is_redacted(freight_trials: list[TrialResult], spooled: Spooled) -> None:
    """A worker without the controller's secret sends it; the controller's spool redacts it."""
    t = TrialResult.from_dict(copy.deepcopy(freight_trials[0].to_dict()))
    t.transcript = [*t.transcript, {"role": "agent", "text": "the key is sk-test-0123456789", "turn": 9}]
    sent = trial_line(t, ()).decode("utf-8")
    assert "sk-test-0123456789" in sent
    (line,), _ = spooled("sent", lambda s: s.add_line(sent), SECRETS)
    assert json.loads(line)["transcript"][-1]["text"] == "the key is [redacted]"


def test_an_integer_past_64_bits_stays_whole(freight_trials: list[TrialResult], spooled: Spooled) -> None:
    """orjson reads such an integer as a float: the controller reads that line as the json module does."""
    t = TrialResult.from_dict(copy.deepcopy(freight_trials[0].to_dict()))
    t.seed = 2**70 + 1
    (line,), (light,) = spooled("sent", lambda s: s.add_line(trial_line(t, ())), ())
    assert light.seed == 2**70 + 1 and json.loads(line)["seed"] == 2**70 + 1


# appended to the shop's conftest: on each worker, the type of what a trial's report
# carries as pytest-xdist sends it (the recorder attaches it first, xdist sends it last)
CARRIED = """

import pytest as _pytest


@_pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    import os
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and report.when == "call":
        with open(f"carried-{worker}.txt", "a", encoding="utf-8") as f:
            f.write(f"{type(getattr(report, 'sandtable', None)).__name__}\\n")
"""


def test_a_worker_sends_each_trial_as_one_string(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each trial's report leaves its worker holding one string, the line results.json keeps."""
    pytest.importorskip("xdist")
    # and the xdist worker variables of a suite run under -n: the inner run's controller
    # would inherit them and pass for a worker in the conftest below
    for var in ("SHOP_FAIL", "SHOP_CRASH", "SHOP_SAY", "SHOP_USER_FAIL", "PYTEST_XDIST_WORKER",
                "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(var, raising=False)
    make_shop(pytester)
    with (pytester.path / "conftest.py").open("a", encoding="utf-8") as f:
        f.write(CARRIED)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=2", "-n", "2")
    assert result.ret == 0
    carried = [line for p in sorted(pytester.path.glob("carried-gw*.txt"))
               for line in p.read_text(encoding="utf-8").split()]
    assert carried == ["str"] * 6
    doc = only_results(pytester.path)
    assert sorted((t["task"], t["trial"], t["verdict"]) for t in doc["trials"]) == \
        sorted((task, i, "passed") for task in ("greet", "order-status", "refund") for i in (1, 2))
