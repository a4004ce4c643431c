"""A trial's line in the spool and results.json: one compact line of JSON that orjson
writes (report/safe.py), the same whichever way the trial reached the spool (from this
process's item, or carried from an xdist worker), and what orjson does not write
written by the json module as before. The caps still measure JSON as the json module
writes it (", " and ": "), so a trial whose compact line is short but whose values are
over a cap that way is bounded as before."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

import orjson
import pytest

from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.report.safe import VALUE_LIMIT, fresh_line, portable_trial
from pytest_sandtable.report.spool import TrialSpool

Spooled = Callable[..., tuple[list[bytes], list[TrialResult]]]  # the spooled fixture (conftest.py)

pytest_plugins = ["pytester"]


def _made(trials: list[TrialResult], change: Callable[[TrialResult], None]) -> list[TrialResult]:
    out = []
    for t in trials:
        fresh = TrialResult.from_dict(copy.deepcopy(t.to_dict()))
        change(fresh)
        out.append(fresh)
    return out


class Status(Enum):
    BOOKED = "booked"


def _result(value: Any) -> Callable[[TrialResult], None]:
    def change(t: TrialResult) -> None:
        t.calls[0]["result"] = value
    return change


def test_a_usual_trial_is_one_compact_line_of_its_fields(freight_trials: list[TrialResult], spooled: Spooled) -> None:
    lines, _ = spooled("fresh", lambda s: [s.add_fresh(t) for t in freight_trials])
    assert sorted(lines) == sorted(orjson.dumps(t.to_dict()) for t in freight_trials)
    assert all(line.startswith(b'{"domain":"freight","task":"') for line in lines)


@pytest.mark.parametrize(("case", "change", "one_pass", "stored"), [
    # orjson writes NaN as null, as the walk makes it: one pass, the same line
    ("a NaN in a tool result", _result({"rate": float("nan")}), True, {"rate": None}),
    # what orjson does not write, the json module does, as before: one pass too
    ("a key that is not a string", _result({1: "one"}), True, {"1": "one"}),
    ("an integer past 64 bits", _result(2**70), True, 2**70),
    # orjson writes an enum member as its value; so does the walk, for a trial it bounds
    ("an enum member", _result({"status": Status.BOOKED}), True, {"status": "booked"}),
    # compact, 14,001 characters; as the caps measure it, 21,000: over VALUE_LIMIT
    ("a result short only when compact", _result([0] * 7_000), False,
     "[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0"),
], ids=["nan", "key-not-a-string", "big-integer", "enum", "short-only-when-compact"])
def test_a_fresh_trial_is_stored_as_a_carried_one(
    freight_trials: list[TrialResult], spooled: Spooled, case: str, change: Callable[[TrialResult], None],
    one_pass: bool, stored: Any,
) -> None:
    """The line and light trial of ``add_fresh`` are those of ``add_stored`` of what an
    xdist worker carries, byte for byte, whether one pass takes it or the walk."""
    made = _made(freight_trials, change)
    fresh = spooled("fresh", lambda s: [s.add_fresh(t) for t in made])
    carried = spooled("carried", lambda s: [s.add_stored(portable_trial(t)) for t in made])
    assert fresh == carried
    assert [fresh_line(t, []) is not None for t in made] == [one_pass] * len(made)
    result = json.loads(fresh[0][0])["calls"][0]["result"]
    if isinstance(stored, str):  # bounded: the value's JSON, clipped, as a string with a marker
        assert result.startswith(stored)
        assert result.endswith("[clipped: 21,000 characters of JSON]")
        assert len(json.dumps([0] * 7_000)) == 21_000 > VALUE_LIMIT
    else:
        assert result == stored


def test_results_json_holds_the_same_lines_with_and_without_xdist(pytester: pytest.Pytester) -> None:
    freight = Path(__file__).resolve().parent.parent / "example_domains" / "freight" / "sandtable.yaml"
    pytester.path.joinpath("sandtable.yaml").write_bytes(freight.read_bytes())
    firsts = []
    for extra in ([], ["-n", "2"]):
        out = pytester.path / f"out{len(extra)}"
        result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-k=2", "--sandtable-agent=reference",
                                    "--sandtable-seed=1", f"--sandtable-out={out}", *extra)
        result.assert_outcomes(passed=34)
        text = (out / "results.json").read_text(encoding="utf-8")
        lines = text[text.index(' "trials": [\n') + 13:text.index("\n ],\n")].split(",\n")
        assert len(lines) == 34
        assert all(line.startswith('  {"domain":"freight","task":"') for line in lines)
        # apart from what timing fills in, the same bytes
        firsts.append([line.split(',"usage":')[0] for line in lines])
    assert firsts[0] == firsts[1]


def test_an_enum_member_is_its_value_where_the_trial_is_bounded(freight_trials: list[TrialResult]) -> None:
    """A trial over a cap takes the walk: an enum member in it is its value there too, so
    a run writes the same with and without xdist (whose workers walk what the json
    module cannot write)."""
    def change(t: TrialResult) -> None:
        _result({"status": Status.BOOKED})(t)
        t.transcript.append({"role": "agent", "text": "n" * 30_000, "turn": 9})  # a reply over the cap

    (t,) = _made(freight_trials[:1], change)
    assert fresh_line(t, []) is None
    assert portable_trial(t)["calls"][0]["result"]["status"] == "booked"


@pytest.mark.parametrize("secret", ["1,2,3,4", '"ok":true'])
def test_a_secret_across_the_punctuation_of_a_line_leaves_it_valid_json(
    freight_trials: list[TrialResult], tmp_path: Path, secret: str
) -> None:
    """Redacting the finished text would cut a JSON token (``[1,2,3,4]`` holds
    ``1,2,3,4``): the line is made again from its values, each redacted on its own, and
    the secret is not in it."""
    made = _made(freight_trials[:1], _result([1, 2, 3, 4]))
    spool = TrialSpool(tmp_path / "s", secrets=[secret])
    spool.add_fresh(made[0])
    (line,) = list(spool.ordered()[1].lines())
    spool.close()
    trial = json.loads(line)
    assert trial["calls"][0]["result"] == [1, 2, 3, 4]
    assert secret.encode() not in line
    assert trial["calls"][0]["ok"] is True
