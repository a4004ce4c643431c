"""How far the judges agree with people, and with themselves (``judge calibrate``).

This module holds what a run reads of a calibration: :func:`calibrated_criteria`. The
calibration itself (labels, Cohen's kappa, test-retest flips) is below it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..domain.files import read_regular
from ..domain.model import Criterion, Domain
from .prompt import snippet

if TYPE_CHECKING:
    from .panel import Panel

CALIBRATION_FILE = ".sandtable/judge-calibration.json"
"""Where ``judge calibrate`` writes its result, relative to where it runs (and where a
run looks for it, relative to its rootdir)."""

MIN_LABELS = 30
"""The fewest human labels of a criterion for it to count as calibrated (docs/judges.md,
"Calibration": at 30 balanced labels the 95% interval of a kappa of 0.6 is about ±0.29)."""

MIN_KAPPA = 0.6
"""The least panel kappa of a calibrated criterion ("substantial" agreement, Landis and Koch)."""


def question_hash(question: str) -> str:
    return hashlib.sha256(question.encode()).hexdigest()[:16]


def criterion_key(domain: str, criterion: str) -> str:
    return f"{domain}/{criterion}"


def calibrated_criteria(calibration: Mapping[str, Any] | None, domains: Mapping[str, Domain],
                        judges: list[str]) -> dict[tuple[str, str], bool]:
    """Per ``(domain, criterion)`` whether a calibration says it is calibrated: for the
    same panel, the same question, at kappa >= :data:`MIN_KAPPA` on >= :data:`MIN_LABELS`
    labels. A criterion the calibration does not know, or knows for another question or
    panel, is not."""
    out: dict[tuple[str, str], bool] = {}
    entries = (calibration or {}).get("criteria") or {}
    same_panel = list((calibration or {}).get("judges") or []) == list(judges)
    for name, domain in domains.items():
        for task in [None, *domain.tasks]:
            for c in domain.judge if task is None else task.judge:
                entry = entries.get(criterion_key(name, c.id)) if same_panel else None
                out[(name, c.id)] = bool(
                    isinstance(entry, dict) and entry.get("calibrated") is True
                    and entry.get("question") == question_hash(c.question))
    return out


# --------------------------------------------------------------------------- the labels

LABEL_KEYS = ("criterion", "trial", "label")


class LabelsError(ValueError):
    """A labels file that cannot be used: one line per problem, each naming its line."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Label:
    """A person's answer to a criterion about one trial, from line ``line`` of the file."""

    criterion: str
    trial: str  # "task/n", or "domain/task/n" in a run of several domains
    label: str  # "yes" or "no"
    line: int


def read_labels(path: Path, shown: str) -> list[Label]:
    """The labels of a JSON lines file: one object a line, ``{"criterion", "trial",
    "label"}`` with ``label`` yes or no (true and false too); blank lines and lines
    starting with ``#`` are skipped. :class:`LabelsError` with every problem."""
    try:
        text = read_regular(path, MAX_LABELS_BYTES, "a labels file").decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LabelsError([f"{shown}: cannot read it: {e}"]) from None
    labels: list[Label] = []
    problems: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            data = json.loads(raw)
        except ValueError:
            problems.append(f"{shown}:{n}: not a JSON object: {snippet(raw)}")
            continue
        if not isinstance(data, dict):
            problems.append(f"{shown}:{n}: not a JSON object: {snippet(raw)}")
            continue
        missing = [k for k in LABEL_KEYS if k not in data]
        unknown = [k for k in data if k not in LABEL_KEYS]
        if missing or unknown:
            parts = ([f"missing {', '.join(repr(k) for k in missing)}"] if missing else []) + (
                [f"unknown key {', '.join(repr(k) for k in unknown)}"] if unknown else [])
            problems.append(f"{shown}:{n}: {'; '.join(parts)}; a line is "
                            '{"criterion": ID, "trial": "TASK/N", "label": "yes" or "no"}')
            continue
        label = data["label"]
        if isinstance(label, bool):
            label = "yes" if label else "no"
        if not isinstance(label, str) or label.strip().lower() not in ("yes", "no"):
            problems.append(f"{shown}:{n}: label {json.dumps(data['label'])}: expected yes or no")
            continue
        criterion, trial = str(data["criterion"]), str(data["trial"])
        if (criterion, trial) in seen:
            problems.append(f"{shown}:{n}: criterion {criterion!r} of trial {trial!r} is labelled twice "
                            f"(first at line {seen[(criterion, trial)]})")
            continue
        seen[(criterion, trial)] = n
        labels.append(Label(criterion, trial, label.strip().lower(), n))
    if problems:
        raise LabelsError(problems)
    if not labels:
        raise LabelsError([f"{shown}: no labels"])
    return labels


MAX_LABELS_BYTES = 64 << 20
"""The largest labels file read."""


def trial_ids(trial: Mapping[str, Any], several_domains: bool) -> list[str]:
    """The ids a label may give a trial: ``task/n``, and ``domain/task/n``."""
    short = f"{trial.get('task')}/{trial.get('trial')}"
    return [f"{trial.get('domain')}/{short}"] if several_domains else [short, f"{trial.get('domain')}/{short}"]


