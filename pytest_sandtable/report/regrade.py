"""Grade the stored trials of a run again, against edited domain files, without any agent
or model: ``python -m pytest_sandtable regrade`` (docs/grading.md).

What may change is what grades a trial: expectations, rules (the engine checks every
call against them but never blocks one, so no rule changes what the agent saw), soft,
ids, tags, critical, descriptions and quotes of rules, new checks. What may not is
what the agent or the simulated user was given or shown: the description and policy,
the tools (descriptions, parameters, checks, ops), the seed world, a task's ``given``,
``user``, ``max_turns``, ``faults`` and ``events``, and, for trials the reference agent played, the task's
``reference``. Those are compared with the domain file the run used, found by the
sha256 the run recorded (at its path, or in its git history; the path looked up only
inside the current directory, the run's rootdir and the run folder, and a file there
parsed only once its bytes, or its git history, are known to hold it); then each trial is
replayed call by call (``engine.trial.regrade_trial``), and a call whose outcome
differs from the stored one refuses that trial. Every refusal is collected and none is
written: :class:`RegradeError` holds one line per refusal.

The trials are read from results.json one at a time (:mod:`.reading`), twice: once for
the tasks that have trials (what is compared), then to be regraded, each handed to a
:class:`~pytest_sandtable.report.spool.TrialSpool` as a run's trials are, so that
memory holds only what the summary reads of each, and results.json and report.html are
written from the spool as a run writes them.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, cast

from ..domain.model import Domain, ScriptLine, Task, Tool
from ..domain.wording import show
from ..engine.results import ERRORED, TrialResult
from .reading import StoredRun
from .results_json import RunMeta, build_spooled, iso_utc
from .spool import TrialSpool
from .types import AdaptiveSection, Results

__all__ = [
    "MAX_TRIAL_LINES",
    "DomainFiles",
    "RegradeError",
    "Regraded",
    "changes_given",
    "domain_files",
    "find_original",
    "regrade_run",
    "search_folders",
]

MAX_TRIAL_LINES = 20
"""Trials refused that are named one line each; the rest are counted in one more line."""
_CLIPPED = ("… [clipped: ", "[not shown: ")
_GIT_COMMITS = 500  # versions of a domain file searched for the one a run used
_GIT_TIMEOUT = 30.0


class RegradeError(Exception):
    """The run cannot be regraded: one line per reason (a field that changed, a trial
    that does not replay)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass
class DomainFiles:
    """One domain of the run: the edited file to grade against (``path`` as given) and
    the file the run used (``original``, with where it was found)."""

    name: str
    path: str
    edited: Domain
    original: Domain
    original_from: str


# --------------------------------------------------------------------------- the original file


def find_original(recorded_path: Path, sha256: str) -> tuple[bytes, str] | None:
    """The bytes of the domain file a run used, told by its sha256, and where they were
    found: the file at its recorded path if it is unchanged, else the version of that
    path in its git repository (the index, then up to :data:`_GIT_COMMITS` commits of
    any branch) with that hash; None when neither has it."""
    raw = _read_regular(recorded_path)
    if raw is not None and hashlib.sha256(raw).hexdigest() == sha256:
        return raw, str(recorded_path)
    return _git_version(recorded_path, sha256)


