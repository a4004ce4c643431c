"""A big domain under xdist: wall time of a pytest run with and without ``-n 2``, cold
and warm domain cache.

The domain is airline-shaped, 4.2 MB and about 13,300 seed rows (one JSON row per line):
users (500, each with
nested name, address and payment methods), payment_methods (about 1,500), flights
(300), flight_dates (9,000: one row per flight and day) and reservations (2,000,
each with nested flights and passengers). By default the rows are generated
(fictional); ``--tau-airline DIR`` converts τ-bench's airline data instead (the
folder holding ``users.json``, ``flights.json`` and ``reservations.json``; read from
there, never copied). Three tasks with a reference each, run ``--k`` times (default 1)
by the reference agent and the scripted user.

Each configuration runs in a fresh ``python -m pytest`` subprocess, in a temporary
folder holding only the domain file; the configurations alternate, ``--repeat`` times:

- ``-n 0, no cache``: ``--sandtable-cache-dir=off`` (what every run did before the cache)
- ``-n 0, warm``: the default cache, already filled
- ``-n 2, no cache``: ``--sandtable-cache-dir=off`` (both workers parse the file)
- ``-n 2, cold``: the default cache, emptied before the run (the workers build it)
- ``-n 2, warm``: the default cache, already filled

Then the same three tasks over a world of only the rows they use, ``-n 0`` and ``-n 2``:
what xdist itself costs (start-up of two more processes, the results sent back).

With ``--turn-ms MS`` the agent is the reference agent taking MS milliseconds for each
turn (an ``asyncio.sleep``, as a model's answer takes time without the CPU): a suite worth
running in parallel, where what the domain costs each worker decides whether ``-n 2``
pays off.

Every run passes ``-p no:hypothesispytest``: hypothesis, a development dependency of this
project that a user's environment does not have, prints its own terminal summary in every
process, importing itself (0.4-3.8 s a process here), which would count as xdist's cost.

Prints the median wall time and CPU time (user + system, of pytest and its workers) of
each configuration with its ratio to ``-n 0, no cache``, and every run's wall time.
One unmeasured run comes first. The subprocesses write bytecode (into the temporary
folder) as on a user's machine, even where PYTHONDONTWRITEBYTECODE is set; ``--as-is``
keeps the environment's setting.

    python benchmarks/bench_xdist_load.py [--tau-airline DIR] [--repeat 5] [--k 1] [--turn-ms 0] [--as-is]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------------- the domain

_CITIES = ("JFK", "LAX", "ORD", "DFW", "ATL", "SFO", "SEA", "MIA", "BOS", "PHX", "DEN", "LAS", "EWR", "IAH", "MSP")
_NAMES = ("Mia", "Noah", "Ava", "Liam", "Emma", "Raj", "Chen", "Fatima", "Yusuf", "Sofia", "Omar", "Lena")
_SURNAMES = ("Li", "Smith", "Garcia", "Khan", "Jackson", "Martin", "Kim", "Silva", "Rossi", "Novak")


def synthetic_airline(seed: int = 0) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Fictional users, flights and reservations in τ-bench airline's shape and numbers."""
    rnd = random.Random(seed)
    users: dict[str, Any] = {}
    for i in range(500):
        first, last = rnd.choice(_NAMES), rnd.choice(_SURNAMES)
        uid = f"{first.lower()}_{last.lower()}_{1000 + i}"
        methods: dict[str, Any] = {}
        for j in range(rnd.choice((2, 3, 4))):
            kind = "credit_card" if j % 2 == 0 else "gift_card"
            mid = f"{kind}_{rnd.randrange(10**6, 10**7)}"
            methods[mid] = {"source": mid.rsplit("_", 1)[0], "id": mid, "last_four": f"{rnd.randrange(10**4):04d}"}
        users[uid] = {
            "user_id": uid,
            "name": {"first_name": first, "last_name": last},
            "address": {"address1": f"{rnd.randrange(1, 999)} Sunset Drive",
                        "address2": f"Suite {rnd.randrange(100, 999)}",
                        "city": "Austin", "country": "USA", "state": "TX", "zip": f"{rnd.randrange(10**5):05d}"},
            "email": f"{uid}@example.com",
            "dob": f"19{rnd.randrange(40, 99)}-0{rnd.randrange(1, 9)}-1{rnd.randrange(0, 9)}",
            "payment_methods": methods,
            "saved_passengers": [{"first_name": rnd.choice(_NAMES), "last_name": last, "dob": "1990-01-01"}],
            "membership": rnd.choice(("gold", "silver", "regular")),
            "reservations": [],
        }
    flights: dict[str, Any] = {}
    for i in range(300):
        number = f"HAT{i:03d}"
        origin, dest = rnd.sample(_CITIES, 2)
        dates: dict[str, Any] = {}
        for d in range(30):
            date = f"2024-05-{1 + d:02d}"
            if rnd.random() < 0.5:
                dates[date] = {"status": "landed", "actual_departure_time_est": f"{date}T06:{rnd.randrange(60):02d}:00",
                               "actual_arrival_time_est": f"{date}T08:{rnd.randrange(60):02d}:00"}
            else:
                dates[date] = {"status": "available",
                               "available_seats": {"basic_economy": rnd.randrange(20), "economy": rnd.randrange(20),
                                                   "business": rnd.randrange(20)},
                               "prices": {"basic_economy": rnd.randrange(50, 100), "economy": rnd.randrange(100, 200),
                                          "business": rnd.randrange(200, 2000)}}
        flights[number] = {"flight_number": number, "origin": origin, "destination": dest,
                           "scheduled_departure_time_est": "06:00:00", "scheduled_arrival_time_est": "08:00:00",
                           "dates": dates}
    reservations: dict[str, Any] = {}
    uids = sorted(users)
    for i in range(2000):
        rid = f"R{i:05d}"
        uid = rnd.choice(uids)
        legs = [{"origin": rnd.choice(_CITIES), "destination": rnd.choice(_CITIES),
                 "flight_number": f"HAT{rnd.randrange(300):03d}",
                 "date": f"2024-05-{rnd.randrange(1, 31):02d}", "price": rnd.randrange(50, 2000)}
                for _ in range(rnd.choice((1, 2, 2, 4)))]
        reservations[rid] = {
            "reservation_id": rid, "user_id": uid, "origin": legs[0]["origin"], "destination": legs[-1]["destination"],
            "flight_type": rnd.choice(("one_way", "round_trip")), "cabin": rnd.choice(("economy", "business")),
            "flights": legs,
            "passengers": [{"first_name": rnd.choice(_NAMES), "last_name": rnd.choice(_SURNAMES), "dob": "1980-02-02"}
                           for _ in range(rnd.choice((1, 2, 3)))],
            "payment_history": [{"payment_id": next(iter(users[uid]["payment_methods"])),
                                 "amount": rnd.randrange(100, 5000)}],
            "created_at": "2024-05-01T10:00:00", "total_baggages": rnd.randrange(4), "nonfree_baggages": 0,
            "insurance": rnd.choice(("yes", "no")),
        }
        users[uid]["reservations"].append(rid)
    return users, flights, reservations


