"""What a run leaves behind: results.json (versioned, schema-checked) and report.html.

- :func:`build_results` turns trials and the run's metadata into the results.json
  document (summary, per-task verdicts and gate outcome included);
- :func:`write_run` writes results.json and report.html into a folder, each
  atomically (a temporary file in the same folder, then :func:`os.replace`), after
  scrubbing secrets out of them;
- :func:`read_results` reads one back, checking its ``schema_version`` and the JSON
  Schema, and raises :class:`ResultsError` (file and what is wrong) for a bad file.

The layout is documented in docs/results.md; the schema is
``pytest_sandtable/schemas/results.schema.json``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from importlib import resources
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, BinaryIO, cast

from ..domain.files import FileRefused, read_regular, write_atomic
from ..engine.redact import public_url
from ..engine.results import TrialResult
from .fmt import clip, plural
from .safe import (
    REDACTED,
    clip_text,
    encoded_trial,
    scrub_secrets,
    scrub_text,
    scrubbed_line,
    secret_values,
    shown_trial,
    utf8,
)
from .spool import SpooledTrials, TrialSpool
from .types import Gate, Options, Results, Run, StoredTrial, Summary, TaskVerdict

__all__ = [
    "MAX_RESULTS_BYTES",
    "REDACTED",
    "REPORT_FILE",
    "RESULTS_FILE",
    "SCHEMA_VERSION",
    "ResultsError",
    "RunMeta",
    "build_results",
    "build_spooled",
    "default_run_dir",
    "iso_utc",
    "parse_results_text",
    "read_results",
    "results_schema",
    "safe_url",
    "scrub_secrets",
    "secret_values",
    "trials_of",
    "validate_results",
    "write_report",
    "write_run",
]

SCHEMA_VERSION = "1.6"
_MAJOR, _MINOR = (int(x) for x in SCHEMA_VERSION.split("."))
RESULTS_FILE = "results.json"
REPORT_FILE = "report.html"
_SCHEMA_FILE = "schemas/results.schema.json"


class ResultsError(Exception):
    """A results.json that cannot be used: the file, and what is wrong with it."""

    def __init__(self, file: str | os.PathLike[str], problem: str) -> None:
        self.file = str(file)
        self.problem = problem
        super().__init__(f"{self.file}: {problem}")


def _writer_version() -> str:
    from .. import __version__

    return __version__


def iso_utc(dt: datetime | None = None) -> str:
    """``2026-03-01T09:30:12.123456Z`` (now, when ``dt`` is None)."""
    dt = (dt or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def safe_url(url: str | None) -> str | None:
    """A URL without any ``user:password@`` part, query string or fragment (they may hold keys)."""
    return public_url(url) if url else url


@dataclass
class RunMeta:
    """The ``run`` object of results.json. ``domains`` holds ``{name, path, sha256}`` with
    ``path`` relative to the rootdir; times are ISO 8601 UTC (see :func:`iso_utc`).
    ``collection_errors`` holds ``{path, message}`` of each domain file that did not
    load (None: not recorded, as in files of schema 1.0)."""

    domains: list[dict[str, str]]
    agent: str
    user: str
    k: int
    run_seed: int
    options: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    finished_at: str = ""
    shards: list[dict[str, Any]] | None = None
    command: str = "pytest"  # what wrote the file: "pytest" or "merge"
    collection_errors: list[dict[str, str]] | None = None
    # why the run ended before every collected trial ran (-x, --maxfail, Ctrl-C); None: it did not
    stopped_early: str | None = None

    def to_dict(self) -> Run:
        """The ``run`` object (``command`` goes to ``writer``)."""
        d: Run = {
            "domains": [{"name": x["name"], "path": x["path"], "sha256": x["sha256"]} for x in self.domains],
            "agent": self.agent,
            "user": self.user,
            "k": self.k,
            "run_seed": self.run_seed,
            # the callers collect the options under the schema's names, some of them None
            "options": cast(Options, dict(self.options)),
            "started_at": self.started_at or iso_utc(),
            "finished_at": self.finished_at or iso_utc(),
        }
        if self.shards is not None:
            d["shards"] = [{"writer_version": s["writer_version"], "started_at": s["started_at"],
                            "finished_at": s["finished_at"], "trials": s["trials"]} for s in self.shards]
        if self.collection_errors is not None:
            # a problem message may quote a huge value of the file: within the text cap
            d["collection_errors"] = [{"path": c["path"], "message": clip_text(c["message"])}
                                      for c in self.collection_errors]
        if self.stopped_early:
            d["stopped_early"] = self.stopped_early
        return d


def _as_trial(t: TrialResult | Mapping[str, Any]) -> TrialResult:
    return t if isinstance(t, TrialResult) else TrialResult.from_dict(dict(t))


def _stored(t: TrialResult) -> StoredTrial:
    """A trial as ``trials[]`` stores it. :meth:`TrialResult.to_dict` writes exactly these
    fields; it returns a plain dict because the engine may not import the report's types."""
    return cast(StoredTrial, t.to_dict())