def _git(folder: Path, *args: str) -> bytes | None:
    """A read-only git command's output; None when git is missing or fails."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, timeout=_GIT_TIMEOUT,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _git_version(path: Path, sha256: str) -> tuple[bytes, str] | None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return None
    log = _git(folder, "log", "--all", f"-n{_GIT_COMMITS}", "--format=%H", "--", path.name)
    revisions = [""] + (log.decode("ascii", "replace").split() if log else [])  # "": the index
    for rev in revisions:
        raw = _git(folder, "show", f"{rev}:./{path.name}")
        if raw is not None and hashlib.sha256(raw).hexdigest() == sha256:
            return raw, f"{path} in git ({rev[:12]})" if rev else f"{path} in the git index"
    return None


# --------------------------------------------------------------------------- what was given


def _line(obj: Tool | Task) -> str:
    return f":{obj.pos.line}" if obj.pos else ""


def _script(lines: Sequence[ScriptLine]) -> list[tuple[str, Any, bool]]:
    """A script as the user gets it (where each line sits in the file does not matter)."""
    return [(x.say, x.when, x.end) for x in lines]


def _tool_changes(original: Domain, edited: Domain, where: str) -> Iterable[str]:
    for name in original.tools:
        if name not in edited.tools:
            yield f"tools: {name} was removed (the agent was given it)"
    for name, tool in edited.tools.items():
        old = original.tools.get(name)
        if old is None:
            yield f"tools: {name} was added ({where}{_line(tool)}; the agent was not given it)"
            continue
        for field in ("description", "params", "checks", "ops", "handoff"):
            if getattr(old, field) != getattr(tool, field):
                yield f"tools[{name}].{field} changed ({where}{_line(tool)}): the agent was given the old one"


def _first_row_change(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], key: str) -> str:
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return f"row {b.get(key, a.get(key, i + 1))} changed"
    return f"{abs(len(new) - len(old))} row(s) {'added' if len(new) > len(old) else 'removed'}"


def _world_changes(original: Domain, edited: Domain) -> Iterable[str]:
    for name in sorted(set(original.tables) | set(edited.tables)):
        old, new = original.tables.get(name), edited.tables.get(name)
        if old is None or new is None:
            yield f"world.{name} was {'added' if old is None else 'removed'}: the agent's calls ran without it"
        elif (old.key, old.key_format) != (new.key, new.key_format):
            yield f"world.{name} key changed: the agent's calls ran against the old one"
        elif old.rows != new.rows:
            yield (f"world.{name}: {_first_row_change(old.rows, new.rows, new.key)}: "
                   "the agent's calls ran against the old rows")


def _task_changes(original: Domain, edited: Domain, tasks: Mapping[str, bool], where: str) -> Iterable[str]:
    """``tasks``: the id of each task with trials, and whether the reference agent played one."""
    for task_id, by_reference in tasks.items():
        try:
            new = edited.task(task_id)
        except KeyError:
            yield f"tasks[{task_id}] is not in {where}: its trials have nothing to be graded against"
            continue
        try:
            old = original.task(task_id)
        except KeyError:
            yield f"tasks[{task_id}] is not in the file the run used: its trials cannot be compared"
            continue
        at = f"{where}{_line(new)}"
        if old.given != new.given:
            yield f"tasks[{task_id}].given changed ({at}): the trials started from the old world"
        for field in ("persona", "instructions", "opening", "say_unknown"):
            if getattr(old.user, field) != getattr(new.user, field):
                yield f"tasks[{task_id}].user.{field} changed ({at}): the simulated user was given the old one"
        if _script(old.user.script) != _script(new.user.script):
            yield f"tasks[{task_id}].user.script changed ({at}): the simulated user was given the old one"
        if old.max_turns != new.max_turns:
            yield f"tasks[{task_id}].max_turns changed ({at}): it bounded the conversations"
        for field in ("faults", "events"):  # what the agent's calls met (compared without their lines)
            if getattr(old, field) != getattr(new, field):
                yield f"tasks[{task_id}].{field} changed ({at}): the agent's calls met the old ones"
        if by_reference and old.reference != new.reference:
            yield f"tasks[{task_id}].reference changed ({at}): the reference agent played the old one"
        for field in ("setup", "history", "solo", "ticket"):  # issue 22, part B (compared without their lines)
            if getattr(old, field) != getattr(new, field):
                yield f"tasks[{task_id}].{field} changed ({at}): the trials started from the old one"


def changes_given(original: Domain, edited: Domain, tasks: Mapping[str, bool], where: str) -> list[str]:
    """What changed between the file a run used and the edited one in what the agent or
    the simulated user was given, one line per field; [] when nothing did. ``tasks``
    maps the id of each task with trials to whether the reference agent played one;
    ``where`` names the edited file in the lines."""
    out = [f"{field} changed ({where}): the agent was given the old one"
           for field in ("description", "policy") if getattr(original, field) != getattr(edited, field)]
    out += _tool_changes(original, edited, where)
    out += _world_changes(original, edited)
    out += _task_changes(original, edited, tasks, where)
    return out


# --------------------------------------------------------------------------- trials


def _clipped_field(t: TrialResult) -> str | None:
    """The first stored value the replay or the grading reads that was cut or left out."""
    for i, call in enumerate(t.calls):
        for field in ("args", "result", "error"):
            if _holds_marker(call.get(field)):
                return f"calls[{i}].{field}"
    for i, entry in enumerate(t.transcript):
        if _holds_marker(entry.get("text")):
            return f"transcript[{i}].text"
    return None


def _holds_marker(value: Any) -> bool:
    if isinstance(value, str):
        return any(m in value for m in _CLIPPED)
    if isinstance(value, dict):
        return any(_holds_marker(k) or _holds_marker(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_marker(v) for v in value)
    return False


def _trial_name(t: TrialResult) -> str:
    return f"{t.domain}/{t.task} trial {t.trial}"


def _regraded(t: TrialResult, domain: Domain, references: dict[str, TrialResult | None]) -> TrialResult:
    """One trial regraded; raises NotReproducible or RegradeError's line as ValueError."""
    from ..engine.trial import run_reference_trial

    task = domain.task(t.task)
    if t.verdict == ERRORED:  # never graded: it stays errored, under the task's new tags
        return TrialResult.from_dict({**t.to_dict(), "tags": list(task.tags), "critical": task.critical,
                                      "shared_tags": [x for x in task.tags if x in domain.shared_tags],
                                      "pending": domain.pending_for(task)})
    if t.error:
        raise ValueError(f"its record is incomplete ({t.error})")
    clipped = _clipped_field(t)
    if clipped is not None:
        raise ValueError(f"{clipped} was cut when stored (a value over the size cap), so its world cannot be rebuilt")
    from ..engine.trial import regrade_trial

    if t.task not in references:
        references[t.task] = run_reference_trial(domain, task)
    return regrade_trial(domain, task, t, references[t.task])


