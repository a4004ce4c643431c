"""Merging shards: the results.json documents of runs that each ran a share of one run's
trials (a CI matrix, several hosts) combined into one document, with pass^k over all trials.

Pure: documents in, a document out, or :class:`MergeError` saying why the documents are not
shards of one run. Reading and writing files and printing are the ``merge`` command's
(:mod:`pytest_sandtable.cli.runs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..engine.results import TrialResult
from .results_json import RunMeta, build_results, trials_of
from .types import Results

__all__ = ["MergeError", "Shard", "merge_results"]

Shard = tuple[str, Mapping[str, Any]]
"""A shard: the name messages call it by (as the user gave it) and its results.json document."""

# What every shard's ``run`` must agree on, with the pytest option that sets it (named in the refusal).
_SAME_SETTINGS = (
    ("k", "--sandtable-k"),
    ("agent", "--sandtable-agent"),
    ("user", "--sandtable-user"),
    ("run_seed", "--sandtable-seed"),
)


class MergeError(Exception):
    """Shards that cannot be merged (mismatched runs or domains, repeated trials)."""


def merge_results(
    shards: Sequence[Shard],
    *,
    fail_under: float | None = None,
    floors: Mapping[str, float] | None = None,
    prices: Mapping[str, Mapping[str, float]] | None = None,
) -> Results:
    """One results.json document from ``(name, document)`` shards. Raises :class:`MergeError`
    when they are not shards of one run: a different k, agent, user or run seed; a domain
    whose content (sha256) or name differs between shards; a trial in more than one shard.

    The agents and users the trials actually used (``trials[].agent``, ``trials[].user``)
    must match too, domain by domain: a ``sandtable_agent`` fixture in one shard's
    conftest.py runs another agent under the same ``run.agent``. Domain files that did
    not load in any shard (``run.collection_errors``) are carried into the merge.

    A domain may be in some shards only (shards split by path or by ``-k``). A repeated
    trial is an error, not renumbered: a trial's number fixes its seed, so the same
    number twice is the same trial run twice, and counting both would inflate pass^k.

    The gate (``fail_under``, ``floors``) is the merge's own, not the shards'. The summary
    and its cost are computed anew from the trials, so ``prices`` must price the models
    that have no built-in list price, as the shards' ``--sandtable-prices`` did.
    """
    if not shards:
        raise MergeError("nothing to merge")
    _check_complete(shards)
    _check_same_settings(shards)
    _check_same_callables(shards)
    domains = _domains(shards)
    trials = _trials(shards)
    floors = dict(floors or {})
    meta = _run_meta(shards, domains, fail_under, floors)
    return build_results(trials, meta, fail_under=fail_under, floors=floors, prices=prices)


# --------------------------------------------------------------------------- checks


def _check_complete(shards: Sequence[Shard]) -> None:
    """A shard that stopped early (-x, --maxfail, Ctrl-C) lacks trials no other shard has:
    merged, its tasks would be scored on the trials that happened to run."""
    for name, doc in shards:
        why = doc["run"].get("stopped_early")
        if why:
            raise MergeError(f"{name} is a partial run (it stopped early: {why}); run that shard again in full")


def _check_same_settings(shards: Sequence[Shard]) -> None:
    """Every shard ran with the first shard's k, agent, user and run seed."""
    first_name, first = shards[0]
    for key, option in _SAME_SETTINGS:
        want = first["run"][key]
        for name, doc in shards[1:]:
            got = doc["run"][key]
            if got != want:
                raise MergeError(
                    f"{first_name} and {name} ran with different {key} ({want!r} and {got!r}): "
                    f"shards of one run use the same {option}"
                )


def _check_same_callables(shards: Sequence[Shard]) -> None:
    """The agents and users the trials actually ran with (``trials[].agent``/``.user``, what
    ``summary.agents``/``users`` list) must be the same in every shard, domain by domain:
    ``run.agent`` records only the option, which a ``sandtable_agent`` fixture overrides."""
    for side, option in (("agent", "agent"), ("user", "simulated user")):
        seen: dict[str, tuple[set[str], str]] = {}  # domain -> (labels, first shard that ran it)
        for name, doc in shards:
            for domain, labels in sorted(_used(doc, side).items()):
                first = seen.get(domain)
                if first is None:
                    seen[domain] = (labels, name)
                elif first[0] != labels:
                    raise MergeError(
                        f"{first[1]} and {name} ran domain {domain!r} with different {side}s "
                        f"({_labels(first[0])} and {_labels(labels)}): shards of one run use the same {option}"
                    )


