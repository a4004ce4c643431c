"""Python handlers and the simulated clock, as a domain file names them (docs/handlers.md).

A tool may say ``handler: module:function`` in place of ``ops``. The module is imported
while the file is loaded (so a handler that cannot be imported is a problem with a line,
like any other, never a traceback during a run), with the domain file's folder searched
first: ``DIR/sandtable.yaml`` and ``DIR/my_handlers.py`` work with nothing on
``sys.path``. Two domain folders may each have a handler module of one name (an
edited copy of a domain next to its own ``handlers.py``, as ``regrade`` loads it beside
the file the run used): each is imported from its own folder. Importing it runs its
code: a domain with handlers is code, like a ``conftest.py``.

The model keeps only the ``module:function`` text (a built domain is pickled by
:mod:`.cache`, whose unpickler resolves nothing but model classes); the engine resolves
it with :func:`resolve_handler`, once per process (an xdist worker that took the domain
from the cache imports the module on its first call).

``clock: {now: ...}`` (top level, or per task) says where the clock handlers read
starts: an ISO 8601 date and time with an offset or ``Z``. A time without an offset
is refused: which zone it meant is a guess, and a guess makes results depend on the
machine.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import datetime
from types import ModuleType
from typing import Any

from .errors import PathTuple, Problem
from .model import Domain
from .wording import clip, found, show, unknown
from .yaml_reader import Document

__all__ = [
    "DEFAULT_NOW",
    "HandlerImportError",
    "attach",
    "clock_now",
    "handler_folder",
    "handler_problems",
    "resolve_handler",
]

DEFAULT_NOW = "2025-01-01T00:00:00+00:00"
"""Where the simulated clock starts when neither the domain nor the task sets it."""

# `module:function`: a dotted module name, a colon, a (possibly dotted) attribute
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_SPEC = re.compile(rf"^{_NAME}(?:\.{_NAME})*:{_NAME}(?:\.{_NAME})*$")

HANDLER_ARGS = ("args", "world", "ctx")


class HandlerImportError(Exception):
    """A ``handler`` that cannot be resolved: its text says why, for a person."""


# --------------------------------------------------------------------------- the clock


def parse_clock(value: Any) -> tuple[str | None, str | None]:
    """``clock.now`` as the model keeps it (ISO 8601 text with an offset), or why not.

    The YAML reader keeps a timestamp as the text written (quoted or not); a ``datetime``
    is taken too, for data built another way. Either needs an offset: without one, the
    zone is a guess that would make a trial's results depend on the machine."""
    expected = 'expected an ISO 8601 date and time with an offset or Z, such as "2024-05-15T15:00:00+00:00"'
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, str):
        text = value.strip()
        if text[-1:] in ("Z", "z"):  # Python 3.10's fromisoformat does not read Z
            text = text[:-1] + "+00:00"
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            return None, f"{found(value)}, {expected}"
        if "T" not in value.upper() and " " not in value.strip():  # a date alone
            return None, f"{found(value)} (a date without a time), {expected}"
    else:
        return None, f"{found(value)}, {expected}"
    if when.tzinfo is None or when.utcoffset() is None:
        shown = found(value if isinstance(value, str) else when.isoformat())
        return None, f"{shown} (a time without an offset), {expected}"
    return when.isoformat(), None


def clock_now(domain_now: str | None, task_now: str | None) -> datetime:
    """Where a trial's simulated clock starts: the task's, else the domain's, else the default."""
    return datetime.fromisoformat(task_now or domain_now or DEFAULT_NOW)


# --------------------------------------------------------------------------- resolving handlers


_LOCK = threading.Lock()
# (folder, spec) -> the function; only successes are kept (a fixed file is tried again)
_RESOLVED: dict[tuple[str | None, str], Callable[..., Any]] = {}


