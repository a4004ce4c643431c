"""``import``: another benchmark's environment as a sandtable domain.

``python -m pytest_sandtable import tau-bench PATH -o DIR`` reads a τ-bench
``envs/<name>`` folder (retail or airline) and writes ``DIR/sandtable.yaml`` and the
handler module its tools name (docs/import.md); ``import tau2 PATH -o DIR`` does the
same for a τ²-bench domain folder (``data/tau2/domains/airline`` or ``.../retail``). The work is in
:mod:`pytest_sandtable.importer`; this module parses arguments and prints.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .exits import EXIT_OK

__all__ = ["add_subcommands"]


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``import`` to ``python -m pytest_sandtable``'s subcommands."""
    cmd = subparsers.add_parser(
        "import",
        help="write a domain from another benchmark's environment (τ-bench, τ²-bench)",
        description="Write a sandtable domain from another benchmark's environment. "
        "`import tau-bench PATH -o DIR` reads a τ-bench env folder (tau_bench/envs/retail or .../airline: "
        "its tools, data, wiki.md and tasks_test.py, read and never run) and writes DIR/sandtable.yaml "
        "and the handler module its tools name. See docs/import.md.",
    )
    sources = cmd.add_subparsers(dest="source", metavar="SOURCE", required=True)
    tau = sources.add_parser(
        "tau-bench",
        help="a τ-bench env folder (retail or airline)",
        description="Import a τ-bench env folder (retail or airline) as a sandtable domain.",
    )
    tau.add_argument("path", metavar="PATH", type=Path, help="the env folder, such as tau_bench/envs/retail")
    tau.add_argument("-o", "--output", metavar="DIR", type=Path, required=True, help="the folder to write into")
    tau.add_argument("--force", action="store_true", help="write into DIR even when it is not empty")
    tau.set_defaults(func=import_tau_bench)
    tau2 = sources.add_parser(
        "tau2",
        help="a τ²-bench domain folder (airline or retail)",
        description="Import a τ²-bench domain (data/tau2/domains/airline or .../retail: db.json, tasks.json, "
        "split_tasks.json and policy.md, with the toolkit's source in src/tau2/domains/NAME, read and never run) "
        "as a sandtable domain.",
    )
    tau2.add_argument("path", metavar="PATH", type=Path,
                      help="the domain's data folder, such as data/tau2/domains/airline")
    tau2.add_argument("-o", "--output", metavar="DIR", type=Path, required=True, help="the folder to write into")
    tau2.add_argument("--split", default="base", choices=("base", "train", "test", "small"),
                      help="the task split to import (default: base, the one τ² reports on)")
    tau2.add_argument("--source", metavar="DIR", type=Path, default=None,
                      help="the toolkit's source folder (default: PATH/../../../../src/tau2/domains/NAME)")
    tau2.add_argument("--force", action="store_true", help="write into DIR even when it is not empty")
    tau2.set_defaults(func=import_tau2)


def import_tau_bench(args: argparse.Namespace) -> int:
    from ..importer.tau_bench import TauImportError, import_tau_bench
    from ..report.fmt import plural
    from .runs import _err, _out

    try:
        done = import_tau_bench(args.path, args.output, force=args.force)
    except TauImportError as e:
        return _err(str(e))
    except OSError as e:  # the output folder cannot be written
        return _err(f"{args.output}: cannot write: {e.strerror or e}")
    rows = ", ".join(f"{n} {t}" for t, n in done.rows.items())
    made = f"{plural(done.tools, 'tool')}, {plural(done.tasks, 'task')}, {plural(done.rules, 'rule')} from the policy"
    _out([
        f"wrote {done.domain_file} ({made}; {rows})",
        f"wrote {done.handler_file}",
        f"next: python -m pytest_sandtable lint {done.domain_file}",
    ])
    return EXIT_OK


def import_tau2(args: argparse.Namespace) -> int:
    from ..importer.tau2 import Tau2ImportError, import_tau2
    from ..report.fmt import plural
    from .runs import _err, _out

    try:
        if Path(args.path).is_dir() and Path(args.path).resolve().name == "telecom":  # dual control
            from ..importer.tau2_telecom import import_telecom

            done = import_telecom(Path(args.path), Path(args.output), args.split, args.force, args.source)
        else:
            done = import_tau2(args.path, args.output, split=args.split, force=args.force, source=args.source)
    except Tau2ImportError as e:
        return _err(str(e))
    except OSError as e:  # the output folder cannot be written
        return _err(f"{args.output}: cannot write: {e.strerror or e}")
    rows = ", ".join(f"{n} {t}" for t, n in done.rows.items())
    _out([
        f"wrote {done.domain_file} ({plural(done.tools, 'tool')}, {plural(done.tasks, 'task')} of the "
        f"{args.split} split; {rows})",
        f"wrote {done.handler_file}",
        f"next: python -m pytest_sandtable lint {done.domain_file}",
    ])
    return EXIT_OK