def resolve(labels: Sequence[Label], trials: Sequence[Mapping[str, Any]], domains: Mapping[str, Domain],
            shown: str) -> list[tuple[Label, Mapping[str, Any], Domain, Criterion]]:
    """Each label with its trial, domain and criterion; :class:`LabelsError` naming the
    line of every label of an unknown trial or criterion."""
    several = len({t.get("domain") for t in trials}) > 1
    by_id: dict[str, Mapping[str, Any]] = {}
    for one in trials:
        for tid in trial_ids(one, several):
            by_id[tid] = one
    problems: list[str] = []
    out = []
    for lab in labels:
        t = by_id.get(lab.trial)
        if t is None:
            known = sorted({trial_ids(x, several)[0] for x in trials})
            hint = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
            problems.append(f"{shown}:{lab.line}: unknown trial {lab.trial!r}; the run has {hint or 'no trial'}"
                            + ("" if several else " (as TASK/N)"))
            continue
        domain = domains.get(str(t.get("domain")))
        if domain is None:
            problems.append(f"{shown}:{lab.line}: trial {lab.trial!r} is of domain {t.get('domain')!r}, "
                            "whose file was not found")
            continue
        try:
            criteria = domain.criteria_for(domain.task(str(t.get("task"))))
        except KeyError:
            problems.append(f"{shown}:{lab.line}: trial {lab.trial!r}: task {t.get('task')!r} is not in the "
                            "domain file any more")
            continue
        crit = next((c for c in criteria if c.id == lab.criterion), None)
        if crit is None:
            ids = ", ".join(c.id for c in criteria) or "none"
            problems.append(f"{shown}:{lab.line}: unknown criterion {lab.criterion!r} for trial {lab.trial!r}; "
                            f"its criteria: {ids}")
            continue
        if t.get("verdict") == "errored":
            problems.append(f"{shown}:{lab.line}: trial {lab.trial!r} errored: it is not judged")
            continue
        out.append((lab, t, domain, crit))
    if problems:
        raise LabelsError(problems)
    return out


# --------------------------------------------------------------------------- agreement


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two raters' yes/no answers (person, judge): (po - pe) / (1 - pe);
    None without pairs, or when chance agreement is certain (both always gave one answer)."""
    n = len(pairs)
    if n == 0:
        return None
    agree = sum(a == b for a, b in pairs) / n
    a_yes = sum(a == "yes" for a, _ in pairs) / n
    b_yes = sum(b == "yes" for _, b in pairs) / n
    chance = a_yes * b_yes + (1 - a_yes) * (1 - b_yes)
    if chance >= 1:
        return None
    return (agree - chance) / (1 - chance)


def _rate(flips: int, n: int) -> float | None:
    return flips / n if n else None


def calibrate(items: Sequence[tuple[Label, Mapping[str, Any], Domain, Criterion]], first: Panel,
              retest: Panel) -> dict[str, Any]:
    """Each labelled item judged by ``first`` (its cache as a run's) and again by
    ``retest`` (no cache: a fresh call); per criterion Cohen's kappa of each judge and
    of the panel against the labels, the test-retest flip rate, and whether it is
    calibrated: panel kappa >= :data:`MIN_KAPPA` on >= :data:`MIN_LABELS` labels."""
    import asyncio

    async def both() -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
        out = []
        for _, t, domain, crit in items:  # one after the other: the budget and the fakes' order hold
            a, _ = await first.judge_trial(domain.policy, [crit], t)
            b, _ = await retest.judge_trial(domain.policy, [crit], t)
            out.append((a, b))
        return out

    judged = asyncio.run(both())
    names = first.names
    per: dict[tuple[str, str], dict[str, Any]] = {}
    for (lab, _, domain, crit), (a, b) in zip(items, judged):
        row = per.setdefault((domain.name, crit.id), {
            "domain": domain.name, "criterion": crit.id, "question": question_hash(crit.question), "labels": 0,
            "pairs": {w: [] for w in [*names, "panel"]}, "retests": {w: [] for w in [*names, "panel"]}})
        row["labels"] += 1
        verdicts_a = {j["judge"]: j["verdict"] for j in a[0]["judges"]} | {"panel": a[0]["verdict"]}
        verdicts_b = {j["judge"]: j["verdict"] for j in b[0]["judges"]} | {"panel": b[0]["verdict"]}
        for who in [*names, "panel"]:
            if verdicts_a[who] in ("yes", "no"):
                row["pairs"][who].append((lab.label, verdicts_a[who]))
                if verdicts_b[who] in ("yes", "no"):
                    row["retests"][who].append(verdicts_a[who] != verdicts_b[who])
    criteria: dict[str, Any] = {}
    for (dname, cid), row in sorted(per.items()):
        kappa = {w: cohen_kappa(row["pairs"][w]) for w in [*names, "panel"]}
        panel_kappa = kappa["panel"]
        if row["labels"] < MIN_LABELS:
            why = f"{row['labels']} labels, fewer than {MIN_LABELS}"
        elif panel_kappa is None:
            why = "panel kappa undefined (every label, or every verdict, is the same answer)"
        elif panel_kappa < MIN_KAPPA:
            why = f"panel kappa {panel_kappa:.2f} below {MIN_KAPPA}"
        else:
            why = f"panel kappa {panel_kappa:.2f} on {row['labels']} labels"
        criteria[criterion_key(dname, cid)] = {
            "domain": dname, "criterion": cid, "question": row["question"], "labels": row["labels"],
            "kappa": kappa,
            "scored": {w: len(row["pairs"][w]) for w in [*names, "panel"]},
            "agreement": {w: _rate(sum(h == j for h, j in row["pairs"][w]), len(row["pairs"][w]))
                          for w in [*names, "panel"]},
            "flip_rate": {w: _rate(sum(row["retests"][w]), len(row["retests"][w])) for w in [*names, "panel"]},
            "calibrated": why.startswith("panel kappa ") and " on " in why,
            "why": why,
        }
    return {"format": 1, "judges": names, "min_labels": MIN_LABELS, "min_kappa": MIN_KAPPA, "criteria": criteria,
            "calls": first.calls + retest.calls}
