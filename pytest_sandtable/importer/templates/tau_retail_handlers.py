"""The tools of τ-bench's retail environment, as pytest-sandtable handlers.

Written by ``python -m pytest_sandtable import tau-bench`` next to the imported
``sandtable.yaml``, whose tools name these functions (``handler:
tau_retail_handlers:<tool>``). Each one is a reimplementation of the τ-bench tool of
the same name against the world handle: the same checks in the same order, the same
writes (so the final data equals τ-bench's), the same result. Where τ-bench returns
``"Error: <text>"`` the handler raises a tool error with ``<text>`` (see
``pytest_sandtable.importer.tau_common``). Edit freely: this file is yours now.
"""

from __future__ import annotations

from typing import Any

from pytest_sandtable import HandlerContext, ToolError, WorldHandle
from pytest_sandtable.importer.tau_common import (
    USER_KEY,
    calculate,
    copy_row,
    public_user,
    require_row,
    think,
    transfer_to_human_agents,
)

__all__ = [
    "calculate",
    "cancel_pending_order",
    "exchange_delivered_order_items",
    "find_user_id_by_email",
    "find_user_id_by_name_zip",
    "get_order_details",
    "get_product_details",
    "get_user_details",
    "list_all_product_types",
    "modify_pending_order_address",
    "modify_pending_order_items",
    "modify_pending_order_payment",
    "modify_user_address",
    "return_delivered_order_items",
    "think",
    "transfer_to_human_agents",
]

Args = dict[str, Any]
CANCEL_REASONS = ("no longer needed", "ordered by mistake")
ADDRESS_FIELDS = ("address1", "address2", "city", "state", "country", "zip")


def _order(world: WorldHandle, order_id: Any, status: str, wrong_status: str) -> dict[str, Any]:
    """The order (a copy to change), which must exist and have ``status``."""
    order = copy_row(world, "orders", order_id)
    if order is None:
        raise ToolError(404, "order not found")
    if order["status"] != status:
        raise ToolError(409, wrong_status)
    return order


def _check_items_in_order(order: dict[str, Any], item_ids: list[Any], message: str | None) -> None:
    """Every item id (duplicates counted) is an item of the order."""
    all_item_ids = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > all_item_ids.count(item_id):
            raise ToolError(404, message or f"{item_id} not found")


def _price_difference(world: WorldHandle, order: dict[str, Any], item_ids: list[Any], new_item_ids: list[Any]) -> Any:
    """What the new items cost more than the old (negative: less), summed in τ-bench's order."""
    if len(item_ids) != len(new_item_ids):
        raise ToolError(400, "the number of items to be exchanged should match")
    diff_price: Any = 0
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        item = next(item for item in order["items"] if item["item_id"] == item_id)
        variants = require_row(world, "products", item["product_id"])["variants"]
        if not (new_item_id in variants and variants[new_item_id]["available"]):
            raise ToolError(409, f"new item {new_item_id} not found or available")
        diff_price += variants[new_item_id]["price"] - item["price"]
    return diff_price


def _payment_method(user: dict[str, Any], payment_method_id: Any) -> dict[str, Any]:
    if payment_method_id not in user["payment_methods"]:
        raise ToolError(404, "payment method not found")
    method: dict[str, Any] = user["payment_methods"][payment_method_id]
    return method


def _address(args: Args) -> dict[str, Any]:
    return {name: args[name] for name in ADDRESS_FIELDS}


# -- lookups -------------------------------------------------------------------------