def handler_folder(filename: str | None) -> str | None:
    """The folder searched first for a domain file's handler modules (None: ``sys.path`` only,
    for a domain loaded from text)."""
    if not filename or not os.path.isfile(filename):
        return None
    return os.path.dirname(os.path.abspath(filename))


def resolve_handler(spec: str, folder: str | None) -> Callable[..., Any]:
    """The function ``spec`` (``module:function``) names, imported with ``folder``
    searched first; cached per process. Raises :class:`HandlerImportError`."""
    hit = _RESOLVED.get((folder, spec))
    if hit is not None:
        return hit
    with _LOCK:
        fn = _resolve(spec, folder)
        _RESOLVED[(folder, spec)] = fn
    return fn


def _resolve(spec: str, folder: str | None, noun: str = "handler") -> Callable[..., Any]:
    if not _SPEC.match(spec):
        raise HandlerImportError(f"expected module:function, such as my_handlers:refund, got {show(spec)}")
    mod_name, _, attr = spec.partition(":")
    module = _import(mod_name, spec, folder, noun)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            known = [n for n, v in vars(obj).items() if callable(v) and not n.startswith("_")]
            raise HandlerImportError(unknown("function", part, sorted(known), f"in module '{clip(mod_name)}'"))
        obj = getattr(obj, part)
    if not callable(obj):
        raise HandlerImportError(f"{noun} '{clip(spec)}' is {type(obj).__name__} {show(obj)}, expected a function")
    if noun == "handler":
        _check_signature(obj, spec)
    return obj  # type: ignore[no-any-return]


def _check_signature(fn: Callable[..., Any], spec: str) -> None:
    """A handler is called as ``fn(args, world, ctx)``: one that cannot take that is a
    problem now, not a TypeError in every trial."""
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise HandlerImportError(
            f"handler '{clip(spec)}' is an async function; handlers are called synchronously, "
            "so make it a plain def"
        )
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature to read
        return
    try:
        sig.bind(None, None, None)
    except TypeError:
        raise HandlerImportError(
            f"handler '{clip(spec)}' takes {clip(str(sig))}, expected a function called as "
            f"function({', '.join(HANDLER_ARGS)})"
        ) from None


def _import(mod_name: str, spec: str, folder: str | None, noun: str = "handler") -> Any:
    """Import ``mod_name`` with ``folder`` first on ``sys.path`` while it imports (the
    folder is not left there: what a handler module imports, it imports at its top).
    When another domain folder's handler module of the same name is imported (an edited
    copy of a domain next to the original, as ``regrade`` loads them), it is set aside
    while this folder's is imported, and put back after: each folder's module is its
    own, kept in :data:`_HELD`."""
    top = mod_name.split(".", 1)[0]
    aside = _set_aside(top, folder)
    if aside is None:
        _check_not_shadowed(top, mod_name, folder)
    added = folder is not None and folder not in sys.path
    if added:
        sys.path.insert(0, folder)  # type: ignore[arg-type]
    try:
        importlib.invalidate_caches()  # a module written since the last import (an importer's output)
        module = importlib.import_module(mod_name)
        if folder is not None and _imported_from(sys.modules.get(top), top, folder):
            _HELD[(folder, top)] = _modules(top)
        return module
    except SyntaxError as e:
        where = f" ({_shown_path(e.filename or '?', folder)}, line {e.lineno})" if e.lineno else ""
        raise HandlerImportError(
            f"module '{clip(mod_name)}' of {noun} '{clip(spec)}' has a syntax error: {e.msg}{where}"
        ) from None
    except ModuleNotFoundError as e:
        if e.name is not None and (mod_name == e.name or mod_name.startswith(e.name + ".")):
            looked = f"the domain file's folder {folder}, then sys.path" if folder else "sys.path"
            raise HandlerImportError(
                f"cannot import module '{clip(mod_name)}' of {noun} '{clip(spec)}': no module named "
                f"'{clip(e.name)}' (looked in {looked})"
            ) from None
        raise HandlerImportError(_raised_on_import(e, mod_name, spec, folder, noun)) from None
    except Exception as e:
        raise HandlerImportError(_raised_on_import(e, mod_name, spec, folder, noun)) from None
    finally:
        if added:
            with suppress(ValueError):  # the module took it off itself
                sys.path.remove(folder)  # type: ignore[arg-type]
        if aside is not None:  # this folder's modules back in _HELD only, the other folder's in sys.modules
            for name in _modules(top):
                del sys.modules[name]
            sys.modules.update(aside)


