"""pytest-sandtable: rehearse a customer-facing AI agent before it goes live.

The public API. Names are imported lazily, so importing the package (which
pytest does for the plugin in every run) costs almost nothing.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentError",
    "Domain",
    "DomainError",
    "HandlerContext",
    "ReferenceAgent",
    "ScriptedUser",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "TrialInfo",
    "TrialResult",
    "Turn",
    "Usage",
    "UserError",
    "UserReply",
    "UserTurn",
    "WorldHandle",
    "__version__",
    "arun_trial",
    "load_domain",
    "run_trial",
    "summarize",
]

_WHERE = {
    "Agent": ".engine.api",
    "AgentError": ".engine.api",
    "ToolResult": ".engine.api",
    "ToolSpec": ".engine.api",
    "TrialInfo": ".engine.api",
    "Turn": ".engine.api",
    "Usage": ".engine.api",
    "UserError": ".engine.api",
    "UserReply": ".engine.api",
    "UserTurn": ".engine.api",
    "Domain": ".domain.model",
    "DomainError": ".domain.errors",
    "HandlerContext": ".engine.handlers",
    "ToolError": ".engine.handlers",
    "WorldHandle": ".engine.handlers",
    "load_domain": ".domain.loader",
    "ReferenceAgent": ".engine.reference",
    "ScriptedUser": ".engine.scripted_user",
    "TrialResult": ".engine.results",
    "arun_trial": ".engine.trial",
    "run_trial": ".engine.trial",
    "summarize": ".report.summary",
}

if TYPE_CHECKING:
    from .domain.errors import DomainError
    from .domain.loader import load_domain
    from .domain.model import Domain
    from .engine.api import (
        Agent,
        AgentError,
        ToolResult,
        ToolSpec,
        TrialInfo,
        Turn,
        Usage,
        UserError,
        UserReply,
        UserTurn,
    )
    from .engine.handlers import HandlerContext, ToolError, WorldHandle
    from .engine.reference import ReferenceAgent
    from .engine.results import TrialResult
    from .engine.scripted_user import ScriptedUser
    from .engine.trial import arun_trial, run_trial
    from .report.summary import summarize


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'pytest_sandtable' has no attribute {name!r}")
    value = getattr(import_module(mod, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
