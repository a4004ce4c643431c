"""``init`` and ``review``: draft a domain from SOP notes, then review what was drafted.

``init NOTES... -o DIR --model claude:<m>|openai:<m>`` drafts ``DIR/sandtable.yaml``
(``--dry-run``: the plan and its most expensive cost, no call). Exit 0 when it wrote
a draft that validates, 1 when the draft still had problems after the repair rounds
(kept as ``DIR/sandtable.draft.yaml``), 2 for bad input or a model that failed.

``review PATH`` walks the pending items in the terminal, or applies ``--accept`` /
``--reject`` / ``--accept-all``. Exit 0, or 2 when it could not go on.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..report.fmt import plural
from .exits import EXIT_ERROR, EXIT_FLAGGED, EXIT_OK

__all__ = ["add_subcommands"]


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``init`` and ``review`` to ``python -m pytest_sandtable``'s subcommands."""
    init_cmd = subparsers.add_parser(
        "init",
        help="draft a domain (sandtable.yaml) from SOP notes with a model",
        description="Draft DIR/sandtable.yaml from SOP notes (text or markdown files): description, policy, "
        "tables with fictional seed rows, tools, rules quoting the notes, tasks with references. Every drafted "
        "rule and task is pending review. The draft must validate: problems go back to the model for a few "
        "repair rounds, and a draft that still has problems is kept as DIR/sandtable.draft.yaml instead "
        "(exit 1). Keys come from ANTHROPIC_API_KEY / OPENAI_API_KEY.",
    )
    init_cmd.add_argument("notes", nargs="+", metavar="NOTES", help="a notes file, or a folder of .md/.txt files")
    init_cmd.add_argument("-o", "--out", default=".", metavar="DIR", help="where sandtable.yaml goes (default: .)")
    init_cmd.add_argument("--model", required=True, metavar="SPEC", help="claude:<model> or openai:<model>")
    init_cmd.add_argument("--base-url", metavar="URL",
                          help="an OpenAI-compatible endpoint, or a local Anthropic-compatible one")
    init_cmd.add_argument("--dry-run", action="store_true", help="print the plan and its cost; call nothing")
    init_cmd.add_argument("--force", action="store_true", help="replace an existing DIR/sandtable.yaml")
    init_cmd.add_argument("--repairs", type=int, default=2, metavar="N",
                          help="repair rounds for a draft that does not validate (default: 2)")
    init_cmd.add_argument("--max-tokens", type=int, default=16_000, metavar="N",
                          help="output tokens per model call (default: 16000)")
    init_cmd.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                          help="seconds per model call (default: 600)")
    init_cmd.add_argument("--prices", metavar="FILE", help="prices for models without a built-in list price")
    init_cmd.set_defaults(func=init)

    review_cmd = subparsers.add_parser(
        "review",
        help="accept, edit or reject drafted rules and tasks (pending: true)",
        description="Walk the pending rules and tasks of a domain file one by one ([a]ccept, [e]dit in "
        "$EDITOR, [r]eject, [s]kip, [q]uit), or decide with --accept / --reject / --accept-all. Each change "
        "is written in place, only when the file still validates.",
    )
    review_cmd.add_argument("path", metavar="PATH", help="a domain file, or a folder holding one")
    review_cmd.add_argument("--accept", nargs="+", default=[], metavar="ID", help="accept these items")
    review_cmd.add_argument("--reject", nargs="+", default=[], metavar="ID", help="reject (remove) these items")
    review_cmd.add_argument("--accept-all", action="store_true", help="accept every pending item")
    review_cmd.set_defaults(func=review)


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def init(args: argparse.Namespace) -> int:
    from ..authoring.draft import (
        DraftError,
        DraftRequest,
        cost_line,
        endpoint_of,
        make_model,
        parse_model,
        plan_lines,
        run_draft,
    )
    from ..authoring.notes import NotesError, read_notes
    from ..engine.api import Usage
    from ..report.prices import PricesError, all_prices

    if args.repairs < 0:
        return _error(f"--repairs must be 0 or more, got {args.repairs}")
    if args.max_tokens < 1 or args.timeout <= 0:
        return _error("--max-tokens and --timeout must be more than 0")
    try:
        provider, model_id = parse_model(args.model)
        notes = read_notes(args.notes)
        prices = all_prices(args.prices)
    except (ValueError, NotesError, PricesError) as e:
        return _error(str(e))
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        return _error(f"-o {args.out}: is a file; expected a folder")
    req = DraftRequest(notes, provider, model_id, out, args.base_url, args.repairs, args.max_tokens, args.timeout,
                       prices=prices)
    exists = req.target.exists() and not args.force
    if args.dry_run:
        env = "ANTHROPIC_API_KEY" if provider == "claude" else "OPENAI_API_KEY"
        key_note = f"key from {env}: {'set' if os.environ.get(env, '').strip() else 'not set'}"
        for line in plan_lines(req, endpoint_of(req), key_note):
            print(line)
        if exists:
            print(f"note: {req.target} exists; a real run needs --force to replace it")
        print("nothing was called (--dry-run)")
        return EXIT_OK
    if exists:
        return _error(f"{req.target} exists; pass --force to replace it")
    try:
        model = make_model(req)
    except ValueError as e:
        return _error(str(e))
    out.mkdir(parents=True, exist_ok=True)
    usage = Usage()
    try:
        outcome = run_draft(req, model, usage)
    except DraftError as e:
        print(cost_line(usage, prices))
        return _error(f"{e}; nothing was written")
    except OSError as e:
        return _error(f"cannot write to {out}: {e.strerror or e}")
    rounds = plural(outcome.calls - 1, "repair round")
    if not outcome.ok:
        for p in outcome.problems:
            print(p)
        print(f"model calls: {outcome.calls} ({rounds})")
        print(cost_line(usage, prices))
        print(f"error: the draft still has {plural(len(outcome.problems), 'problem')} after {rounds}; kept it as "
              f"{outcome.path} (problems listed at its end); {req.target} was not written", file=sys.stderr)
        return EXIT_FLAGGED
    d = outcome.domain
    assert d is not None
    print(f"wrote {outcome.path}: {plural(len(d.tables), 'table')}, {plural(len(d.tools), 'tool')}, "
          f"{plural(len(d.invariants), 'rule')}, {plural(len(d.tasks), 'task')}, all pending review; "
          f"{plural(outcome.copied, 'value')} copied from the notes marked")
    print(f"model calls: {outcome.calls} ({rounds})")
    print(cost_line(usage, prices))
    print(f"next: python -m pytest_sandtable review {out}")
    return EXIT_OK