def _regrade_trials(trials: Iterable[dict[str, Any]], domains: Mapping[str, DomainFiles],
                    spool: TrialSpool) -> dict[tuple[str, str], int]:
    """Regrade each stored trial into ``spool``, one at a time; returns how many went
    from one verdict to another (``(before, after) -> count``). Raises
    :class:`RegradeError` with every trial refused (then the spool is not whole)."""
    from ..engine.trial import NotReproducible

    changes: dict[tuple[str, str], int] = {}
    refused: list[str] = []
    references: dict[str, dict[str, TrialResult | None]] = {name: {} for name in domains}
    for stored in trials:
        t = TrialResult.from_dict(stored)
        files = domains.get(t.domain)
        if files is None:
            refused.append(f"cannot regrade {_trial_name(t)}: its domain is not in run.domains")
            continue
        try:
            new = _regraded(t, files.edited, references[t.domain])
        except (NotReproducible, ValueError) as e:
            refused.append(f"cannot regrade {_trial_name(t)}: {e}")
            continue
        except (KeyError, IndexError, TypeError) as e:  # a transcript entry naming a call that is not there
            refused.append(f"cannot regrade {_trial_name(t)}: its record is inconsistent "
                           f"({type(e).__name__}: {e})")
            continue
        if refused:  # nothing will be written: the rest are only checked
            continue
        spool.add_stored(new.to_dict())
        if new.verdict != t.verdict:
            changes[(t.verdict, new.verdict)] = changes.get((t.verdict, new.verdict), 0) + 1
    if refused:
        shown = refused[:MAX_TRIAL_LINES]
        if len(refused) > len(shown):
            shown.append(f"... and {len(refused) - len(shown)} more trials cannot be regraded")
        raise RegradeError(shown)
    return changes


