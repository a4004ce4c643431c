"""The small freight desk that several test files build their domains on, written once.

Each test file adds its own ``tasks:``, because what it asserts (test ids, line
numbers, counts in ``validate`` and ``lint`` output) depends on them; the world,
tools and rule they have in common live here. The texts are assembled from the
pieces below so that each piece exists once; tests compute line numbers from the
assembled text, never by hand. Tests that mean the bundled example read
``example_domains/freight/`` itself.
"""

from __future__ import annotations

_HEADER = "version: 1\nname: freight\n"

_CARRIERS = """\
  carriers:
    key: mc_number
    rows:
      - { mc_number: "100101", name: Blue Ridge Haulers }
"""

_LOADS = """\
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, max_rate: 2350, status: available }
"""

_VERIFY_CARRIER = """\
  - name: verify_carrier
    params: { mc_number: { type: string } }
    ops:
      - get: { table: carriers, key: $mc_number }
"""

_BOOK_LOAD = """\
  - name: book_load
    params: { load_id: { type: string }, rate: { type: number } }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
"""

_RATE_CEILING = """\
  - { id: rate-ceiling, kind: limit, tool: book_load, arg: rate, lte: { table: loads, key: $load_id, field: max_rate } }
"""

CARRIERS_AND_LOADS = _CARRIERS + _LOADS
"""The rows of ``world:``: carrier MC 100101 and load L-1001 (ceiling 2350), indented
under ``world:`` for a test that declares its own further tables after them."""

DESK = _HEADER + "world:\n" + CARRIERS_AND_LOADS + "tools:\n" + _VERIFY_CARRIER + _BOOK_LOAD + (
    "invariants:\n" + _RATE_CEILING
)
"""A whole domain but its ``tasks:``: carriers and loads, ``verify_carrier`` and
``book_load``, and the ``rate-ceiling`` limit."""

LOADS_DESK = _HEADER + "world:\n" + _LOADS + "tools:\n" + _BOOK_LOAD + "invariants:\n" + _RATE_CEILING
""":data:`DESK` without carriers: one table, one tool, one invariant; no ``tasks:``."""

BOOKS_L1001 = """\
    expect:
      state: [{ table: loads, key: L-1001, fields: { status: booked } }]
    reference:
      - call: verify_carrier
        args: { mc_number: "100101" }
      - say: "Verified. 2,100?"
      - call: book_load
        args: { load_id: L-1001, rate: 2100 }
      - say: "Booked."
"""
"""The end of a :data:`DESK` task that books L-1001 at 2,100: its expectation and the
reference that meets it."""