def review(args: argparse.Namespace) -> int:
    from ..authoring.review import Invalid, ReviewError, ReviewFile, interactive, scripted
    from ..domain.files import find_domain_files

    path = Path(args.path)
    if path.is_dir():
        found = list(find_domain_files(path))
        if not found:
            return _error(f"no sandtable.yaml or *.sandtable.yaml under {args.path}")
        if len(found) > 1:
            return _error(f"{len(found)} domain files under {args.path} ({', '.join(map(str, found[:3]))}...); "
                          "name one")
        path = found[0]
    elif not path.exists():
        return _error(f"no such file or folder: {args.path}")
    try:
        rf = ReviewFile(path)
        pending = rf.pending()
        if not pending:
            items = rf.items()
            rules = sum(i.kind == "rule" for i in items)
            print(f"{path}: nothing pending review ({plural(rules, 'rule')}, "
                  f"{plural(len(items) - rules, 'task')}, none pending)")
            return EXIT_OK
        if args.accept or args.reject or args.accept_all:
            tally = scripted(rf, args.accept, args.reject, args.accept_all, print)
        else:
            tally = interactive(rf, _ask, print)
        print(tally.summary(len(rf.pending()), path))
    except Invalid as e:
        for p in e.problems:
            print(p)
        return _error(str(e))
    except ReviewError as e:
        return _error(str(e))
    return EXIT_OK


def _ask(prompt: str) -> str | None:
    try:
        return input(prompt)
    except EOFError:
        print()
        return None