def airline_text(users: dict[str, Any], flights: dict[str, Any], reservations: dict[str, Any]) -> str:
    """A domain over airline data: five seed tables, four tools, a rule, three tasks."""
    methods = {m["id"]: {**m, "user_id": uid} for uid, u in users.items() for m in u["payment_methods"].values()}
    dates = {
        f"{number}/{date}": {"flight_date": f"{number}/{date}", "flight_number": number, "date": date, **d}
        for number, f in flights.items()
        for date, d in f["dates"].items()
    }
    flights_only = {number: {k: v for k, v in f.items() if k != "dates"} for number, f in flights.items()}

    def rows(table: dict[str, Any], key: str) -> str:
        # JSON is YAML flow style: one row per line
        return "\n".join(
            "      - " + json.dumps({key: k, **{f: x for f, x in v.items() if f != key}}, ensure_ascii=False)
            for k, v in sorted(table.items())
        )

    rid = sorted(reservations)[0]
    uid = reservations[rid]["user_id"]
    landed = next(k for k, d in sorted(dates.items()) if d["status"] == "landed")
    q = json.dumps
    return f"""\
version: 1
name: airline
description: An airline's reservation desk.
policy: Authenticate the user first. Never read out a card's last four digits.
world:
  users:
    key: user_id
    rows:
{rows(users, "user_id")}
  payment_methods:
    key: id
    rows:
{rows(methods, "id")}
  flights:
    key: flight_number
    rows:
{rows(flights_only, "flight_number")}
  flight_dates:
    key: flight_date
    rows:
{rows(dates, "flight_date")}
  reservations:
    key: reservation_id
    rows:
{rows(reservations, "reservation_id")}
tools:
  - name: get_user_details
    params: {{ user_id: {{ type: string }} }}
    ops: [{{ get: {{ table: users, key: $user_id }} }}]
  - name: get_reservation_details
    params: {{ reservation_id: {{ type: string }} }}
    ops: [{{ get: {{ table: reservations, key: $reservation_id }} }}]
  - name: get_flight_status
    params: {{ flight_date: {{ type: string, description: "FLIGHT/DATE, e.g. HAT001/2024-05-01" }} }}
    ops: [{{ get: {{ table: flight_dates, key: $flight_date }} }}]
  - name: cancel_reservation
    params: {{ reservation_id: {{ type: string }} }}
    checks:
      - {{ require: {{ table: reservations, key: $reservation_id }}, error: 404,
          message: "no reservation {{reservation_id}}" }}
    ops:
      - update: {{ table: reservations, key: $reservation_id, set: {{ status: cancelled }} }}
invariants:
  - {{ id: look-before-cancel, kind: before, first: get_reservation_details, then: cancel_reservation,
      same: [reservation_id] }}
tasks:
  - id: cancel
    user:
      persona: A traveller.
      instructions: Cancel your reservation.
      opening: {q(f"I'm {uid}; please cancel reservation {rid}.")}
    expect:
      state:
        - {{ table: reservations, key: {q(rid)}, fields: {{ status: cancelled }} }}
    reference:
      - {{ call: get_user_details, args: {{ user_id: {q(uid)} }} }}
      - {{ call: get_reservation_details, args: {{ reservation_id: {q(rid)} }} }}
      - {{ call: cancel_reservation, args: {{ reservation_id: {q(rid)} }} }}
      - say: {q(f"Reservation {rid} is cancelled.")}
  - id: flight-status
    user:
      persona: A traveller.
      instructions: Ask whether a flight landed.
      opening: {q(f"Did {landed} land?")}
    expect:
      called: [get_flight_status]
    reference:
      - {{ call: get_flight_status, args: {{ flight_date: {q(landed)} }} }}
      - say: "Yes, it landed."
  - id: no-cancel-without-reservation
    user:
      persona: A traveller.
      instructions: Ask to cancel a reservation that does not exist.
      opening: "Please cancel reservation NOPE00."
    expect:
      not_called: [cancel_reservation]
    reference:
      - {{ call: get_reservation_details, args: {{ reservation_id: NOPE00 }} }}
      - say: "I can't find reservation NOPE00."
"""


