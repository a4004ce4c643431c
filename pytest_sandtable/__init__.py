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
    "ReferenceAgent",
    "ScriptedUser",
    "ToolResult",
    "ToolSpec",
    "TrialInfo",
    "TrialResult",
    "Turn",
    "Usage",
    "UserError",
    "UserReply",
    "UserTurn",
    "__version__",
    "arun_trial",
    "load_domain",
    "run_trial",
    "summarize",
]

_WHERE = {
    "Agent": "._agent_api",
    "AgentError": "._agent_api",
    "ToolResult": "._agent_api",
    "ToolSpec": "._agent_api",
    "TrialInfo": "._agent_api",
    "Turn": "._agent_api",
    "Usage": "._agent_api",
    "UserError": "._agent_api",
    "UserReply": "._agent_api",
    "UserTurn": "._agent_api",
    "Domain": "._model",
    "DomainError": "._errors",
    "load_domain": "._loader",
    "ReferenceAgent": "._agents",
    "ScriptedUser": "._users",
    "TrialResult": "._results",
    "arun_trial": "._trial",
    "run_trial": "._trial",
    "summarize": "._summary",
}

if TYPE_CHECKING:
    from ._agent_api import (
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
    from ._agents import ReferenceAgent
    from ._errors import DomainError
    from ._loader import load_domain
    from ._model import Domain
    from ._results import TrialResult
    from ._summary import summarize
    from ._trial import arun_trial, run_trial
    from ._users import ScriptedUser


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'pytest_sandtable' has no attribute {name!r}")
    value = getattr(import_module(mod, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
