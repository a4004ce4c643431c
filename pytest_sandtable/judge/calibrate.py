"""How far the judges agree with people, and with themselves (``judge calibrate``).

This module holds what a run reads of a calibration: :func:`calibrated_criteria`. The
calibration itself (labels, Cohen's kappa, test-retest flips) is below it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ..domain.model import Domain

CALIBRATION_FILE = ".sandtable/judge-calibration.json"
"""Where ``judge calibrate`` writes its result, relative to where it runs (and where a
run looks for it, relative to its rootdir)."""

MIN_LABELS = 30
"""The fewest human labels of a criterion for it to count as calibrated (see
docs/judges.md, "Calibration": below 30 the 95% interval of kappa is wider than ±0.3)."""

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
