"""Commands over finished runs: ``merge`` (shards into one run) and ``report`` (re-render).

``python -m pytest_sandtable merge a/results.json b/results.json -o merged/`` combines
the results of shards (a CI matrix that ran a share of the trials each, or several
hosts) into one results.json and report.html, with pass^k over all their trials.

``python -m pytest_sandtable report results.json [-o DIR]`` writes report.html anew
from a results.json and prints the terminal summary.

Both exit 2 for a bad or mismatched file, with one clear line saying which file and what.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["MergeError", "add_subcommands", "merge_results"]

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_ERROR = 2


class MergeError(Exception):
    """Shards that cannot be merged (mismatched runs or domains, repeated trials)."""


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``merge`` and ``report`` to ``python -m pytest_sandtable``'s subcommands."""
    merge = subparsers.add_parser(
        "merge",
        help="combine the results.json of shards into one run",
        description="Combine the results.json files of shards of one run (the same domain files, agent, user, "
        "k and run seed; each trial in exactly one shard) into one results.json and report.html with pass^k "
        "over all trials. Exit 2 when the shards do not match, 1 when a gate given here fails, else 0 "
        "(without a gate: 1 when any trial failed or errored, as pytest would).",
    )
    merge.add_argument("files", nargs="+", metavar="RESULTS", help="a results.json, or a run folder holding one")
    merge.add_argument("-o", "--out", metavar="DIR",
                       help="where the merged results.json and report.html go "
                            "(default .sandtable/runs/<timestamp>-<domain>/ here)")
    merge.add_argument("--fail-under", metavar="PCT", default=None,
                       help="gate: exit 1 when the merged highest pass^k is below PCT percent")
    merge.add_argument("--floor", metavar="TAG=PCT", action="append", default=[],
                       help="gate: exit 1 when a tag's merged highest pass^k is below PCT percent (repeatable)")
    merge.set_defaults(func=_merge)

    report = subparsers.add_parser(
        "report",
        help="re-render report.html from a results.json and print its summary",
        description="Write report.html anew from a results.json (beside it, or into DIR) and print the "
        "terminal summary and the gate's outcome as recorded.",
    )
    report.add_argument("file", metavar="RESULTS", help="a results.json, or a run folder holding one")
    report.add_argument("-o", "--out", metavar="DIR", help="where report.html goes (default: beside the results.json)")
    report.set_defaults(func=_report)


def _short(sha: str) -> str:
    return sha[:12] or "unknown"