# --------------------------------------------------------------------------- the run


@dataclass
class Regraded:
    """A regraded run: its results document (whose trials are read from ``spool``, so
    write it before closing this) and how many trials went from one verdict to
    another (``(before, after) -> count``)."""

    results: Results
    changes: dict[tuple[str, str], int]
    spool: TrialSpool

    def close(self) -> None:
        """Delete the spool file (the results' trials can no longer be read)."""
        self.spool.close()

    def __enter__(self) -> Regraded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tasks_with_trials(trials: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, bool]]:
    """For each domain, the id of each task with trials, and whether the reference agent played one."""
    tasks: dict[str, dict[str, bool]] = {}
    for t in trials:
        of = tasks.setdefault(t["domain"], {})
        of[t["task"]] = of.get(t["task"], False) or t["agent"] == "reference"
    return tasks


def regrade_run(
    stored: StoredRun,
    domains: Sequence[DomainFiles],
    *,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    spool_in: Path | None = None,
) -> Regraded:
    """``stored``'s trials graded against the edited domains, read and regraded one at
    a time into a :class:`~pytest_sandtable.report.spool.TrialSpool` (its file in
    ``spool_in``; the system's temporary folder when None), so that memory holds only
    what the summary reads of each, as during a run. Raises :class:`RegradeError` with
    every refusal: a field given to the agent or user that changed, a trial that does
    not replay; nothing is half done."""
    problems: list[str] = []
    tasks = _tasks_with_trials(stored.trials())
    for d in domains:
        problems += [f"cannot regrade {d.name}: {line}" for line in
                     changes_given(d.original, d.edited, tasks.get(d.name, {}), d.path)]
    if problems:
        raise RegradeError(problems)
    spool = TrialSpool(spool_in)
    try:
        changes = _regrade_trials(stored.trials(), {d.name: d for d in domains}, spool)
        results = _results(spool, stored, domains, prices)
    except BaseException:
        spool.close()
        raise
    return Regraded(results, changes, spool)


def _results(spool: TrialSpool, stored: StoredRun, domains: Sequence[DomainFiles],
             prices: Mapping[str, Mapping[str, float]] | None) -> Results:
    """The document of the regraded trials, under the run's metadata and gate options."""
    run = stored.doc["run"]
    options = run.get("options") or {}
    meta = RunMeta(
        domains=list(run["domains"]), agent=run["agent"], user=run["user"], k=run["k"], run_seed=run["run_seed"],
        options=dict(options), started_at=run["started_at"], finished_at=run["finished_at"],
        shards=run.get("shards"), command="regrade", collection_errors=run.get("collection_errors"),
        stopped_early=run.get("stopped_early"),
    )
    section = _adaptive(spool, stored.doc.get("adaptive"))
    from .adaptive import attach, failing_tasks

    results = build_spooled(spool, meta, fail_under=options.get("fail_under"),
                            floors=options.get("floors") or {}, prices=prices,
                            failing=failing_tasks(section) if section is not None else ())
    if section is not None:
        attach(results, section)
    # the schema's optional `run.regraded` (1.2), which RunMeta does not write
    cast(dict[str, Any], results["run"])["regraded"] = {
        "from": str(stored.source),
        "from_sha256": stored.sha256,
        "domains": [{"name": d.name, "path": d.path.replace(os.sep, "/"), "sha256": d.edited.sha256}
                    for d in domains],
        "at": iso_utc(),
    }
    return results


def _adaptive(spool: TrialSpool, given: Any) -> AdaptiveSection | None:
    """An adaptive run's section, decided again from the regraded outcomes under the run's
    own design: a task may now settle at another trial (the later ones uncounted) or stay
    open (its remaining trials never ran). None for a run that was not adaptive."""
    if not given:
        return None
    from .adaptive import adaptive_section

    return adaptive_section(given["design"], spool.trials(),
                            tasks=[(t["domain"], t["task"]) for t in given.get("tasks") or ()],
                            stopped=given.get("stopped"))


