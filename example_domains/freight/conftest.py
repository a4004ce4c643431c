"""How a team plugs its own agent into sandtable.

sandtable runs every task of ``sandtable.yaml`` in this folder against whatever
the ``sandtable_agent`` fixture returns. Overriding that fixture here, in the
domain's folder, is all it takes to rehearse an in-house agent: build it from
your own settings (here a session-scoped ``desk_config`` fixture) and return it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

# pytest's default import mode ("prepend") already puts this folder on sys.path
# because it has no __init__.py, but `--import-mode=importlib` does not. Insert it
# ourselves so `desk_agent` imports the same way under either mode.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from desk_agent import DeskAgent  # noqa: E402


@pytest.fixture(scope="session")
def desk_config() -> dict[str, Any]:
    """The desk agent's settings, as a team would read them from its own config.

    ``DESK_FLAW_RATE`` sets how often a trial slips (0 gives a perfect agent).
    """
    return {
        "flaw_rate": float(os.environ.get("DESK_FLAW_RATE", "0.25")),
        "brokerage": "Harborline Logistics",
    }


@pytest.fixture(scope="session")
def sandtable_agent(desk_config: dict[str, Any]) -> DeskAgent:
    """The agent under test for the freight domain: our in-house desk agent.

    It keeps no per-trial data on itself (that lives in ``turn.state``), so one
    instance serves every trial of the session, also when trials run in parallel.
    """
    return DeskAgent(**desk_config)
