"""Under xdist with trials in flight, a worker that runs out of items takes only items
whose trials have not started on another worker (``plugin/pool.py``'s scheduler):
a trial taken while running was cancelled there and run again from the start."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

DOMAIN = """\
version: 1
name: steals
world:
  notes:
    key: id
    rows:
      - { id: n-1, text: hello }
tools:
  - name: read_note
    params: { id: { type: string } }
    ops:
      - get: { table: notes, key: $id }
tasks:
  - id: slow
    user: { opening: "Read note n-1 please." }
    expect: { called: [read_note] }
  - id: fast
    user: { opening: "Read note n-1 please." }
    expect: { called: [read_note] }
"""

# every trial notes when it starts; the slow task's trials take a second
AGENTS = """\
import asyncio, os

async def agent(turn):
    if len(turn.messages) == 1:
        with open(os.environ["STARTS_FILE"], "a") as f:
            f.write(f"{turn.trial.task_id}[{turn.trial.trial}]\\n")
    await asyncio.sleep(1.0 if turn.trial.task_id == "slow" else 0.01)
    turn.call_tool("read_note", {"id": "n-1"})
    return "It says hello."
"""


def test_no_trial_is_taken_from_a_worker_while_it_runs(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("steal_agents.py").write_text(AGENTS, encoding="utf-8")
    starts = pytester.path / "starts.txt"
    monkeypatch.setenv("STARTS_FILE", str(starts))
    monkeypatch.syspath_prepend(str(pytester.path))
    # gw0 is given the 8 slow trials, gw1 the 8 fast ones, which it ends at once: it then
    # takes from gw0, whose first 4 trials are running
    result = pytester.runpytest_subprocess(
        "-p", "xdist", "-n", "2", "--sandtable-k=8", "--sandtable-agent=steal_agents:agent",
        "--sandtable-concurrency=4", "-p", "no:randomly")
    result.assert_outcomes(passed=16)
    started = sorted(starts.read_text(encoding="utf-8").split())
    assert started == sorted(f"{task}[{trial}]" for task in ("slow", "fast") for trial in range(1, 9))


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


class _Worker:
    """The parts of xdist's WorkerInteractor its own ``steal`` uses: its queue (xdist's
    TestQueue) and the events it sends; ``steal`` is xdist's own, bound to this."""

    def __init__(self, indices: list[int]) -> None:
        import execnet
        from xdist.remote import TestQueue, WorkerInteractor

        self.torun = TestQueue(execnet.gateway_base.get_execmodel("thread"))
        for i in indices:
            self.torun.put(i)
        self.sent: list[tuple[str, dict[str, object]]] = []
        self.steal = WorkerInteractor.steal.__get__(self)

    def sendevent(self, name: str, **kwargs: object) -> None:
        self.sent.append((name, kwargs))


def test_a_worker_refuses_a_steal_of_a_trial_that_began_there() -> None:
    """The worker's side of the scheduler's guess (the controller's reports lag): asked for
    items one of whose trials began here, it gives none up, as xdist's worker does when one
    has left its queue; asked for items none of whose trials began, xdist's steal as it is."""
    if not hasattr(pytest.importorskip("xdist.remote").TestQueue, "lock"):
        pytest.skip("xdist's worker queue has no lock before pytest-xdist 3.6: no guard there")
    from pytest_sandtable.plugin.pool import guard_interactor

    items = [_Item(f"d.yaml::t[{i}-8]") for i in range(8)]
    worker = _Worker(list(range(8)))
    begun = {items[5].nodeid}
    guard_interactor(worker, items, begun)
    worker.steal([5, 6, 7])
    worker.steal([6, 7])
    assert worker.sent == [("unscheduled", {"indices": []}), ("unscheduled", {"indices": [6, 7]})]
    with worker.torun.lock() as q:
        assert list(q) == [0, 1, 2, 3, 4, 5]
