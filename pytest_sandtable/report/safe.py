"""What a user sees and keeps is made safe where it leaves the package: no secret, no
text that UTF-8 cannot hold, no value big enough to drown a report.

Everything a run writes (results.json, report.html) or prints (a trial's failure
text, transcript and traceback, the summary tables) passes through here:

- **Secrets.** The values of environment variables named like keys
  (:func:`secret_values`) become ``[redacted]``: :func:`scrub_secrets` on a value,
  :func:`scrub_text` on rendered text (raw, JSON-escaped and HTML-escaped forms).
- **Lone surrogates.** An agent or a model may hold ``"\\ud800"``, a
  code point that UTF-8 cannot encode; writing it would raise and lose the run's
  files. :func:`utf8` and :func:`safe_text` replace each lone surrogate with U+FFFD
  (a high surrogate followed by a low one becomes the character the pair encodes), in
  one pass over the finished text, never a walk over the values.
- **Size.** One string is shown up to :data:`TEXT_LIMIT` characters, and one tool
  argument, tool result or world value up to :data:`VALUE_LIMIT` characters of JSON;
  past that it is clipped, and a marker says how big it was
  (``… [clipped: 10,485,760 characters]``). :func:`storable_trial` applies the caps
  to a trial; the JSON sizes are measured with the C encoder.
- **Values that are not JSON.** A trial field that cannot be bounded, scrubbed or
  encoded (a circular structure, an integer over Python's 4,300-digit limit) is left
  out of that trial alone, and the trial's ``error`` says which and why
  (:func:`storable_trial`, :func:`encoded_trial`): one bad trial never costs a run its
  results.json and report.html.
- **Once a trial.** A run records thousands of trials, nearly all small and clean:
  :func:`fresh_line` in the process that ran it (under xdist the worker, which sends
  the line to the controller as it is: ``report.spool.trial_line``), or
  :func:`portable_trial` and :func:`stored_line` for a trial given as a dict, each
  take one pass of the C encoder to show that a trial holds nothing to clip, redact or
  replace, and only a trial that does is walked.
- **Length.** A trial's transcript, world diff and list of rules broken are shown in
  report.html and the terminal up to :data:`ENTRY_LIMIT` entries each (the first
  three quarters and the last quarter of them, :func:`shown_items`), a marker
  between saying how many are not (:func:`not_shown`); results.json keeps them all.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, fields
from enum import Enum
from typing import Any, TypeVar

import orjson

from ..engine.results import _FIELDS as _TRIAL_KEYS
from ..engine.results import ERRORED, Check, TrialResult, Violation
from .fmt import clip
from .usage import model_name

__all__ = [
    "ENTRY_LIMIT",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "TEXT_LIMIT",
    "VALUE_LIMIT",
    "bounded_trial",
    "clip_text",
    "clip_value",
    "encoded_trial",
    "for_terminal",
    "fresh_line",
    "named_usage",
    "not_shown",
    "portable_encoded",
    "portable_trial",
    "safe_text",
    "scrub_secrets",
    "scrub_text",
    "scrubbed_line",
    "secret_values",
    "shown_items",
    "shown_trial",
    "storable_trial",
    "stored_line",
    "utf8",
]

TEXT_LIMIT = 20_000
"""Characters of one string shown in results.json, report.html and the terminal."""
VALUE_LIMIT = 20_000
"""Characters of JSON of one tool argument, tool result or world value shown there."""
ENTRY_LIMIT = 400
"""Entries of one trial's transcript, world diff or list of rules broken shown in
report.html and the terminal (results.json keeps them all)."""

REDACTED = "[redacted]"
# env vars whose values never appear in a written file or the terminal
SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET")
SECRET_NAMES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
# shorter values are not secrets in practice, and replacing them would maul ordinary text
MIN_SECRET_LENGTH = 4

# a surrogate code point: alone it is not a character, and UTF-8 cannot encode it
_SURROGATE = re.compile("[\ud800-\udfff]")
# ints longer than this many bits may pass Python's limit on int -> str (4,300 digits)
_BIG_INT_BITS = 14_000
_WHY_LIMIT = 200  # characters of an exception's message in a note
_NAME_LIMIT = 200  # characters of a model's name
_T = TypeVar("_T")
# a trial whose JSON is this short holds no string, argument or result over a cap
_FAST_LIMIT = min(TEXT_LIMIT, VALUE_LIMIT)
# one encoder for the many small checks: json.dumps with options builds one per call
_ENCODER = json.JSONEncoder(ensure_ascii=False)
# what json.dumps(..., ensure_ascii=False, allow_nan=False) encodes with: the stored line's encoder
_STRICT = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
# the same, without the C encoder's table of the containers it is in (a fifth of its
# time on a trial): a structure that contains itself raises RecursionError instead of
# ValueError, where every caller takes the walk alike
_STRICT_UNCHECKED = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False)
# a trial's line is one compact line of JSON that orjson writes: in C, like the json
# module's encoder, and about ten times as fast on a trial (2 against 21 µs on the freight
# example's; a run writes every trial once, so the json module's cost a fifth of an item
# in pytest). What orjson does not write (a key that is not a string, an integer past 64
# bits, nesting past 254 levels, a lone surrogate, a dataclass or a date) the json module
# writes, as before, on one line too
_LINE_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
# the caps measure JSON with the json module's ", " and ": ", which add at most half to
# compact JSON ("0," becomes "0, "): compact JSON this short is surely within the smaller cap
_COMPACT_SURE = _FAST_LIMIT * 2 // 3
# a stored trial's checks' and rules broken's keys, in the order to_dict() gives them (its
# own: engine.results._FIELDS)
_CHECK_KEYS = tuple(f.name for f in fields(Check) if f.name != "counted")
# a check the task's basis leaves out has its `counted: false` too (issue 22)
_UNCOUNTED_CHECK_KEYS = (*_CHECK_KEYS, "counted")
_VIOLATION_KEYS = tuple(f.name for f in fields(Violation))


# --------------------------------------------------------------------------- secrets


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of env vars named ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET`` (and
    ``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``), longest first; values shorter than
    :data:`MIN_SECRET_LENGTH` characters are ignored. ``env`` defaults to :data:`os.environ`."""
    env = os.environ if env is None else env
    found = set()
    for name, value in env.items():
        upper = name.upper()
        if (upper.endswith(SECRET_SUFFIXES) or upper in SECRET_NAMES) and len(value.strip()) >= MIN_SECRET_LENGTH:
            found.add(value.strip())
            if value != value.strip():
                found.add(value)
    return sorted(found, key=lambda v: (-len(v), v))


