"""Trial cost of Python handlers (docs/handlers.md): the same tools written once as
declarative ops and once as handlers, and a handler domain over 100 against 100,000 rows.

A retail-like world (users, orders, products; fictional rows generated here, or
τ-bench's retail data with ``--tau-retail DIR``, read from DIR's ``users.json``,
``orders.json`` and ``products.json`` and never copied into this project) gets three
tools, each in two forms that do the same thing:

- ``get_order_details``: a ``get`` op / ``world.get``;
- ``list_user_orders``: a ``list`` op with ``where`` / ``world.list(where=...)``;
- ``cancel_pending_order``: two ``checks`` and an ``update`` op / ``world.get``, a
  ``ToolError`` and ``world.update``.

Tasks replayed by the reference agent with the scripted user, in-process
(``arun_trial``), the domains interleaved round by round (``bench_world.run_rounds``):
``cancel`` (3 calls: look up, list, cancel) and ``lookups`` (30 calls: 10 rounds of the
same three, cancelling a delivered order, a tool error). Printed: the median trial
time of each, the time per call of ``lookups`` (its trial time over its 30 calls), and
the ratio handler / declarative. Then the handler domain with its ``orders`` table
padded to 100 and to 100,000 rows (the rows the tasks read are the same at both sizes):
the median trial time of each task and the ratio big / small (target: at most 1.1).

With ``--tau-bench ENV`` (τ-bench's retail env folder, ``.../tau_bench/envs/retail``), it
first imports that env into a temporary folder (``python -m pytest_sandtable import
tau-bench``; nothing of it is copied into this project) and times its 115 tasks, Python
handlers as imported, against the declarative forms above over the same data (ENV's
``data``), in one process, the two alternating round by round: each round runs every
imported task once, then ``cancel`` and ``lookups`` of the declarative domain 20 times
each, then 20 times each of the three tasks of ``bench_world.py``'s declarative domain over
τ-bench's retail data (``retail_text``: the "declarative retail domain" issue 26 measured
against, with its ``before`` rule and its ``never_disclose`` rule over the users' emails;
its row is the mean of its tasks); CPU time (``time.process_time``) per trial, driven as the plugin drives an inline
trial (the coroutine sent once). Printed: the median over rounds of each one's time per
trial and per call, and the ratios imported / declarative.

With ``--tau-bench ENV --against DIR`` (DIR: a folder holding another copy of the
``pytest_sandtable`` package, such as ``git worktree add /tmp/before REV`` makes), that copy
is loaded into this process too, under another name (``pytest_sandtable_other``, its text
rewritten to match), ENV is imported by each copy and both run the same trials, the copies
alternating round by round in the same process: on a machine whose speed drifts by a third
from one minute to the next, the ratio of two rounds run seconds apart holds where two
processes' medians do not. Printed: each copy's imported trial and bench_world's retail
trial (medians), their ratio, and this copy's imported trial over the other's (the median
of the rounds' ratios, with the least and the greatest).

With ``--tau-bench ENV --floor``, it times the imported trials as they are and with parts of
the handler contract switched off in this process (the benchmark replaces the engine's
functions; nothing of it is an option of the product):

- "no result copy": each result is the value itself (a handler's row as a plain dict),
  not ``_json_copy_fast``'s copy (what a handler writes is still copied);
- "no alarm": ``_arm`` sets no SIGALRM for the trial's deadline;
- "neither": both;
- "no copy at all": no alarm, no result copy, and a handler reads the world's own rows
  and lists (``_lazy``, ``_private``, ``_rows_for`` give them as they are) and the world
  keeps what it writes (``_written`` copies nothing). The
  handlers then change the seed's rows in place, so the domain is loaded again each round
  and its tasks run once untimed (its reference worlds made), and its verdicts mean
  nothing: this is the trial with no isolation at all;
- "handlers return null": every handler replaced by one that returns ``null`` at once (a
  second load of the domain, whose reference worlds those handlers make too: its trials
  read, copy and write nothing of a handler's, and pass). That is the cost of a trial of
  these tasks outside the handlers: the engine's per call (arguments, rules, the call
  log, the user's turns, the grading), which no implementation of the contract can cut.

Each round runs every mode's 115 trials (the modes' order alternating), bench_world's
declarative retail tasks 20 times, and then τ-bench's own tool functions
(``tau_bench.envs.retail.tools``, imported from ENV's repository as
``bench_tau_agreement.py`` imports it) making each task's calls on τ-bench's data: the
work of the same calls as τ-bench does it, with no engine and nothing copied (each tool
returns ``json.dumps`` of what it read; its user lookups read all 500 users, where the
imported templates use the world's index). The data is parsed once a round (not timed)
and the tasks run on it one after another, each one's changes left for the next (a few
later calls then find an order no longer pending and return at once): on data parsed
afresh for each task the same calls take three times as long, in the CPU's caches after
the parse, not in the tools (``calculate``, which reads no data, took 17 µs a call on the
round's data and 72 µs as the first call after a parse). Printed: each one's trial
(median), over bench_world's trial and over the trial as imported (medians of the
rounds' ratios), how many verdicts differ from the trials as imported (without the result
copy, results share the world's rows and what changes them later changes the world), and
what "handlers return null" plus τ-bench's tools alone come to, with what that leaves a
call within 2x of bench_world's trial.

    python benchmarks/bench_handlers.py [--small 100] [--big 100000] [--reps 200] [--tau-retail DIR]
    python benchmarks/bench_handlers.py --tau-bench ENV [--rounds 15]
    python benchmarks/bench_handlers.py --tau-bench ENV --against DIR [--rounds 20]
    python benchmarks/bench_handlers.py --tau-bench ENV --floor [--rounds 15]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_world import load, median_trial, ms, retail_text, run_rounds

import pytest_sandtable as st

HANDLERS = '''\
"""The handler forms of the benchmark's tools."""