def tau_airline(data_dir: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """τ-bench's airline data, read from ``data_dir``."""
    def read(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((data_dir / f"{name}.json").read_text(encoding="utf-8"))
        return data

    return read("users"), read("flights"), read("reservations")


# --------------------------------------------------------------------------- running

CONFIGS: list[tuple[str, str, list[str], str]] = [
    # label, project, extra pytest arguments, cache state before the run ("off", "cold", "warm")
    ("-n 0, no cache", "big", ["-n", "0", "--sandtable-cache-dir=off"], "off"),
    ("-n 0, warm", "big", ["-n", "0"], "warm"),
    ("-n 2, no cache", "big", ["-n", "2", "--sandtable-cache-dir=off"], "off"),
    ("-n 2, cold", "big", ["-n", "2"], "cold"),
    ("-n 2, warm", "big", ["-n", "2"], "warm"),
    # the same tasks over a world of one user, flight and reservation: xdist's own cost
    ("tiny, -n 0", "tiny", ["-n", "0"], "off"),
    ("tiny, -n 2", "tiny", ["-n", "2"], "off"),
]


def tiny(users: dict[str, Any], flights: dict[str, Any], reservations: dict[str, Any]) -> tuple[
    dict[str, Any], dict[str, Any], dict[str, Any]
]:
    """The rows the three tasks use, and no others."""
    rid = sorted(reservations)[0]
    uid = reservations[rid]["user_id"]
    number = next(n for n, f in sorted(flights.items()) if any(d["status"] == "landed" for d in f["dates"].values()))
    return {uid: users[uid]}, {number: flights[number]}, {rid: reservations[rid]}


def child_env(folder: Path, as_is: bool) -> dict[str, str]:
    """The subprocesses' environment: bytecode written, as on a user's machine (under
    ``folder``, via PYTHONPYCACHEPREFIX, so nothing is written next to the sources), unless
    ``as_is``. Without it every process compiles and assertion-rewrites its plugins again,
    about a second of CPU each: what an environment with PYTHONDONTWRITEBYTECODE=1 pays."""
    env = dict(os.environ)
    if not as_is:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(folder / ".pycache")
    return env


SLOW_AGENT = """\
import asyncio

from pytest_sandtable.engine.reference import ReferenceAgent


class SlowReference(ReferenceAgent):
    \"\"\"The reference agent, taking {ms} ms a turn as a model's answer would.\"\"\"

    inline = False

    def for_task(self, task):
        return SlowReference(task.reference)

    async def __call__(self, turn):
        await asyncio.sleep({ms} / 1000)
        return ReferenceAgent.__call__(self, turn)
"""


def write_agent(folder: Path, turn_ms: float) -> str:
    """The agent option of every run: the reference agent, or with ``turn_ms`` a slower one
    written into ``folder`` (the projects' parent, on the subprocesses' PYTHONPATH)."""
    if not turn_ms:
        return "reference"
    (folder / "slow_agent.py").write_text(SLOW_AGENT.format(ms=turn_ms), encoding="utf-8")
    return "slow_agent:SlowReference"


def run_pytest(folder: Path, extra: list[str], env: dict[str, str], k: int = 1,
               agent: str = "reference") -> tuple[float, float]:
    """Wall seconds of one run, and the CPU seconds (user + system) of its processes: pytest
    and, under xdist, its workers (children it waits for, so counted in RUSAGE_CHILDREN)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:hypothesispytest", f"--sandtable-k={k}",
           f"--sandtable-agent={agent}", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"pytest failed ({' '.join(extra)}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tau-airline", type=Path, metavar="DIR",
                    help="τ-bench's airline data folder (else generated rows)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each configuration (the median is printed)")
    ap.add_argument("--k", type=int, default=1, help="trials per task (default 1)")
    ap.add_argument("--turn-ms", type=float, default=0,
                    help="milliseconds each agent turn takes (default 0: the reference agent as it is)")
    ap.add_argument("--as-is", action="store_true",
                    help="keep the environment's PYTHONDONTWRITEBYTECODE (default: bytecode cached in the temp folder)")
    a = ap.parse_args()
    users, flights, reservations = tau_airline(a.tau_airline) if a.tau_airline else synthetic_airline()
    text = airline_text(users, flights, reservations)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for project, t in (("big", text), ("tiny", airline_text(*tiny(users, flights, reservations)))):
            (root / project).mkdir()
            (root / project / "sandtable.yaml").write_text(t, encoding="utf-8")
        cache = root / "big" / ".pytest_cache"
        entries = cache / "d" / "sandtable-domains"
        env = child_env(root, a.as_is)
        agent = write_agent(root, a.turn_ms)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
        rows = text.count("\n      - {")
        source = f"τ-bench airline from {a.tau_airline}" if a.tau_airline else "generated"
        print(f"python {sys.version.split()[0]}; domain: {source}, {len(text.encode()) / 1e6:.1f} MB, "
              f"{rows:,} seed rows; k={a.k}; agent {agent}"
              f"{f' ({a.turn_ms:g} ms a turn)' if a.turn_ms else ''}; "
              f"bytecode {'as the environment says' if a.as_is else 'cached'}")
        run_pytest(root / "big", ["-n", "2", "--sandtable-cache-dir=off"], env)  # warm up: bytecode, file cache
        times: dict[str, list[float]] = {c[0]: [] for c in CONFIGS}
        cpus: dict[str, list[float]] = {c[0]: [] for c in CONFIGS}
        for _ in range(a.repeat):
            for label, project, extra, state in CONFIGS:
                if state == "cold":
                    shutil.rmtree(cache, ignore_errors=True)
                elif state == "warm" and not any(entries.glob("*.domain")):
                    run_pytest(root / "big", ["-n", "0"], env)  # fill it (not measured)
                wall, cpu = run_pytest(root / project, extra, env, a.k, agent)
                times[label].append(wall)
                cpus[label].append(cpu)
        base = statistics.median(times[CONFIGS[0][0]])
        base_cpu = statistics.median(cpus[CONFIGS[0][0]])
        print(f"{'configuration':<16}{'wall s':>8}{'ratio':>7}{'CPU s':>8}{'ratio':>7}   every run's wall s")
        for label, runs in times.items():
            m, c = statistics.median(runs), statistics.median(cpus[label])
            print(f"{label:<16}{m:>8.2f}{m / base:>7.2f}{c:>8.2f}{c / base_cpu:>7.2f}   "
                  f"{' '.join(f'{x:.2f}' for x in runs)}")


if __name__ == "__main__":
    main()