# (domain folder, top-level name) -> the handler module imported from that folder and its
# submodules, by their names in sys.modules
_HELD: dict[tuple[str, str], dict[str, ModuleType]] = {}


def _modules(top: str) -> dict[str, ModuleType]:
    return {n: m for n, m in sys.modules.items() if n == top or n.startswith(top + ".")}


def _own_files(folder: str, top: str) -> list[str]:
    return [p for p in (os.path.join(folder, top + ".py"), os.path.join(folder, top, "__init__.py"))
            if os.path.isfile(p)]


def _imported_from(module: ModuleType | None, top: str, folder: str) -> bool:
    loaded = getattr(module, "__file__", None)
    return loaded is not None and os.path.dirname(os.path.abspath(loaded)) in (folder, os.path.join(folder, top))


def _set_aside(top: str, folder: str | None) -> dict[str, ModuleType] | None:
    """When ``sys.modules[top]`` is another domain folder's handler module and ``folder``
    has its own: that one's modules taken out of sys.modules (returned, to be put back)
    and this folder's, if imported before, put in. None otherwise."""
    loaded = sys.modules.get(top)
    if folder is None or loaded is None or not _own_files(folder, top):
        return None
    if not any(t == top and f != folder and held.get(top) is loaded for (f, t), held in _HELD.items()):
        return None
    aside = _modules(top)
    for name in aside:
        del sys.modules[name]
    sys.modules.update(_HELD.get((folder, top), {}))
    return aside


def _check_not_shadowed(top: str, mod_name: str, folder: str | None) -> None:
    """A module of the same name imported from elsewhere (a module of Python's own, or
    one imported from sys.path) would be used in place of the domain folder's: say so."""
    if folder is None or top not in sys.modules:
        return
    here = [os.path.join(folder, top + ".py"), os.path.join(folder, top, "__init__.py")]
    if not _own_files(folder, top):
        return
    loaded = getattr(sys.modules[top], "__file__", None)
    if _imported_from(sys.modules[top], top, folder):
        return
    raise HandlerImportError(
        f"module '{clip(top)}' is already imported from {loaded or 'a built-in module'}, so the domain "
        f"file's {os.path.basename(here[0]) if os.path.isfile(here[0]) else top + '/'} cannot be; "
        f"give the handler module a name of its own"
    )


def _raised_on_import(e: BaseException, mod_name: str, spec: str, folder: str | None, noun: str = "handler") -> str:
    """``importing module 'm' of handler 'm:f' raised KeyError: 'x' (m.py, line 3)``."""
    frames = traceback.extract_tb(e.__traceback__)
    last = frames[-1] if frames else None
    where = f" ({_shown_path(last.filename, folder)}, line {last.lineno})" if last else ""
    try:
        message = str(e)
    except Exception:
        message = "(its message could not be read)"
    text = f"{type(e).__name__}: {message}" if message else type(e).__name__
    return f"importing module '{clip(mod_name)}' of {noun} '{clip(spec)}' raised {clip(text, 300)}{where}"


def _shown_path(path: str, folder: str | None) -> str:
    """A path relative to the domain file's folder when it is inside it."""
    if folder is not None:
        full = os.path.abspath(path)
        if full.startswith(folder + os.sep):
            return full[len(folder) + 1 :]
    return path


# --------------------------------------------------------------------------- the model


