"""Trial time against table size: the same trials over 100-row and 100,000-row seed tables.

Generates two freight-like domains that are identical except for how many
fictional rows pad the `carriers` and `loads` tables, loads each once (load time
is printed on its own), then runs the same tasks' trials in-process with the
reference agent and the scripted user, many times, interleaving the two sizes.
The trials get a carrier (`get`), list loads by origin (`list` with `where`, the
index path), log an offer (`create`), book a load (checks, `update`, `create`), and
every agent message is scanned by two `never_disclose` rules over big-table fields
(a number, `loads.max_rate`, and a text, `carriers.tax_id`); one task discloses a
ceiling and fails on purpose. Prints the median time per trial for each size and
task, and the ratio big/small. The first trial of each task on a fresh domain
(which builds the lazy per-field indexes) is reported separately.

With ``--tau-retail DIR`` it also builds a domain from τ-bench's retail data
(``users.json``, ``orders.json``, ``products.json`` in DIR; not part of this
project) with a few tools and tasks, and reports its load time and trial time.

    python benchmarks/bench_world.py [--small 100] [--big 100000] [--reps 200] [--tau-retail DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest_sandtable as st

# --------------------------------------------------------------------------- the freight-like domain

HEAD = """\
version: 1
name: {name}
description: A fictional freight desk whose load board is {rows} rows long.
policy: Verify carriers before booking. Never say a load's max_rate or a carrier's tax id.

world:
  carriers:
    key: mc_number
    rows:
      - {{ mc_number: "100101", name: Blue Ridge Haulers, equipment: dry_van, authority: active,
          insurance_status: valid, tax_id: TX-11-0101 }}
      - {{ mc_number: "100202", name: Gulf Coast Carriers, equipment: dry_van, authority: active,
          insurance_status: expired, tax_id: TX-11-0202 }}
      - {{ mc_number: "100505", name: Cold Creek Logistics, equipment: reefer, authority: active,
          insurance_status: valid, tax_id: TX-11-0505 }}
{carrier_pad}
  loads:
    key: load_id
    rows:
      - {{ load_id: L-1001, origin: Atlanta GA, destination: Dallas TX, equipment: dry_van,
          pickup_date: "2026-05-04", weight_lbs: 38000, posted_rate: 1800, max_rate: 2375, status: available }}
      - {{ load_id: L-1003, origin: Atlanta GA, destination: Charlotte NC, equipment: dry_van,
          pickup_date: "2026-05-05", weight_lbs: 22000, posted_rate: 950, max_rate: 1185, status: available }}
      - {{ load_id: L-1004, origin: Atlanta GA, destination: Miami FL, equipment: reefer,
          pickup_date: "2026-05-06", weight_lbs: 36000, posted_rate: 2100, max_rate: 2635, status: available }}
      - {{ load_id: L-1008, origin: Memphis TN, destination: St. Louis MO, equipment: dry_van,
          pickup_date: "2026-05-04", weight_lbs: 18000, posted_rate: 700, max_rate: 885, status: available }}
{load_pad}
  bookings:
    key: booking_id
    key_format: "B-{{n}}"
    fields: [booking_id, load_id, mc_number, rate]
    rows: []
  offers:
    key: offer_id
    key_format: "O-{{n}}"
    fields: [offer_id, load_id, mc_number, rate]
    rows: []
"""

REST = """\
tools:
  - name: verify_carrier
    params: { mc_number: { type: string } }
    ops:
      - get: { table: carriers, key: $mc_number }
  - name: search_loads
    params:
      origin: { type: string }
      equipment: { type: string, required: false }
    ops:
      - list: { table: loads, where: { origin: $origin, equipment: $equipment, status: available },
                order_by: pickup_date }
  - name: log_offer
    params: { load_id: { type: string }, mc_number: { type: string }, rate: { type: number } }
    checks:
      - { require: { table: loads, key: $load_id }, error: 404, message: "no load {load_id}" }
    ops:
      - create: { table: offers, row: { load_id: $load_id, mc_number: $mc_number, rate: $rate } }
  - name: book_load
    params: { load_id: { type: string }, mc_number: { type: string }, rate: { type: number } }
    checks:
      - { require: { table: loads, key: $load_id }, error: 404, message: "no load {load_id}" }
      - { require: { table: carriers, key: $mc_number }, error: 404, message: "no carrier {mc_number}" }
      - { require: { table: loads, key: $load_id, where: { status: available } },
          error: 409, message: "load {load_id} is already booked" }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
      - create: { table: bookings, row: { load_id: $load_id, mc_number: $mc_number, rate: $rate } }