def _task_verdicts(summary: Summary) -> list[TaskVerdict]:
    """``tasks[]``: each task's verdict and counts, in the summary's order (critical first),
    with the Wilson interval of its success rate."""
    return [
        {
            "domain": e["domain"],
            "task": e["task"],
            "verdict": e["verdict"],
            "critical": e["critical"],
            "tags": list(e["tags"]),
            "trials": e["trials"],
            "graded": e["graded"],
            "passed": e["passed"],
            "errored": e["errored"],
            "rate_ci": e.get("rate_ci"),
        }
        for e in summary["tasks"]
    ]


def build_results(
    trials: Iterable[TrialResult | Mapping[str, Any]],
    run_meta: RunMeta,
    *,
    fail_under: float | None = None,
    floors: Mapping[str, float] | None = None,
    prices: Mapping[str, Mapping[str, float]] | None = None,
) -> Results:
    """The results.json document for these trials: every trial (in a stable order,
    whatever order they finished in), per-task verdicts, the summary and the gates'
    outcome (critical tasks and domain files that did not load are always checked;
    fail-under and floors when given). Every trial is held in memory: a run's recorder
    builds it from a :class:`~pytest_sandtable.report.spool.TrialSpool` instead
    (:func:`build_spooled`)."""
    from .summary import order_trials

    secrets = secret_values()
    # within the size caps before anything reads them: the summary's examples and errors too
    ts = order_trials(shown_trial(_as_trial(t), secrets) for t in trials)
    return _document(ts, [_stored(t) for t in ts], run_meta, fail_under=fail_under, floors=floors, prices=prices)


def build_spooled(
    spool: TrialSpool,
    run_meta: RunMeta,
    *,
    fail_under: float | None = None,
    floors: Mapping[str, float] | None = None,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    failing: Collection[tuple[str, str]] = (),
) -> Results:
    """:func:`build_results` for the trials of a spool: the summary and the gate from its
    light trials, ``trials`` the spooled ones, read from disk when written (see
    :func:`write_run`). ``failing``: the tasks an adaptive run settled unreliable
    (``summarize``'s, counted as failing past their graded trials, the gate's figures too)."""
    ts, stored = spool.ordered()
    return _document(ts, stored, run_meta, fail_under=fail_under, floors=floors, prices=prices, failing=failing)


def _document(
    ts: list[TrialResult],
    stored: Sequence[StoredTrial],
    run_meta: RunMeta,
    *,
    fail_under: float | None,
    floors: Mapping[str, float] | None,
    prices: Mapping[str, Mapping[str, float]] | None,
    failing: Collection[tuple[str, str]] = (),
) -> Results:
    """The document around the trials ``stored`` (``ts``, in the same order, as the
    summary and the gate read them)."""
    from .gates import evaluate
    from .summary import summarize

    summary = summarize(ts, k=run_meta.k, prices=prices, failing=failing)
    floors = dict(floors or {})
    outcome = evaluate(summary, fail_under, floors, ts, run_meta.collection_errors or (),
                       stopped_early=run_meta.stopped_early)
    return {
        "schema_version": SCHEMA_VERSION,
        "writer": {"name": "pytest-sandtable", "version": _writer_version(), "command": run_meta.command},
        "run": run_meta.to_dict(),
        "trials": stored,
        "tasks": _task_verdicts(summary),
        "summary": summary,
        # GateOutcome.to_dict writes the schema's gate object, as a plain dict
        "gate": cast(Gate, outcome.to_dict(fail_under, floors)),
    }