def _used(doc: Mapping[str, Any], side: str) -> dict[str, set[str]]:
    """Domain name -> labels of the agents (``side="agent"``) or users its trials actually used."""
    out: dict[str, set[str]] = {}
    for t in doc.get("trials") or []:
        label = t.get(side)
        if label:
            out.setdefault(str(t.get("domain", "")), set()).add(str(label))
    return out


def _labels(labels: Iterable[str]) -> str:
    return ", ".join(repr(x) for x in sorted(labels))


def _short_sha(sha: str) -> str:
    return sha[:12] or "unknown"


# --------------------------------------------------------------------------- combining


def _domains(shards: Sequence[Shard]) -> list[dict[str, str]]:
    """The domains of all shards, each once, sorted: ``{name, path, sha256}``. A name must
    have the same content (sha256) and a path the same name in every shard that ran it."""
    by_name: dict[str, tuple[str, str, str]] = {}  # domain name -> (sha256, path, shard)
    by_path: dict[str, tuple[str, str]] = {}  # path -> (name, shard)
    for name, doc in shards:
        for d in doc["run"]["domains"]:
            seen = by_name.get(d["name"])
            if seen is not None and seen[0] != d["sha256"]:
                raise MergeError(
                    f"domain {d['name']!r} differs between {seen[2]} (sha256 {_short_sha(seen[0])}) and {name} "
                    f"(sha256 {_short_sha(d['sha256'])}): shards must run the same domain files"
                )
            at = by_path.get(d["path"])
            if at is not None and at[0] != d["name"]:
                raise MergeError(
                    f"{d['path']} is domain {at[0]!r} in {at[1]} but {d['name']!r} in {name}: "
                    "shards must run the same domain files"
                )
            by_name.setdefault(d["name"], (d["sha256"], d["path"], name))
            by_path.setdefault(d["path"], (d["name"], name))
    return sorted(
        ({"name": n, "path": v[1], "sha256": v[0]} for n, v in by_name.items()),
        key=lambda d: (d["name"], d["path"]),
    )


def _trials(shards: Sequence[Shard]) -> list[TrialResult]:
    """The trials of all shards; each (domain, task, trial number) in one shard only."""
    where: dict[tuple[str, str, int], str] = {}  # (domain, task, trial) -> shard
    trials = []
    for name, doc in shards:
        for t in trials_of(doc):
            tkey = (t.domain, t.task, t.trial)
            if tkey in where:
                raise MergeError(
                    f"{t.domain}/{t.task} trial {t.trial} is in both {where[tkey]} and {name}: shards must split "
                    "the trials, not repeat them (a trial's number fixes its seed, so a repeat is the same trial "
                    "twice)"
                )
            where[tkey] = name
            trials.append(t)
    return trials


def _collection_errors(shards: Sequence[Shard]) -> list[dict[str, str]]:
    """Domain files that did not load in any shard, each once (every shard that collected
    the file reports it), sorted by path."""
    errors: dict[str, dict[str, str]] = {}
    for _, doc in shards:
        for c in doc["run"].get("collection_errors") or []:
            errors.setdefault(c["path"], {"path": c["path"], "message": c["message"]})
    return [errors[p] for p in sorted(errors)]


def _run_meta(
    shards: Sequence[Shard], domains: list[dict[str, str]], fail_under: float | None, floors: Mapping[str, float]
) -> RunMeta:
    """The merged ``run``: the settings all shards agree on, the merge's gate in place of
    the shards' own, the span of their times, and one entry per shard."""
    first = shards[0][1]["run"]
    options = dict(first.get("options") or {})
    options["fail_under"] = fail_under
    options["floors"] = dict(floors)
    return RunMeta(
        domains=domains,
        agent=first["agent"],
        user=first["user"],
        k=int(first["k"]),
        run_seed=int(first["run_seed"]),
        options=options,
        started_at=min(doc["run"]["started_at"] for _, doc in shards),
        finished_at=max(doc["run"]["finished_at"] for _, doc in shards),
        shards=[_shard_entry(doc) for _, doc in shards],
        command="merge",
        collection_errors=_collection_errors(shards),
    )


def _shard_entry(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A shard as ``run.shards`` records it: what wrote it, when, and how many trials it ran."""
    return {
        "writer_version": doc["writer"]["version"],
        "started_at": doc["run"]["started_at"],
        "finished_at": doc["run"]["finished_at"],
        "trials": len(doc["trials"]),
    }
