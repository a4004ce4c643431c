"""Policy coverage for the terminal (:func:`coverage_lines`) and as JSON (:func:`coverage_json`)."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from ..report.fmt import plural
from .compute import LEVELS, DomainCoverage

_WORDS = {"declared": "declared", "applied": "applied", "could-fire": "could fire",
          "both-outcomes": "both outcomes", "boundary": "boundary"}
MAX_NOTES = 5  # trials not replayed to the end, shown one a line; the others counted
HEADERS = ("rule", "kind", "level", "calls", "applied", "held", "broken", "tasks")


def summary_line(cov: DomainCoverage) -> str:
    """``policy coverage: 9 rules: 2 boundary, 4 both outcomes, 2 applied, 1 declared; 1 policy
    sentence quoted by no rule; 0 tasks exercise no rule`` (the levels reached, highest first)."""
    counts = cov.counts()
    levels = ", ".join(f"{counts[lv]} {_WORDS[lv]}" for lv in reversed(LEVELS) if counts[lv])
    rules = plural(len(cov.rules), "rule") + (f": {levels}" if levels else "")
    sentences = f"{plural(len(cov.unquoted), 'policy sentence')} quoted by no rule"
    tasks = len(cov.tasks_without_rules)
    return f"policy coverage: {rules}; {sentences}; {tasks} task{'' if tasks == 1 else 's'} exercise" \
           f"{'s' if tasks == 1 else ''} no rule"


def coverage_lines(cov: DomainCoverage) -> list[str]:
    """The summary line, a table of the rules (each at its level, with how many calls of its
    tool the trials made, how many it applied to, held on and was broken on, and in how many
    tasks), then one line per rule no trial reaches, policy sentence no rule quotes, quote
    not in the policy, task that exercises no rule and trial not replayed to the end."""
    lines = [summary_line(cov)]
    if cov.rules:
        rows = [
            (r.id, r.kind + (" (soft)" if r.soft else ""), r.level, r.reached, r.applied, r.held, r.broken,
             len(r.tasks))
            for r in cov.rules
        ]
        table = tabulate(rows, headers=HEADERS, tablefmt="simple", disable_numparse=True,
                         colalign=("left", "left", "left", "right", "right", "right", "right", "right"))
        lines += ["  " + line.rstrip() for line in table.splitlines()]
    lines += [f"  no trial reaches rule {rule}" for rule in cov.unreached]
    lines += [f"  quoted by no rule: {sentence}" for sentence in cov.unquoted]
    lines += [f"  rule {rule} quotes what the policy does not say: {quote}" for rule, quote in cov.quotes_not_found]
    lines += [f"  task {task} exercises no rule" for task in cov.tasks_without_rules]
    if cov.tasks_not_run:
        lines.append(f"  {plural(len(cov.tasks_not_run), 'task')} with no trial: {', '.join(cov.tasks_not_run)}")
    lines += [f"  not replayed to the end: {note}" for note in cov.notes[:MAX_NOTES]]
    if len(cov.notes) > MAX_NOTES:
        lines.append(f"  and {plural(len(cov.notes) - MAX_NOTES, 'more trial')} not replayed to the end")
    return lines


def coverage_json(cov: DomainCoverage) -> dict[str, Any]:
    """The coverage as one JSON-compatible dict (docs/grading.md, "Policy coverage")."""
    return {
        "domain": cov.domain,
        "trials": cov.trials,
        "levels": cov.counts(),
        "rules": [
            {
                "id": r.id,
                "kind": r.kind,
                "soft": r.soft,
                "tool": r.tool,
                "level": r.level,
                "calls": r.reached,
                "applied": r.applied,
                "held": r.held,
                "broken": r.broken,
                "could_fire": r.could_fire or bool(r.broken),
                "tasks": sorted(r.tasks),
                **({"boundary": {op: {"held_at_bound": pair[0], "broken_past_bound": pair[1]}
                                 for op, pair in r.boundary.items()}} if r.kind == "limit" else {}),
            }
            for r in cov.rules
        ],
        "unreached_rules": cov.unreached,
        "unquoted_sentences": cov.unquoted,
        "quotes_not_found": [{"rule": rule, "quote": quote} for rule, quote in cov.quotes_not_found],
        "tasks_without_rules": cov.tasks_without_rules,
        "tasks_not_run": cov.tasks_not_run,
        "notes": cov.notes,
    }