def _scrub_str(s: str, secrets: Sequence[str]) -> str:
    for v in secrets:
        if v in s:
            s = s.replace(v, REDACTED)
    return s


def scrub_secrets(obj: Any, secrets: Sequence[str]) -> Any:
    """A JSON-compatible copy of ``obj`` with every secret value replaced by ``[redacted]``
    in strings and keys (a number whose digits contain one becomes ``"[redacted]"``).
    Also makes the value strict JSON: NaN and infinities become null, tuples lists,
    an enum member its value, and other objects their ``str()``."""
    if isinstance(obj, str):
        return _scrub_str(obj, secrets) if secrets else obj
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, (int, float)):
        if isinstance(obj, float) and not math.isfinite(obj):
            return None
        if secrets and any(v in repr(obj) for v in secrets):
            return REDACTED
        return obj
    if isinstance(obj, Mapping):
        return {_scrub_str(str(k), secrets): scrub_secrets(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub_secrets(v, secrets) for v in obj]
    if isinstance(obj, Enum):  # its value, as orjson writes it on the one pass
        return scrub_secrets(obj.value, secrets)
    return _scrub_str(str(obj), secrets)


@functools.lru_cache(maxsize=256)
def _forms(secret: str) -> tuple[str, ...]:
    """The forms a secret takes in rendered text, each once: raw, JSON-escaped (with and
    without ``ensure_ascii``) and HTML-escaped. Made once a secret: every trial of a run
    is scanned for the same few."""
    import html

    forms = (secret, _json_form(secret), json.dumps(secret)[1:-1], html.escape(secret, quote=True))
    return tuple(form for form in dict.fromkeys(forms) if form)


@functools.lru_cache(maxsize=256)
def _json_form(secret: str) -> str:
    """A secret as JSON written with ``ensure_ascii=False`` holds it, without the quotes."""
    return json.dumps(secret, ensure_ascii=False)[1:-1]


def scrub_text(text: str, secrets: Sequence[str]) -> str:
    """Rendered text without secrets: their raw, JSON-escaped and HTML-escaped forms."""
    for v in secrets:
        for form in _forms(v):
            if form in text:
                text = text.replace(form, REDACTED)
    return text


def scrubbed_line(line: str, secrets: Sequence[str]) -> str:
    """A trial's JSON line with every form of every secret redacted (:func:`scrub_text`),
    still one line of valid JSON. Redacting the text breaks the JSON when a secret spans
    its punctuation (``1,2`` in ``[1,2,3]``, a secret ``true``): the line is then made
    again from its values, each string and each number's digits redacted on its own,
    written compact, or as the json module writes JSON where the compact text still
    shows the secret across values (``1,2`` in ``[1,2]``, which ``[1, 2]`` does not)."""
    if not secrets:
        return line
    text = scrub_text(line, secrets)
    if text == line:
        return line
    try:
        json.loads(text)
        return text
    except ValueError:
        clean = _scrubbed_values(json.loads(line), secrets)
        compact = _compact_text(clean)
        if compact is not None and not _shows_secret(compact, secrets):
            return compact
        return json.dumps(clean, ensure_ascii=False)


def _scrubbed_values(obj: Any, secrets: Sequence[str]) -> Any:
    """A value read from a trial's line with every form of every secret redacted in each
    string and key, and a number holding one in its digits as ``[redacted]``."""
    if isinstance(obj, str):
        return scrub_text(obj, secrets)
    if isinstance(obj, dict):
        return {scrub_text(k, secrets): _scrubbed_values(v, secrets) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrubbed_values(v, secrets) for v in obj]
    if isinstance(obj, (int, float)) and not isinstance(obj, bool) and any(v in repr(obj) for v in secrets):
        return REDACTED
    return obj


def _shows_secret(text: str, secrets: Sequence[str]) -> bool:
    """Whether :func:`scrub_text` would find anything to redact in ``text``."""
    return any(form in text for v in secrets for form in _forms(v))


# --------------------------------------------------------------------------- text UTF-8 can hold


def _repaired(text: str) -> str:
    """``text`` with lone surrogates as U+FFFD and surrogate pairs joined: a round trip
    through UTF-16, which pairs what pairs and replaces what does not (two C passes)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def utf8(text: str) -> bytes:
    """``text`` as UTF-8, a lone surrogate written as U+FFFD instead of raising. The
    encoding is the check: text without surrogates costs one ``encode``."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _repaired(text).encode("utf-8")


def safe_text(text: str) -> str:
    """``text`` with lone surrogates as U+FFFD, for the terminal (one regex scan when there is none)."""
    return text if _SURROGATE.search(text) is None else _repaired(text)


def for_terminal(text: str, secrets: Sequence[str]) -> str:
    """Text for the terminal: secrets redacted, lone surrogates replaced."""
    return safe_text(scrub_text(text, secrets) if secrets else text)


# --------------------------------------------------------------------------- size caps


def _cut(text: str, size: int, unit: str, limit: int, secrets: Sequence[str]) -> str:
    """The start of ``text`` and a marker saying how big it was, ``limit`` characters in
    all (so that clipping again changes nothing). Secrets are redacted before the cut,
    so that the cut never leaves the start of one readable."""
    marker = f"… [clipped: {size:,} {unit}]"
    return scrub_text(text, secrets)[: max(0, limit - len(marker))] + marker


def clip_text(text: str, limit: int = TEXT_LIMIT, secrets: Sequence[str] = ()) -> str:
    """``text``, or, when it is longer than ``limit`` characters, its start and a marker
    with its length (``… [clipped: 10,485,760 characters]``), ``limit`` characters in all."""
    return text if len(text) <= limit else _cut(text, len(text), "characters", limit, secrets)


def shown_items(items: Sequence[_T], limit: int = ENTRY_LIMIT) -> tuple[Sequence[_T], int, Sequence[_T]]:
    """``items`` as shown: all of them, or, past ``limit``, the first three quarters and
    the last quarter of ``limit`` and how many between are not shown. The start shows
    how a conversation went wrong, the end how it stopped."""
    if len(items) <= limit:
        return items, 0, ()
    tail = limit // 4
    head = limit - tail
    return items[:head], len(items) - limit, items[len(items) - tail:]


def not_shown(hidden: int, total: int, what: str) -> str:
    """The marker where ``hidden`` of ``total`` entries are not shown:
    ``… [not shown: 99,600 of 100,000 transcript entries; results.json holds every one]``."""
    return f"… [not shown: {hidden:,} of {total:,} {what}; results.json holds every one]"


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {clip(str(exc), _WHY_LIMIT)}" if str(exc) else type(exc).__name__


def clip_value(value: Any, limit: int = VALUE_LIMIT, secrets: Sequence[str] = ()) -> Any:
    """A tool argument, tool result or world value within ``limit`` characters of JSON:
    itself when it fits; a string clipped like :func:`clip_text`; anything bigger, its
    JSON clipped, as a string (``… [clipped: 12,582,912 characters of JSON]``); and a
    value that is not JSON at all (a circular structure, an integer past Python's
    4,300-digit limit) a string saying why (``[not shown: ValueError: ...]``)."""
    if isinstance(value, str):
        return clip_text(value, limit, secrets)
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int) and value.bit_length() <= _BIG_INT_BITS:
        return value
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)  # the C encoder: no indent
    except (ValueError, TypeError, RecursionError) as exc:
        return f"[not shown: {_why(exc)}]"
    return value if len(text) <= limit else _cut(text, len(text), "characters of JSON", limit, secrets)


