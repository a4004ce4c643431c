"""Shared helpers: a domain from a few YAML lines, and a tiny agent that plays a script."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# pytester's in-process runs drop from sys.modules what was first imported during them.
# httpx imports httpcore (and h11, anyio's backend) only at its first connection: made first
# inside such a run, httpcore was imported again afterwards, and the httpx of the adapters no
# longer recognised the new copy's errors (a dropped connection became an "unexpected error"
# in test_adapters whenever test_recording ran first). Imported here, once for the session.
import anyio._backends._asyncio  # noqa: F401
import h11  # noqa: F401
import httpcore  # noqa: F401
import pytest

import pytest_sandtable as st

Step = tuple[str, dict[str, Any]] | str


class Playbook:
    """An agent that plays its turns in order. A turn is a reply string, or a list of
    tool calls ``(tool, args)`` and at most one reply string; past the last turn it
    replies nothing."""

    def __init__(self, *turns: str | Sequence[Step]) -> None:
        self.turns = [[t] if isinstance(t, str) else list(t) for t in turns]

    def __call__(self, turn: st.Turn) -> str:
        i = turn.state.get("i", 0)
        turn.state["i"] = i + 1
        reply = ""
        for step in self.turns[i] if i < len(self.turns) else []:
            if isinstance(step, str):
                reply = step
            else:
                turn.call_tool(*step)
        return reply


def write_domain(folder: Path, body: str, name: str = "sandtable.yaml") -> Path:
    """Write ``version: 1``, a domain name, then ``body`` (dedented) to ``folder/name``."""
    path = folder / name
    path.write_text("version: 1\nname: test\n" + textwrap.dedent(body).lstrip("\n"), encoding="utf-8")
    return path


@pytest.fixture
def make_domain(tmp_path: Path) -> Callable[[str], st.Domain]:
    """Load a domain from YAML lines (without `version` and `name`, which are added)."""
    count = 0

    def make(body: str) -> st.Domain:
        nonlocal count
        count += 1
        return st.load_domain(write_domain(tmp_path, body, f"d{count}.sandtable.yaml"))

    return make


@pytest.fixture
def play() -> Callable[..., st.TrialResult]:
    """Run one trial of a task (the first by default) with a :class:`Playbook` or any
    agent, and the scripted user."""

    def run(domain: st.Domain, *turns: Any, task: str | None = None, agent: Any = None,
            user: Any = None, **kw: Any) -> st.TrialResult:
        return st.run_trial(
            domain,
            task or domain.tasks[0].id,
            agent if agent is not None else Playbook(*turns),
            user if user is not None else st.ScriptedUser(),
            **kw,
        )

    return run


@pytest.fixture(scope="module")
def freight_trials() -> list[st.TrialResult]:
    """A trial of each freight example task (the reference agent) and a failed copy of the first."""
    import copy

    domain = st.load_domain(Path(__file__).resolve().parent.parent / "example_domains" / "freight" / "sandtable.yaml")
    ran = [st.run_trial(domain, task.id, st.ReferenceAgent(), st.ScriptedUser(), trial=1, k=1,
                        location=f"sandtable.yaml:{task.pos.line if task.pos else 0}") for task in domain.tasks]
    failed = st.TrialResult.from_dict(copy.deepcopy(ran[0].to_dict()))
    failed.verdict = "failed"
    failed.checks[0].passed = False
    failed.checks[0].detail = "the booking is not there"
    return [*ran, failed]



@pytest.fixture
def spooled(tmp_path: Path) -> Callable[..., tuple[list[bytes], list[st.TrialResult]]]:
    """``spooled(name, add, secrets=())``: trials added by ``add`` to a fresh TrialSpool
    (its folder ``name`` under tmp_path, redacting ``secrets``): its lines in results.json's
    order, and its light trials."""
    from pytest_sandtable.report.spool import TrialSpool

    def spool(name: str, add: Callable[[TrialSpool], object],
              secrets: Sequence[str] = ()) -> tuple[list[bytes], list[st.TrialResult]]:
        made = TrialSpool(tmp_path / name, secrets=list(secrets))
        add(made)
        lines, light = list(made.ordered()[1].lines()), made.trials()
        made.close()
        return lines, light

    return spool