def find_user_id_by_email(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    email = str(args["email"]).lower()
    # the world narrows the users to those of that email in any case (its index); the test is τ-bench's
    for profile in world.list("users", {"email": {"ieq": email}}):
        if profile["email"].lower() == email:
            return profile[USER_KEY]
    raise ToolError(404, "user not found")


def find_user_id_by_name_zip(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    first, last = str(args["first_name"]).lower(), str(args["last_name"]).lower()
    # the world narrows the users to those of the zip (its index); the test below is τ-bench's
    for profile in world.list("users", {"address.zip": args["zip"]}):
        if (
            profile["name"]["first_name"].lower() == first
            and profile["name"]["last_name"].lower() == last
            and profile["address"]["zip"] == args["zip"]
        ):
            return profile[USER_KEY]
    raise ToolError(404, "user not found")


def get_order_details(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    order = world.get("orders", args["order_id"])
    if order is None:
        raise ToolError(404, "order not found")
    return order


def get_product_details(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    product = world.get("products", args["product_id"])
    if product is None:
        raise ToolError(404, "product not found")
    return product


def get_user_details(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    user = world.get("users", args["user_id"])
    if user is None:
        raise ToolError(404, "user not found")
    return public_user(user)


def list_all_product_types(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    product_dict = {product["name"]: product["product_id"] for product in world.list("products")}
    return dict(sorted(product_dict.items()))


# -- changes -------------------------------------------------------------------------


def cancel_pending_order(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    order_id, reason = args["order_id"], args["reason"]
    order = _order(world, order_id, "pending", "non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError(400, "invalid reason")
    refunds = []
    user: dict[str, Any] | None = None
    for payment in order["payment_history"]:
        payment_id = payment["payment_method_id"]
        refunds.append({"transaction_type": "refund", "amount": payment["amount"], "payment_method_id": payment_id})
        if "gift_card" in payment_id:  # refunded to the gift card at once
            user = user or require_row(world, "users", order["user_id"])
            method = user["payment_methods"][payment_id]
            method["balance"] = round(method["balance"] + payment["amount"], 2)
    if user is not None:
        world.update("users", order["user_id"], {"payment_methods": user["payment_methods"]})
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    world.update(
        "orders",
        order_id,
        {"status": order["status"], "cancel_reason": reason, "payment_history": order["payment_history"]},
    )
    return order


def exchange_delivered_order_items(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    order_id, item_ids, new_item_ids = args["order_id"], args["item_ids"], args["new_item_ids"]
    payment_method_id = args["payment_method_id"]
    order = _order(world, order_id, "delivered", "non-delivered order cannot be exchanged")
    _check_items_in_order(order, item_ids, None)
    diff_price = round(_price_difference(world, order, item_ids, new_item_ids), 2)
    user = require_row(world, "users", order["user_id"])
    method = _payment_method(user, payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < diff_price:
        raise ToolError(409, "insufficient gift card balance to pay for the price difference")
    changes = {
        "status": "exchange requested",
        "exchange_items": sorted(item_ids),
        "exchange_new_items": sorted(new_item_ids),
        "exchange_payment_method_id": payment_method_id,
        "exchange_price_difference": diff_price,
    }
    order.update(changes)
    world.update("orders", order_id, changes)
    return order


def modify_pending_order_address(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    order_id = args["order_id"]
    order = _order(world, order_id, "pending", "non-pending order cannot be modified")
    order["address"] = _address(args)
    world.update("orders", order_id, {"address": order["address"]})
    return order


def modify_pending_order_items(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    order_id, item_ids, new_item_ids = args["order_id"], args["item_ids"], args["new_item_ids"]
    payment_method_id = args["payment_method_id"]
    order = _order(world, order_id, "pending", "non-pending order cannot be modified")
    _check_items_in_order(order, item_ids, None)
    diff_price = _price_difference(world, order, item_ids, new_item_ids)  # not rounded, as in τ-bench
    user = require_row(world, "users", order["user_id"])
    method = _payment_method(user, payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < diff_price:
        raise ToolError(409, "insufficient gift card balance to pay for the new item")
    order["payment_history"].append(
        {
            "transaction_type": "payment" if diff_price > 0 else "refund",
            "amount": abs(diff_price),
            "payment_method_id": payment_method_id,
        }
    )
    if method["source"] == "gift_card":
        method["balance"] = round(method["balance"] - diff_price, 2)
        world.update("users", order["user_id"], {"payment_methods": user["payment_methods"]})
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        # the first item still carrying the old id: with duplicates, each pair changes the next one
        item = next(item for item in order["items"] if item["item_id"] == item_id)
        variant = require_row(world, "products", item["product_id"])["variants"][new_item_id]
        item["item_id"] = new_item_id
        item["price"] = variant["price"]
        item["options"] = variant["options"]
    order["status"] = "pending (item modified)"
    world.update(
        "orders",
        order_id,
        {"payment_history": order["payment_history"], "items": order["items"], "status": order["status"]},
    )
    return order


def modify_pending_order_payment(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    order_id, payment_method_id = args["order_id"], args["payment_method_id"]
    order = _order(world, order_id, "pending", "non-pending order cannot be modified")
    user = require_row(world, "users", order["user_id"])
    method = _payment_method(user, payment_method_id)
    history = order["payment_history"]
    if len(history) > 1 or history[0]["transaction_type"] != "payment":
        raise ToolError(409, "there should be exactly one payment for a pending order")
    old_id = history[0]["payment_method_id"]
    if old_id == payment_method_id:
        raise ToolError(409, "the new payment method should be different from the current one")
    amount = history[0]["amount"]
    if method["source"] == "gift_card" and method["balance"] < amount:
        raise ToolError(409, "insufficient gift card balance to pay for the order")
    history.extend(
        [
            {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id},
        ]
    )
    if method["source"] == "gift_card":
        method["balance"] = round(method["balance"] - amount, 2)
    if "gift_card" in old_id:  # the refund goes back to the old gift card at once
        old = user["payment_methods"][old_id]
        old["balance"] = round(old["balance"] + amount, 2)
    if method["source"] == "gift_card" or "gift_card" in old_id:
        world.update("users", order["user_id"], {"payment_methods": user["payment_methods"]})
    world.update("orders", order_id, {"payment_history": history})
    return order


def modify_user_address(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    user_id = args["user_id"]
    if world.get("users", user_id) is None:
        raise ToolError(404, "user not found")
    return public_user(world.update("users", user_id, {"address": _address(args)}))


def return_delivered_order_items(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    order_id, item_ids, payment_method_id = args["order_id"], args["item_ids"], args["payment_method_id"]
    order = _order(world, order_id, "delivered", "non-delivered order cannot be returned")
    user = require_row(world, "users", order["user_id"])
    _payment_method(user, payment_method_id)
    if "gift_card" not in payment_method_id and payment_method_id != order["payment_history"][0]["payment_method_id"]:
        raise ToolError(400, "payment method should be either the original payment method or a gift card")
    _check_items_in_order(order, item_ids, "some item not found")
    changes = {
        "status": "return requested",
        "return_items": sorted(item_ids),
        "return_payment_method_id": payment_method_id,
    }
    order.update(changes)
    world.update("orders", order_id, changes)
    return order
