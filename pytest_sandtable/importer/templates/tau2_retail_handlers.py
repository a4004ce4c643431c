"""The tools of τ²-bench's retail domain, as pytest-sandtable handlers.

Written by ``python -m pytest_sandtable import tau2`` next to the imported
``sandtable.yaml``, whose tools name these functions (``handler:
tau2_retail_handlers:<tool>``). τ²'s retail tools are τ-bench's, rewritten over
pydantic models: the tools they share behave the same on the data, so they are
τ-bench's handlers (``pytest_sandtable.importer.templates.tau_retail_handlers``);
what τ² added or changed is here. Where τ² raises ``ValueError`` the handler raises
a tool error with its text. Edit freely: this file is yours now.
"""

from __future__ import annotations

from typing import Any

from pytest_sandtable import HandlerContext, ToolError, WorldHandle
from pytest_sandtable.importer.templates.tau_retail_handlers import (
    calculate,
    cancel_pending_order,
    exchange_delivered_order_items,
    find_user_id_by_email,
    find_user_id_by_name_zip,
    get_order_details,
    get_product_details,
    list_all_product_types,
    modify_pending_order_address,
    modify_pending_order_items,
    modify_pending_order_payment,
    modify_user_address,
    return_delivered_order_items,
    transfer_to_human_agents,
)

__all__ = [
    "calculate",
    "cancel_pending_order",
    "exchange_delivered_order_items",
    "find_user_id_by_email",
    "find_user_id_by_name_zip",
    "get_item_details",
    "get_order_details",
    "get_product_details",
    "get_user_details",
    "list_all_product_types",
    "modify_pending_order_address",
    "modify_pending_order_items",
    "modify_pending_order_payment",
    "modify_user_address",
    "return_delivered_order_items",
    "transfer_to_human_agents",
]

Args = dict[str, Any]


def get_user_details(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """``get_user_details``: τ²'s users carry their ``user_id``, and show it."""
    user = world.get("users", args["user_id"])
    if user is None:
        raise ToolError(404, "User not found")
    return user


def get_item_details(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """``get_item_details`` (new in τ²): one variant, found in whichever product has it."""
    item_id = args["item_id"]
    for product in world.list("products"):
        if item_id in product["variants"]:
            return product["variants"][item_id]
    raise ToolError(404, "Item not found")
