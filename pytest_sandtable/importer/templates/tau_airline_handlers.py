"""The tools of τ-bench's airline environment, as pytest-sandtable handlers.

Written by ``python -m pytest_sandtable import tau-bench`` next to the imported
``sandtable.yaml``, whose tools name these functions (``handler:
tau_airline_handlers:<tool>``). Each one is a reimplementation of the τ-bench tool of
the same name against the world handle: the same checks in the same order, the same
writes (so the final data equals τ-bench's), the same result. Where τ-bench returns
``"Error: <text>"`` the handler raises a tool error with ``<text>`` (see
``pytest_sandtable.importer.tau_common``). Edit freely: this file is yours now.

The one difference on purpose: a booking's ``created_at`` is the simulated clock's
``now`` (the imported domain sets it to τ-bench's 2024-05-15T15:00:00 EST), where
τ-bench writes that time as a constant.
"""

from __future__ import annotations

import copy
from typing import Any

from pytest_sandtable import HandlerContext, ToolError, WorldHandle
from pytest_sandtable.importer.tau_common import (
    calculate,
    copy_row,
    key_error,
    public_user,
    require_row,
    think,
    transfer_to_human_agents,
)

__all__ = [
    "book_reservation",
    "calculate",
    "cancel_reservation",
    "get_reservation_details",
    "get_user_details",
    "list_all_airports",
    "search_direct_flight",
    "search_onestop_flight",
    "send_certificate",
    "think",
    "transfer_to_human_agents",
    "update_reservation_baggages",
    "update_reservation_flights",
    "update_reservation_passengers",
]

Args = dict[str, Any]
# τ-bench assumes a task books at most three reservations and sends at most three certificates
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
NEW_CERTIFICATE_IDS = (3221322, 3221323, 3221324)
AIRPORTS = {
    "SFO": "San Francisco",
    "JFK": "New York",
    "LAX": "Los Angeles",
    "ORD": "Chicago",
    "DFW": "Dallas",
    "DEN": "Denver",
    "SEA": "Seattle",
    "ATL": "Atlanta",
    "MIA": "Miami",
    "BOS": "Boston",
    "PHX": "Phoenix",
    "IAH": "Houston",
    "LAS": "Las Vegas",
    "MCO": "Orlando",
    "EWR": "Newark",
    "CLT": "Charlotte",
    "MSP": "Minneapolis",
    "DTW": "Detroit",
    "PHL": "Philadelphia",
    "LGA": "LaGuardia",
}


def _reservation(world: WorldHandle, reservation_id: Any) -> dict[str, Any]:
    reservation = copy_row(world, "reservations", reservation_id)
    if reservation is None:
        raise ToolError(404, "reservation not found")
    return reservation


def _price_flight(world: WorldHandle, flight: dict[str, Any], cabin: Any, passengers: int) -> Any:
    """Check one flight of a booking can be flown on its date in ``cabin`` by
    ``passengers`` people; fill in its price, origin and destination as τ-bench does."""
    flight_number = flight["flight_number"]
    flight_data = world.get("flights", flight_number)
    if flight_data is None:
        raise ToolError(404, f"flight {flight_number} not found")
    if flight["date"] not in flight_data["dates"]:
        raise ToolError(404, f"flight {flight_number} not found on date {flight['date']}")
    date_data = flight_data["dates"][flight["date"]]
    if date_data["status"] != "available":
        raise ToolError(409, f"flight {flight_number} not available on date {flight['date']}")
    if date_data["available_seats"][cabin] < passengers:
        raise ToolError(409, f"not enough seats on flight {flight_number}")
    flight["price"] = date_data["prices"][cabin]
    flight["origin"] = flight_data["origin"]
    flight["destination"] = flight_data["destination"]
    return flight["price"] * passengers