def attach(domain: Domain, data: dict[str, Any]) -> None:
    """Give a built domain its handlers and clocks (``data`` has no problems)."""
    for t in data.get("tools", []):
        if "handler" in t:
            domain.tools[t["name"]].handler = t["handler"]
    for t in data.get("user_tools", []):  # dual control (issue 22 A)
        if "handler" in t:
            domain.user_tools[t["name"]].handler = t["handler"]
    domain.sync = data.get("sync")
    domain.clock_now = _clock_text(data)
    for task, t in zip(domain.tasks, data.get("tasks", [])):
        task.clock_now = _clock_text(t)


def _clock_text(owner: dict[str, Any]) -> str | None:
    clock = owner.get("clock")
    return parse_clock(clock["now"])[0] if isinstance(clock, dict) else None


# --------------------------------------------------------------------------- checking a document


def handler_problems(doc: Document) -> list[Problem]:
    """The problems of a document's ``handler`` and ``clock`` entries (the schema has
    checked their shape; this reads the data warily, as :mod:`.check` does)."""
    data = doc.data if isinstance(doc.data, dict) else {}
    folder = handler_folder(doc.filename)
    problems = [doc.problem(path, msg) for path, msg in _clock_problems(data)]
    for path, spec in _handlers(data):
        try:
            resolve_handler(spec, folder)
        except HandlerImportError as e:
            problems.append(doc.problem(path, str(e)))
    problems += [doc.problem(path, msg) for path, msg in _task_function_problems(data, folder)]  # issue 22, part B
    sync = data.get("sync")  # dual control (issue 22 A)
    if isinstance(sync, str) and sync:
        try:
            resolve_sync(sync, folder)
        except HandlerImportError as e:
            problems.append(doc.problem(("sync",), str(e)))
    return problems


def _handlers(data: dict[str, Any]) -> Iterator[tuple[PathTuple, str]]:
    for section in ("tools", "user_tools"):  # dual control: the user tools' handlers too
        tools = data.get(section)
        for i, tool in enumerate(tools if isinstance(tools, list) else []):
            if isinstance(tool, dict) and isinstance(tool.get("handler"), str) and tool["handler"]:
                yield (section, i, "handler"), tool["handler"]


# --------------------------------------------------------------------------- dual control (issue 22 A)

SYNC_ARGS = ("world", "ctx")
_SYNCS: dict[tuple[str | None, str], Callable[..., Any]] = {}


def resolve_sync(spec: str, folder: str | None) -> Callable[..., Any]:
    """The ``sync: module:function`` hook, imported as a handler is (``folder`` first),
    called as ``fn(world, ctx)``; cached per process. Raises :class:`HandlerImportError`."""
    hit = _SYNCS.get((folder, spec))
    if hit is not None:
        return hit
    if not _SPEC.match(spec):
        raise HandlerImportError(f"expected module:function, such as device_handlers:sync, got {show(spec)}")
    mod_name, _, attr = spec.partition(":")
    with _LOCK:
        obj: Any = _import(mod_name, spec, folder)
        for part in attr.split("."):
            if not hasattr(obj, part):
                known = [n for n, v in vars(obj).items() if callable(v) and not n.startswith("_")]
                raise HandlerImportError(unknown("function", part, sorted(known), f"in module '{clip(mod_name)}'"))
            obj = getattr(obj, part)
    if inspect.iscoroutinefunction(obj) or inspect.isasyncgenfunction(obj):
        raise HandlerImportError(f"sync '{clip(spec)}' is an async function; sync is called synchronously, "
                                 "so make it a plain def")
    if not callable(obj):
        raise HandlerImportError(f"sync '{clip(spec)}' is {type(obj).__name__} {show(obj)}, expected a function")
    try:
        inspect.signature(obj).bind(None, None)
    except TypeError:
        raise HandlerImportError(
            f"sync '{clip(spec)}' takes {clip(str(inspect.signature(obj)))}, expected a function called as "
            f"function({', '.join(SYNC_ARGS)})"
        ) from None
    except ValueError:  # no signature to read
        pass
    _SYNCS[(folder, spec)] = obj
    return obj  # type: ignore[no-any-return]


