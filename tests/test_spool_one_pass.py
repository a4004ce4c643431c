"""A trial is recorded in one pass of the C encoder (``report.safe.stored_line``,
``TrialSpool.add_stored``) when that pass shows there is nothing in it to bound or
redact: the line on disk and the light trial in memory are then exactly what reading it
into a TrialResult, bounding it (the walk) and encoding it give, as they are for every
trial that needs the walk, whatever a report carried."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.report.safe import portable_encoded, portable_trial, stored_line

Spooled = Callable[..., tuple[list[bytes], list[TrialResult]]]  # the spooled fixture (conftest.py)

FREIGHT = Path(__file__).resolve().parent.parent / "example_domains" / "freight" / "sandtable.yaml"
SECRETS = ["sk-test-0123456789", "ab&cd-1234", "98765432"]



def _reply(d: dict[str, Any], text: str) -> None:
    d["transcript"] = [*d["transcript"], {"role": "agent", "text": text, "turn": 9}]


def _circular(d: dict[str, Any]) -> None:
    loop: list[Any] = []
    loop.append(loop)
    d["calls"] = [{**d["calls"][0], "result": loop}]


# (what the report carries, how it is made from a usual trial, whether one pass stores it)
CASES: list[tuple[str, Callable[[dict[str, Any]], None], bool]] = [
    ("a usual trial", lambda d: None, True),
    ("a model with no name and counters that are not whole numbers",
     lambda d: d.update(usage={"agent": {None: {"input": 3.0, "output": -2, "junk": "x"}, "": {"input": 1}},
                               "user": {}}), True),
    ("usage that is not a mapping", lambda d: d.update(usage=None), True),
    ("a secret only in its HTML-escaped form", lambda d: _reply(d, "see ab&amp;cd-1234"), True),
    ("a secret in a reply", lambda d: _reply(d, "the key is sk-test-0123456789"), False),
    ("a secret in the digits of a number", lambda d: d["calls"][0].update(result=1987654321), False),
    ("a secret in a key", lambda d: d.update(soft={"sk-test-0123456789": {}}), False),
    ("a lone surrogate", lambda d: _reply(d, "half \ud800 a pair"), True),
    ("a reply over the cap", lambda d: _reply(d, "x" * 30_000), False),
    ("many replies, together over the cap", lambda d: [_reply(d, "y" * 5_000) for _ in range(5)], False),
    ("a tool argument over the cap", lambda d: d["calls"][0]["args"].update(note="z" * 25_000), False),
    ("a latency that is not a number", lambda d: d.update(latency=[float("nan")]), False),
    ("a structure that contains itself", _circular, False),
    ("a value that is not JSON", lambda d: d["calls"][0].update(result=object()), False),
    ("its fields in another order", lambda d: [d.update({k: d.pop(k)}) for k in ("domain", "task")], False),
    ("a field it does not know", lambda d: d.update(extra=1), False),
    ("a field left out", lambda d: d.pop("replayed"), False),
    ("a check's fields in another order", lambda d: d.update(checks=[dict(reversed(c.items())) for c in d["checks"]]),
     False),
]


@pytest.mark.parametrize(("case", "make", "one_pass"), CASES, ids=[c[0] for c in CASES])
def test_a_carried_trial_is_stored_as_the_walk_stores_it(
    freight_trials: list[TrialResult], spooled: Spooled,
    case: str, make: Callable[[dict[str, Any]], None], one_pass: bool
) -> None:
    carried = []
    for t in freight_trials:
        d = copy.deepcopy(t.to_dict())
        make(d)
        carried.append(d)
    walked = spooled("walked", lambda s: [s.add(TrialResult.from_dict(copy.deepcopy(d))) for d in carried], SECRETS)
    once = spooled("once", lambda s: [s.add_stored(copy.deepcopy(d)) for d in carried], SECRETS)
    assert once[0] == walked[0]  # byte for byte on disk
    assert once[1] == walked[1]  # the same light trials
    assert sorted(json.loads(line)["task"] for line in once[0]) == sorted(t.task for t in freight_trials)
    assert [stored_line(d, SECRETS) is not None for d in carried] == [one_pass] * len(carried)


def test_the_json_made_for_the_report_is_the_line_stored(freight_trials: list[TrialResult], spooled: Spooled) -> None:
    """In the process that ran the trial the spool takes the JSON portable_encoded made:
    the same line, and, for usage the walk rewrites, a line made again."""
    odd = TrialResult.from_dict(copy.deepcopy(freight_trials[0].to_dict()))
    odd.usage = {"agent": {None: {"input": 2.0}}, "user": {}}
    every = [*freight_trials, odd]
    encoded = [portable_encoded(t) for t in every]
    assert all(text is not None for _, text in encoded)
    assert [d for d, _ in encoded] == [portable_trial(t) for t in every]
    walked = spooled("walked", lambda s: [s.add(TrialResult.from_dict(portable_trial(t))) for t in every], SECRETS)
    once = spooled("once", lambda s: [s.add_stored(d, text) for d, text in encoded], SECRETS)
    assert once == walked
    usages = [json.loads(line)["usage"] for line in once[0]]
    assert usages.count({"agent": {"(unknown model)": {"input": 2}}, "user": {}}) == 1
    # a trial whose JSON had to be bounded carries none: the spool encodes what it carries
    big = TrialResult.from_dict(copy.deepcopy(freight_trials[0].to_dict()))
    big.transcript = [*big.transcript, {"role": "agent", "text": "w" * 30_000, "turn": 9}]
    d, text = portable_encoded(big)
    assert text is None and d["transcript"][-1]["text"].endswith("… [clipped: 30,000 characters]")