def _update_payment_method(world: WorldHandle, user_id: Any, payment_id: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The user (a copy to change) and the payment method an update pays with: never a
    certificate; a gift card must cover the price (checked by the caller)."""
    user = require_row(world, "users", user_id)
    if payment_id not in user["payment_methods"]:
        raise ToolError(404, "payment method not found")
    method: dict[str, Any] = user["payment_methods"][payment_id]
    if method["source"] == "certificate":
        raise ToolError(400, "certificate cannot be used to update reservation")
    return user, method


def _flight_on_date(flight: dict[str, Any], date: str) -> dict[str, Any]:
    """A search result: the flight without its calendar, with that date's status, seats and prices."""
    result = {k: v for k, v in flight.items() if k != "dates"}
    result.update(flight["dates"][date])
    return result


# -- lookups -------------------------------------------------------------------------


def get_user_details(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    user = world.get("users", args["user_id"])
    if user is None:
        raise ToolError(404, "user not found")
    return public_user(user)


def get_reservation_details(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    reservation = world.get("reservations", args["reservation_id"])
    if reservation is None:
        raise ToolError(404, "user not found")  # sic: τ-bench's wording
    return reservation


def list_all_airports(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    return dict(AIRPORTS)


def search_direct_flight(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    origin, destination, date = args["origin"], args["destination"], args["date"]
    return [
        _flight_on_date(flight, date)
        # narrowed by the world before the rows are copied for the handler: 300 flights with
        # their dates, on every search
        for flight in world.list("flights", {"origin": origin, "destination": destination})
        if flight["origin"] == origin
        and flight["destination"] == destination
        and date in flight["dates"]
        and flight["dates"][date]["status"] == "available"
    ]


def search_onestop_flight(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    origin, destination, date = args["origin"], args["destination"], args["date"]
    # narrowed by the world before the rows are copied (in table order, as τ-bench goes)
    firsts, seconds = world.list("flights", {"origin": origin}), world.list("flights", {"destination": destination})
    results = []
    for flight1 in firsts:
        if flight1["origin"] != origin:
            continue
        for flight2 in seconds:
            if flight2["destination"] != destination or flight1["destination"] != flight2["origin"]:
                continue
            try:  # τ-bench's next-day date, written as it writes it (no zero padding)
                date2 = f"2024-05-{int(date[-2:]) + 1}" if "+1" in flight1["scheduled_arrival_time_est"] else date
            except ValueError as e:
                raise ToolError(400, str(e)) from None
            if flight1["scheduled_arrival_time_est"] > flight2["scheduled_departure_time_est"]:
                continue
            if date not in flight1["dates"] or date2 not in flight2["dates"]:
                continue
            if flight1["dates"][date]["status"] != "available" or flight2["dates"][date2]["status"] != "available":
                continue
            result1 = _flight_on_date(flight1, date)
            result1["date"] = date
            # τ-bench reads the second flight's status, seats and prices on the first date
            if date not in flight2["dates"]:
                raise key_error(date)
            result2 = _flight_on_date(flight2, date)
            result2["date"] = date2
            results.append([result1, result2])
    return results


# -- changes -------------------------------------------------------------------------


def book_reservation(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    user_id, cabin, insurance = args["user_id"], args["cabin"], args["insurance"]
    passengers, payment_methods = args["passengers"], args["payment_methods"]
    nonfree_baggages = args["nonfree_baggages"]
    user = copy_row(world, "users", user_id)
    if user is None:
        raise ToolError(404, "user not found")
    reservation_id = next((rid for rid in NEW_RESERVATION_IDS[:-1] if world.get("reservations", rid) is None),
                          NEW_RESERVATION_IDS[-1])
    reservation = {
        "reservation_id": reservation_id,
        "user_id": user_id,
        "origin": args["origin"],
        "destination": args["destination"],
        "flight_type": args["flight_type"],
        "cabin": cabin,
        "flights": copy.deepcopy(args["flights"]),
        "passengers": passengers,
        "payment_history": payment_methods,
        "created_at": ctx.now.replace(tzinfo=None).isoformat(timespec="seconds"),
        "total_baggages": args["total_baggages"],
        "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
    }
    total_price: Any = 0
    for flight in reservation["flights"]:
        total_price += _price_flight(world, flight, cabin, len(passengers))
    if insurance == "yes":
        total_price += 30 * len(passengers)
    total_price += 50 * nonfree_baggages
    for payment in payment_methods:
        payment_id, amount = payment["payment_id"], payment["amount"]
        if payment_id not in user["payment_methods"]:
            raise ToolError(404, f"payment method {payment_id} not found")
        method = user["payment_methods"][payment_id]
        if method["source"] in ("gift_card", "certificate") and method["amount"] < amount:
            raise ToolError(409, f"not enough balance in payment method {payment_id}")
    paid = sum(payment["amount"] for payment in payment_methods)
    if paid != total_price:
        raise ToolError(400, f"payment amount does not add up, total price is {total_price}, but paid {paid}")
    for payment in payment_methods:
        payment_id = payment["payment_id"]
        if user["payment_methods"][payment_id]["source"] == "gift_card":
            user["payment_methods"][payment_id]["amount"] -= payment["amount"]
        elif user["payment_methods"][payment_id]["source"] == "certificate":
            del user["payment_methods"][payment_id]
    if world.get("reservations", reservation_id) is not None:  # the fourth booking replaces the third, as in τ-bench
        world.delete("reservations", reservation_id)
    world.create("reservations", reservation)
    user["reservations"].append(reservation_id)
    world.update("users", user_id, {"payment_methods": user["payment_methods"], "reservations": user["reservations"]})
    return reservation


def cancel_reservation(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    reservation_id = args["reservation_id"]
    reservation = _reservation(world, reservation_id)
    refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in reservation["payment_history"]]
    reservation["payment_history"].extend(refunds)
    reservation["status"] = "cancelled"
    world.update("reservations", reservation_id,
                 {"payment_history": reservation["payment_history"], "status": "cancelled"})
    return reservation


def send_certificate(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    user_id, amount = args["user_id"], args["amount"]
    user = copy_row(world, "users", user_id)
    if user is None:
        raise ToolError(404, "user not found")
    for number in NEW_CERTIFICATE_IDS:
        payment_id = f"certificate_{number}"
        if payment_id not in user["payment_methods"]:
            user["payment_methods"][payment_id] = {"source": "certificate", "amount": amount, "id": payment_id}
            world.update("users", user_id, {"payment_methods": user["payment_methods"]})
            return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
    return None  # τ-bench's tool falls off its end here too


def update_reservation_baggages(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    reservation_id, payment_id = args["reservation_id"], args["payment_id"]
    total_baggages, nonfree_baggages = args["total_baggages"], args["nonfree_baggages"]
    reservation = _reservation(world, reservation_id)
    total_price = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
    user, method = _update_payment_method(world, reservation["user_id"], payment_id)
    if method["source"] == "gift_card" and method["amount"] < total_price:
        raise ToolError(409, "gift card balance is not enough")
    reservation["total_baggages"] = total_baggages
    reservation["nonfree_baggages"] = nonfree_baggages
    if method["source"] == "gift_card":
        method["amount"] -= total_price
        world.update("users", reservation["user_id"], {"payment_methods": user["payment_methods"]})
    if total_price != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": total_price})
    world.update(
        "reservations",
        reservation_id,
        {
            "total_baggages": total_baggages,
            "nonfree_baggages": nonfree_baggages,
            "payment_history": reservation["payment_history"],
        },
    )
    return reservation


def update_reservation_flights(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    reservation_id, cabin, payment_id = args["reservation_id"], args["cabin"], args["payment_id"]
    reservation = _reservation(world, reservation_id)
    passengers = len(reservation["passengers"])
    flights = copy.deepcopy(args["flights"])
    total_price: Any = 0
    for flight in flights:
        # a flight the reservation already has, in the same cabin, keeps its price
        kept = [
            f
            for f in reservation["flights"]
            if f["flight_number"] == flight["flight_number"]
            and f["date"] == flight["date"]
            and cabin == reservation["cabin"]
        ]
        if kept:
            total_price += kept[0]["price"] * passengers
            flight["price"] = kept[0]["price"]
            flight["origin"] = kept[0]["origin"]
            flight["destination"] = kept[0]["destination"]
            continue
        total_price += _price_flight(world, flight, cabin, passengers)
    total_price -= sum(flight["price"] for flight in reservation["flights"]) * passengers
    user, method = _update_payment_method(world, reservation["user_id"], payment_id)
    if method["source"] == "gift_card" and method["amount"] < total_price:
        raise ToolError(409, "gift card balance is not enough")
    if method["source"] == "gift_card":
        method["amount"] -= total_price
        world.update("users", reservation["user_id"], {"payment_methods": user["payment_methods"]})
    reservation["flights"] = flights
    if total_price != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": total_price})
    # like τ-bench, the flights' seats are not updated here
    world.update("reservations", reservation_id,
                 {"flights": flights, "payment_history": reservation["payment_history"]})
    return reservation


def update_reservation_passengers(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    reservation_id, passengers = args["reservation_id"], args["passengers"]
    reservation = _reservation(world, reservation_id)
    if len(passengers) != len(reservation["passengers"]):
        raise ToolError(400, "number of passengers does not match")
    return world.update("reservations", reservation_id, {"passengers": passengers})