def merge_results(
    shards: Sequence[tuple[str, dict[str, Any]]],
    *,
    fail_under: float | None = None,
    floors: dict[str, float] | None = None,
) -> dict[str, Any]:
    """One results.json document from ``(name, document)`` shards. Raises :class:`MergeError`
    when they are not shards of one run: a different k, agent, user or run seed; a domain
    whose content (sha256) or name differs between shards; a trial in more than one shard.

    A domain may be in some shards only (shards split by path or by ``-k``). A repeated
    trial is an error, not renumbered: a trial's number fixes its seed, so the same
    number twice is the same trial run twice, and counting both would inflate pass^k.
    """
    from ._artifacts import RunMeta, build_results, trials_of

    if not shards:
        raise MergeError("nothing to merge")
    first_name, first = shards[0]
    for key, option in (("k", "--sandtable-k"), ("agent", "--sandtable-agent"), ("user", "--sandtable-user"),
                        ("run_seed", "--sandtable-seed")):
        want = first["run"][key]
        for name, doc in shards[1:]:
            got = doc["run"][key]
            if got != want:
                raise MergeError(
                    f"{first_name} and {name} ran with different {key} ({want!r} and {got!r}): "
                    f"shards of one run use the same {option}"
                )
    by_name: dict[str, tuple[str, str, str]] = {}  # domain name -> (sha256, path, shard)
    by_path: dict[str, tuple[str, str]] = {}  # path -> (name, shard)
    for name, doc in shards:
        for d in doc["run"]["domains"]:
            seen = by_name.get(d["name"])
            if seen is not None and seen[0] != d["sha256"]:
                raise MergeError(
                    f"domain {d['name']!r} differs between {seen[2]} (sha256 {_short(seen[0])}) and {name} "
                    f"(sha256 {_short(d['sha256'])}): shards must run the same domain files"
                )
            at = by_path.get(d["path"])
            if at is not None and at[0] != d["name"]:
                raise MergeError(
                    f"{d['path']} is domain {at[0]!r} in {at[1]} but {d['name']!r} in {name}: "
                    "shards must run the same domain files"
                )
            by_name.setdefault(d["name"], (d["sha256"], d["path"], name))
            by_path.setdefault(d["path"], (d["name"], name))
    where: dict[tuple[str, str, int], str] = {}
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
    floors = dict(floors or {})
    options = dict(first["run"].get("options") or {})
    options["fail_under"] = fail_under
    options["floors"] = dict(floors)
    meta = RunMeta(
        domains=sorted(({"name": n, "path": v[1], "sha256": v[0]} for n, v in by_name.items()),
                       key=lambda d: (d["name"], d["path"])),
        agent=first["run"]["agent"],
        user=first["run"]["user"],
        k=int(first["run"]["k"]),
        run_seed=int(first["run"]["run_seed"]),
        options=options,
        started_at=min(doc["run"]["started_at"] for _, doc in shards),
        finished_at=max(doc["run"]["finished_at"] for _, doc in shards),
        shards=[
            {
                "writer_version": doc["writer"]["version"],
                "started_at": doc["run"]["started_at"],
                "finished_at": doc["run"]["finished_at"],
                "trials": len(doc["trials"]),
            }
            for _, doc in shards
        ],
        command="merge",
    )
    return build_results(trials, meta, fail_under=fail_under, floors=floors)


def _err(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _print_summary(doc: dict[str, Any], folder: Path | None) -> None:
    from ._summary import render_terminal

    for line in render_terminal(doc["summary"]):
        print(line)
    print()
    if folder is not None:
        print(f"sandtable: results in {folder}/")
    for line in doc["gate"]["lines"]:
        print(line)


def _merge(args: argparse.Namespace) -> int:
    import pytest

    from ._artifacts import ResultsError, default_run_dir, read_results, write_run
    from ._gates import parse_fail_under, parse_floor

    try:
        fail_under = parse_fail_under(args.fail_under)
        floors = dict(parse_floor(f) for f in args.floor)
    except pytest.UsageError as e:
        return _err(str(e).replace("--sandtable-", "--"))
    shards = []
    for f in args.files:
        try:
            shards.append((f, read_results(f)))
        except ResultsError as e:
            return _err(str(e))
    try:
        doc = merge_results(shards, fail_under=fail_under, floors=floors)
    except MergeError as e:
        return _err(f"cannot merge: {e}")
    try:
        out = Path(args.out) if args.out else default_run_dir(Path.cwd(), (d["name"] for d in doc["run"]["domains"]))
        folder = write_run(doc, out)
    except OSError as e:
        return _err(f"cannot write the merged results: {e}")
    shown = Path(args.out) if args.out else folder.relative_to(Path.cwd())
    _print_summary(doc, Path(str(shown).rstrip("/")))
    gate = doc["gate"]
    if gate["set"]:
        return EXIT_OK if gate["passed"] else EXIT_GATE_FAILED
    s = doc["summary"]
    return EXIT_GATE_FAILED if (s["failed"] or s["errored"] or not gate["passed"]) else EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from ._artifacts import ResultsError, read_results, write_report

    try:
        doc = read_results(args.file)
    except ResultsError as e:
        return _err(str(e))
    src = Path(args.file)
    out = Path(args.out) if args.out else (src if src.is_dir() else src.parent)
    try:
        path = write_report(doc, out)
    except OSError as e:
        return _err(f"cannot write report.html: {e}")
    from ._summary import render_terminal

    for line in render_terminal(doc["summary"]):
        print(line)
    print()
    print(f"sandtable: report in {path}")
    for line in doc["gate"]["lines"]:
        print(line)
    return EXIT_OK
