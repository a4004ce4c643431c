"""The write ops beyond set (docs/spec.md, "Ops"): `delete`, `append`, `add` / `subtract`;
arithmetic written into a `set` refused at load; every write seen by the diff, the
rollback of a failed call, the grading and the report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import pytest_sandtable as st
from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.report.results_json import read_results

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

SHOP = """\
version: 1
name: shop
world:
  cards:
    key: card_id
    rows:
      - { card_id: G-1, balance: 100, refunds: [R-0], note: gift }
      - { card_id: G-2, balance: 0.1, note: promo }
      - { card_id: G-3 }
  orders:
    key: order_id
    rows:
      - { order_id: O-1, card_id: G-1, total: 30 }
tools:
  - name: pay
    params: { card_id: { type: string }, amount: { type: number }, order_id: { type: string } }
    ops:
      - update: { table: cards, key: $card_id, subtract: { balance: $amount }, append: { refunds: $order_id } }
  - name: top_up
    params: { card_id: { type: string }, amount: { type: number, required: false } }
    ops:
      - update: { table: cards, key: $card_id, add: { balance: $amount, uses: 1 } }
  - name: cancel_order
    params: { order_id: { type: string } }
    ops:
      - delete: { table: orders, key: $order_id }
  - name: cancel_and_refund
    params: { order_id: { type: string }, card_id: { type: string } }
    ops:
      - delete: { table: orders, key: $order_id }
      - update: { table: cards, key: $card_id, add: { balance: 30 } }
tasks:
  - id: t
    user: { opening: Hi. }
    expect:
      state:
        - { table: orders, count: 0 }
  - id: odd-balance
    given:
      - update: { table: cards, key: G-3, set: { balance: n/a } }
    user: { opening: Hi. }