def _clock_problems(data: dict[str, Any]) -> Iterator[tuple[PathTuple, str]]:
    tasks = data.get("tasks")
    owners: list[tuple[PathTuple, Any]] = [((), data)]
    owners += [(("tasks", i), t) for i, t in enumerate(tasks if isinstance(tasks, list) else [])]
    for path, owner in owners:
        clock = owner.get("clock") if isinstance(owner, dict) else None
        if isinstance(clock, dict) and "now" in clock:
            message = parse_clock(clock["now"])[1]
            if message is not None:
                yield (*path, "clock", "now"), message


# --------------------------------------------------------------------------- issue 22, part B
# A task's `expect.assert` functions, called `fn(world, **args)`, and its `setup` handlers
# (the handler contract), imported at load as tools' handlers are.

_RESOLVED_ASSERTIONS: dict[tuple[str | None, str], Callable[..., Any]] = {}


def resolve_assertion(spec: str, folder: str | None) -> Callable[..., Any]:
    """The function an ``expect.assert`` entry names, imported as a handler is (the domain
    file's folder first); cached per process. Raises :class:`HandlerImportError`."""
    hit = _RESOLVED_ASSERTIONS.get((folder, spec))
    if hit is not None:
        return hit
    with _LOCK:
        fn = _resolve(spec, folder, "assertion")
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            raise HandlerImportError(
                f"assertion '{clip(spec)}' is an async function; assertions are called synchronously, "
                "so make it a plain def"
            )
        _RESOLVED_ASSERTIONS[(folder, spec)] = fn
    return fn


def assertion_signature_problem(fn: Callable[..., Any], spec: str, args: dict[str, Any]) -> str | None:
    """Why ``fn`` cannot be called as ``fn(world, **args)``, or None when it can."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature to read
        return None
    try:
        sig.bind(None, **args)
    except TypeError as e:
        call = ", ".join(["world", *(f"{k}=..." for k in args)])
        return f"assertion '{clip(spec)}' takes {clip(str(sig))}, so it cannot be called as function({call}): {e}"
    return None


def assertion_entry(entry: Any) -> tuple[str, dict[str, Any]] | None:
    """An `assert` entry's function and args (`module:function` or `{function, args}`), or
    None for an entry of another shape (the schema says what is wrong with it)."""
    if isinstance(entry, str):
        return entry, {}
    if isinstance(entry, dict) and isinstance(entry.get("function"), str):
        args = entry.get("args", {})
        return entry["function"], args if isinstance(args, dict) else {}
    return None


def _task_function_problems(data: dict[str, Any], folder: str | None) -> Iterator[tuple[PathTuple, str]]:
    tasks = data.get("tasks")
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        if not isinstance(task, dict):
            continue
        expect = task.get("expect")
        entries = expect.get("assert") if isinstance(expect, dict) else None
        for j, entry in enumerate(entries if isinstance(entries, list) else []):
            parsed = assertion_entry(entry)
            if parsed is None or not parsed[0]:
                continue
            spec, args = parsed
            path: PathTuple = ("tasks", i, "expect", "assert", j) + (() if isinstance(entry, str) else ("function",))
            try:
                fn = resolve_assertion(spec, folder)
            except HandlerImportError as e:
                yield path, str(e)
                continue
            why = assertion_signature_problem(fn, spec, args)
            if why is not None:
                yield path, why
        steps = task.get("setup")
        for j, step in enumerate(steps if isinstance(steps, list) else []):
            if isinstance(step, dict) and isinstance(step.get("handler"), str) and step["handler"]:
                try:
                    resolve_handler(step["handler"], folder)
                except HandlerImportError as e:
                    yield ("tasks", i, "setup", j, "handler"), str(e)
