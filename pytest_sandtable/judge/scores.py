"""Judged scores: per criterion, per task and criterion, per tag and criterion, the share
of scored trials the panel said "yes" to, with its Wilson interval.

A trial is scored on a criterion when the panel's majority is "yes" or "no". A ``void``
(no judge's verdict stood), ``split`` (a tie) or ``n/a`` (the criterion does not apply)
verdict is counted, and shown, but not scored. Phrase criteria so that "yes" is what you
want ("Did the agent apologise ...?"): the score is then the share of trials that did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..report.stats import wilson

_COUNTED = ("yes", "no", "void", "split", "n/a")


def _row(counts: Mapping[str, int], disagreements: int) -> dict[str, Any]:
    scored = counts["yes"] + counts["no"]
    interval = wilson(counts["yes"], scored)
    return {
        "yes": counts["yes"], "no": counts["no"], "void": counts["void"], "split": counts["split"],
        "na": counts["n/a"], "scored": scored, "disagreements": disagreements,
        "rate": counts["yes"] / scored if scored else None,
        "interval": list(interval) if interval is not None else None,
    }


class _Tally:
    def __init__(self) -> None:
        self.counts = dict.fromkeys(_COUNTED, 0)
        self.disagreements = 0

    def add(self, judged: Mapping[str, Any]) -> None:
        verdict = judged.get("verdict")
        if verdict in self.counts:
            self.counts[verdict] += 1
        if judged.get("disagreement"):
            self.disagreements += 1


def judged_scores(trials: Iterable[Mapping[str, Any]], questions: Mapping[tuple[str, str], str],
                  calibrated: Mapping[tuple[str, str], bool]) -> dict[str, list[dict[str, Any]]]:
    """The score rows of judged trials (``{"domain", "task", "tags", "criteria": [...]}``):
    ``criteria``, ``tasks`` and ``tags``, each sorted by its keys. ``questions`` and
    ``calibrated`` are per ``(domain, criterion)``."""
    by_criterion: dict[tuple[str, str], _Tally] = {}
    by_task: dict[tuple[str, str, str], _Tally] = {}
    by_tag: dict[tuple[str, str], _Tally] = {}
    for t in trials:
        domain, task = str(t.get("domain")), str(t.get("task"))
        for judged in t.get("criteria", []):
            cid = str(judged.get("criterion"))
            by_criterion.setdefault((domain, cid), _Tally()).add(judged)
            by_task.setdefault((domain, task, cid), _Tally()).add(judged)
            for tag in t.get("tags") or []:
                by_tag.setdefault((str(tag), cid), _Tally()).add(judged)
    return {
        "criteria": [{"domain": d, "criterion": c, "question": questions.get((d, c), ""),
                      "calibrated": bool(calibrated.get((d, c), False)), **_row(v.counts, v.disagreements)}
                     for (d, c), v in sorted(by_criterion.items())],
        "tasks": [{"domain": d, "task": task, "criterion": c, **_row(v.counts, v.disagreements)}
                  for (d, task, c), v in sorted(by_task.items())],
        "tags": [{"tag": tag, "criterion": c, **_row(v.counts, v.disagreements)}
                 for (tag, c), v in sorted(by_tag.items())],
    }
