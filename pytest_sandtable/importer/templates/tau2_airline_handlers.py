"""The tools of τ²-bench's airline domain, as pytest-sandtable handlers.

Written by ``python -m pytest_sandtable import tau2`` next to the imported
``sandtable.yaml``, whose tools name these functions (``handler:
tau2_airline_handlers:<tool>``). τ²'s airline tools are τ-bench's, rewritten over
pydantic models: the tools they share behave the same on the data (the same checks,
the same writes), so they are τ-bench's handlers
(``pytest_sandtable.importer.templates.tau_airline_handlers``); what τ² added or
changed is here: a booking takes its seats from the flights (τ-bench's left them), a
change of flights sets the reservation's cabin (τ²: "This was missing from original
TauBench"), ``get_flight_status`` is new. Where τ² raises ``ValueError`` the handler raises a tool error with
its text. Edit freely: this file is yours now.
"""

from __future__ import annotations

from typing import Any

from pytest_sandtable import HandlerContext, ToolError, WorldHandle
from pytest_sandtable.importer.templates import tau_airline_handlers as tau
from pytest_sandtable.importer.templates.tau_airline_handlers import (
    calculate,
    cancel_reservation,
    get_reservation_details,
    list_all_airports,
    search_direct_flight,
    search_onestop_flight,
    send_certificate,
    transfer_to_human_agents,
    update_reservation_baggages,
    update_reservation_passengers,
)

__all__ = [
    "book_reservation",
    "calculate",
    "cancel_reservation",
    "get_flight_status",
    "get_reservation_details",
    "get_user_details",
    "list_all_airports",
    "search_direct_flight",
    "search_onestop_flight",
    "send_certificate",
    "transfer_to_human_agents",
    "update_reservation_baggages",
    "update_reservation_flights",
    "update_reservation_passengers",
]

Args = dict[str, Any]


def get_user_details(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """``get_user_details``: τ²'s users carry their ``user_id``, and show it."""
    user = world.get("users", args["user_id"])
    if user is None:
        raise ToolError(404, f"User {args['user_id']} not found")
    return user


def get_flight_status(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """``get_flight_status`` (new in τ²): the status of a flight on a date."""
    flight = world.get("flights", args["flight_number"])
    if flight is None:
        raise ToolError(404, f"Flight {args['flight_number']} not found")
    if args["date"] not in flight["dates"]:
        raise ToolError(404, f"Flight {args['flight_number']} not found on date {args['date']}")
    return flight["dates"][args["date"]]["status"]


def book_reservation(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """``book_reservation``: τ-bench's, and then, as τ² does once every check has
    passed, each flight of the booking has that many fewer seats left in the cabin."""
    reservation = tau.book_reservation(args, world, ctx)
    cabin, seats = args["cabin"], len(args["passengers"])
    for flight in args["flights"]:
        row = world.get("flights", flight["flight_number"])
        assert row is not None  # the booking checked it
        row["dates"][flight["date"]]["available_seats"][cabin] -= seats
        world.update("flights", flight["flight_number"], {"dates": row["dates"]})
    return reservation


def update_reservation_flights(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """``update_reservation_flights``: τ-bench's, and the reservation takes the new cabin
    (τ² sets it; the seats of the flights stay as they were, in both)."""
    reservation = tau.update_reservation_flights(args, world, ctx)
    world.update("reservations", args["reservation_id"], {"cabin": args["cabin"]})
    reservation["cabin"] = args["cabin"]
    return reservation