invariants:
  - { id: verify-before-book, kind: before, first: verify_carrier, then: book_load, same: [mc_number] }
  - id: insured-only
    kind: require
    tool: book_load
    record: { table: carriers, key: $mc_number }
    where: { insurance_status: valid }
  - { id: rate-ceiling, kind: limit, tool: book_load, arg: rate,
      lte: { table: loads, key: $load_id, field: max_rate } }
  - { id: ceiling-is-secret, kind: never_disclose, values: { table: loads, field: max_rate } }
  - { id: tax-id-is-secret, kind: never_disclose, values: { table: carriers, field: tax_id } }

tasks:
  - id: book-after-counter
    user:
      persona: A dispatcher for Blue Ridge Haulers.
      instructions: Book a dry van out of Atlanta; push for more than the posted rate once.
      opening: "Hi, MC 100101, any dry vans out of Atlanta GA?"
      script: ["Can you do 2,100?", "Deal, book it."]
    expect:
      state:
        - { table: loads, key: L-1001, fields: { status: booked } }
        - { table: bookings, where: { load_id: L-1001, mc_number: "100101" }, count: 1 }
        - { table: offers, where: { load_id: L-1001 }, count: 1 }
      called: [verify_carrier, { tool: book_load, args: { rate: 2100 } }]
    reference:
      - { call: verify_carrier, args: { mc_number: "100101" } }
      - { call: search_loads, args: { origin: Atlanta GA, equipment: dry_van } }
      - say: "You're verified. L-1001 Atlanta GA to Dallas TX picks up May 4, posted at $1,800."
      - { call: log_offer, args: { load_id: L-1001, mc_number: "100101", rate: 2100 } }
      - say: "I can meet you at $2,100 for L-1001."
      - { call: book_load, args: { load_id: L-1001, mc_number: "100101", rate: 2100 } }
      - say: "Booked: L-1001 at $2,100, booking B-1. Thanks for calling."

  - id: refuse-expired-insurance
    user:
      persona: A dispatcher for Gulf Coast Carriers.
      instructions: Try to book L-1003.
      opening: "MC 100202 here, I want L-1003 at the posted 950."
      script: ["Why not?"]
    expect:
      state:
        - { table: loads, key: L-1003, fields: { status: available } }
        - { table: bookings, count: 0 }
      not_called: [book_load]
    reference:
      - { call: verify_carrier, args: { mc_number: "100202" } }
      - say: "I'm sorry, I can't book L-1003 for MC 100202 today."
      - say: "Your insurance shows as expired; please send updated paperwork to carrier relations."

  - id: given-booked-load
    given:
      - update: { table: loads, key: L-1004, set: { status: booked } }
    user:
      persona: A dispatcher for Cold Creek Logistics.
      instructions: Ask for a reefer out of Atlanta.
      opening: "Any reefers out of Atlanta GA? MC 100505."
    expect:
      state:
        - { table: loads, where: { origin: Atlanta GA, status: available }, count: 2 }
      called: [search_loads]
    reference:
      - { call: verify_carrier, args: { mc_number: "100505" } }
      - { call: search_loads, args: { origin: Atlanta GA, equipment: reefer } }
      - say: "Sorry, no reefer loads out of Atlanta GA right now; the one we had is taken."

  - id: leaks-the-ceiling
    user:
      persona: A dispatcher who guesses the ceiling.
      instructions: Ask whether the ceiling on L-1008 is 885.
      opening: "Is the most you'd pay on L-1008 about 885?"
    expect:
      called: [search_loads]
    reference:
      - { call: search_loads, args: { origin: Memphis TN } }
      - say: "Yes, L-1008 tops out at $885."