"""


@pytest.fixture
def shop() -> st.Domain:
    return load_domain_text(SHOP, "shop.yaml")


def problems(text: str) -> list[str]:
    with pytest.raises(DomainError) as info:
        load_domain_text(text, "shop.yaml")
    return str(info.value).splitlines()


def edit(old: str, new: str) -> str:
    assert SHOP.count(old) == 1, old
    return SHOP.replace(old, new)


# --------------------------------------------------------------------------- at run time


def test_delete_removes_the_row_and_returns_it(shop: st.Domain, play: Play) -> None:
    result = play(shop, [("cancel_order", {"order_id": "O-1"}), ("cancel_order", {"order_id": "O-1"}), "Done."])
    assert result.calls[0]["result"] == {"order_id": "O-1", "card_id": "G-1", "total": 30}
    assert result.calls[1]["error"] == {"code": 404, "message": "orders O-1 not found"}
    assert result.verdict == "passed"  # `count: 0` sees the row gone
    assert result.diff == {"created": [], "changed": [], "deleted": [
        {"table": "orders", "key": "O-1", "row": {"order_id": "O-1", "card_id": "G-1", "total": 30}}]}


def test_a_failed_op_after_a_delete_undoes_it(shop: st.Domain, play: Play) -> None:
    result = play(shop, [("cancel_and_refund", {"order_id": "O-1", "card_id": "G-9"}), "Sorry."])
    assert result.calls[0]["error"] == {"code": 404, "message": "cards G-9 not found"}
    assert result.diff == {"created": [], "changed": []}
    assert result.verdict == "failed"


def test_subtract_and_append_compute_from_the_row_as_it_is(shop: st.Domain, play: Play) -> None:
    result = play(shop, [("pay", {"card_id": "G-1", "amount": 30, "order_id": "O-1"}),
                         ("pay", {"card_id": "G-1", "amount": 20.5, "order_id": "O-2"}), "Paid."])
    assert [c["result"]["balance"] for c in result.calls] == [70, 49.5]
    assert result.calls[1]["result"]["refunds"] == ["R-0", "O-1", "O-2"]
    assert result.diff["changed"] == [{"table": "cards", "key": "G-1", "fields": {
        "balance": {"before": 100, "after": 49.5}, "refunds": {"before": ["R-0"], "after": ["R-0", "O-1", "O-2"]}}}]


def test_arithmetic_is_decimal_and_a_missing_field_counts_as_zero(shop: st.Domain, play: Play) -> None:
    result = play(shop, [("top_up", {"card_id": "G-2", "amount": 0.2}), ("top_up", {"card_id": "G-2"}), "Ok."])
    assert [(c["result"]["balance"], c["result"]["uses"]) for c in result.calls] == [(0.3, 1), (0.3, 2)]
    appended = play(shop, [("pay", {"card_id": "G-2", "amount": 0.1, "order_id": "O-1"}), "Ok."]).calls[0]["result"]
    assert (appended["balance"], appended["refunds"]) == (0, ["O-1"])


def test_a_non_numeric_value_is_a_500_tool_error_and_nothing_changes(shop: st.Domain, play: Play) -> None:
    result = play(shop, [("top_up", {"card_id": "G-3", "amount": 5}), "Sorry."], task="odd-balance")
    assert result.calls[0]["ok"] is False
    assert result.calls[0]["error"] == {
        "code": 500, "message": 'cards G-3 balance is "n/a", not a number: cannot add 5'}
    assert result.diff == {"created": [], "changed": []}


def test_appending_to_a_field_that_is_no_list_is_a_500(make_domain: Make, play: Play) -> None:
    body = SHOP.split("\n", 2)[2].replace("append: { refunds: $order_id }", "append: { note: $order_id }")
    domain = make_domain(body.replace(", note: gift }", " }").replace(", note: promo }", " }"))
    result = play(domain, [("top_up", {"card_id": "G-1", "amount": 1}), "Ok."])
    assert result.calls[0]["ok"]
    result = play(domain, [("pay", {"card_id": "G-1", "amount": 1, "order_id": "O-1"}), "Ok."])
    assert result.calls[0]["result"]["note"] == ["O-1"]


def test_the_report_shows_deleted_rows(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sandtable.yaml", shop=SHOP.replace("user: { opening: Hi. }", """user: { opening: Hi. }
    reference:
      - call: cancel_order
        args: { order_id: O-1 }
      - say: Cancelled."""))
    result = pytester.runpytest("--sandtable-agent=reference", "-q", "-p", "no:cacheprovider", "--sandtable-out=out")
    result.assert_outcomes(passed=2)
    (run,) = (p for p in Path(pytester.path, "out").rglob("results.json"))
    run = run.parent
    doc = read_results(run / "results.json")  # valid against the schema
    assert [t["diff"].get("deleted") for t in doc["trials"] if t["task"] == "t"] == [
        [{"table": "orders", "key": "O-1", "row": {"order_id": "O-1", "card_id": "G-1", "total": 30}}]]
    html = (run / "report.html").read_text(encoding="utf-8")
    assert ('<span class="badge v-failed">deleted</span></td><td><code>orders</code></td><td><code>&quot;O-1&quot;'
            '</code></td><td><code>order_id=&quot;O-1&quot;, card_id=&quot;G-1&quot;, total=30</code>') in html


# --------------------------------------------------------------------------- at load time


def test_arithmetic_in_a_set_is_refused_and_points_at_add_or_subtract() -> None:
    text = edit("subtract: { balance: $amount }", 'set: { balance: "$balance - $amount" }')
    assert problems(text)[0] == (
        "shop.yaml:18:64: tools[0].ops[0].update.set.balance: found '$balance - $amount', arithmetic, which "
        "values never do (it would be stored as this text); to change a number, write subtract: "
        "{ balance: $amount } in the update"
    )
    text = edit("add: { balance: $amount, uses: 1 }", 'set: { uses: "$amount * 2" }')
    assert problems(text) == [
        "shop.yaml:22:61: tools[1].ops[0].update.set.uses: found '$amount * 2', arithmetic, which values never "
        "do (it would be stored as this text); to change a number, write add: { uses: <a number or $name> } "
        "(or subtract) in the update"
    ]


def test_a_template_with_a_dash_is_no_arithmetic(shop: st.Domain, play: Play) -> None:
    text = edit("add: { balance: $amount, uses: 1 }", 'set: { note: "top-up $card_id - thanks" }')
    domain = load_domain_text(text, "shop.yaml")
    result = play(domain, [("top_up", {"card_id": "G-1"}), "Ok."])
    assert result.calls[0]["result"]["note"] == "top-up G-1 - thanks"


def test_add_on_a_field_a_seed_row_holds_text_in_is_refused() -> None:
    assert problems(edit("add: { balance: $amount, uses: 1 }", "add: { note: 1 }")) == [
        "shop.yaml:22:55: tools[1].ops[0].update.add.note: `add` needs a number field, but 'note' of table "
        "cards holds 'gift' in a seed row (line 7)"
    ]
    assert problems(edit("append: { refunds: $order_id }", "append: { note: $order_id }")) == [
        "shop.yaml:18:90: tools[0].ops[0].update.append.note: `append` needs a list field, but 'note' of "
        "table cards holds 'gift' in a seed row (line 7)"
    ]


def test_what_add_takes() -> None:
    assert problems(edit("add: { balance: $amount, uses: 1 }", "add: { balance: $card_id }")) == [
        "shop.yaml:22:64: tools[1].ops[0].update.add.balance: '$card_id' is a param of type string; `add` takes "
        "a number or a $name of a number or integer param"
    ]
    assert problems(edit("add: { balance: $amount, uses: 1 }", "add: { balance: lots }")) == [
        "shop.yaml:22:64: tools[1].ops[0].update.add.balance: found string 'lots', expected a number or a $name "
        "argument for `add`"
    ]
    assert problems(edit("add: { balance: $amount, uses: 1 }", "add: { balance: 1 }, set: { balance: 2 }")) == [
        "shop.yaml:22:55: tools[1].ops[0].update.add.balance: field 'balance' is also in `set`; an update "
        "changes a field once"
    ]


def test_an_update_needs_something_to_change() -> None:
    assert problems(edit("add: { balance: $amount, uses: 1 }", "note: x")) == [
        "shop.yaml:22:17: tools[1].ops[0].update: missing required key: at least one of 'set', 'add', "
        "'subtract', 'append'",
        "shop.yaml:22:48: tools[1].ops[0].update.note: unknown key 'note'; expected one of: table, key, set, "
        "add, subtract, append",
    ]


def test_given_writes_values_as_they_are() -> None:
    text = SHOP.replace("user: { opening: Hi. }", """user: { opening: Hi. }
    given:
      - update: { table: cards, key: G-1, add: { balance: 5 } }""", 1)
    assert problems(text) == [
        "shop.yaml:36:43: tasks[0].given[0].update.add: `add` is for tools' updates; `given` writes its values "
        "as they are: use set with the value the row should hold"
    ]


def test_delete_names_a_table_and_a_key_argument() -> None:
    assert problems(edit("delete: { table: orders, key: $order_id }\n  - name: cancel_and",
                         "delete: { table: order, key: $order }\n  - name: cancel_and")) == [
        "shop.yaml:26:26: tools[2].ops[0].delete.table: unknown table 'order'; did you mean 'orders'?",
        "shop.yaml:26:38: tools[2].ops[0].delete.key: unknown param '$order' of tool cancel_order; "
        "did you mean '$order_id'?",
    ]
