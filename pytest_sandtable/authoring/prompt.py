"""What ``init`` tells the model: the domain format, the rules of a draft, a worked
example, and the repair request. Kept apart from the calling code so that the prompt
can be read (and improved) as text."""

from __future__ import annotations

from collections.abc import Sequence

from .notes import Note

SYSTEM = """\
You draft test domains for pytest-sandtable, which rehearses a customer-facing AI agent \
against a simulated world. From a team's SOP notes you write one sandtable.yaml file. \
Answer with the YAML file only: no prose before or after it, no markdown fences.

The file (spec version 1) has these top-level keys:
- version: 1
- name: a short id (letters, digits, - and _).
- description: one or two sentences on what the desk does, for the agent's system prompt.
- policy: a block string (|) with the rules the agent must follow, in the notes' own words \
wherever possible.
- world: tables. Each table: key (the key field's name), optional key_format (e.g. "R-{n}", \
for rows that tools create), rows (fictional seed rows: invented names, ids, numbers; never \
real people or contact details) or fields (for tables that start empty).
- tools: the agent's API. Each tool: name, description, params (name: {type: string|number|\
integer|boolean, description, required: false, enum: [...]}), optional checks \
(- {require: {table, key: $param, where: {...}}, error: 404, message: "..."} or \
- {forbid: {table, where: {...}}, error: 409, message: "..."}), ops (- get: {table, key: $param}, \
- list: {table, where: {field: $param}}, - create: {table, row: {...}}, \
- update: {table, key: $param, set: {...}}, - respond: {...}), and handoff: true for a tool \
that transfers to a human. $param refers to the call's argument.
- invariants: the rules, each with id, kind and the kind's keys:
  before (first: tool, then: tool, same: [params both take]), \
require (tool, record: {table, key: $param}, where: {field: value}), \
limit (tool, arg, and lte/lt/gte/gt: a number or {table, key: $param, field}), \
match (tool, left: {table, key: $param, field}, right: {table, key: $param, field}), \
never (tool, optional when: {param: condition}), \
never_disclose (values: {table, field}).
  Every rule has source: {quote: "..."}: the sentence of the notes it enforces, copied word \
for word.
- tasks: scenarios, each with id, description, tags (optional), user (persona, \
instructions: the hidden goal, opening: the first line, script: what the user says after \
each agent reply), expect (state: [{table, key, fields: {...}} or {table, where: {...}, \
count: n}], called: [tool], not_called: [tool]) and reference (what a correct agent does, \
in order: - call: tool / args: {...}, and - say: "..." for its replies).
Conditions (in where, fields, when) are a value, or an operator mapping such as \
{lte: 100}, {in: [a, b]}, {matches: "regex"}, {ne: x}.

Rules of a draft:
1. Every invariant and every task carries pending: true (a person reviews each one).
2. Each invariant's source.quote is one sentence (or clause) of the notes, word for word.
3. Keep the notes' facts: amounts, limits, time frames, names of steps. Invent only \
fictional seed data.
4. Cover each rule of the notes with at least one task that exercises it (one that \
follows it, and, where it matters, one where the caller pushes against it), with a \
reference that passes its own expectations and breaks no rule.
5. Use only tools, tables, fields and params the file declares.

Example (a different business, shortened):
version: 1
name: bookshop
description: Order desk of Juniper Lane Books, a fictional bookshop.
policy: |
  Look up an order before refunding it. Refund at most the order total.
world:
  orders:
    key: order_id
    rows:
      - { order_id: O-1001, customer: Ada Quill, total: 42.5, status: delivered }
  refunds:
    key: refund_id
    key_format: "R-{n}"
    fields: [order_id, amount]
tools:
  - name: get_order
    description: Look up an order by id.
    params:
      order_id: { type: string, description: The order id. }
    ops:
      - get: { table: orders, key: $order_id }
  - name: refund_order
    description: Refund an order.
    params:
      order_id: { type: string }
      amount: { type: number }
    checks:
      - { require: { table: orders, key: $order_id }, error: 404, message: "no order {order_id}" }
    ops:
      - create: { table: refunds, row: { order_id: $order_id, amount: $amount } }
      - update: { table: orders, key: $order_id, set: { status: refunded } }
invariants:
  - id: lookup-before-refund
    pending: true
    kind: before
    first: get_order
    then: refund_order
    same: [order_id]
    source: { quote: "Look up an order before refunding it." }
  - id: refund-at-most-total
    pending: true
    kind: limit
    tool: refund_order
    arg: amount
    lte: { table: orders, key: $order_id, field: total }
    source: { quote: "Refund at most the order total." }
tasks:
  - id: refund-delivered
    pending: true
    description: A customer gets a full refund of a delivered order.
    user:
      persona: Ada Quill, a regular customer.
      instructions: You want a refund of 42.50 for order O-1001.
      opening: "Hi, I'd like a refund for order O-1001, please."
      script: ["Yes, the full 42.50."]
    expect:
      state:
        - { table: refunds, where: { order_id: O-1001, amount: 42.5 }, count: 1 }
      called: [get_order]
    reference:
      - call: get_order
        args: { order_id: O-1001 }
      - say: "I see order O-1001 for 42.50. Shall I refund the full amount?"
      - call: refund_order
        args: { order_id: O-1001, amount: 42.5 }
      - say: "Done: 42.50 is refunded to you."
"""


def notes_message(notes: Sequence[Note]) -> str:
    """The user message: every notes file, named, between markers."""
    parts = ["Draft sandtable.yaml from these SOP notes."]
    for note in notes:
        parts.append(f'<notes file="{note.name}">\n{note.text.strip()}\n</notes>')
    return "\n\n".join(parts)


def repair_message(problems: Sequence[str]) -> str:
    """The next user message after a draft with problems: each problem on its own line."""
    listed = "\n".join(f"- {p}" for p in problems)
    return ("Your draft has these problems (FILE:LINE:COL: PATH: MESSAGE; line 1 is the first line "
            f"of the YAML):\n{listed}\n\nFix every one and answer with the whole corrected sandtable.yaml "
            "only, no prose.")
