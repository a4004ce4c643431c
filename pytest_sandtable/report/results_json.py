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
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, cast

from ..domain.files import write_atomic
from ..engine.redact import public_url
from ..engine.results import TrialResult
from .fmt import clip, plural
from .safe import REDACTED, clip_text, encoded_trial, scrub_secrets, scrub_text, secret_values, shown_trial, utf8
from .types import Gate, Options, Results, Run, StoredTrial, Summary, TaskVerdict

__all__ = [
    "REDACTED",
    "REPORT_FILE",
    "RESULTS_FILE",
    "SCHEMA_VERSION",
    "ResultsError",
    "RunMeta",
    "build_results",
    "default_run_dir",
    "iso_utc",
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

SCHEMA_VERSION = "1.2"
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
    fail-under and floors when given)."""
    from .gates import evaluate
    from .summary import order_trials, summarize

    secrets = secret_values()
    # within the size caps before anything reads them: the summary's examples and errors too
    ts = order_trials(shown_trial(_as_trial(t), secrets) for t in trials)
    summary = summarize(ts, k=run_meta.k, prices=prices)
    floors = dict(floors or {})
    outcome = evaluate(summary, fail_under, floors, ts, run_meta.collection_errors or (),
                       stopped_early=run_meta.stopped_early)
    return {
        "schema_version": SCHEMA_VERSION,
        "writer": {"name": "pytest-sandtable", "version": _writer_version(), "command": run_meta.command},
        "run": run_meta.to_dict(),
        "trials": [_stored(t) for t in ts],
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


def _cleaned(results: Mapping[str, Any], secrets: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The document with its secrets redacted, and each trial's JSON line. Trial by trial,
    so that a trial that cannot be encoded loses only its own bad fields (see
    :func:`~pytest_sandtable.report.safe.encoded_trial`), never the run its files."""
    clean: dict[str, Any] = {}
    lines: list[str] = []
    for key, value in results.items():
        if key == "trials" and isinstance(value, list):
            clean[key] = []
            for t in value:
                trial, line = encoded_trial(t, secrets)
                clean[key].append(trial)
                lines.append(line)
        else:
            clean[key] = scrub_secrets(value, secrets)
    return clean, lines


def _document_json(doc: Mapping[str, Any], trial_lines: list[str]) -> str:
    """results.json's text: the document indented by one space, each trial on a line of
    its own as the C encoder wrote it (indenting takes Python's slower pure-Python
    encoder, kept to the parts around the trials)."""
    slot = f"trials-{uuid.uuid4().hex}"  # stands in for the trials, replaced by their lines
    shell = {key: [slot] if key == "trials" and trial_lines else value for key, value in doc.items()}
    text = json.dumps(shell, ensure_ascii=False, indent=1, allow_nan=False)
    if trial_lines:
        text = text.replace(json.dumps(slot), ",\n  ".join(trial_lines), 1)
    return text + "\n"


def write_run(
    results: Mapping[str, Any], out_dir: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> Path:
    """Write ``results.json`` and ``report.html`` into ``out_dir`` (created if needed);
    returns the folder. Secret values from the environment (see :func:`secret_values`;
    ``env`` defaults to :data:`os.environ`) are replaced by ``[redacted]`` in both files,
    and lone surrogates by U+FFFD. Both files are rendered before either is written; a
    trial that cannot be written in full is written without its bad fields, with a note."""
    from .html import render_report

    secrets = secret_values(env)
    clean, trial_lines = _cleaned(results, secrets)
    json_text = scrub_text(_document_json(clean, trial_lines), secrets)
    html_text = scrub_text(render_report(clean), secrets)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / RESULTS_FILE, utf8(json_text))
    write_atomic(out / REPORT_FILE, utf8(html_text))
    return out


def write_report(results: Mapping[str, Any], out_dir: str | os.PathLike[str],
                 *, env: Mapping[str, str] | None = None) -> Path:
    """Re-render ``report.html`` alone into ``out_dir`` (created if needed), atomically
    and with secrets scrubbed; returns the file written."""
    from .html import render_report

    secrets = secret_values(env)
    html_text = scrub_text(render_report(_cleaned(results, secrets)[0]), secrets)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / REPORT_FILE, utf8(html_text))
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


def read_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a results.json (a folder means its results.json).

    Raises :class:`ResultsError` (never another exception) for a missing, unreadable,
    malformed, newer-major or schema-violating file.
    """
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS_FILE
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(p, "no such file") from None
    except UnicodeDecodeError:
        raise ResultsError(p, "not a results.json: the file is not UTF-8 text") from None
    except OSError as e:
        raise ResultsError(p, f"cannot read it: {e.strerror or e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        hint = " (the file is empty)" if not text.strip() else ""
        raise ResultsError(p, f"not valid JSON{hint}: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise ResultsError(p, "not a results.json: nested too deeply") from None
    validate_results(data, p)
    result: dict[str, Any] = data
    return result
