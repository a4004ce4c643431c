"""The bundled examples are the model of a strong suite (issue 28): their tasks catch the
mutants of their own references, by expectations, not by accepting mutants, and neither
trivial agent passes one of their tasks. The figures are those docs/mutate.md and the
README show."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sandtable.cli import main
from pytest_sandtable.domain.loader import load_domain
from pytest_sandtable.mutate.run import mutate_domain

EXAMPLES = Path(__file__).resolve().parent.parent / "example_domains"


@pytest.mark.parametrize(("name", "counts", "survivors"), [
    ("freight", {"killed": 231, "survived": 1, "equivalent": 70, "accepted": 0, "invalid": 0},
     ["no-deal-above-ceiling: stop-after@5"]),
    ("clinic", {"killed": 71, "survived": 0, "equivalent": 25, "accepted": 0, "invalid": 0}, []),
])
def test_each_example_catches_its_mutants(name: str, counts: dict[str, int], survivors: list[str]) -> None:
    domain = load_domain(EXAMPLES / name / "sandtable.yaml")
    report = mutate_domain(domain)
    assert {k: report.counts[k] for k in counts} == counts
    assert report.score is not None and report.score >= 0.95
    assert report.weak_tasks == []
    assert [f"{t.task}: {m.id}" for t in report.tasks for m in t.mutants if m.state == "survived"] == survivors
    assert [t.id for t in domain.tasks if t.accept] == []  # caught, not accepted


def test_the_readme_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["mutate", str(EXAMPLES / "freight"), str(EXAMPLES / "clinic"),
                 "--fail-under", "95", "--fail-on-weak"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[-1] == ("sandtable mutate: 2 domains, 398 mutants: score 99.7% (302 killed of 303 scored); "
                         "0 weak tasks; ok")
    assert [line for line in lines if line.startswith("baselines:")] == [
        "baselines: doing nothing passes 0 of 17 tasks; spam passes 0 of 17 tasks",
        "baselines: doing nothing passes 0 of 8 tasks; spam passes 0 of 8 tasks",
    ]