def trials_of(results: Mapping[str, Any]) -> list[TrialResult]:
    """The trials of a results.json document as :class:`TrialResult` objects."""
    return [TrialResult.from_dict(t) for t in results.get("trials", [])]


# --------------------------------------------------------------------------- writing


def _label(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:60] or "run"


def default_run_dir(base: str | os.PathLike[str], domains: Iterable[str], now: datetime | None = None) -> Path:
    """A new folder ``BASE/.sandtable/runs/<UTC timestamp>-<domain or 'multi'>/`` (``-run``
    when no domain loaded; a ``-2``, ``-3``... suffix when a run in the same second took
    the name). It is created."""
    names = sorted(set(domains))
    label = _label(names[0]) if len(names) == 1 else ("multi" if names else "run")
    stamp = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    runs = Path(base) / ".sandtable" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        path = runs / (f"{stamp}-{label}" if n == 1 else f"{stamp}-{label}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            n += 1
            continue
        return path


def _cleaned(results: Mapping[str, Any], secrets: list[str]) -> tuple[dict[str, Any], Iterable[bytes]]:
    """The document with its secrets redacted, and each trial's JSON line (UTF-8). Trial
    by trial, so that a trial that cannot be encoded loses only its own bad fields (see
    :func:`~pytest_sandtable.report.safe.encoded_trial`), never the run its files.
    Spooled trials were made so when they were spooled: their lines are read as they are
    written (scrubbed again only for a secret the spool did not know)."""
    clean: dict[str, Any] = {}
    lines: Iterable[bytes] = ()
    for key, value in results.items():
        if key == "trials" and isinstance(value, SpooledTrials):
            clean[key] = value
            new = [v for v in secrets if v not in value.secrets]
            lines = (utf8(scrubbed_line(line.decode("utf-8"), new)) for line in value.lines()) if new else value.lines()
        elif key == "trials" and isinstance(value, list):
            encoded = [encoded_trial(t, secrets) for t in value]
            clean[key] = [trial for trial, _ in encoded]
            lines = [utf8(scrubbed_line(line, secrets)) for _, line in encoded]
        else:
            clean[key] = _strict(value, secrets)
    return clean, lines


def _strict(value: Any, secrets: list[str]) -> Any:
    """``value`` as strict JSON without a secret (:func:`scrub_secrets`); as it is when one
    C encoding shows it already is (the usual case), which spares the walk over a big
    summary."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return scrub_secrets(value, secrets)
    return value if scrub_text(text, secrets) == text else scrub_secrets(value, secrets)


_KEYS = {True: "true", False: "false", None: "null"}


class _Text:
    """Pieces of results.json's text on their way to the file: written (secrets scrubbed,
    as UTF-8) every few thousand pieces, so a big summary is never whole in memory."""

    CHUNK = 4096

    def __init__(self, f: BinaryIO, secrets: list[str]) -> None:
        self.f = f
        self.secrets = secrets
        self.out: list[str] = []

    def flush(self) -> None:
        self.f.write(utf8(scrub_text("".join(self.out), self.secrets)))
        self.out.clear()


def _indented(value: Any, text: _Text, pad: str = "\n") -> None:
    """Write ``value`` as ``json.dumps(value, indent=1, ensure_ascii=False)`` writes it at
    the indentation ``pad`` gives, for strict JSON (see :func:`_strict`): the same text,
    four times as fast, as strings are encoded by the C encoder's own function and the
    structure by a plain recursion instead of the pure-Python encoder's generators."""
    out = text.out
    if isinstance(value, str):
        out.append(encode_basestring(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = pad + " "
        sep = "{" + inner
        for k, v in value.items():
            key = k if isinstance(k, str) else _KEYS[k] if k is None or isinstance(k, bool) else repr(k)
            out.append(sep)
            out.append(encode_basestring(key))
            out.append(": ")
            _indented(v, text, inner)
            sep = "," + inner
        out.append(pad + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = pad + " "
        sep = "[" + inner
        for v in value:
            out.append(sep)
            _indented(v, text, inner)
            sep = "," + inner
            if len(out) > text.CHUNK:
                text.flush()
        out.append(pad + "]")
    elif value is None or isinstance(value, bool):
        out.append(_KEYS[value])
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    else:  # a finite float: _strict made sure
        out.append(float.__repr__(value))


def _write_json(f: BinaryIO, clean: Mapping[str, Any], lines: Iterable[bytes], secrets: list[str]) -> None:
    """Stream results.json: the document indented by one space, as ``json.dumps(...,
    indent=1)`` would write it, except that each trial is the one line the C encoder
    wrote (indenting takes Python's slower pure-Python encoder); the trials' lines are
    copied as they are."""
    text = _Text(f, secrets)
    sep = "{\n "
    for key, value in clean.items():
        text.out += [sep, encode_basestring(key), ": "]
        sep = ",\n "
        if key != "trials":
            _indented(value, text, "\n ")
            continue
        text.flush()
        glue = b"[\n  "
        for line in lines:
            f.write(glue)
            f.write(line)
            glue = b",\n  "
        text.out.append("[]" if glue == b"[\n  " else "\n ]")
    text.out.append("\n}\n" if clean else "{}\n")
    text.flush()


class _Utf8Sink:
    """A text sink writing UTF-8 to a binary file (the text is made safe by its writer)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f

    def write(self, text: str, /) -> int:
        return self._f.write(utf8(text))


def _write_html(f: BinaryIO, clean: Mapping[str, Any], secrets: list[str]) -> None:
    """Stream report.html of the cleaned document (secrets redacted, piece by piece,
    by :func:`~pytest_sandtable.report.html.write_report_html`)."""
    from .html import write_report_html

    write_report_html(clean, _Utf8Sink(f), secrets=secrets)


def write_run(
    results: Mapping[str, Any], out_dir: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> Path:
    """Write ``results.json`` and ``report.html`` into ``out_dir`` (created if needed);
    returns the folder. Secret values from the environment (see :func:`secret_values`;
    ``env`` defaults to :data:`os.environ`) are replaced by ``[redacted]`` in both files,
    and lone surrogates by U+FFFD. Each file is streamed to a temporary file and renamed
    into place, so each is whole or absent; a trial that cannot be written in full is
    written without its bad fields, with a note. The trials may be a
    :class:`~pytest_sandtable.report.spool.SpooledTrials`: then neither file holds more
    than one trial in memory at a time."""
    secrets = secret_values(env)
    clean, lines = _cleaned(results, secrets)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / RESULTS_FILE, lambda f: _write_json(f, clean, lines, secrets))
    write_atomic(out / REPORT_FILE, lambda f: _write_html(f, clean, secrets))
    return out


def write_report(results: Mapping[str, Any], out_dir: str | os.PathLike[str],
                 *, env: Mapping[str, str] | None = None) -> Path:
    """Re-render ``report.html`` alone into ``out_dir`` (created if needed), atomically
    and with secrets scrubbed; returns the file written."""
    secrets = secret_values(env)
    clean, _ = _cleaned(results, secrets)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / REPORT_FILE, lambda f: _write_html(f, clean, secrets))
    return out / REPORT_FILE


# --------------------------------------------------------------------------- reading


@lru_cache(maxsize=1)
def results_schema() -> dict[str, Any]:
    """The JSON Schema of results.json (draft 2020-12)."""
    text = resources.files("pytest_sandtable").joinpath(_SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _relaxed(node: Any) -> Any:
    """The schema without ``additionalProperties: false``: for files of a newer minor
    version, whose extra (optional) fields this version does not know."""
    if isinstance(node, dict):
        return {k: _relaxed(v) for k, v in node.items() if not (k == "additionalProperties" and v is False)}
    if isinstance(node, list):
        return [_relaxed(v) for v in node]
    return node


def _schema(relaxed: bool) -> dict[str, Any]:
    schema = results_schema()
    if relaxed:
        schema = _relaxed(schema)
        # a newer minor writes a newer minor version number
        schema["properties"]["schema_version"] = {"type": "string", "pattern": rf"^{_MAJOR}\.[0-9]+$"}
    return schema


@lru_cache(maxsize=2)
def _validator(relaxed: bool) -> Any:
    """jsonschema's validator: slow, but it lists every problem with its path (the
    messages a user reads)."""
    import jsonschema  # type: ignore[import-untyped,unused-ignore]

    return jsonschema.Draft202012Validator(_schema(relaxed))


@lru_cache(maxsize=2)
def _fast_check(relaxed: bool) -> tuple[Any, type[Exception]]:
    """The same schema compiled to Python by fastjsonschema: about 10x faster on a large
    file (20,000 trials: 1.5 s against 17 s), so a good file is read at the speed of
    the JSON parser; only a bad one pays for jsonschema's messages. The schema uses
    only keywords both libraries read alike (type, properties, required, enum, const,
    items, oneOf, $ref into $defs, pattern, bounds). Returned with the exception class it
    raises, taken at compile time (a module imported anew would bring another class)."""
    import fastjsonschema

    return fastjsonschema.compile(_schema(relaxed)), fastjsonschema.JsonSchemaException


def _is_valid(data: Any, relaxed: bool) -> bool:
    check, invalid = _fast_check(relaxed)
    try:
        check(data)
    except invalid:
        return False
    return True


def _where(path: Iterable[Any]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def validate_results(data: Any, file: str | os.PathLike[str] = "results.json") -> None:
    """Check a parsed results.json: its ``schema_version`` (another major version is
    refused) and the JSON Schema. Raises :class:`ResultsError` listing what is wrong."""
    if not isinstance(data, dict):
        raise ResultsError(file, f"expected a JSON object at the top, got {type(data).__name__}")
    version = data.get("schema_version")
    if version is None:
        raise ResultsError(file, "no schema_version: this is not a pytest-sandtable results.json")
    m = re.fullmatch(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
    if m is None:
        raise ResultsError(file, f"schema_version {version!r} is not MAJOR.MINOR, e.g. {SCHEMA_VERSION!r}")
    major, minor = int(m.group(1)), int(m.group(2))
    if major != _MAJOR:
        writer = data.get("writer") if isinstance(data.get("writer"), dict) else {}
        by = f" by {writer.get('name', '?')} {writer.get('version', '?')}" if writer else ""
        newer = "upgrade pytest-sandtable to read it" if major > _MAJOR else "re-run the suite to write it anew"
        raise ResultsError(
            file,
            f"written with results schema {version}{by}; this pytest-sandtable ({_writer_version()}) "
            f"reads schema {_MAJOR}.x only: {newer}",
        )
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped,unused-ignore]

    if _is_valid(data, minor > _MINOR):
        return
    errors = sorted(_validator(minor > _MINOR).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = []
        for e in errors[:5]:
            if e.context:
                e = best_match(e.context)
            lines.append(f"{_where(e.absolute_path)}: {clip(e.message, 160)}")
        more = f"\n  ... and {len(errors) - 5} more" if len(errors) > 5 else ""
        raise ResultsError(
            file, f"does not match the results schema {SCHEMA_VERSION} ({plural(len(errors), 'problem')}):\n  "
            + "\n  ".join(lines) + more
        )


def counts_problem(data: Mapping[str, Any]) -> str | None:
    """What makes a results.json's counts unusable as a baseline, or None: a task of
    ``tasks[]`` whose passes exceed its graded trials or whose graded trials exceed its
    trials (the schema cannot say that), or a trial of ``trials[]`` repeated (the same
    domain, task and trial number twice: a trial's number fixes its seed, so it is one
    trial, and counting it twice would weigh it double)."""
    for i, t in enumerate(data.get("tasks") or ()):
        name = f"tasks[{i}] ({t.get('domain')}/{t.get('task')})"
        trials, graded, passed = (int(t.get(key) or 0) for key in ("trials", "graded", "passed"))
        if passed > graded:
            return f"{name}: passed {passed} is more than its {plural(graded, 'graded trial')}"
        if graded > trials:
            return f"{name}: graded {graded} is more than its {plural(trials, 'trial')}"
    seen: dict[tuple[str, str, int], int] = {}
    for i, t in enumerate(data.get("trials") or ()):
        key = (str(t.get("domain")), str(t.get("task")), int(t.get("trial") or 0))
        if key in seen:
            return (f"trials[{i}] repeats {key[0]}/{key[1]} trial {key[2]} (trials[{seen[key]}]): a trial's number "
                    f"fixes its seed, so a repeat is the same trial twice and would be counted twice")
        seen[key] = i
    return None


MAX_RESULTS_BYTES = 4 * 2**30
"""The largest results.json read whole (``report``, ``merge``, ``--sandtable-baseline``,
and a file not in the writer's layout): a run of 20,000 trials writes a few hundred MB.
A file in the writer's layout read a trial at a time (``regrade``, ``compare``) has no
cap on its whole but one on each line (:data:`~pytest_sandtable.report.reading.MAX_LINE_BYTES`)."""
_WHAT = "a results.json"


def read_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a results.json (a folder means its results.json).

    Raises :class:`ResultsError` (never another exception) for a missing, unreadable,
    malformed, newer-major or schema-violating file, and for anything but a regular file
    of at most :data:`MAX_RESULTS_BYTES` (a named pipe, ``/dev/zero``: nothing of it is
    read). A UTF-8 byte-order mark at the start is read past.
    """
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS_FILE
    try:
        text = read_regular(p, MAX_RESULTS_BYTES, _WHAT).decode("utf-8-sig")
    except FileNotFoundError:
        raise ResultsError(p, "no such file") from None
    except UnicodeDecodeError:
        raise ResultsError(p, "not a results.json: the file is not UTF-8 text") from None
    except FileRefused as e:
        raise ResultsError(p, e.problem) from None
    except OSError as e:
        raise ResultsError(p, f"cannot read it: {e.strerror or e}") from None
    except MemoryError:
        raise ResultsError(p, "too big to read into this machine's memory") from None
    data = parse_results_text(text, p)
    validate_results(data, p)
    result: dict[str, Any] = data
    return result


def parse_results_text(text: str, file: str | os.PathLike[str]) -> Any:
    """The JSON of a results.json's text; :class:`ResultsError` naming ``file`` (and the
    line, where there is one) for text that is not JSON, is nested too deeply, holds an
    integer longer than Python reads (4,300 digits), or needs more memory than there is."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        hint = " (the file is empty)" if not text.strip() else ""
        raise ResultsError(file, f"not valid JSON{hint}: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError:  # int() of more digits than sys.get_int_max_str_digits()
        raise ResultsError(file, f"not a results.json: {_long_integer(text)}") from None
    except RecursionError:
        raise ResultsError(file, "not a results.json: nested too deeply") from None
    except MemoryError:
        raise ResultsError(file, "too big to read into this machine's memory") from None


def _long_integer(text: str) -> str:
    """Where the integer json.loads refused is: ``an integer of 5,000 digits at line 12
    column 30 (Python reads at most 4,300)``."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
    m = re.search(rf"(?<![\w.\"\\])-?(\d{{{limit + 1},}})(?![\d.eE\"])", text)
    most = f"(Python reads at most {limit:,})"
    if m is None:
        return f"an integer of more than {limit:,} digits {most}"
    line = text.count("\n", 0, m.start()) + 1
    column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
    return f"an integer of {len(m.group(1)):,} digits at line {line} column {column} {most}"