# --------------------------------------------------------------------------- the files


def search_folders(results_file: Path, cwd: Path | None = None) -> list[Path]:
    """The folders a run's domain paths (``run.domains[].path``, relative to the pytest
    rootdir) are looked up in, in order: the current directory, the rootdir a run in the
    default place implies (``ROOT/.sandtable/runs/NAME/results.json``), the folder
    results.json sits in. Each as shown to the user: relative to ``cwd`` when inside it."""
    here = (cwd or Path.cwd()).absolute()
    folder = results_file.absolute().parent
    found = [here]
    if folder.parent.name == "runs" and folder.parent.parent.name == ".sandtable":
        found.append(folder.parent.parent.parent)
    found.append(folder)
    out: list[Path] = []
    seen: set[Path] = set()
    for f in found:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            out.append(_shown(f, here))
    return out


def _shown(path: Path, here: Path) -> Path:
    try:
        return path.relative_to(here)
    except ValueError:
        return path


def _confined(recorded: str) -> bool:
    """``run.domains[].path`` is a relative path that stays inside the folder it is joined to."""
    if not recorded or "\x00" in recorded or "\\" in recorded:
        return False
    p = PurePosixPath(recorded)
    return not p.is_absolute() and ".." not in p.parts and ":" not in p.parts[0]


def _read_regular(path: Path) -> bytes | None:
    """The bytes of a regular file of at most the loader's size cap; None for anything
    else (missing, a folder, a pipe or device, too big), read without blocking."""
    from ..domain.files import read_regular
    from ..domain.loader import MAX_FILE_BYTES

    try:
        return read_regular(path, MAX_FILE_BYTES, "a domain file")
    except (OSError, ValueError):  # FileRefused is an OSError
        return None


def _loaded(path: Path) -> Domain:
    """The domain in ``path``; RegradeError with one line per problem (FILE:LINE: ...) when it does not load."""
    from ..domain.errors import DomainError
    from ..domain.loader import load_domain

    try:
        return load_domain(path)
    except DomainError as e:
        raise RegradeError([str(p) for p in e.problems]) from None


def _from_bytes(name: str, raw: bytes, where: str, filename: Path) -> Domain:
    """The domain the run used, from its bytes (found at ``where``); its handler modules
    are imported from ``filename``'s folder."""
    from ..domain.errors import DomainError
    from ..domain.loader import load_domain_text

    try:
        domain = load_domain_text(raw.decode("utf-8-sig"), str(filename))
    except (DomainError, UnicodeDecodeError) as e:
        raise RegradeError([f"cannot regrade {name}: the domain file the run used ({where}) does not load: "
                            f"{str(e).splitlines()[0]}"]) from None
    domain.sha256 = hashlib.sha256(raw).hexdigest()
    return domain


@dataclass
class _Recorded:
    """One domain of ``run.domains``: its name, path and sha256, and where the path is."""

    name: str
    path: str
    sha256: str
    at: list[Path]  # the path joined to each search folder, in order

    def existing(self) -> Path | None:
        return next((p for p in self.at if p.exists() and not p.is_dir()), None)

    def original(self) -> tuple[Domain, str] | None:
        """The file the run used, told by its sha256 before it is parsed: at the path in a
        search folder, else in the git history of one; None when nowhere."""
        for p in self.at:
            raw = _read_regular(p)
            if raw is not None and hashlib.sha256(raw).hexdigest() == self.sha256:
                return _from_bytes(self.name, raw, str(p), p), str(p)
        for p in self.at:
            found = _git_version(p, self.sha256)
            if found is not None:
                return _from_bytes(self.name, found[0], found[1], p), found[1]
        return None


def _recorded(doc: Mapping[str, Any], results: str, folders: Sequence[Path]) -> tuple[dict[str, _Recorded], list[str]]:
    out: dict[str, _Recorded] = {}
    problems: list[str] = []
    for d in doc["run"]["domains"]:
        if not _confined(d["path"]):
            problems.append(f"cannot regrade {d['name']}: {results} names its domain file {show(d['path'])}, not a "
                            "path inside the current directory or the run's folder, so it is not read")
        else:
            out[d["name"]] = _Recorded(d["name"], d["path"], d["sha256"], [f / d["path"] for f in folders])
    return out, problems


