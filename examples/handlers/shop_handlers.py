"""Handlers of the example shop (sandtable.yaml next to this file): the calls its
declarative ops cannot say, a total summed over items and a payment split between a
gift card and a credit card. See docs/handlers.md."""

from __future__ import annotations

from typing import Any

from pytest_sandtable import HandlerContext, ToolError, WorldHandle


def place_order(args: dict[str, Any], world: WorldHandle, ctx: HandlerContext) -> dict[str, Any]:
    """Price the items from the catalogue, take what the gift card holds first and the
    rest from the card on file, and record the order."""
    user = world.get("users", args["user_id"])
    if user is None:
        raise ToolError(404, f"no user {args['user_id']}")
    total = 0.0
    for sku in args["skus"]:
        product = world.get("products", sku)
        if product is None:
            raise ToolError(404, f"no product {sku}")
        if product["stock"] < 1:
            raise ToolError(409, f"{sku} is out of stock")
        world.update("products", sku, {"stock": product["stock"] - 1})
        total += product["price"]
    from_gift = min(user["gift_balance"], total)
    world.update("users", user["user_id"], {"gift_balance": round(user["gift_balance"] - from_gift, 2)})
    order = world.create("orders", {
        "user_id": user["user_id"],
        "skus": list(args["skus"]),
        "total": round(total, 2),
        "paid_gift_card": round(from_gift, 2),
        "paid_card": round(total - from_gift, 2),
        "status": "placed",
        "placed_at": ctx.now.isoformat(),
        "refunds": [],
    })
    ctx.advance(30)  # the payment provider takes its time
    return order


def refund_item(args: dict[str, Any], world: WorldHandle, ctx: HandlerContext) -> dict[str, Any]:
    """Refund one item of a delivered order to the gift card, appending to the order's refunds."""
    order = world.get("orders", args["order_id"])
    if order is None:
        raise ToolError(404, f"no order {args['order_id']}")
    if order["status"] != "delivered":
        raise ToolError(409, f"order {order['order_id']} is {order['status']}, not delivered")
    sku = args["sku"]
    if sku not in order["skus"] or sku in [r["sku"] for r in order["refunds"]]:
        raise ToolError(409, f"{sku} is not a refundable item of order {order['order_id']}")
    product = world.get("products", sku)
    user = world.get("users", order["user_id"])
    if product is None or user is None:  # the seed data is wrong: a bug of the domain, not a tool error
        raise LookupError(f"order {order['order_id']} names a product or user that does not exist")
    price = product["price"]
    world.update("users", user["user_id"], {"gift_balance": round(user["gift_balance"] + price, 2)})
    refund = {"sku": sku, "amount": price, "at": ctx.now.isoformat()}
    return world.update("orders", order["order_id"], {"refunds": [*order["refunds"], refund]})
