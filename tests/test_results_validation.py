"""Reading a results.json checks it against the schema twice over: fastjsonschema decides
whether a file is good (fast), jsonschema says what is wrong with a bad one (slow, with
paths). The two must agree, or a bad file would be read as good: this walks a real run's
results.json and breaks it at every place, one at a time."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.report import results_json as rj
from pytest_sandtable.report.results_json import RunMeta, build_results

FREIGHT = Path(__file__).parent.parent / "example_domains" / "freight" / "sandtable.yaml"


@pytest.fixture(scope="module")
def real_run() -> dict[str, Any]:
    domain = st.load_domain(FREIGHT)
    trials = [st.run_trial(domain, task.id, st.ReferenceAgent(), st.ScriptedUser(), trial=1, k=1,
                           location=f"example_domains/freight/sandtable.yaml:{task.pos.line if task.pos else 0}")
              for task in domain.tasks[:2]]
    meta = RunMeta(domains=[{"name": domain.name, "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="reference", user="scripted", k=1, run_seed=0)
    # through JSON, as a reader sees it
    doc: dict[str, Any] = json.loads(json.dumps(build_results(trials, meta)))
    return doc


def _places(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _places(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node[:1]):  # a list's first item stands for the rest
            yield from _places(value, (*path, i))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def _agree(doc: dict[str, Any]) -> bool:
    fast = rj._is_valid(doc, relaxed=False)
    thorough = not any(True for _ in rj._validator(False).iter_errors(doc))
    return fast == thorough


BREAKS: list[Any] = [None, -1, 1.5, "", [], {"unknown": 1}, True]


def test_both_validators_accept_a_real_run(real_run: dict[str, Any]) -> None:
    assert rj._is_valid(real_run, relaxed=False)
    assert not any(True for _ in rj._validator(False).iter_errors(real_run))


def test_both_validators_agree_on_every_broken_place(real_run: dict[str, Any]) -> None:
    places = [p for p in _places(real_run) if p and p[0] != "schema_version"]
    assert len(places) > 200  # the walk reaches into trials, calls, checks and the summary
    disagreements = []
    for path in places:
        for value in BREAKS:
            doc = copy.deepcopy(real_run)
            _set(doc, path, value)
            if not _agree(doc):
                disagreements.append((path, value))
        doc = copy.deepcopy(real_run)
        parent: Any = doc
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict):
            del parent[path[-1]]  # a field left out
            if not _agree(doc):
                disagreements.append((path, "<missing>"))
    assert disagreements == []