def _fits(obj: Any) -> bool:
    """Whether ``obj`` surely holds nothing over a cap: its JSON, one pass of the C
    encoder, is within the smaller cap (a trial of 100,000 tool calls is 100,000 small
    objects, each cheaper to encode once than to walk)."""
    try:
        return len(_ENCODER.encode(obj)) <= _FAST_LIMIT
    except (ValueError, TypeError, RecursionError):
        return False


def _clipped(obj: Any, secrets: Sequence[str]) -> Any:
    """``obj`` with every string in it (keys too) clipped to :data:`TEXT_LIMIT`."""
    if isinstance(obj, str):
        return clip_text(obj, TEXT_LIMIT, secrets)
    if isinstance(obj, Mapping):
        if _fits(obj):
            return obj
        return {_clipped(k, secrets): _clipped(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clipped(v, secrets) for v in obj]
    return obj


def _values(obj: Any, secrets: Sequence[str]) -> Any:
    """A mapping of values (tool arguments, a row): each key clipped, each value capped;
    anything else capped as one value."""
    if isinstance(obj, Mapping):
        return {_clipped(k, secrets): clip_value(v, VALUE_LIMIT, secrets) for k, v in obj.items()}
    return clip_value(obj, VALUE_LIMIT, secrets)


def _call(call: Any, secrets: Sequence[str]) -> Any:
    """A tool call: its arguments and result capped as values, the rest clipped."""
    if not isinstance(call, Mapping):
        return _clipped(call, secrets)
    if _fits(call):
        return call
    out = {}
    for k, v in call.items():
        if k == "args":
            out[k] = _values(v, secrets)
        elif k == "result":
            out[k] = clip_value(v, VALUE_LIMIT, secrets)
        else:
            out[k] = _clipped(v, secrets)
    return out


def _diff_entry(entry: Any, secrets: Sequence[str]) -> Any:
    """``{table, key, row}`` or ``{table, key, fields: {field: {before, after}}}``."""
    if not isinstance(entry, Mapping):
        return _clipped(entry, secrets)
    out = {}
    for k, v in entry.items():
        if k == "key":
            out[k] = clip_value(v, VALUE_LIMIT, secrets)
        elif k == "row":
            out[k] = _values(v, secrets)
        elif k == "fields" and isinstance(v, Mapping):
            out[k] = {_clipped(f, secrets): _values(ba, secrets) for f, ba in v.items()}
        else:
            out[k] = _clipped(v, secrets)
    return out


def _diff(diff: Any, secrets: Sequence[str]) -> Any:
    if not isinstance(diff, Mapping):
        return _clipped(diff, secrets)
    return {k: [_diff_entry(x, secrets) for x in v] if isinstance(v, list) else _clipped(v, secrets)
            for k, v in diff.items()}


def _counters(counts: Any) -> dict[str, int]:
    """A model's token counters as whole numbers >= 0 (what the schema reads back)."""
    if not isinstance(counts, Mapping):
        return {}
    out: dict[str, int] = {}
    for name, v in counts.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[str(name)] = max(0, int(v))
    return out


def named_usage(by_model: Any) -> dict[str, dict[str, int]]:
    """A side's usage (model -> counters) under printable model names (see
    :func:`~pytest_sandtable.report.usage.model_name`), each counter a whole number >= 0
    (others dropped); counters of models that end up with one name are added up."""
    out: dict[str, dict[str, int]] = {}
    if not isinstance(by_model, Mapping):
        return out
    for model, counts in by_model.items():
        acc = out.setdefault(clip_text(model_name(model), _NAME_LIMIT), {})
        for name, n in _counters(counts).items():
            acc[name] = acc.get(name, 0) + n
    return out


def _usage(usage: Any, secrets: Sequence[str]) -> Any:
    if not isinstance(usage, Mapping):
        return {"agent": {}, "user": {}}
    return {side: named_usage(v) if side in ("agent", "user") else _clipped(v, secrets) for side, v in usage.items()}


# how each field of a stored trial is bounded (any other field: its strings clipped)
_BOUND: dict[str, Callable[[Any, Sequence[str]], Any]] = {
    "calls": lambda calls, secrets: [_call(c, secrets) for c in calls] if isinstance(calls, list)
    else _clipped(calls, secrets),
    "diff": _diff,
    "usage": _usage,
}

# what a field that cannot be kept becomes: TrialResult's defaults, and for the fields
# without one a stand-in of the right type
_REQUIRED_STAND_INS: dict[str, Any] = {"domain": "?", "task": "?", "trial": 1, "k": 1, "seed": 0, "verdict": ERRORED}


def _stand_in(name: str) -> Any:
    for f in fields(TrialResult):
        if f.name == name:
            if f.default_factory is not MISSING:
                return f.default_factory()
            if f.default is not MISSING:
                return f.default
    return _REQUIRED_STAND_INS.get(name)


def _fieldwise(d: Mapping[str, Any], keep: Callable[[str, Any], Any]) -> dict[str, Any]:
    """``keep(name, value)`` of every field of the stored trial ``d``; a field it raises on
    is left out (its empty value), and the trial's ``error`` says which and why."""
    out: dict[str, Any] = {}
    lost: list[str] = []
    for name, value in d.items():
        try:
            out[name] = keep(name, value)
        except Exception as exc:  # one bad value must not cost the run its results
            out[name] = _stand_in(name)
            lost.append(f"{name} ({_why(exc)})")
    if lost:
        note = f"left out of this trial's record, as it could not be written: {'; '.join(lost)}"
        before = out.get("error")
        out["error"] = f"{clip(before, 2_000)}; {note}" if isinstance(before, str) and before else note
    return out


def storable_trial(d: Mapping[str, Any], secrets: Sequence[str] = ()) -> dict[str, Any]:
    """A stored trial (``TrialResult.to_dict()``) within the caps: every string clipped to
    :data:`TEXT_LIMIT` characters; each tool argument, tool result and value of the world
    diff to :data:`VALUE_LIMIT` characters of JSON; model names of its usage printable.
    ``secrets`` are redacted in what is clipped before it is cut. A field that cannot be
    bounded is left out with a note in ``error``."""
    # a walk, not one encoding of the whole trial to see whether it fits: a hostile trial
    # holds many megabytes, which the walk cuts without encoding them
    return _fieldwise(d, lambda name, value: _BOUND.get(name, _clipped)(value, secrets))


def bounded_trial(d: Mapping[str, Any]) -> Mapping[str, Any]:
    """A stored trial within the caps, for a renderer that may be given a document this
    package did not write (``report`` and ``merge`` read any valid results.json): ``d``
    itself when one pass of the C encoder shows it holds nothing over a cap (what a run
    writes always does), else :func:`storable_trial` of it."""
    return d if _fits(d) else storable_trial(d)


def shown_trial(r: TrialResult, secrets: Sequence[str] = ()) -> TrialResult:
    """``r`` within the caps of :func:`storable_trial`, as a :class:`TrialResult`."""
    return TrialResult.from_dict(storable_trial(r.to_dict(), secrets))


def portable_trial(r: TrialResult) -> dict[str, Any]:
    """``r`` as a plain dict that any transport can carry (pytest-xdist's, which encodes
    text as UTF-8), and that a recorder may hold for the whole run: within the caps,
    strict JSON, lone surrogates replaced.

    It runs once per trial item, so the usual trial costs one pass of the C encoder: when
    its JSON is within the smaller cap and valid UTF-8, nothing in it can need a change.
    Any other is bounded (:func:`storable_trial`), encoded and read back."""
    return portable_encoded(r)[0]


def portable_encoded(r: TrialResult) -> tuple[dict[str, Any], str | None]:
    """:func:`portable_trial` of ``r``, and for the usual trial the JSON that its one pass
    of the C encoder made (None for a trial that had to be bounded): where the trial is
    stored by the process that ran it, :func:`stored_line` takes that JSON instead of
    encoding the trial again."""
    d = r.to_dict()
    text = None if _surely_over_caps(r) else _spaced_line(d)
    if text is not None:
        try:
            text.encode("utf-8")  # raises on a lone surrogate
            return d, text
        except UnicodeEncodeError:
            pass
    _, text = encoded_trial(storable_trial(d), ())
    portable: dict[str, Any] = json.loads(utf8(text))
    return portable, None


def _compact(value: Any) -> bytes | None:
    """``value`` as one compact line of JSON, UTF-8 (orjson's); None for what orjson
    does not write. NaN and infinities become null, as :func:`scrub_secrets` makes them."""
    try:
        return orjson.dumps(value, option=_LINE_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: what it does not write
        return None


def _compact_text(value: Any) -> str | None:
    """:func:`_compact` as text: a trial's line as every path writes it, where orjson can."""
    data = _compact(value)
    return None if data is None else data.decode("utf-8")


def _finite(x: Any) -> bool:
    """Whether ``x`` is a number JSON holds as it is (not NaN or an infinity)."""
    return type(x) is int or (type(x) is float and math.isfinite(x))


def _spaced_line(value: Any) -> str | None:
    """``value`` as strict JSON the json module's way (", " and ": ", as the caps measure
    it), when it is within the smaller cap, so that nothing in it is over one; None when
    it is not, or is not JSON."""
    try:
        text = _STRICT_UNCHECKED.encode(value)
    except (ValueError, TypeError, RecursionError, AttributeError):
        return None
    return text if len(text) <= _FAST_LIMIT else None


def _surely_over_caps(r: TrialResult) -> bool:
    """Whether ``r`` is surely over the cap without encoding it: a long conversation (or
    a transcript that is not the engine's, which the walk is for)."""
    try:
        return sum(len(str(e.get("text", ""))) for e in r.transcript) > _FAST_LIMIT
    except AttributeError:
        return True


def fresh_line(r: TrialResult, secrets: Sequence[str]) -> bytes | None:
    """The line :meth:`~pytest_sandtable.report.spool.TrialSpool.add_stored` stores for
    ``portable_trial(r)``, as UTF-8, for a trial the calling process ran (so its dict is a
    :class:`TrialResult`'s own, of a known shape: :func:`stored_line` need not check it),
    in the one pass of the C encoder that shows there is nothing in it to bound, redact,
    replace or rewrite; None when there may be (the caller then takes that path).

    What that pass must show: usage as the walk leaves it (:func:`_usage_as_stored`,
    decided without encoding it), JSON within the smaller cap, no lone surrogate (the
    UTF-8 encoding raises) and no secret in any form :func:`scrub_text` redacts."""
    if not _usage_as_stored(r.usage) or _surely_over_caps(r):
        return None
    # of what a light trial keeps (summary_view), the engine writes numbers that are not
    # whole only here: where orjson would write NaN or an infinity as null, the walk
    # makes the light trial hold null too
    try:
        if not (_finite(r.duration) and all(map(_finite, r.latency))):
            return None
    except TypeError:  # a latency that is no list: the walk
        return None
    d = r.to_dict()
    data = _compact(d)
    if data is None:  # what orjson does not write: the json module's line, as before
        text = _spaced_line(d)
        if text is None:
            return None
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            return None
    elif len(data) > _COMPACT_SURE and (len(data) > 4 * _FAST_LIMIT or _spaced_line(d) is None):
        # past four bytes a character of the cap it is surely over: no second encoding of a huge trial
        return None
    if secrets and _shows_secret(data.decode("utf-8"), secrets):
        return None
    return data


def _usage_as_stored(usage: Any) -> bool:
    """Whether :func:`_usage` leaves ``usage`` as it is, to the value: the agent's and the
    user's side only, their models under their printable names (so none are merged) and
    their counters whole numbers >= 0, in plain dicts (what the engine's ``Usage.to_dict``
    gives)."""
    if type(usage) is not dict:
        return False
    for side, models in usage.items():
        if side not in ("agent", "user") or type(models) is not dict:
            return False
        for model, counts in models.items():
            if type(model) is not str or clip_text(model_name(model), _NAME_LIMIT) != model or type(counts) is not dict:
                return False
            for name, n in counts.items():
                if type(name) is not str or type(n) is not int or n < 0:
                    return False
    return True


def _encoded(value: Any, secrets: Sequence[str]) -> tuple[Any, str]:
    clean = scrub_secrets(value, secrets)
    return clean, _compact_text(clean) or json.dumps(clean, ensure_ascii=False, allow_nan=False)


def _holds_secret(text: str, secrets: Sequence[str]) -> bool:
    """Whether JSON text holds a secret, raw or JSON-escaped."""
    return any(v in text or _json_form(v) in text for v in secrets)


def encoded_trial(d: Mapping[str, Any], secrets: Sequence[str]) -> tuple[dict[str, Any], str]:
    """A stored trial with its secrets redacted, and its JSON on one line (the C
    encoder). A field that cannot be encoded is left out with a note in ``error``."""
    try:  # most trials: strict JSON as they are, and no secret in them
        text = _STRICT.encode(d)
        if not _holds_secret(text, secrets):
            return dict(d), _compact_text(d) or text
    except (ValueError, TypeError, RecursionError):
        pass  # NaN, an object that is not JSON, ...: scrub_secrets makes them JSON
    try:
        clean, text = _encoded(d, secrets)
    except Exception:  # find the culprit field by field
        kept = _fieldwise(d, lambda _, value: _encoded(value, secrets)[0])
        clean, text = _encoded(kept, secrets)
    return clean, text


def stored_line(d: Mapping[str, Any], secrets: Sequence[str],
                text: str | None = None) -> tuple[dict[str, Any], str] | None:
    """What :func:`storable_trial` then :func:`encoded_trial` make of the trial ``d`` (as
    ``TrialResult.to_dict()`` gives it, or as a report carried it from an xdist worker):
    the stored trial and its JSON line, in one pass of the C encoder, when that pass shows
    there is nothing to bound or redact in it; None when there may be (the caller then
    takes the walk). ``text``, when given, is ``d``'s JSON as :func:`portable_encoded`
    made it, taken for that pass.

    That is: ``d`` has a trial's fields in their order (its checks and rules broken
    theirs), so reading it into a :class:`TrialResult` and back changes nothing; its
    usage as the walk gives it (model names printable, counters whole numbers), which is
    the one field the walk changes whatever its size; its JSON within the smaller cap, so
    no string, argument, result or world value in it is over one; and no secret in that
    JSON. The stored trial is a shallow copy of ``d``: it shares ``d``'s values."""
    if tuple(d) != _TRIAL_KEYS or not _check_rows(d["checks"]) or not _rows(d["violations"], _VIOLATION_KEYS):
        return None
    stored = dict(d)
    try:
        stored["usage"] = _usage(d["usage"], secrets)
        if text is None or _STRICT.encode(stored["usage"]) != _STRICT.encode(d["usage"]):
            text = _STRICT.encode(stored)
    except Exception:  # not JSON, or a model name whose str() raises: the walk says which field
        return None
    if len(text) > _FAST_LIMIT or _holds_secret(text, secrets):
        return None
    # the strict pass showed it holds no NaN, which orjson would write as null
    return stored, _compact_text(stored) or text


def _check_rows(rows: Any) -> bool:
    """Whether ``rows`` are checks as ``TrialResult.to_dict`` gives them (issue 22: with
    ``counted`` only when it is false)."""
    return isinstance(rows, list) and all(
        type(r) is dict and (tuple(r) == _CHECK_KEYS or (tuple(r) == _UNCOUNTED_CHECK_KEYS and r["counted"] is False))
        for r in rows)


def _rows(rows: Any, keys: tuple[str, ...]) -> bool:
    """Whether ``rows`` is a list of dicts with exactly ``keys``, in that order."""
    return isinstance(rows, list) and all(type(r) is dict and tuple(r) == keys for r in rows)
