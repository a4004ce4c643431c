"""`never_disclose` over a whole table field costs what the message and the trial's
changes hold, not the table's size, and finds exactly what trying every value in
``World.field_values`` order finds (the rule as first written, kept here as the
reference)."""

from __future__ import annotations

import random
import re
from typing import Any

from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.domain.model import Domain
from pytest_sandtable.engine.rules import _WORD, DisclosureScanner, numbers_in
from pytest_sandtable.engine.world import World, _index_key, seed_for

TEXTS = ["Alpha", "alpha beta", "Beta-2", "--", "  ", "", "x y z", "Gamma", "$$", "gamma ray", "Tp-7", "delta"]
NUMBERS = [1, 2, 7, 20, 2.5, 300, 1000]


def domain(rows: int, seed: int) -> Domain:
    r = random.Random(seed)
    vals = [r.choice([*TEXTS, *NUMBERS, None]) for _ in range(rows)]
    lines = "\n".join(f"      - {{ id: r{i}, v: {value!r} }}".replace("None", "null") for i, value in enumerate(vals))
    return load_domain_text(
        f"""\
version: 1
name: scale
world:
  t:
    key: id
    rows:
{lines}
tools: [{{ name: noop, ops: [{{ respond: ok }}] }}]
invariants:
  - {{ id: secret, kind: never_disclose, values: {{ table: t, field: v }} }}
tasks: [{{ id: x, user: {{ opening: Hi. }} }}]
"""
    )


def reference(scanner: DisclosureScanner, text: str, world: World) -> str | None:
    """The scan as it was: every value of ``field_values`` in order."""
    inv = scanner.rules[0]
    nums = numbers_in(text)
    words = {w.lower() for w in _WORD.findall(text)}
    protected = world.field_values("t", "v")
    for n, written in nums.items():
        if ("n", n) in protected:
            return scanner._detail(inv, n, written, world)
    for ik in protected:
        if ik is None or ik[0] != "s" or not ik[1].strip():
            continue
        first = _WORD.findall(ik[1])
        if first and first[0].lower() not in words:
            continue
        m = re.compile(r"(?<!\w)" + re.escape(ik[1]) + r"(?!\w)", re.IGNORECASE).search(text)
        if m:
            return scanner._detail(inv, ik[1], m.group(0), world)
    return None


def change(world: World, r: random.Random, rows: int) -> None:
    value: Any = r.choice([*TEXTS, *NUMBERS, None, "Epsilon", "new words"])
    if r.random() < 0.7:
        world.update("t", f"r{r.randrange(rows)}", {"v": value})
    else:
        world.create("t", {"id": f"n{r.randrange(10**9)}", "v": value})


def test_field_view_is_field_values_in_the_same_order() -> None:
    for seed in range(20):
        r = random.Random(seed)
        d = domain(100, seed)
        world = World(seed_for(d))
        for _ in range(40):
            change(world, r, 100)
            now = world.field_view("t", "v")
            order = [ik for ik in now.seed if now.in_seed_order(ik)] + now.tail()
            assert order == list(world.field_values("t", "v"))
            everything = {_index_key(x) for x in [*TEXTS, *NUMBERS, "Epsilon", "new words"]}
            for ik in everything:
                assert (ik in now) == (ik in world.field_values("t", "v"))


def test_the_scan_finds_what_trying_every_value_finds() -> None:
    for seed in range(20):
        r = random.Random(seed)
        d = domain(100, seed)
        world = World(seed_for(d))
        scanner = DisclosureScanner(d)
        for step in range(60):
            if step % 3 == 0:
                change(world, r, 100)
            vocabulary = [*TEXTS, *NUMBERS, "Epsilon", "new words", "other", "ALPHA", "tp-7"]
            words = [str(r.choice(vocabulary)) for _ in range(4)]
            text = " ".join(words) + r.choice(["", ".", "!"])
            got = scanner.scan(text, world)
            want = reference(scanner, text, world)
            assert (got[0][1] if got else None) == want, text