from pytest_sandtable import ToolError


def get_order_details(args, world, ctx):
    order = world.get("orders", args["order_id"])
    if order is None:
        raise ToolError(404, "orders " + args["order_id"] + " not found")
    return order


def list_user_orders(args, world, ctx):
    return world.list("orders", where={"user_id": args["user_id"]})


def cancel_pending_order(args, world, ctx):
    order = world.get("orders", args["order_id"])
    if order is None:
        raise ToolError(404, "no order " + args["order_id"])
    if order["status"] != "pending":
        raise ToolError(409, "order " + args["order_id"] + " is not pending")
    return world.update("orders", args["order_id"], {"status": "cancelled", "cancel_reason": args["reason"]})
'''

DECLARATIVE_TOOLS = """\
  - name: get_order_details
    params: { order_id: { type: string } }
    ops: [{ get: { table: orders, key: $order_id } }]
  - name: list_user_orders
    params: { user_id: { type: string } }
    ops: [{ list: { table: orders, where: { user_id: $user_id } } }]
  - name: cancel_pending_order
    params: { order_id: { type: string }, reason: { type: string } }
    checks:
      - { require: { table: orders, key: $order_id }, error: 404, message: "no order {order_id}" }
      - { require: { table: orders, key: $order_id, where: { status: pending } },
          error: 409, message: "order {order_id} is not pending" }
    ops:
      - update: { table: orders, key: $order_id, set: { status: cancelled, cancel_reason: $reason } }
"""

HANDLER_TOOLS = """\
  - name: get_order_details
    params: { order_id: { type: string } }
    handler: bench_retail_handlers:get_order_details
  - name: list_user_orders
    params: { user_id: { type: string } }
    handler: bench_retail_handlers:list_user_orders
  - name: cancel_pending_order
    params: { order_id: { type: string }, reason: { type: string } }
    handler: bench_retail_handlers:cancel_pending_order
"""


def _rows(table: dict[str, Any], key: str) -> str:
    """JSON is YAML flow style: one row per line."""
    return "\n".join("      - " + json.dumps({key: k, **{f: x for f, x in v.items() if f != key}}, ensure_ascii=False)
                     for k, v in table.items())


def generated_world(orders: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Fictional users, orders and products: user u0 has the same four orders (two
    pending, two delivered) at every size; the padding belongs to other users."""
    products = {f"P{i}": {"name": f"Product {i}", "price": 10.0 + i} for i in range(50)}
    users = {f"u{i}": {"name": f"User {i}", "email": f"user{i}@example.test"} for i in range(max(2, orders // 4))}
    table: dict[str, Any] = {}
    for i in range(orders):
        mine = i < 4
        table[f"#O{i:07d}"] = {
            "user_id": "u0" if mine else f"u{1 + i % (len(users) - 1)}",
            "status": ("pending", "delivered")[i % 2] if mine else ("pending", "delivered", "processed")[i % 3],
            "items": [{"product_id": f"P{i % 50}", "price": 10.0 + i % 50}],
        }
    return users, table, products


def tau_world(data_dir: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    def read(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((data_dir / name).read_text(encoding="utf-8"))
        return data

    return read("users.json"), read("orders.json"), read("products.json")


def domain_text(name: str, tools: str, world: tuple[dict[str, Any], dict[str, Any], dict[str, Any]]) -> str:
    users, orders, products = world
    ordered = sorted(orders.items())
    pending = next(k for k, o in ordered if o["status"] == "pending")
    delivered = next(k for k, o in ordered if o["status"] == "delivered")
    user = orders[pending]["user_id"]
    q = json.dumps
    look = (f"      - {{ call: get_order_details, args: {{ order_id: {q(delivered)} }} }}\n"
            f"      - {{ call: list_user_orders, args: {{ user_id: {q(user)} }} }}\n"
            f"      - {{ call: cancel_pending_order, args: {{ order_id: {q(delivered)}, reason: mistake }} }}\n")
    return f"""\
version: 1
name: {name}
policy: Only pending orders can be cancelled.
world:
  users:
    key: user_id
    rows:
{_rows(users, "user_id")}
  orders:
    key: order_id
    rows:
{_rows(orders, "order_id")}
  products:
    key: product_id
    rows:
{_rows(products, "product_id")}
tools:
{tools}
tasks:
  - id: cancel
    user: {{ opening: {q(f"Please cancel {pending}.")} }}
    expect:
      state: [{{ table: orders, key: {q(pending)}, fields: {{ status: cancelled }} }}]
    reference:
      - {{ call: get_order_details, args: {{ order_id: {q(pending)} }} }}
      - {{ call: list_user_orders, args: {{ user_id: {q(user)} }} }}
      - {{ call: cancel_pending_order, args: {{ order_id: {q(pending)}, reason: no longer needed }} }}
      - say: Cancelled.
  - id: lookups
    user: {{ opening: {q(f"Cancel {delivered}?")} }}
    expect:
      state: [{{ table: orders, key: {q(delivered)}, fields: {{ status: delivered }} }}]
    reference:
{look * 10}      - say: It was delivered, so it cannot be cancelled.
"""


EXPECTED = {"cancel": "passed", "lookups": "passed"}
LOOKUP_CALLS = 30


def forms(folder: Path, world: tuple[dict[str, Any], dict[str, Any], dict[str, Any]], reps: int, label: str) -> None:
    domains = {name: load(domain_text(name, tools, world), folder, f"{label}-{name}")[0]
               for name, tools in (("declarative", DECLARATIVE_TOOLS), ("handler", HANDLER_TOOLS))}
    res = run_rounds(domains, EXPECTED, reps)
    print(f"{label}: the same tools as ops and as handlers ({len(world[1]):,} orders)")
    print(f"  {'':<32}{'declarative ms':>16}{'handler ms':>14}{'ratio':>8}")
    for task in EXPECTED:
        d, h = (median_trial({task: res[n]["times"][task]}) for n in ("declarative", "handler"))
        print(f"  {'median trial, ' + task:<32}{ms(d):>16}{ms(h):>14}{h / d:>8.2f}")
    d, h = (median_trial({"lookups": res[n]["times"]["lookups"]}) / LOOKUP_CALLS for n in ("declarative", "handler"))
    print(f"  {'per call (lookups / 30 calls)':<32}{ms(d):>16}{ms(h):>14}{h / d:>8.2f}")
    print(f"  {reps} rounds; first trials excluded")


def sizes(folder: Path, small: int, big: int, reps: int) -> None:
    domains, load_s = {}, {}
    for n in (small, big):
        name = f"rows-{n}"
        domains[name], load_s[name] = load(domain_text(name, HANDLER_TOOLS, generated_world(n)), folder, name)
    res = run_rounds(domains, EXPECTED, reps)
    a, b = (f"rows-{n}" for n in (small, big))
    print(f"handler domain: {small:,} against {big:,} orders")
    print(f"  {'':<32}{f'{small:,} rows ms':>16}{f'{big:,} rows ms':>18}{'ratio':>8}")
    for task in EXPECTED:
        x, y = (median_trial({task: res[n]["times"][task]}) for n in (a, b))
        print(f"  {'median trial, ' + task:<32}{ms(x):>16}{ms(y):>18}{y / x:>8.2f}")
    x, y = (sum(median_trial({t: res[n]["times"][t]}) for t in EXPECTED) for n in (a, b))
    print(f"  {'both tasks (sum of medians)':<32}{ms(x):>16}{ms(y):>18}{y / x:>8.2f}")
    print(f"  load s: {load_s[a]:.2f} and {load_s[b]:.2f}; {reps} rounds; first trials excluded")


def _drive(coro: Any) -> Any:
    """A trial's coroutine run to its end without an event loop, as the plugin runs a
    trial whose agent and user both run inline."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("an inline trial suspended")


def _runner(pkg: Any, arun_trial: Any) -> Any:
    """``one(domain, task, n)``: trial ``n`` of a task with ``pkg``'s reference agent and
    scripted user, driven as the plugin drives an inline trial."""
    agent, user = pkg.ReferenceAgent(), pkg.ScriptedUser()

    def one(domain: Any, task: Any, n: int) -> Any:
        return _drive(arun_trial(domain, task, agent, user, trial=n, k=3, run_seed=1, agent_name="reference",
                                 user_name="scripted", trial_timeout=900.0, location="sandtable.yaml:1"))

    return one


def _import_env(env: Path, folder: Path) -> Path:
    """ENV imported by this copy's importer into ``folder``: its ``sandtable.yaml``."""
    from pytest_sandtable.cli import main as cli

    out = folder / "tau-retail-imported"
    with contextlib.redirect_stdout(io.StringIO()):
        if cli(["import", "tau-bench", str(env), "-o", str(out)]) != 0:
            raise SystemExit(f"could not import {env}")
    return out / "sandtable.yaml"


def imported(env: Path, folder: Path, rounds: int) -> None:
    """τ-bench's retail env as imported (Python handlers) against the declarative forms."""
    from pytest_sandtable.engine.trial import arun_trial

    tau = st.load_domain(_import_env(env, folder))
    declarative = load(domain_text("declarative", DECLARATIVE_TOOLS, tau_world(env / "data")), folder, "tau-decl")[0]
    # the issue's own baseline: bench_world's declarative domain over the same data (three
    # tasks of 4, 2 and 1 calls, a `before` rule and a never_disclose rule over the emails)
    world_text, world_expected = retail_text(env / "data")
    world_retail = load(world_text, folder, "tau-world")[0]
    one = _runner(st, arun_trial)

    verdicts = {t.id: one(tau, t, 1).verdict for t in tau.tasks}  # warm: handler imports, indexes
    calls = statistics.fmean(len(one(tau, t, 1).calls) for t in tau.tasks)
    for task, want in EXPECTED.items():
        got = one(declarative, declarative.task(task), 1).verdict
        if got != want:
            raise SystemExit(f"declarative {task}: {got}, expected {want}")
    for task, want in world_expected.items():
        got = one(world_retail, world_retail.task(task), 1).verdict
        if got != want:
            raise SystemExit(f"bench_world's tau-retail {task}: {got}, expected {want}")
    world_calls = statistics.fmean(len(one(world_retail, t, 1).calls) for t in world_retail.tasks)
    reps = 20
    samples: dict[str, list[float]] = {"imported": [], "cancel": [], "lookups": [], "world": []}
    for r in range(rounds):
        c0 = time.process_time()
        for t in tau.tasks:
            if one(tau, t, 1 + r % 3).verdict != verdicts[t.id]:
                raise SystemExit(f"{t.id}: the verdict changed")
        samples["imported"].append((time.process_time() - c0) / len(tau.tasks))
        for task in ("cancel", "lookups"):
            spec = declarative.task(task)
            c0 = time.process_time()
            for i in range(reps):
                one(declarative, spec, 1 + i % 3)
            samples[task].append((time.process_time() - c0) / reps)
        c0 = time.process_time()
        for i in range(reps):
            for t in world_retail.tasks:
                one(world_retail, t, 1 + i % 3)
        samples["world"].append((time.process_time() - c0) / (reps * len(world_retail.tasks)))
    med = {n: statistics.median(x) for n, x in samples.items()}
    per_call = {"imported": med["imported"] / calls, "cancel": med["cancel"] / 3,
                "lookups": med["lookups"] / LOOKUP_CALLS, "world": med["world"] / world_calls}
    print(f"τ-bench retail imported ({len(tau.tasks)} tasks, {calls:.2f} calls a trial, Python handlers) against "
          "the declarative forms over the same data")
    print(f"  {'':<36}{'trial ms':>10}{'call ms':>10}{'trial ratio':>13}{'call ratio':>12}")
    print(f"  {'imported, mean of its tasks':<36}{ms(med['imported']):>10}{ms(per_call['imported']):>10}")
    rows = (("cancel", "declarative cancel (3 calls)"), ("lookups", f"declarative lookups ({LOOKUP_CALLS} calls)"),
            ("world", f"bench_world tau-retail ({world_calls:.2f} calls)"))
    for task, label in rows:
        print(f"  {label:<36}{ms(med[task]):>10}{ms(per_call[task]):>10}"
              f"{med['imported'] / med[task]:>13.2f}{per_call['imported'] / per_call[task]:>12.2f}")
    print(f"  CPU time, medians of {rounds} rounds (each: the {len(tau.tasks)} tasks once, each declarative task "
          f"{reps} times, bench_world's tau-retail its {len(world_retail.tasks)} tasks {reps} times, their mean); "
          "ratios imported / declarative")


OTHER = "pytest_sandtable_other"


def _other_copy(source: Path, folder: Path) -> None:
    """The package in ``source`` as ``OTHER`` under ``folder``: every reference to its own
    name (imports, plugin names, the importer's templates) rewritten."""
    target = folder / OTHER
    shutil.copytree(source / "pytest_sandtable", target, ignore=shutil.ignore_patterns("__pycache__"))
    for f in target.rglob("*.py"):
        text = f.read_text(encoding="utf-8")
        new = re.sub(r"\bpytest_sandtable\b", OTHER, text)
        if new != text:
            f.write_text(new, encoding="utf-8")


def _side(package: str, env: Path, folder: Path) -> tuple[Any, Any, Any]:
    """ENV imported by ``package``'s own importer (its handler module renamed for the other
    copy, so the two modules do not meet in ``sys.modules``), bench_world's retail domain,
    and a function that runs one trial of either, as :func:`imported` does."""
    pkg = importlib.import_module(package)
    cli = importlib.import_module(package + ".cli").main
    trial = importlib.import_module(package + ".engine.trial")
    out = folder / f"{package}-retail"
    with contextlib.redirect_stdout(io.StringIO()):
        if cli(["import", "tau-bench", str(env), "-o", str(out)]) != 0:
            raise SystemExit(f"{package} could not import {env}")
    if package == OTHER:
        module = out / "tau_retail_handlers.py"
        (out / "tau_retail_handlers_other.py").write_text(module.read_text(encoding="utf-8"), encoding="utf-8")
        module.unlink()
        spec = out / "sandtable.yaml"
        spec.write_text(spec.read_text(encoding="utf-8").replace("tau_retail_handlers:", "tau_retail_handlers_other:"),
                        encoding="utf-8")
    tau = pkg.load_domain(out / "sandtable.yaml")
    text, _ = retail_text(env / "data")
    (folder / f"{package}-world").mkdir()
    (folder / f"{package}-world" / "sandtable.yaml").write_text(text, encoding="utf-8")
    world = pkg.load_domain(folder / f"{package}-world" / "sandtable.yaml")
    return tau, world, _runner(pkg, trial.arun_trial)


def against(env: Path, folder: Path, rounds: int, other: Path) -> None:
    """This copy's imported τ-bench retail trial against another copy's, in one process."""
    if not (other / "pytest_sandtable" / "__init__.py").is_file():
        raise SystemExit(f"{other} holds no pytest_sandtable package")
    _other_copy(other, folder / "other")
    sys.path.insert(0, str(folder / "other"))
    sides = {"this": _side("pytest_sandtable", env, folder), "other": _side(OTHER, env, folder)}
    verdicts = {}
    for name, (tau, world, one) in sides.items():  # warm: handler imports, indexes, kept references
        verdicts[name] = [one(d, t, 1).verdict for d in (tau, world) for t in d.tasks]
    if verdicts["this"] != verdicts["other"]:
        raise SystemExit("the two copies' verdicts differ")
    reps = 20
    samples: dict[str, dict[str, list[float]]] = {name: {"imported": [], "world": []} for name in sides}
    for r in range(rounds):
        for name in ("this", "other") if r % 2 == 0 else ("other", "this"):
            tau, world, one = sides[name]
            c0 = time.process_time()
            for t in tau.tasks:
                one(tau, t, 1 + r % 3)
            samples[name]["imported"].append((time.process_time() - c0) / len(tau.tasks))
            c0 = time.process_time()
            for i in range(reps):
                for t in world.tasks:
                    one(world, t, 1 + i % 3)
            samples[name]["world"].append((time.process_time() - c0) / (reps * len(world.tasks)))
    print(f"τ-bench retail imported (Python handlers), this copy against {other}, alternating in one process")
    print(f"  {'':<8}{'imported ms':>13}{'bench_world ms':>16}{'ratio':>8}")
    for name in sides:
        i, w = (statistics.median(samples[name][x]) for x in ("imported", "world"))
        print(f"  {name:<8}{ms(i):>13}{ms(w):>16}{i / w:>8.2f}")
    for what in ("imported", "world"):
        ratios = [a / b for a, b in zip(samples["this"][what], samples["other"][what], strict=True)]
        print(f"  this / other, {what + ' trial,':<17} per round: median {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f} to {max(ratios):.3f})")
    print(f"  CPU time, {rounds} rounds (each: the {len(sides['this'][0].tasks)} imported tasks once, "
          f"bench_world's retail tasks {reps} times), the copies' order alternating")


def floor(env: Path, folder: Path, rounds: int) -> None:
    """The imported trials with the contract's result copy, its alarm, or its handlers
    switched off, against bench_world's declarative retail trial."""
    from pytest_sandtable.engine import handlers
    from pytest_sandtable.engine.api import ToolResult
    from pytest_sandtable.engine.trial import arun_trial

    path = _import_env(env, folder)
    tau, free = st.load_domain(path), st.load_domain(path)
    if free is tau:
        raise SystemExit("load_domain gave the same domain twice: the free handlers' reference worlds would be shared")
    world_text, _ = retail_text(env / "data")
    world = load(world_text, folder, "tau-world")[0]
    one = _runner(st, arun_trial)
    names = ("_json_copy_fast", "_written", "_arm", "run_handler", "_lazy", "_private", "_rows_for")
    engine = {name: getattr(handlers, name) for name in names}

    def no_copy(value: Any) -> Any:
        return dict(value) if isinstance(value, dict) else value

    def copied_writes(values: Any, call: str, arg: str) -> Any:  # writes still copied, as the engine copies them
        handlers._json_copy_fast = engine["_json_copy_fast"]
        try:
            return engine["_written"](values, call, arg)
        finally:
            handlers._json_copy_fast = no_copy

    def no_arm(state: Any, thread: int) -> None:
        state._alarm = ()  # as _arm marks a trial it has tried

    def free_handler(tool: Any, args: Any, w: Any, state: Any, index: int) -> Any:
        return ToolResult(True, value=None)

    def same(value: Any) -> Any:
        return value

    # each mode: its domain (a function giving a new one each round, for a mode that changes
    # the seed's own rows) and the engine's functions it replaces
    modes: dict[str, tuple[Any, dict[str, Any]]] = {
        "as imported": (tau, {}),
        "no result copy": (tau, {"_json_copy_fast": no_copy, "_written": copied_writes}),
        "no alarm": (tau, {"_arm": no_arm}),
        "neither": (tau, {"_json_copy_fast": no_copy, "_written": copied_writes, "_arm": no_arm}),
        "no copy at all": (lambda: st.load_domain(path),
                           {"_json_copy_fast": no_copy, "_arm": no_arm, "_lazy": same, "_private": same,
                            "_rows_for": same}),
        "handlers return null": (free, {"run_handler": free_handler}),
    }

    def use(mode: str) -> Any:
        domain, patches = modes[mode]
        for name in names:
            setattr(handlers, name, patches.get(name, engine[name]))
        if callable(domain):  # a new domain, its reference worlds made (and its seed changed) untimed
            domain = domain()
            for t in domain.tasks:
                one(domain, t, 1)
        return domain

    try:
        base = [one(use("as imported"), t, 1).verdict for t in tau.tasks]  # warm: imports, indexes, references
        differ = {}
        for mode in modes:
            domain = use(mode)
            differ[mode] = sum(one(domain, t, 1).verdict != v for t, v in zip(domain.tasks, base, strict=True))
        for t in world.tasks:
            one(world, t, 1)
        calls = statistics.fmean(len(one(use("as imported"), t, 1).calls) for t in tau.tasks)
        tau_alone = _tau_tools_alone(env)
        tau_alone()
        reps = 20
        samples: dict[str, list[float]] = {mode: [] for mode in modes}
        world_samples: list[float] = []
        alone_samples: list[float] = []
        order = list(modes)
        for r in range(rounds):
            for mode in order if r % 2 == 0 else order[::-1]:
                domain = use(mode)
                c0 = time.process_time()
                for t in domain.tasks:
                    one(domain, t, 1 + r % 3)
                samples[mode].append((time.process_time() - c0) / len(domain.tasks))
            use("as imported")
            c0 = time.process_time()
            for i in range(reps):
                for t in world.tasks:
                    one(world, t, 1 + i % 3)
            world_samples.append((time.process_time() - c0) / (reps * len(world.tasks)))
            alone_samples.append(tau_alone())
    finally:
        use("as imported")
    print(f"τ-bench retail imported ({len(tau.tasks)} tasks, {calls:.2f} calls a trial) with parts of the handler "
          "contract switched off, against bench_world's declarative retail trial")
    print(f"  {'':<24}{'trial ms':>10}{'/ bench_world':>15}{'/ as imported':>15}{'verdicts changed':>18}")
    for mode in modes:
        over_world = [a / b for a, b in zip(samples[mode], world_samples, strict=True)]
        over_base = [a / b for a, b in zip(samples[mode], samples["as imported"], strict=True)]
        print(f"  {mode:<24}{ms(statistics.median(samples[mode])):>10}{statistics.median(over_world):>15.2f}"
              f"{statistics.median(over_base):>15.3f}{differ[mode]:>18}")
    world_ms = statistics.median(world_samples)
    print(f"  {'bench_world retail':<24}{ms(world_ms):>10}")
    over_world = [a / b for a, b in zip(alone_samples, world_samples, strict=True)]
    over_base = [a / b for a, b in zip(alone_samples, samples["as imported"], strict=True)]
    print(f"  {'τ-bench tools alone':<24}{ms(statistics.median(alone_samples)):>10}"
          f"{statistics.median(over_world):>15.2f}{statistics.median(over_base):>15.3f}")
    least = [(a + b) / w for a, b, w in zip(samples["handlers return null"], alone_samples, world_samples, strict=True)]
    budget = [(2 - x) * w / calls for x, w in zip(least, world_samples, strict=True)]
    print(f"  handlers return null + τ-bench tools alone (the engine's part and the calls' own work): "
          f"{statistics.median(least):.2f}x bench_world; within 2x, that leaves the contract (its copies, "
          f"savepoints, alarm, handle) and what its results add (the log, the grading) "
          f"{statistics.median(budget) * 1e6:.1f} µs a call (medians of the rounds')")
    print(f"  CPU time, {rounds} rounds (each: the {len(tau.tasks)} tasks once in every mode, the modes' order "
          f"alternating, then bench_world's {len(world.tasks)} tasks {reps} times, then τ-bench's tools); ratios "
          "are medians of the rounds' ratios")


def _tau_tools_alone(env: Path) -> Any:
    """``run()``: τ-bench's own tools' CPU time per task, every task's actions invoked in
    τ-bench's order on one copy of its data (parsed first, not timed)."""
    from bench_tau_agreement import TauOracle

    oracle = TauOracle(env.parents[2], env.name)
    tools = {t.get_info()["function"]["name"]: t for t in oracle.tools}

    def run() -> float:
        spent = 0.0
        data = oracle.load_data()
        for task in oracle.tasks:
            c0 = time.process_time()
            for action in task.actions:
                try:
                    tools[action.name].invoke(data=data, **action.kwargs)
                except Exception:  # τ-bench's env turns a tool's raise into "Error: ..." too
                    pass
            spent += time.process_time() - c0
        return spent / len(oracle.tasks)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=100, help="orders of the small handler domain")
    ap.add_argument("--big", type=int, default=100_000, help="orders of the big handler domain")
    ap.add_argument("--reps", type=int, default=200, help="rounds of every task per domain")
    ap.add_argument("--tau-retail", type=Path, help="τ-bench's retail data folder (users.json, orders.json, ...)")
    ap.add_argument("--tau-bench", type=Path, metavar="ENV", help="τ-bench's retail env folder: import it and time it")
    ap.add_argument("--rounds", type=int, default=15, help="with --tau-bench: alternating rounds")
    ap.add_argument("--against", type=Path, metavar="DIR",
                    help="with --tau-bench: a folder holding another copy of pytest_sandtable to run beside this one")
    ap.add_argument("--floor", action="store_true",
                    help="with --tau-bench: the trials with the contract's result copy, alarm or handlers switched off")
    args = ap.parse_args()
    if (args.floor or args.against) and not args.tau_bench:
        ap.error(f"{'--floor' if args.floor else '--against'} needs --tau-bench ENV")
    if args.floor and args.against:
        ap.error("--floor and --against are two modes: give one")
    print(f"pytest-sandtable {st.__version__}, Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bench_retail_handlers.py").write_text(HANDLERS, encoding="utf-8")
        if args.tau_bench and args.floor:
            floor(args.tau_bench, folder, args.rounds)
            return
        if args.tau_bench and args.against:
            against(args.tau_bench, folder, args.rounds, args.against)
            return
        if args.tau_bench:
            imported(args.tau_bench, folder, args.rounds)
            return
        world = tau_world(args.tau_retail) if args.tau_retail else generated_world(1000)
        forms(folder, world, args.reps, "tau-retail" if args.tau_retail else "generated")
        if args.big != args.small:
            sizes(folder, args.small, args.big, args.reps)


if __name__ == "__main__":
    main()
