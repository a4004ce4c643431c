"""The device desk's agent under test: ``sandtable_agent`` overridden in the domain's
folder to return the rule-based ``DeviceAgent`` (see example_domains/freight for the
same wiring with settings)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# as in freight/conftest.py: importable under --import-mode=importlib too
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from device_agent import DeviceAgent  # noqa: E402


@pytest.fixture(scope="session")
def sandtable_agent() -> DeviceAgent:
    """The agent under test for the device desk."""
    return DeviceAgent()