def _where(folders: Sequence[Path]) -> str:
    return " or ".join("the current directory" if str(f) == "." else str(f) for f in folders)


def domain_files(doc: Mapping[str, Any], results: str, given: Sequence[str],
                 folders: Sequence[Path]) -> list[DomainFiles]:
    """Each domain of the run with its edited file and the file the run used. The edited
    file is one of ``given`` when its name is the domain's, else the file at the path
    the run recorded, in the first of ``folders`` (see :func:`search_folders`) that has
    it. The recorded path must stay inside those folders, and a file there is parsed
    only once the file the run used is known (by its sha256, there or in its git
    history): a file that is not the one the run used, with no history that has it, is
    one line, never parsed or quoted. Raises RegradeError with every problem found."""
    recorded, problems = _recorded(doc, results, folders)
    if problems:
        raise RegradeError(problems)
    edited: dict[str, tuple[str, Domain]] = {}
    for arg in given:
        try:
            domain = _loaded(Path(arg))
        except RegradeError as e:
            problems += e.problems
            continue
        if domain.name not in recorded:
            ran = ", ".join(repr(n) for n in recorded) or "no domain"
            problems.append(f"{arg}: domain {domain.name!r} is not in {results} (it ran {ran})")
        elif domain.name in edited:
            problems.append(f"{arg}: domain {domain.name!r} is given twice ({edited[domain.name][0]} and {arg})")
        else:
            edited[domain.name] = (arg, domain)
    if problems:
        raise RegradeError(problems)
    out: list[DomainFiles] = []
    for name, r in recorded.items():
        try:
            out.append(_given(r, *edited[name]) if name in edited else _in_place(r, results, folders))
        except RegradeError as e:
            problems += e.problems
    if problems:
        raise RegradeError(problems)
    return out


def _given(r: _Recorded, shown: str, domain: Domain) -> DomainFiles:
    """A domain whose edited file was given: the file the run used is found by its sha256."""
    if domain.sha256 == r.sha256:
        return DomainFiles(r.name, shown, domain, domain, "unchanged")
    found = r.original()
    if found is None:
        raise RegradeError([
            f"cannot regrade {r.name}: the domain file the run used (sha256 {r.sha256[:12]}) is neither "
            f"at {r.path} nor in its git history, so what the agent was given cannot be compared: "
            "put it back there and give the edited file as an argument"
        ])
    return DomainFiles(r.name, shown, domain, *found)


def _in_place(r: _Recorded, results: str, folders: Sequence[Path]) -> DomainFiles:
    """A domain graded against the file at its recorded path, edited in place: parsed
    only when it is the file the run used, or that one is in its git history."""
    path = r.existing()
    if path is None:
        raise RegradeError([f"{r.path}: no such file in {_where(folders)} (the domain file of {r.name!r} that "
                            f"{results} names; give the edited file as an argument)"])
    raw = _read_regular(path)
    if raw is not None and hashlib.sha256(raw).hexdigest() == r.sha256:
        original = _from_bytes(r.name, raw, str(path), path)
        original.path = str(path)
        return DomainFiles(r.name, str(path), original, original, "unchanged")
    found = _git_version(path, r.sha256)
    if found is None:
        raise RegradeError([
            f"cannot regrade {r.name}: {path} is not the domain file the run used (sha256 {r.sha256[:12]}) and "
            "no git history holds that one, so what the agent was given cannot be compared: save the edit as a "
            f"copy, put the file the run used back at {path} (or in git), and regrade with the copy: "
            f"regrade {results} COPY.yaml -o DIR"
        ])
    return DomainFiles(r.name, str(path), _loaded(path), _from_bytes(r.name, found[0], found[1], path), found[1])