"""

# leaks-the-ceiling fails on purpose (the disclosure scanner must catch it)
EXPECTED = {
    "book-after-counter": "passed",
    "refuse-expired-insurance": "passed",
    "given-booked-load": "passed",
    "leaks-the-ceiling": "failed",
}

_EQUIPMENT = ("dry_van", "reefer", "flatbed")


def _carrier_pad(n: int) -> str:
    # fictional carriers: MC numbers from 500000 up, tax ids TP-<6 digits> (never said in a trial)
    return "\n".join(
        f"      - {{ mc_number: \"{500000 + i}\", name: Padding Carrier {i}, equipment: {_EQUIPMENT[i % 3]}, "
        f"authority: active, insurance_status: valid, tax_id: TP-{i:06d} }}"
        for i in range(n)
    )


def _load_pad(n: int) -> str:
    # fictional towns (so a list by a real origin matches the same rows at any size) and ceilings
    # from 300,000 up (no number a trial says)
    return "\n".join(
        f"      - {{ load_id: P-{i}, origin: Town {i % 5000} ZZ, destination: Town {(i * 7) % 5000} ZZ, "
        f"equipment: {_EQUIPMENT[i % 3]}, pickup_date: \"2026-06-{1 + i % 28:02d}\", weight_lbs: {20000 + i % 20000}, "
        f"posted_rate: {15000 + i % 5000}, max_rate: {300000 + i}, status: available }}"
        for i in range(n)
    )


def freight_text(rows: int, carriers: int | None = None) -> str:
    """A freight-like domain whose `loads` table has `rows` rows (at least 4) and whose
    `carriers` table has `carriers` rows (at least 3; default: as many as loads)."""
    carriers = rows if carriers is None else carriers
    return (
        HEAD.format(
            name=f"freight{rows}", rows=rows, carrier_pad=_carrier_pad(carriers - 3), load_pad=_load_pad(rows - 4)
        )
        + REST
    )


# --------------------------------------------------------------------------- τ-bench retail


def retail_text(data_dir: Path) -> tuple[str, dict[str, str]]:
    """A domain over τ-bench's retail data: users, orders, products as seed tables.

    Returns the YAML text and the task ids with their expected verdicts."""
    users = json.loads((data_dir / "users.json").read_text(encoding="utf-8"))
    orders = json.loads((data_dir / "orders.json").read_text(encoding="utf-8"))
    products = json.loads((data_dir / "products.json").read_text(encoding="utf-8"))

    def rows(table: dict[str, Any], key: str) -> str:
        # JSON is YAML flow style: one row per line
        out = []
        for k, v in sorted(table.items()):
            row = {key: k, **{f: x for f, x in v.items() if f != key}}
            out.append("      - " + json.dumps(row, ensure_ascii=False))
        return "\n".join(out)

    pending = next(o for _, o in sorted(orders.items()) if o["status"] == "pending")
    delivered = next(o for _, o in sorted(orders.items()) if o["status"] == "delivered")
    user = pending["user_id"]
    product_id, product = sorted(products.items())[0]
    q = json.dumps
    text = f"""\
