"""Commands over finished runs: ``merge`` (shards into one run) and ``report`` (re-render).

``python -m pytest_sandtable merge a/results.json b/results.json -o merged/`` combines
the results of shards (a CI matrix that ran a share of the trials each, or several
hosts) into one results.json and report.html, with pass^k over all their trials.

``python -m pytest_sandtable report results.json [-o DIR]`` writes report.html anew
from a results.json and prints the terminal summary.

Both exit 2 for a bad or mismatched file, with one clear line saying which file and what.
Output cut short by a closed pipe (``... | head -1``) ends quietly: the files are
written all the same, and the exit status is what it would have been.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
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
    merge.add_argument("--prices", metavar="FILE", default=None,
                       help="prices of models without built-in list prices, as the shards' --sandtable-prices")
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


def _check_same_callables(shards: Sequence[tuple[str, dict[str, Any]]]) -> None:
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


def merge_results(
    shards: Sequence[tuple[str, dict[str, Any]]],
    *,
    fail_under: float | None = None,
    floors: dict[str, float] | None = None,
    prices: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, Any]:
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
    """
    from ..report.results_json import RunMeta, build_results, trials_of

    if not shards:
        raise MergeError("nothing to merge")
    first_name, first = shards[0]
    for name, doc in shards:
        why = doc["run"].get("stopped_early")
        if why:
            raise MergeError(f"{name} is a partial run (it stopped early: {why}); run that shard again in full")
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
    _check_same_callables(shards)
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
    collection_errors: dict[str, dict[str, str]] = {}
    for _, doc in shards:
        for c in doc["run"].get("collection_errors") or []:
            collection_errors.setdefault(c["path"], {"path": c["path"], "message": c["message"]})
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
        collection_errors=[collection_errors[p] for p in sorted(collection_errors)],
    )
    return build_results(trials, meta, fail_under=fail_under, floors=floors, prices=prices)


def _err(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _out(lines: Iterable[str]) -> None:
    """Print lines to stdout. A reader that went away (``| head -1``) ends the output
    quietly: no traceback, and nothing more is written to the closed pipe."""
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at devnull so that flush cannot fail
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # pragma: no cover - stdout without a file descriptor
            pass


def _summary_lines(doc: Mapping[str, Any], where: str | None) -> list[str]:
    """The terminal summary of a results.json: figures, where the files are, domain files
    that did not load, and the gate's lines as recorded."""
    from ..report.gates import collection_errors_line
    from ..report.summary import render_terminal

    lines = [*render_terminal(dict(doc["summary"])), ""]
    if where is not None:
        lines.append(where)
    errors = doc["run"].get("collection_errors") or []
    if errors:
        lines.append(collection_errors_line(errors))
    lines += doc["gate"]["lines"]
    return lines


def _merge(args: argparse.Namespace) -> int:
    from ..report.gates import GateError, parse_fail_under, parse_floor
    from ..report.results_json import ResultsError, default_run_dir, read_results, write_run

    try:
        fail_under = parse_fail_under(args.fail_under, "--fail-under")
        floors = dict(parse_floor(f, "--floor") for f in args.floor)
    except GateError as e:
        return _err(str(e))
    prices = None
    if args.prices:
        from ..report.prices import PricesError, all_prices

        try:
            prices = all_prices(args.prices)
        except PricesError as e:
            return _err(f"--prices: {e}")
    shards = []
    for f in args.files:
        try:
            shards.append((f, read_results(f)))
        except ResultsError as e:
            return _err(str(e))
    try:
        doc = merge_results(shards, fail_under=fail_under, floors=floors, prices=prices)
    except MergeError as e:
        return _err(f"cannot merge: {e}")
    try:
        out = Path(args.out) if args.out else default_run_dir(Path.cwd(), (d["name"] for d in doc["run"]["domains"]))
        folder = write_run(doc, out)
    except OSError as e:
        return _err(f"cannot write the merged results: {e}")
    shown = Path(args.out) if args.out else folder.relative_to(Path.cwd())
    _out(_summary_lines(doc, f"sandtable: results in {Path(str(shown).rstrip('/'))}/"))
    gate = doc["gate"]
    if gate["set"]:
        return EXIT_OK if gate["passed"] else EXIT_GATE_FAILED
    s = doc["summary"]
    return EXIT_GATE_FAILED if (s["failed"] or s["errored"] or not gate["passed"]) else EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from ..report.results_json import ResultsError, read_results, write_report

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
    _out(_summary_lines(doc, f"sandtable: report in {path}"))
    return EXIT_OK
