"""Judge mutants: does the panel notice when what it said "yes" to is gone?

For every judged trial that passed and whose criterion the panel answered "yes", the
mutant is the same transcript with the evidence removed: each sentence of the agent's
messages that holds a quote a judge relied on (the fee sentence, the apology). A panel
that still says "yes" to the mutant was not reading what it quoted; one that says "no"
caught it. The detection rate, per criterion, is caught / mutants (a ``void`` or
``split`` verdict on a mutant is not a catch). A mutant whose agent messages are left
empty, or that removes nothing, is not made.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..domain.model import Domain
from .panel import Panel

OPERATOR = "drop-evidence"
_SENTENCE = re.compile(r"[^.!?\n]*(?:[.!?]+|\n|$)")


def _normal(text: str) -> str:
    return " ".join(text.split())


def drop_evidence(trial: Mapping[str, Any], quotes: Sequence[str]) -> dict[str, Any] | None:
    """``trial`` with every agent sentence that holds one of ``quotes`` removed; None when
    that removes nothing or leaves the agent without a word."""
    mutant = copy.deepcopy(dict(trial))
    changed = False
    for entry in mutant.get("transcript") or []:
        if entry.get("role") != "agent" or not entry.get("text"):
            continue
        kept = []
        for sentence in _SENTENCE.findall(str(entry["text"])):
            if sentence and any(_normal(q) and _normal(q) in _normal(sentence) for q in quotes):
                changed = True
                continue
            kept.append(sentence)
        entry["text"] = "".join(kept).strip()
    said = any(e.get("role") == "agent" and str(e.get("text") or "").strip() for e in mutant.get("transcript") or [])
    return mutant if changed and said else None


def judge_mutants(judged_trials: Iterable[Mapping[str, Any]], trials: Iterable[Mapping[str, Any]],
                  domain_of: Mapping[str, Domain], panel: Panel) -> dict[str, Any]:
    """The mutants of a judged run (results.json's ``judged.trials`` and ``trials``), each
    judged by ``panel``: per criterion ``{mutants, caught, rate}`` and every mutant's
    outcome."""
    by_key = {(t.get("domain"), t.get("task"), t.get("trial")): t for t in trials}
    jobs: list[tuple[str, Mapping[str, Any], Domain, Any, dict[str, Any]]] = []
    for jt in judged_trials:
        t = by_key.get((jt.get("domain"), jt.get("task"), jt.get("trial")))
        domain = domain_of.get(str(jt.get("domain")))
        if t is None or domain is None or t.get("verdict") != "passed":
            continue
        criteria = {c.id: c for c in domain.criteria_for(domain.task(str(jt["task"])))}
        for judged in jt.get("criteria") or []:
            crit = criteria.get(str(judged.get("criterion")))
            quotes = [j["quote"] for j in judged.get("judges") or [] if j.get("verdict") == "yes" and j.get("quote")]
            if crit is None or judged.get("verdict") != "yes" or not quotes:
                continue
            mutant = drop_evidence(t, quotes)
            if mutant is not None:
                jobs.append((crit.id, jt, domain, crit, mutant))

    async def run() -> list[dict[str, Any]]:
        out = []
        for _, _, domain, crit, mutant in jobs:
            judged, _ = await panel.judge_trial(domain.policy, [crit], mutant)
            out.append(judged[0])
        return out

    verdicts = asyncio.run(run()) if jobs else []
    per: dict[tuple[str, str], dict[str, Any]] = {}
    outcomes = []
    for (cid, jt, domain, _, _), judged in zip(jobs, verdicts):
        row = per.setdefault((domain.name, cid), {"domain": domain.name, "criterion": cid, "mutants": 0, "caught": 0})
        row["mutants"] += 1
        caught = judged["verdict"] == "no"
        row["caught"] += caught
        outcomes.append({"domain": domain.name, "task": jt.get("task"), "trial": jt.get("trial"), "criterion": cid,
                         "operator": OPERATOR, "verdict": judged["verdict"], "caught": caught})
    rows = [{**r, "rate": r["caught"] / r["mutants"]} for _, r in sorted(per.items())]
    total = sum(r["mutants"] for r in rows)
    return {"criteria": rows, "mutants": outcomes, "total": total,
            "caught": sum(r["caught"] for r in rows),
            "rate": sum(r["caught"] for r in rows) / total if total else None, "calls": panel.calls}