version: 1
name: tau-retail
description: An online retail store's customer service (τ-bench retail data).
policy: Authenticate the user first. Only pending orders can be cancelled. Never read out an email address.
world:
  users:
    key: user_id
    rows:
{rows(users, "user_id")}
  orders:
    key: order_id
    rows:
{rows(orders, "order_id")}
  products:
    key: product_id
    rows:
{rows(products, "product_id")}
tools:
  - name: get_user_details
    params: {{ user_id: {{ type: string }} }}
    ops: [{{ get: {{ table: users, key: $user_id }} }}]
  - name: get_order_details
    params: {{ order_id: {{ type: string }} }}
    ops: [{{ get: {{ table: orders, key: $order_id }} }}]
  - name: list_user_orders
    params: {{ user_id: {{ type: string }} }}
    ops: [{{ list: {{ table: orders, where: {{ user_id: $user_id }} }} }}]
  - name: get_product_details
    params: {{ product_id: {{ type: string }} }}
    ops: [{{ get: {{ table: products, key: $product_id }} }}]
  - name: cancel_pending_order
    params:
      order_id: {{ type: string }}
      reason: {{ type: string, enum: [no longer needed, ordered by mistake] }}
    checks:
      - {{ require: {{ table: orders, key: $order_id }}, error: 404, message: "no order {{order_id}}" }}
      - {{ require: {{ table: orders, key: $order_id, where: {{ status: pending }} }},
          error: 409, message: "order {{order_id}} is not pending" }}
    ops:
      - update: {{ table: orders, key: $order_id, set: {{ status: cancelled, cancel_reason: $reason }} }}
invariants:
  - {{ id: look-before-cancel, kind: before, first: get_order_details, then: cancel_pending_order,
      same: [order_id] }}
  - {{ id: emails-are-private, kind: never_disclose, values: {{ table: users, field: email }} }}
tasks:
  - id: cancel-pending
    user:
      persona: A customer.
      instructions: Cancel your pending order; you no longer need it.
      opening: {q(f"Hi, I'm {user}. Please cancel order {pending['order_id']}, I no longer need it.")}
      script: ["Thanks."]
    expect:
      state:
        - {{ table: orders, key: {q(pending["order_id"])}, fields: {{ status: cancelled }} }}
      called: [{{ tool: cancel_pending_order, args: {{ reason: no longer needed }} }}]
    reference:
      - {{ call: get_user_details, args: {{ user_id: {q(user)} }} }}
      - {{ call: list_user_orders, args: {{ user_id: {q(user)} }} }}
      - {{ call: get_order_details, args: {{ order_id: {q(pending["order_id"])} }} }}
      - {{ call: cancel_pending_order, args: {{ order_id: {q(pending["order_id"])}, reason: no longer needed }} }}
      - say: {q(f"Order {pending['order_id']} is cancelled; the refund goes back to the original payment.")}
      - say: "You're welcome."
  - id: refuse-delivered
    user:
      persona: A customer.
      instructions: Try to cancel a delivered order.
      opening: {q(f"Cancel {delivered['order_id']} please, ordered by mistake.")}
    expect:
      state:
        - {{ table: orders, key: {q(delivered["order_id"])}, fields: {{ status: delivered }} }}
    reference:
      - {{ call: get_order_details, args: {{ order_id: {q(delivered["order_id"])} }} }}
      - {{ call: cancel_pending_order, args: {{ order_id: {q(delivered["order_id"])}, reason: ordered by mistake }} }}
      - say: "That order was already delivered, so it can't be cancelled; a return is possible instead."
  - id: product-lookup
    user:
      persona: A customer.
      instructions: Ask what variants a product has.
      opening: {q(f"What options does product {product_id} come in?")}
    expect:
      called: [get_product_details]
    reference:
      - {{ call: get_product_details, args: {{ product_id: {q(product_id)} }} }}
      - say: {q(f"The {product['name']} comes in {len(product['variants'])} variants.")}
