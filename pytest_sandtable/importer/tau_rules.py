"""The rules of τ-bench's policies (wiki.md) that a sandtable invariant can check.

Each rule quotes the sentence of wiki.md it comes from (``source.quote``); the import
writes a rule only when its quote is in the env's wiki.md word for word and every tool
it names is one of the env's tools, so an edited policy never gets a rule it no longer
states. docs/import.md lists these and the policy rules that are left out, with why.

τ-bench itself checks none of them: its reward looks only at the final data and the
outputs. A rule here makes a trial fail when the agent *attempts* a call the policy
forbids, even when the tool then refuses it (rules are checked before every call).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["RULES", "rules_for"]

_CANCEL_PENDING = (
    "An order can only be cancelled if its status is 'pending', "
    "and you should check its status before taking the action."
)
_MODIFY_PENDING = (
    "An order can only be modified if its status is 'pending', "
    "and you should check its status before taking the action."
)
_RETURN_DELIVERED = (
    "An order can only be returned if its status is 'delivered', "
    "and you should check its status before taking the action."
)
_EXCHANGE_DELIVERED = (
    "An order can only be exchanged if its status is 'delivered', "
    "and you should check its status before taking the action."
)


def _order_status(rule_id: str, tool: str, status: str, quote: str) -> dict[str, Any]:
    return {
        "id": rule_id,
        "kind": "require",
        "tool": tool,
        "record": {"table": "orders", "key": "$order_id"},
        "where": {"status": status},
        "source": {"quote": quote},
    }


RULES: Mapping[str, Sequence[dict[str, Any]]] = {
    "retail": [
        _order_status("cancel-pending-orders-only", "cancel_pending_order", "pending", _CANCEL_PENDING),
        _order_status("modify-address-of-pending-orders-only", "modify_pending_order_address", "pending",
                      _MODIFY_PENDING),
        _order_status("modify-items-of-pending-orders-only", "modify_pending_order_items", "pending", _MODIFY_PENDING),
        _order_status("modify-payment-of-pending-orders-only", "modify_pending_order_payment", "pending",
                      _MODIFY_PENDING),
        _order_status("return-delivered-orders-only", "return_delivered_order_items", "delivered", _RETURN_DELIVERED),
        _order_status("exchange-delivered-orders-only", "exchange_delivered_order_items", "delivered",
                      _EXCHANGE_DELIVERED),
    ],
    "airline": [
        {
            "id": "at-most-five-passengers",
            "kind": "never",
            "tool": "book_reservation",
            "when": {"passengers": {"length": {"gt": 5}}},
            "source": {"quote": "Each reservation can have at most five passengers."},
        },
        {
            "id": "bags-added-not-removed",
            "kind": "limit",
            "tool": "update_reservation_baggages",
            "arg": "total_baggages",
            "gte": {"table": "reservations", "key": "$reservation_id", "field": "total_baggages"},
            "source": {"quote": "The user can add but not remove checked bags."},
        },
        {
            "id": "no-certificate-for-changed-flights",
            "kind": "never",
            "tool": "update_reservation_flights",
            "when": {"payment_id": {"matches": "^certificate_"}},
            "source": {
                "quote": "Payment: If the flights are changed, the user needs to provide one gift card or credit "
                "card for payment or refund method."
            },
        },
        {
            "id": "cancel-only-when-allowed",
            "kind": "require",
            "soft": True,
            "description": "Measured, not enforced: the rule cannot see an airline-cancelled flight (its status "
            "is inside the flight's calendar) or the user's reason, so it flags every other cancellation of an "
            "economy reservation without insurance booked over 24 hours before now.",
            "tool": "cancel_reservation",
            "record": {"table": "reservations", "key": "$reservation_id"},
            "where": {
                "any_of": [
                    {"cabin": "business"},
                    {"insurance": "yes"},
                    {"created_at": {"gte": "2024-05-14T15:00:00"}},
                ]
            },
            "source": {
                "quote": "All reservations can be cancelled within 24 hours of booking, or if the airline cancelled "
                "the flight. Otherwise, basic economy or economy flights can be cancelled only if travel insurance "
                "is bought and the condition is met, and business flights can always be cancelled."
            },
        },
    ],
}


def _tools(rule: Mapping[str, Any]) -> set[str]:
    return {str(rule[k]) for k in ("tool", "first", "then") if k in rule}


def rules_for(env: str, policy: str, tools: set[str]) -> list[dict[str, Any]]:
    """The env's rules whose quote the policy states and whose tools the env has."""
    return [
        dict(rule)
        for rule in RULES.get(env, ())
        if rule["source"]["quote"] in policy and _tools(rule) <= tools
    ]
