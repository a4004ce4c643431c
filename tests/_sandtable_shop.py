"""A tiny fictional domain and agent for the artefact, gate, merge and xdist tests.

The agent replays each task's reference, except where the environment says
otherwise: ``SHOP_FAIL=greet:2,refund:1`` makes those trials (task:trial) slip
(a wrong reply, so the trial fails), ``SHOP_CRASH=greet:2`` kills the process
running that trial with ``os._exit(1)``, ``SHOP_USER_FAIL=greet:2`` makes the
simulated user raise there (the trial errors), and ``SHOP_SAY=text`` adds text to
every reply.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

import pytest

# Import the engine now: in-process pytester runs drop the modules first imported
# during a run, and a later run would then see two different ReferenceAgent classes.
import pytest_sandtable.plugin.items
import pytest_sandtable.plugin.session  # noqa: F401
from pytest_sandtable.report.results_json import RESULTS_FILE, read_results

# Likewise hypothesis, when installed: its pytest plugin imports it in every run's
# header, which would cost each in-process pytester run seconds.
with contextlib.suppress(ImportError):
    import hypothesis  # noqa: F401

# The plugin (entry point) records results and writes the artefacts by itself; runs
# only keep pytest's cache out of the project folder.
PLUGIN_ARGS = ("-p", "no:cacheprovider")

SHOP = """\
version: 1
name: shop
description: The help desk of Pebble & Pine, a fictional shop.
policy: Look the customer up before any refund. Refunds over 100 go to a human.
tags:
  refunds: Refunds within the cap.
  chat: Talking to customers.
world:
  customers:
    key: customer_id
    rows:
      - { customer_id: C-1, name: Ada Example, tier: gold }
  orders:
    key: order_id
    rows:
      - { order_id: O-1, customer_id: C-1, status: shipped }
  refunds:
    key: refund_id
    key_format: "R-{n}"
    fields: [customer_id, amount]
tools:
  - name: lookup_customer
    description: Find a customer.
    params: { customer_id: { type: string } }
    ops:
      - get: { table: customers, key: $customer_id }
  - name: order_status
    description: The status of an order.
    params: { order_id: { type: string } }
    ops:
      - get: { table: orders, key: $order_id }
  - name: issue_refund
    description: Refund a customer.
    params: { customer_id: { type: string }, amount: { type: number } }
    ops:
      - create: { table: refunds, row: { customer_id: $customer_id, amount: $amount } }
invariants:
  - { id: lookup-before-refund, kind: before, first: lookup_customer, then: issue_refund, same: [customer_id] }
  - { id: refund-cap, kind: limit, tool: issue_refund, arg: amount, lte: 100 }
tasks:
  - id: refund
    tags: [refunds]
    critical: true
    user: { opening: "Hi, I'm customer C-1. Please refund 20 for my broken mug." }
    expect:
      state:
        - { table: refunds, where: { customer_id: C-1, amount: 20 }, count: 1 }
    reference:
      - call: lookup_customer
        args: { customer_id: C-1 }
      - call: issue_refund
        args: { customer_id: C-1, amount: 20 }
      - say: "Done: refund R-1 of 20 is on its way."
  - id: greet
    tags: [chat]
    user: { opening: "Hello there!" }
    expect: { reply_includes: ["Hello"] }
    reference:
      - say: "Hello! How can I help?"
  - id: order-status
    tags: [chat]
    user: { opening: "Where is my order O-1?" }
    expect:
      called: [order_status]
      reply_includes: ["shipped"]
    reference:
      - call: order_status
        args: { order_id: O-1 }
      - say: "Your order O-1 has shipped."
"""

CONFTEST = """\
import os

import pytest

from pytest_sandtable import ReferenceAgent, ScriptedUser


def _listed(var, key):
    return key in os.environ.get(var, "").split(",")


class ShopAgent(ReferenceAgent):
    name = "shop-agent"

    def for_task(self, task):
        return ShopAgent(task.reference)

    def __call__(self, turn):
        key = f"{turn.trial.task_id}:{turn.trial.trial}"
        if _listed("SHOP_CRASH", key):
            os._exit(1)
        if _listed("SHOP_FAIL", key):
            return "Sorry, I cannot help with that."
        return super().__call__(turn) + os.environ.get("SHOP_SAY", "")


@pytest.fixture(scope="session")
def sandtable_agent():
    return ShopAgent()


class FailingUser:
    name = "scripted"

    def __init__(self):
        self.base = ScriptedUser()

    def __call__(self, turn):
        if _listed("SHOP_USER_FAIL", f"{turn.trial.task_id}:{turn.trial.trial}"):
            raise RuntimeError("the simulated user lost the line")
        return self.base(turn)


@pytest.fixture(scope="session")
def sandtable_user():
    return FailingUser() if os.environ.get("SHOP_USER_FAIL") else ScriptedUser()
"""


def make_shop(pytester: pytest.Pytester, domain: str = SHOP, folder: str = ".") -> Path:
    """The shop domain and its agent in ``folder`` of a pytester project (rootdir pinned by an ini)."""
    pytester.makeini("[pytest]\n")
    where = pytester.path / folder
    where.mkdir(parents=True, exist_ok=True)
    (where / "sandtable.yaml").write_text(domain, encoding="utf-8")
    (where / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    return where / "sandtable.yaml"


def run_dirs(root: Path) -> list[Path]:
    """Run folders written under ``root/.sandtable/runs``, oldest first."""
    runs = root / ".sandtable" / "runs"
    return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []


def only_results(root: Path) -> dict[str, Any]:
    """The results.json of the one run written under ``root`` (asserts there is exactly one)."""
    dirs = run_dirs(root)
    assert len(dirs) == 1, dirs
    return read_results(dirs[0] / RESULTS_FILE)


# Fields that measure time, and so differ between two runs of a deterministic agent.
TIMING_FIELDS = {
    "run": ("started_at", "finished_at"),
    "trial": ("duration", "latency"),
    "summary.latency": ("p50", "p95"),
}


def strip_timings(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of a results.json document without its timing fields (see TIMING_FIELDS)."""
    doc = copy.deepcopy(doc)
    for f in TIMING_FIELDS["run"]:
        doc["run"].pop(f, None)
    for shard in doc["run"].get("shards") or []:
        for f in TIMING_FIELDS["run"]:
            shard.pop(f, None)
    for t in doc["trials"]:
        for f in TIMING_FIELDS["trial"]:
            t.pop(f, None)
    for f in TIMING_FIELDS["summary.latency"]:
        doc["summary"]["latency"].pop(f, None)
    return doc