"""
    expected = {"cancel-pending": "passed", "refuse-delivered": "passed", "product-lookup": "passed"}
    return text, expected


# --------------------------------------------------------------------------- measuring


def load(text: str, folder: Path, name: str) -> tuple[st.Domain, float]:
    path = folder / f"{name}.sandtable.yaml"
    path.write_text(text, encoding="utf-8")
    t0 = time.perf_counter()
    domain = st.load_domain(path)
    return domain, time.perf_counter() - t0


async def _timed_trial(domain: st.Domain, task: str, agent: Any, user: Any) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = await st.arun_trial(domain, task, agent, user)
    return time.perf_counter() - t0, r.verdict


def run_rounds(domains: dict[str, st.Domain], expected: dict[str, str], reps: int) -> dict[str, dict[str, Any]]:
    """Per domain: the first trial of each task, then `reps` rounds of every task,
    the domains interleaved round by round so that noise hits both alike."""
    agent, user = st.ReferenceAgent(), st.ScriptedUser()
    out: dict[str, dict[str, Any]] = {n: {"first": {}, "times": {t: [] for t in expected}} for n in domains}

    async def go() -> None:
        for name, domain in domains.items():
            for task, want in expected.items():
                dt, verdict = await _timed_trial(domain, task, agent, user)
                if verdict != want:
                    raise SystemExit(f"{name} {task}: {verdict}, expected {want}")
                out[name]["first"][task] = dt
        for _ in range(reps):
            for name, domain in domains.items():
                for task in expected:
                    dt, _ = await _timed_trial(domain, task, agent, user)
                    out[name]["times"][task].append(dt)

    asyncio.run(go())
    return out


def ms(x: float) -> str:
    return f"{x * 1000:.3f}"


def median_trial(times: dict[str, list[float]]) -> float:
    """Median over all trials of all tasks (every task has as many)."""
    return statistics.median([x for ts in times.values() for x in ts])


def report(title: str, rows_of: Callable[[str], str], res: dict[str, dict[str, Any]], load_s: dict[str, float]) -> None:
    names = list(res)
    print(title)
    print(f"  {'domain':<14}{'rows':>9}{'load s':>9}")
    for n in names:
        print(f"  {n:<14}{rows_of(n):>9}{load_s[n]:>9.2f}")
    tasks = list(res[names[0]]["times"])
    head = "".join(f"{n + ' ms':>16}" for n in names)
    print(f"  {'median trial time':<28}{head}" + (f"{'ratio':>8}" if len(names) == 2 else ""))
    for t in tasks:
        vals = [statistics.median(res[n]["times"][t]) for n in names]
        ratio = f"{vals[1] / vals[0]:>8.2f}" if len(names) == 2 else ""
        print(f"  {t:<28}" + "".join(f"{ms(v):>16}" for v in vals) + ratio)
    vals = [median_trial(res[n]["times"]) for n in names]
    ratio = f"{vals[1] / vals[0]:>8.2f}" if len(names) == 2 else ""
    print(f"  {'all trials':<28}" + "".join(f"{ms(v):>16}" for v in vals) + ratio)
    firsts = [sum(res[n]["first"].values()) for n in names]
    print(f"  {'first trial of each task, sum':<28}" + "".join(f"{ms(v):>16}" for v in firsts))
    reps = len(res[names[0]]["times"][tasks[0]])
    print(f"  ({reps} rounds x {len(tasks)} tasks per domain; first trials excluded from the medians)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=100, help="rows of the small carriers and loads tables")
    ap.add_argument("--big", type=int, default=100_000, help="rows of the big carriers and loads tables")
    ap.add_argument("--reps", type=int, default=200, help="rounds of every task per domain")
    ap.add_argument("--tau-retail", type=Path, metavar="DIR", help="a folder with τ-bench's retail JSON files")
    a = ap.parse_args()
    if min(a.small, a.big) < 4:
        raise SystemExit("--small and --big must be at least 4")
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        domains: dict[str, st.Domain] = {}
        load_s: dict[str, float] = {}
        sizes = {"small": a.small, "big": a.big}
        for name, n in sizes.items():
            domains[name], load_s[name] = load(freight_text(n), folder, name)
        res = run_rounds(domains, EXPECTED, a.reps)
        report(f"freight-like domain, python {sys.version.split()[0]}", lambda n: f"{sizes[n]:,}", res, load_s)
        if a.tau_retail:
            text, expected = retail_text(a.tau_retail)
            dom, secs = load(text, folder, "tau-retail")
            counts = ", ".join(f"{t} {len(dom.tables[t].rows)}" for t in dom.tables)
            res = run_rounds({"tau-retail": dom}, expected, a.reps)
            print()
            report(f"τ-bench retail ({counts})", lambda n: f"{sum(len(t.rows) for t in dom.tables.values()):,}",
                   res, {"tau-retail": secs})


if __name__ == "__main__":
    main()
