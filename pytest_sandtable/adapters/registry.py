"""Every `--sandtable-agent` / `--sandtable-user` spec, parsed in one place.

``reference`` and ``scripted`` are the engine's built-ins; ``claude:<model>``,
``openai:<model>`` and ``http(s)://`` name an adapter of this package, imported
only when named (so anthropic / httpx load only for runs that use them);
``module:attr`` is the team's own callable.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from ..engine.api import AgentCallable, UserCallable
from ..engine.reference import ReferenceAgent
from ..engine.scripted_user import ScriptedUser
from .options import AdapterOptions


def agent_label(agent: Any) -> str:
    """A readable name for an agent object."""
    name = getattr(agent, "name", None)
    if isinstance(name, str) and name:
        return name
    target = agent if inspect.isfunction(agent) or inspect.isclass(agent) else type(agent)
    qualname = str(getattr(target, "__qualname__", repr(agent)))
    if "<locals>" in qualname:  # a function made inside a fixture: `conftest:agent`, not `...<locals>.agent`
        qualname = qualname.rsplit(".", 1)[-1]
    return f"{getattr(target, '__module__', '?')}:{qualname}"


def load_object(spec: str, what: str = "agent", folders: Sequence[str | os.PathLike[str]] = ()) -> Any:
    """Import `module:attr` (attr may be dotted); ``what`` names it in errors.

    The module is looked for on ``sys.path``, then in each of ``folders`` (the plugin
    gives the rootdir, the ini file's folder and the domain files' folders), so that
    bare ``pytest`` finds a module beside the domain as ``python -m pytest`` does. A
    folder is on ``sys.path`` only while the module imports.
    """
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise ValueError(f"expected module:attr, got {spec!r}")
    obj: Any = _import(mod_name, spec, what, [os.path.abspath(f) for f in folders])
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(_no_attribute(obj, part, mod_name, attr, what, spec)) from None
    return obj


def _import(mod_name: str, spec: str, what: str, folders: list[str]) -> Any:
    try:
        return importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if not _is_the_module(e, mod_name):
            raise ValueError(f"cannot import module {mod_name!r} for {what} {spec!r}: {e}") from None
        first = e
    except ImportError as e:
        raise ValueError(f"cannot import module {mod_name!r} for {what} {spec!r}: {e}") from None
    top = mod_name.split(".", 1)[0]
    searched: list[str] = []
    for folder in dict.fromkeys(folders):  # in order, each once
        if folder in sys.path:
            continue  # tried already
        searched.append(folder)
        if not (os.path.isfile(os.path.join(folder, top + ".py")) or os.path.isdir(os.path.join(folder, top))):
            continue
        sys.path.insert(0, folder)
        try:
            importlib.invalidate_caches()
            return importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if not _is_the_module(e, mod_name):
                raise ValueError(f"cannot import module {mod_name!r} for {what} {spec!r}: {e}") from None
        except ImportError as e:
            raise ValueError(f"cannot import module {mod_name!r} for {what} {spec!r}: {e}") from None
        finally:
            with suppress(ValueError):  # the module took it off itself
                sys.path.remove(folder)
    looked = "on sys.path" + (f", then in {', '.join(_shown(f) for f in searched)}" if searched else "")
    raise ValueError(
        f"cannot import module {mod_name!r} for {what} {spec!r}: {first} (looked {looked}; put it beside "
        f"the domain file or in the rootdir, or set `pythonpath` in pytest's configuration)"
    ) from None


def _is_the_module(e: ModuleNotFoundError, mod_name: str) -> bool:
    """True when it is `mod_name` (or a package above it) that was not found, not a module it imports."""
    return e.name is not None and (mod_name == e.name or mod_name.startswith(e.name + "."))


def _shown(folder: str) -> str:
    """A folder as the user would name it: relative to the current folder when inside it,
    with a trailing separator (``./``, ``desk/``)."""
    here = os.getcwd()
    if folder == here:
        return "." + os.sep
    if folder.startswith(here + os.sep):
        return folder[len(here) + 1:] + os.sep
    return folder + os.sep


def _no_attribute(obj: Any, part: str, mod_name: str, attr: str, what: str, spec: str) -> str:
    """``module 'm' has no attribute 'agnet' (agent 'm:agnet'); did you mean 'agent'?``"""
    from ..domain.wording import clip, closest

    head = f"module {mod_name!r} has no attribute {attr!r} ({what} {spec!r})"
    public = sorted(n for n in dir(obj) if not n.startswith("_"))
    match = closest(part, public)
    if match is not None:
        return f"{head}; did you mean {match!r}?"
    if not public:
        return f"{head}; it has no public names"
    shown = [clip(n) for n in public[:12]] + (["..."] if len(public) > 12 else [])
    return f"{head}; its public names are: {', '.join(shown)}"


def load_callable(spec: str, what: str = "agent", folders: Sequence[str | os.PathLike[str]] = ()) -> Any:
    """Import `module:attr` (see :func:`load_object`); a class is instantiated without
    arguments; the result must be callable."""
    obj = load_object(spec, what, folders)
    if inspect.isclass(obj):
        try:
            obj = obj()
        except Exception as e:
            raise ValueError(
                f"{what} {spec!r} is a class, and creating it without arguments failed: {type(e).__name__}: {e} "
                f"(point at an instance or a factory instead, or override the sandtable_agent fixture)"
            ) from None
    if not callable(obj):
        raise ValueError(f"{what} {spec!r} is not callable")
    return obj


AGENT_FORMS = "'reference', 'claude:<model>', 'openai:<model>', 'http(s)://<url>' or 'module:attr'"


def model_name(spec: str, example: str) -> str:
    """The model of a ``claude:<model>`` / ``openai:<model>`` spec; ``example`` is shown
    in the error when the spec names none."""
    kind, _, model = spec.partition(":")
    model = model.strip()
    if not model:
        raise ValueError(f"{spec!r} names no model; expected {kind}:<model>, e.g. {kind}:{example}")
    return model


_EXAMPLE_AGENT_MODEL = {"claude": "claude-sonnet-4-5", "openai": "gpt-4.1"}
_EXAMPLE_USER_MODEL = {"claude": "claude-haiku-4-5", "openai": "gpt-4.1-mini"}
_NEEDS = {"anthropic": "claude", "httpx": "openai"}


def import_adapter(module: str, spec: str) -> Any:
    """Import ``pytest_sandtable.adapters.<module>``; a missing client library becomes a
    ValueError saying which extra to install."""
    try:
        return importlib.import_module(f"pytest_sandtable.adapters.{module}")
    except ImportError as e:
        missing = (e.name or "").split(".")[0]
        if missing not in _NEEDS:
            raise
        raise ValueError(f"{spec!r} needs the {missing} package: pip install 'pytest-sandtable[{_NEEDS[missing]}]'"
                         ) from None


def make_agent(
    spec: str, options: AdapterOptions | None = None, folders: Sequence[str | os.PathLike[str]] = ()
) -> tuple[AgentCallable, str]:
    """The agent named by `--sandtable-agent`, and its label:

    - ``reference``: replays each task's reference path;
    - ``claude:<model>``: Claude through the anthropic SDK (key from ``$ANTHROPIC_API_KEY``);
    - ``openai:<model>``: an OpenAI-compatible chat-completions endpoint (base URL from
      ``options.agent_base_url``, else ``$OPENAI_BASE_URL``; key from ``$OPENAI_API_KEY``);
    - ``http://...`` / ``https://...``: a service speaking the ``sandtable-step/1`` protocol;
    - ``module:attr``: a callable, or a class instantiated without arguments; the module
      is looked for on ``sys.path``, then in ``folders`` (see :func:`load_object`).

    Raises ValueError for anything else, or when a model agent lacks its key. The
    adapters (and anthropic / httpx) are imported only when a spec names them.
    """
    spec = (spec or "reference").strip()
    options = options or AdapterOptions()
    if spec == "reference":
        return ReferenceAgent(), "reference"
    if spec.startswith("claude:"):
        model = model_name(spec, _EXAMPLE_AGENT_MODEL["claude"])
        claude = import_adapter("claude", spec).ClaudeAgent(model, options)
        return claude, str(claude.name)
    if spec.startswith("openai:"):
        model = model_name(spec, _EXAMPLE_AGENT_MODEL["openai"])
        oai = import_adapter("openai", spec).OpenAIAgent(model, options)
        return oai, str(oai.name)
    if spec.startswith(("http://", "https://")):
        if not spec.split("://", 1)[1].strip("/"):
            raise ValueError(f"agent URL {spec!r} has no host")
        http = import_adapter("http_agent", spec).HttpStepAgent(spec, options)
        return http, str(http.name)
    if ":" in spec:
        return load_callable(spec, "agent", folders), spec
    raise ValueError(f"unknown agent {spec!r}; expected {AGENT_FORMS}")


USER_FORMS = "'scripted', 'claude:<model>', 'openai:<model>' or 'module:attr'"


def make_user(
    spec: str, options: AdapterOptions | None = None, folders: Sequence[str | os.PathLike[str]] = ()
) -> tuple[UserCallable, str]:
    """The simulated user named by `--sandtable-user`, and its label:

    - ``scripted``: says the task's opening and script lines (no model);
    - ``claude:<model>``: played by Claude (key from ``$ANTHROPIC_API_KEY``);
    - ``openai:<model>``: played by a model behind an OpenAI-compatible endpoint (base URL
      from ``options.user_base_url``, else ``$OPENAI_BASE_URL``; key from ``$OPENAI_API_KEY``);
    - ``module:attr``: your own user, a callable or a class instantiated without arguments
      (its module looked for as an agent's is).

    Raises ValueError for anything else, or when a model user lacks its key.
    """
    spec = (spec or "scripted").strip()
    options = options or AdapterOptions()
    if spec == "scripted":
        return ScriptedUser(), "scripted"
    if spec.startswith(("claude:", "openai:")):
        kind = spec.partition(":")[0]
        model = model_name(spec, _EXAMPLE_USER_MODEL[kind])
        import_adapter("claude" if kind == "claude" else "openai", spec)  # is its client library installed?
        users = import_adapter("model_user", spec)
        user = (users.ClaudeUser if kind == "claude" else users.OpenAIUser)(model, options)
        return user, str(user.name)
    if ":" in spec:
        return load_callable(spec, "simulated user", folders), spec
    raise ValueError(f"unknown simulated user {spec!r}; expected {USER_FORMS}")
