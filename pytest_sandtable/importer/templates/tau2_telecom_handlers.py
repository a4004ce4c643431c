"""τ²-bench's telecom domain (dual control), as pytest-sandtable handlers.

Written by ``python -m pytest_sandtable import tau2`` next to the imported
``sandtable.yaml``. Every function is a reimplementation, from reading τ²'s
``TelecomTools``, ``TelecomUserTools`` and ``TelecomEnvironment``, against the
handler contract (docs/handlers.md): the same checks in the same order, the same
writes, the same texts. Where τ² raises ``ValueError`` (the agent reads
``Error: <text>``) the handler raises a tool error with ``<text>``.

Two worlds, one module:

- the carrier's tables, as τ²'s ``db.toml`` has them (``plans``, ``customers``,
  ``lines``, ``bills``, ``devices``, each keyed by its id), which the agent's tools
  (:data:`AGENT_TOOLS`) read and write;
- the caller's own tables (``user_world``): ``device``, one row ``phone`` holding the
  phone's settings and state (τ²'s ``MockPhoneAttributes``, as its JSON dump), and
  ``surroundings``, one row ``user`` (τ²'s ``UserSurroundings``: who and where the
  caller is, what the network lets them do, the payment request the agent sent). The
  phone's tools (:data:`USER_TOOLS`) read and write these.

:func:`sync` is τ²'s ``sync_tools``, run after every step: the line's status, roaming
and data allowance reach the caller's surroundings, a payment the caller made marks
the bill paid, a bill awaiting payment becomes the caller's payment request.

The task setup functions (τ²'s ``initialization_actions`` that are not tools, such as
``turn_data_off`` or ``suspend_line_for_overdue_bill``) are called as
``function(args, world, ctx)`` like a handler; the assertions (τ²'s
``env_assertions``) as ``function(world, **args)`` on the final worlds, returning a
bool or ``(bool, message)``.

"Today" is the simulated clock's date (``ctx.now``; the import sets it to τ²'s
2025-02-25 12:08 EST). A new bill's id is drawn from ``ctx.random`` (τ² draws it from
``uuid4``). Edit freely: this file is yours now.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from pytest_sandtable import HandlerContext, ToolError, WorldHandle

Args = dict[str, Any]
Row = dict[str, Any]

AGENT_TABLES = {"plans": "plan_id", "customers": "customer_id", "lines": "line_id", "bills": "bill_id",
                "devices": "device_id"}
DEVICE = ("device", "phone")  # the user table and the key of its one row
SURROUNDINGS = ("surroundings", "user")
USER_TABLES = {DEVICE[0]: "id", SURROUNDINGS[0]: "id"}

# τ²'s defaults (user_data_model.py), for a phone or surroundings a task does not say
DEFAULT_APN: Row = {"apn_name": "internet", "reset_at_reboot": False, "mms_apn": "mms",
                    "mmsc_url": "http://mms.carrier.com/mms/wapenc", "mms_proxy": None, "mms_port": None}
DEFAULT_DEVICE: Row = {
    "sim_card_status": "active", "sim_card_missing": False, "airplane_mode": False,
    "network_signal_strength": "good", "network_technology_connected": "5G",
    "network_connection_status": "connected", "battery_level": 80, "data_enabled": True,
    "roaming_enabled": False, "network_mode_preference": "4g_5g_preferred", "active_apn_settings": DEFAULT_APN,
    "wifi_enabled": False, "wifi_connected": False, "wifi_ssid": None, "wifi_signal_strength": "none",
    "wifi_calling_enabled": False, "wifi_calling_mms_over_wifi": False, "data_saver_mode": False,
    "vpn_enabled_setting": False, "vpn_connected": False, "vpn_details": None,
    "app_statuses": {
        "messaging": {"app_name": "messaging",
                      "permissions": {"sms": True, "storage": True, "phone": True, "network": False}},
        "browser": {"app_name": "browser",
                    "permissions": {"sms": False, "storage": True, "phone": False, "network": True}},
    },
}
DEFAULT_SURROUNDINGS: Row = {
    "name": None, "phone_number": None, "is_abroad": False, "roaming_allowed": False,
    "signal_strength": {"2G": "poor", "3G": "fair", "4G": "good", "5G": "excellent"},
    "mobile_data_usage_exceeded": False, "line_active": True, "payment_request": None,
}
DEFAULT_VPN: Row = {"server_address": "192.168.1.1", "protocol": "OpenVPN", "server_performance": "excellent"}
NETWORK_MODES = ("4g_5g_preferred", "4g_only", "3g_only", "2g_only")
SIM_STATUSES = ("active", "missing", "locked_pin", "locked_puk")
NETWORK_STATUSES = ("connected", "searching", "no_service", "emergency_only")
APN_NAMES = ("internet", "broken")

AGENT_TOOLS = (
    "get_customer_by_phone", "get_customer_by_id", "get_customer_by_name", "get_details_by_id", "suspend_line",
    "resume_line", "get_bills_for_customer", "send_payment_request", "get_data_usage", "enable_roaming",
    "disable_roaming", "transfer_to_human_agents", "refuel_data",
)
USER_TOOLS = (
    "check_status_bar", "check_network_status", "check_network_mode_preference", "set_network_mode_preference",
    "run_speed_test", "toggle_airplane_mode", "check_sim_status", "reseat_sim_card", "toggle_data",
    "toggle_roaming", "check_data_restriction_status", "toggle_data_saver_mode", "check_apn_settings",
    "set_apn_settings", "reset_apn_settings", "check_wifi_status", "toggle_wifi", "check_wifi_calling_status",
    "toggle_wifi_calling", "check_vpn_status", "connect_vpn", "disconnect_vpn", "check_installed_apps",
    "check_app_status", "check_app_permissions", "grant_app_permission", "can_send_mms", "reboot_device",
    "check_payment_request", "make_payment",
)
# τ²'s initialization functions that are no tool (the task setup's `handler:` steps), by side
AGENT_SETUP = ("set_data_usage", "suspend_line_for_overdue_bill")
USER_SETUP = (
    "set_user_info", "set_user_location", "turn_airplane_mode_on", "turn_airplane_mode_off", "unseat_sim_card",
    "lock_sim_card", "turn_data_on", "turn_data_off", "turn_roaming_on", "turn_roaming_off",
    "turn_data_saver_mode_on", "turn_data_saver_mode_off", "break_apn_settings", "break_apn_mms_setting",
    "set_wifi_calling", "break_vpn", "remove_app_permission", "simulate_network_search",
)
AGENT_ASSERTIONS = ("assert_data_refueling_amount", "assert_line_status", "assert_overdue_bill_exists",
                    "assert_no_overdue_bill")
USER_ASSERTIONS = (
    "assert_airplane_mode_status", "assert_service_status", "assert_mobile_data_status",
    "assert_mobile_roaming_status", "assert_mobile_data_saver_mode_status", "assert_internet_speed",
    "assert_internet_not_excellent", "assert_can_send_mms", "assert_mobile_data_usage_exceeded",
)

__all__ = [*AGENT_TOOLS, *USER_TOOLS, *AGENT_SETUP, *USER_SETUP, *AGENT_ASSERTIONS, *USER_ASSERTIONS, "sync"]


def _plain(row: Mapping[str, Any]) -> Row:
    return {k: copy.deepcopy(v) for k, v in row.items()}


def _write_changes(world: WorldHandle, table: str, key: Any, before: Row, after: Row) -> None:
    """Write the fields of ``after`` that differ from ``before`` (only those: the diff stays small)."""
    changed = {k: v for k, v in after.items() if k not in before or before[k] != v}
    if changed:
        world.update(table, key, changed)


def _today(ctx: HandlerContext | None) -> dt.date:
    return ctx.now.date() if ctx is not None else dt.date(2025, 2, 25)


# -- the carrier's side --------------------------------------------------------------------------


def _missing(what: str, key: Any) -> ToolError:
    return ToolError(404, f"{what} with ID {key} not found")


def _row(world: WorldHandle, table: str, key: Any, what: str) -> Row:
    row = world.get(table, key) if isinstance(key, str) else None
    if row is None:
        raise _missing(what, key)
    return _plain(row)


def _customer(world: WorldHandle, customer_id: Any) -> Row:
    return _row(world, "customers", customer_id, "Customer")


def _line(world: WorldHandle, line_id: Any) -> Row:
    return _row(world, "lines", line_id, "Line")


def _bill(world: WorldHandle, bill_id: Any) -> Row:
    return _row(world, "bills", bill_id, "Bill")


def _plan(world: WorldHandle, plan_id: Any) -> Row:
    return _row(world, "plans", plan_id, "Plan")


def _target_line(world: WorldHandle, customer_id: Any, line_id: Any) -> Row:
    """τ²'s ``_get_target_line``: the customer's line."""
    customer = _customer(world, customer_id)
    if line_id not in customer["line_ids"]:
        raise ToolError(404, f"Line {line_id} not found for customer {customer_id}")
    return _line(world, line_id)


def _customer_by_phone(world: WorldHandle, phone_number: Any) -> Row:
    for customer in world.list("customers"):
        if customer["phone_number"] == phone_number:
            return _plain(customer)
        for line_id in customer["line_ids"]:
            if _line(world, line_id)["phone_number"] == phone_number:
                return _plain(customer)
    raise ToolError(404, f"Customer with phone number {phone_number} not found")


def _awaiting_payment(world: WorldHandle, customer: Row) -> list[Row]:
    return [bill for bill in (_bill(world, b) for b in customer["bill_ids"]) if bill["status"] == "Awaiting Payment"]


def get_customer_by_phone(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """Finds a customer by their primary contact number or one of their lines' numbers."""
    return _customer_by_phone(world, args["phone_number"])


def get_customer_by_id(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    return _customer(world, args["customer_id"])


def get_customer_by_name(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """The customers of that name (in any case) and date of birth, in table order."""
    name = str(args["full_name"]).lower()
    return [_plain(c) for c in world.list("customers")
            if str(c["full_name"]).lower() == name and c["date_of_birth"] == args["dob"]]


_BY_PREFIX = (("L", "lines", "Line"), ("D", "devices", "Device"), ("B", "bills", "Bill"),
              ("C", "customers", "Customer"), ("P", "plans", "Plan"))


def get_details_by_id(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """A line, device, bill, customer or plan, by the first letter of its id."""
    key = str(args["id"])
    for prefix, table, what in _BY_PREFIX:
        if key.startswith(prefix):
            return _row(world, table, key, what)
    raise ToolError(400, f"Unknown ID format or type: {key}")


def suspend_line(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    line = _target_line(world, args["customer_id"], args["line_id"])
    if line["status"] != "Active":
        raise ToolError(409, "Line must be active to suspend")
    values = {"status": "Suspended", "suspension_start_date": _today(ctx).isoformat()}
    world.update("lines", line["line_id"], values)
    return {"message": "Line suspended successfully. $5/month holding fee will apply.", "line": {**line, **values}}


def resume_line(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    line = _target_line(world, args["customer_id"], args["line_id"])
    if line["status"] not in ("Suspended", "Pending Activation"):
        raise ToolError(409, "Line must be suspended to resume")
    values = {"status": "Active", "suspension_start_date": None}
    world.update("lines", line["line_id"], values)
    return {"message": "Line resumed successfully", "line": {**line, **values}}


def get_bills_for_customer(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """The customer's bills, newest issue date first (ties in the customer's order), at most ``limit``."""
    customer = _customer(world, args["customer_id"])
    bills = [_bill(world, b) for b in customer["bill_ids"]]
    limit = args.get("limit")
    return sorted(bills, key=lambda bill: bill["issue_date"], reverse=True)[: 12 if limit is None else limit]


def send_payment_request(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    customer_id, bill_id = args["customer_id"], args["bill_id"]
    customer = _customer(world, customer_id)
    if _awaiting_payment(world, customer):
        raise ToolError(409, "A bill is already awaiting payment for this customer")
    if bill_id not in customer["bill_ids"]:
        raise ToolError(404, f"Bill {bill_id} not found for customer {customer_id}")
    bill = _bill(world, bill_id)
    world.update("bills", bill["bill_id"], {"status": "Awaiting Payment"})
    return f"Payment request sent to the customer for bill {bill['bill_id']}"


def _first_of_next_month(day: dt.date) -> dt.date:
    return (day.replace(day=1) + dt.timedelta(days=32)).replace(day=1)


def _apply_one_time_charge(world: WorldHandle, ctx: HandlerContext, customer_id: Any, amount: Any,
                           description: str) -> None:
    """A charge (or, negative, a credit) on the customer's draft bill, made for next month when there is none."""
    customer = _customer(world, customer_id)
    draft = next((b for b in (_bill(world, k) for k in customer["bill_ids"]) if b["status"] == "Draft"), None)
    today = _today(ctx)
    if draft is None:
        start = _first_of_next_month(today)
        end = start.replace(month=start.month + 1 if start.month < 12 else 1,
                            year=start.year if start.month < 12 else start.year + 1) - dt.timedelta(days=1)
        draft = world.create("bills", {
            "bill_id": f"B{ctx.random.getrandbits(32):08x}", "customer_id": customer_id,
            "period_start": start.isoformat(), "period_end": end.isoformat(), "issue_date": start.isoformat(),
            "total_due": 0.0, "due_date": (start + dt.timedelta(days=14)).isoformat(), "line_items": [],
            "status": "Draft",
        })
        world.update("customers", customer["customer_id"], {"bill_ids": [*customer["bill_ids"], draft["bill_id"]]})
    item = {"description": description, "amount": amount, "date": today.isoformat(),
            "item_type": "Credit" if amount < 0 else "Charge"}
    world.update("bills", draft["bill_id"], {"line_items": [*draft["line_items"], item],
                                             "total_due": draft["total_due"] + amount})


def get_data_usage(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    line = _target_line(world, args["customer_id"], args["line_id"])
    plan = _plan(world, line["plan_id"])
    today = _today(ctx)
    cycle_end = dt.date(today.year, today.month + 1 if today.month < 12 else 1, 1) - dt.timedelta(days=1)
    return {"line_id": args["line_id"], "data_used_gb": line["data_used_gb"], "data_limit_gb": plan["data_limit_gb"],
            "data_refueling_gb": line["data_refueling_gb"], "cycle_end_date": cycle_end.isoformat()}


def _set_roaming(args: Args, world: WorldHandle, on: bool) -> str:
    line = _target_line(world, args["customer_id"], args["line_id"])
    word = "enabled" if on else "disabled"
    if bool(line["roaming_enabled"]) == on:
        return f"Roaming was already {word}"
    world.update("lines", line["line_id"], {"roaming_enabled": on})
    return f"Roaming {word} successfully"


def enable_roaming(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    return _set_roaming(args, world, True)


def disable_roaming(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    return _set_roaming(args, world, False)


def transfer_to_human_agents(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """A handoff tool (the conversation ends after it)."""
    return "Transfer successful"


def refuel_data(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    customer_id, gb_amount = args["customer_id"], args["gb_amount"]
    line = _target_line(world, customer_id, args["line_id"])
    if gb_amount <= 0:
        raise ToolError(400, "Refuel amount must be positive")
    plan = _plan(world, line["plan_id"])
    price = plan["data_refueling_price_per_gb"]
    charge = gb_amount * price
    refueled = line["data_refueling_gb"] + gb_amount
    world.update("lines", line["line_id"], {"data_refueling_gb": refueled})
    _apply_one_time_charge(world, ctx, customer_id, charge, f"Data refueling: {gb_amount} GB at ${price}/GB")
    return {"message": f"Successfully added {gb_amount} GB of data for line {args['line_id']} for ${charge:.2f}",
            "new_data_refueling_gb": refueled, "charge": charge}


def set_data_usage(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """Setup: the line's data used this cycle."""
    line = _target_line(world, args["customer_id"], args["line_id"])
    world.update("lines", line["line_id"], {"data_used_gb": args["data_used_gb"]})
    return f"Data usage set to {args['data_used_gb']} GB for line {args['line_id']}"


def suspend_line_for_overdue_bill(args: Args, world: WorldHandle, ctx: HandlerContext) -> Any:
    """Setup: an overdue bill of last month for the line's plan, and the line suspended for it."""
    customer_id, line_id, bill_id = args["customer_id"], args["line_id"], args["new_bill_id"]
    line = _line(world, line_id)
    if line["status"] != "Active":
        raise ToolError(409, "Line must be active to suspend for unpaid bill")
    amount = _plan(world, line["plan_id"])["price_per_month"]
    if amount <= 0:
        raise ToolError(400, "Amount must be positive for overdue bill")
    customer = _customer(world, customer_id)
    if any(_bill(world, b)["status"] == "Overdue" for b in customer["bill_ids"]):
        raise ToolError(409, "Customer already has an overdue bill")
    today = _today(ctx)
    last_of_last_month = today.replace(day=1) - dt.timedelta(days=1)
    first_of_last_month = last_of_last_month.replace(day=1)
    world.create("bills", {
        "bill_id": bill_id, "customer_id": customer_id, "period_start": first_of_last_month.isoformat(),
        "period_end": last_of_last_month.isoformat(), "issue_date": first_of_last_month.isoformat(),
        "total_due": 0.0 + amount, "due_date": (first_of_last_month + dt.timedelta(days=14)).isoformat(),
        "line_items": [{"description": f"Charge for line {line_id}", "amount": amount, "date": today.isoformat(),
                        "item_type": "Charge"}],
        "status": "Overdue",
    })
    world.update("customers", customer["customer_id"], {"bill_ids": [*customer["bill_ids"], bill_id]})
    values: Row = {"status": "Suspended", "suspension_start_date": today.isoformat()}
    if args["contract_ended"]:
        values["contract_end_date"] = last_of_last_month.isoformat()
    world.update("lines", line_id, values)
    return f"Line {line_id} suspended for unpaid bill {bill_id}. Contract ended: {args['contract_ended']}"


# -- the caller's phone ---------------------------------------------------------------------------


class Phone:
    """The phone and its surroundings as plain dicts to change; :meth:`save` writes what changed."""

    def __init__(self, world: WorldHandle) -> None:
        self.world = world
        device, around = world.get(*DEVICE), world.get(*SURROUNDINGS)
        if device is None or around is None:
            raise ValueError(f"the user world has no {DEVICE[0]} {DEVICE[1]!r} or {SURROUNDINGS[0]} "
                             f"{SURROUNDINGS[1]!r} row; the telecom handlers need both")
        self._before = (_plain(device), _plain(around))
        self.d, self.s = _plain(device), _plain(around)

    def save(self) -> None:
        _write_changes(self.world, *DEVICE, self._before[0], self.d)
        _write_changes(self.world, *SURROUNDINGS, self._before[1], self.s)
        self._before = (_plain(self.d), _plain(self.s))

    # -- what the phone shows ------------------------------------------------------------------

    def sim_status(self) -> str:
        return "missing" if self.d["sim_card_missing"] else str(self.d["sim_card_status"])

    def status_bar(self) -> str:
        d = self.d
        shown = []
        if d["airplane_mode"]:
            shown.append("✈️ Airplane Mode")
        else:
            shown.append(_SIGNAL_ICONS.get(d["network_signal_strength"], "📵 No Signal"))
            tech = d["network_technology_connected"]
            if tech != "none":
                shown.append(tech)
            if d["data_enabled"] and tech != "none":
                shown.append("📱 Data Enabled")
                if d["data_saver_mode"]:
                    shown.append("🔽 Data Saver")
            else:
                shown.append("📵 Data Disabled")
        if d["wifi_enabled"] and d["wifi_connected"]:
            shown.append(f"📡 Connected to {d['wifi_ssid']}" if d["wifi_ssid"] else "📡 Enabled")
        if d["vpn_connected"]:
            shown.append("🔒 VPN Connected")
        shown.append(f"🔋 {d['battery_level']}%")
        return " | ".join(shown)

    def with_bar(self, text: str) -> str:
        return f"{text}\nStatus Bar: {self.status_bar()}"

    def mobile_data_working(self) -> bool:
        d, s = self.d, self.s
        if d["airplane_mode"] or d["network_signal_strength"] == "none":
            return False
        if d["network_connection_status"] == "no_service":
            return False
        if s["is_abroad"] and (not d["roaming_enabled"] or not s["roaming_allowed"]):
            return False
        return bool(d["data_enabled"]) and not s["mobile_data_usage_exceeded"]

    def speed_test(self) -> tuple[float | None, str]:
        """τ²'s simulated speed: the technology's range midpoint, times the signal's factor, times
        0.1 behind a poor VPN and 0.2 with data saver; rounded to 2 places."""
        if not self.mobile_data_working():
            return None, "No Connection"
        d = self.d
        vpn = d["vpn_details"]
        factor = 0.1 if d["vpn_connected"] and vpn and vpn.get("server_performance") == "poor" else 1.0
        if d["data_saver_mode"]:
            factor *= 0.2
        low, high = _TECH_SPEEDS.get(d["network_technology_connected"], (0.0, 0.0))
        speed = round((low + high) / 2.0 * _SIGNAL_FACTORS.get(d["network_signal_strength"], 0.0) * factor, 2)
        for bound, desc in ((1, "Very Poor"), (5, "Poor"), (25, "Fair"), (100, "Good")):
            if speed < bound:
                return speed, desc
        return speed, "Excellent"

    def can_send_mms(self) -> bool:
        d = self.d
        if not self.mobile_data_working() or d["network_technology_connected"] == "2G":
            return False
        if d["wifi_calling_enabled"] and d["wifi_calling_mms_over_wifi"]:
            return False
        if d["active_apn_settings"].get("mmsc_url") is None:
            return False
        app = d["app_statuses"].get("messaging")
        return app is not None and bool(app["permissions"]["storage"] and app["permissions"]["sms"])

    # -- what changes it -------------------------------------------------------------------------

    def no_network(self) -> None:
        self.d.update(network_connection_status="no_service", network_technology_connected="none",
                      network_signal_strength="none")

    def network_search(self) -> None:
        """τ²'s ``simulate_network_search``: what the phone connects to, from its SIM, its mode
        preference and the signal where the caller is; nothing in airplane mode, with a broken
        APN or on a line that is not active."""
        d, signal = self.d, self.s["signal_strength"]
        if self.sim_status() == "active":
            d["network_connection_status"] = "connected"
            pref = d["network_mode_preference"]
            if pref == "4g_5g_preferred":
                five = signal.get("5G", "none")
                tech, strength = ("4G", signal.get("4G", "none")) if five == "none" else ("5G", five)
            else:
                tech = {"3g_only": "3G", "2g_only": "2G"}.get(pref, "4G")
                strength = signal.get(tech, "none")
            d["network_technology_connected"], d["network_signal_strength"] = tech, strength
        else:
            self.no_network()
        if d["airplane_mode"] or d["active_apn_settings"].get("apn_name") == "broken" or not self.s["line_active"]:
            self.no_network()

    def toggle_airplane(self) -> bool:
        d = self.d
        was_on = bool(d["airplane_mode"])
        d["airplane_mode"] = not was_on
        if was_on:
            d["network_connection_status"] = "searching"
            if d["wifi_enabled"]:
                d.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")
        else:
            d.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")
            if d["vpn_connected"]:
                self.disconnect_vpn()
        self.network_search()
        return bool(d["airplane_mode"])

    def toggle(self, field: str, search: bool) -> bool:
        self.d[field] = not self.d[field]
        if search:
            self.network_search()
        return bool(self.d[field])

    def connect_vpn(self) -> bool | None:
        if self.d["vpn_connected"]:
            return None
        self.d.update(vpn_connected=True, vpn_details=dict(DEFAULT_VPN))
        return True

    def disconnect_vpn(self) -> bool:
        if not self.d["vpn_connected"]:
            return False
        self.d.update(vpn_connected=False, vpn_details=None)
        return True


_SIGNAL_ICONS = {"none": "📵 No Signal", "poor": "📶¹ Poor", "fair": "📶² Fair", "good": "📶³ Good",
                 "excellent": "📶⁴ Excellent"}
_TECH_SPEEDS = {"2G": (0.1, 0.4), "3G": (1.0, 5.0), "4G": (10.0, 100.0), "5G": (50.0, 500.0), "none": (0.0, 0.0)}
_SIGNAL_FACTORS = {"poor": 0.2, "fair": 0.5, "good": 0.8, "excellent": 1.0, "none": 0.0}
_SPEED_ADVICE = {
    "Very Poor": "Connection is very slow. Basic web browsing might be difficult.",
    "Poor": "Connection is slow. Web browsing may be sluggish, streaming difficult.",
    "Fair": "Connection is okay for web browsing and some standard definition streaming.",
    "Good": "Connection is good for most activities, including HD streaming.",
    "Excellent": "Connection is very fast.",
}


def _on_phone(change: Callable[[Phone, Args], str]) -> Callable[[Args, WorldHandle, HandlerContext], str]:
    """A user tool (or setup step) over the phone: ``change(phone, args)`` gives the text; what it
    changed is written."""

    def handler(args: Args, world: WorldHandle, ctx: HandlerContext) -> str:
        phone = Phone(world)
        text = change(phone, args)
        phone.save()
        return text

    handler.__name__ = handler.__qualname__ = change.__name__
    handler.__doc__ = change.__doc__
    return handler


def _onoff(on: Any) -> str:
    return "ON" if on else "OFF"


def _yesno(on: Any) -> str:
    return "Yes" if on else "No"


@_on_phone
def check_status_bar(p: Phone, args: Args) -> str:
    return f"Status Bar: {p.status_bar()}"


@_on_phone
def check_network_status(p: Phone, args: Args) -> str:
    d = p.d
    lines = [
        f"Airplane Mode: {_onoff(d['airplane_mode'])}",
        f"SIM Card Status: {p.sim_status()}",
        f"Cellular Connection: {d['network_connection_status']}",
        f"Cellular Signal: {d['network_signal_strength']}",
        f"Cellular Network Type: {d['network_technology_connected']}",
        f"Mobile Data Enabled: {_yesno(d['data_enabled'])}",
        f"Data Roaming Enabled: {_yesno(d['roaming_enabled'])}",
        f"Wi-Fi Radio: {_onoff(d['wifi_enabled'])}",
        f"Wi-Fi Connected: {_yesno(d['wifi_connected'])}",
    ]
    if d["wifi_connected"]:
        lines.append(f"Connected Wi-Fi Network: {d['wifi_ssid']}")
    return "\n".join(lines)


@_on_phone
def check_network_mode_preference(p: Phone, args: Args) -> str:
    return f"Network Mode Preference: {p.d['network_mode_preference']}"


@_on_phone
def set_network_mode_preference(p: Phone, args: Args) -> str:
    mode = args["mode"]
    if mode not in NETWORK_MODES:
        return (f"Failed to set network mode: '{mode}' is not a valid option. Please use one of: "
                f"{', '.join(NETWORK_MODES)}\nStatus Bar: {p.status_bar()}")
    p.d["network_mode_preference"] = mode
    p.network_search()
    return p.with_bar(f"Preferred Network Mode set to: {mode}")


@_on_phone
def run_speed_test(p: Phone, args: Args) -> str:
    speed, desc = p.speed_test()
    if speed is None:
        return f"Speed test failed: {desc or 'Could not determine speed'}."
    return f"Speed Test Result: {speed:.2f} Mbps ({desc}). {_SPEED_ADVICE.get(desc, '')}"


@_on_phone
def toggle_airplane_mode(p: Phone, args: Args) -> str:
    return p.with_bar(f"Airplane Mode is now {_onoff(p.toggle_airplane())}.")


_SIM_TEXT = {"active": "Your SIM card is active and working.", "missing": "No SIM card detected in the phone.",
             "locked_pin": "The SIM card is locked with a PIN code.",
             "locked_puk": "The SIM card is locked with a PUK code."}


@_on_phone
def check_sim_status(p: Phone, args: Args) -> str:
    status = p.sim_status()
    return _SIM_TEXT.get(status, f"Unknown SIM status: {status}")


@_on_phone
def reseat_sim_card(p: Phone, args: Args) -> str:
    p.d["sim_card_missing"] = False
    p.network_search()
    return p.with_bar("SIM card re-seated successfully.")


@_on_phone
def toggle_data(p: Phone, args: Args) -> str:
    return p.with_bar(f"Mobile Data is now {_onoff(p.toggle('data_enabled', search=True))}.")


@_on_phone
def toggle_roaming(p: Phone, args: Args) -> str:
    return p.with_bar(f"Data Roaming is now {_onoff(p.toggle('roaming_enabled', search=True))}.")


@_on_phone
def check_data_restriction_status(p: Phone, args: Args) -> str:
    return "Data Saver mode is ON (limits data usage)." if p.d["data_saver_mode"] else "Data Saver mode is OFF."


@_on_phone
def toggle_data_saver_mode(p: Phone, args: Args) -> str:
    return p.with_bar(f"Data Saver Mode is now {_onoff(p.toggle('data_saver_mode', search=False))}.")


@_on_phone
def check_apn_settings(p: Phone, args: Args) -> str:
    apn = p.d["active_apn_settings"]
    return (f"Current APN Name: {apn.get('apn_name') or 'Not Set'}\n"
            f"MMSC URL (for picture messages): {apn.get('mmsc_url') or 'Not Set'}\n"
            "(These are technical settings, usually best left unchanged.)")


@_on_phone
def set_apn_settings(p: Phone, args: Args) -> str:
    given = args["apn_settings"]
    if not isinstance(given, Mapping):
        raise ToolError(400, "apn_settings: expected an object of APN settings")
    unknown = sorted(set(given) - set(DEFAULT_APN))
    if unknown:
        raise ToolError(400, f"apn_settings: unknown setting {unknown[0]!r}; known: {', '.join(DEFAULT_APN)}")
    if given.get("apn_name", "internet") not in APN_NAMES:
        raise ToolError(400, f"apn_settings.apn_name: expected one of {', '.join(APN_NAMES)}")
    apn = {**DEFAULT_APN, **given}
    p.d["active_apn_settings"] = apn
    p.network_search()
    return p.with_bar(f"APN settings set to: {apn['apn_name']}")


@_on_phone
def reset_apn_settings(p: Phone, args: Args) -> str:
    """Marks the APN settings to be reset to the defaults at the next reboot."""
    p.d["active_apn_settings"]["reset_at_reboot"] = True
    p.network_search()
    return p.with_bar("APN settings will reset at reboot.")


@_on_phone
def check_wifi_status(p: Phone, args: Args) -> str:
    d = p.d
    if not d["wifi_enabled"]:
        return "Wi-Fi is turned OFF."
    if d["wifi_connected"]:
        return f"Wi-Fi is ON and connected to '{d['wifi_ssid']}'. Signal strength: {d['wifi_signal_strength']}."
    return "Wi-Fi is ON but not connected to any network."


@_on_phone
def toggle_wifi(p: Phone, args: Args) -> str:
    d = p.d
    if d["airplane_mode"]:
        return p.with_bar("Cannot change Wi-Fi settings while Airplane Mode is ON.")
    d["wifi_enabled"] = not d["wifi_enabled"]
    if not d["wifi_enabled"]:
        d.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")
    return p.with_bar(f"Wi-Fi is now {_onoff(d['wifi_enabled'])}.")


@_on_phone
def check_wifi_calling_status(p: Phone, args: Args) -> str:
    return f"Wi-Fi Calling is currently turned {_onoff(p.d['wifi_calling_enabled'])}."


@_on_phone
def toggle_wifi_calling(p: Phone, args: Args) -> str:
    return p.with_bar(f"Wi-Fi Calling is now {_onoff(p.toggle('wifi_calling_enabled', search=False))}.")


class _Level(str):
    """A performance level printed as τ²'s enum member prints inside a dict."""

    def __repr__(self) -> str:
        return f"<PerformanceLevel.{self.upper()}: {str.__repr__(self)}>"


def _py_repr(details: Mapping[str, Any]) -> str:
    """The VPN's details as τ²'s text shows them: the dict as Python prints it, its level an enum."""
    return repr({k: _Level(v) if k == "server_performance" and isinstance(v, str) else v
                 for k, v in details.items()})


@_on_phone
def check_vpn_status(p: Phone, args: Args) -> str:
    d = p.d
    if d["vpn_connected"]:
        if d["vpn_details"]:
            return f"VPN is ON and connected. Details: {_py_repr(d['vpn_details'])}"
        return "VPN is ON and connected (no specific details available)."
    if d["vpn_enabled_setting"]:
        return "VPN is turned ON in settings, but currently not connected."
    return "VPN is turned OFF."


@_on_phone
def connect_vpn(p: Phone, args: Args) -> str:
    connected = p.connect_vpn()
    if connected is None:
        return "VPN already connected."
    return p.with_bar("VPN connected successfully.")


@_on_phone
def disconnect_vpn(p: Phone, args: Args) -> str:
    done = p.disconnect_vpn()
    return p.with_bar("VPN disconnected successfully." if done else "No active VPN connection to disconnect.")


@_on_phone
def check_installed_apps(p: Phone, args: Args) -> str:
    return f"The following apps are installed on the phone: {', '.join(p.d['app_statuses'])}"


def _granted(app: Row) -> list[str]:
    return [name.replace("_", " ").lower() for name, allowed in app["permissions"].items() if allowed]


@_on_phone
def check_app_status(p: Phone, args: Args) -> str:
    name = args["app_name"]
    app = p.d["app_statuses"].get(name)
    if app is None:
        return f"App '{name}' not found on this phone."
    lines = [f"Status for App: {name}"]
    granted = _granted(app)
    if not granted:
        lines.append(" - Permissions: None granted.")
    else:
        lines.append(" - Permissions Granted:")
        lines += [f"   - {perm}" for perm in granted]
    return "\n".join(lines)


@_on_phone
def check_app_permissions(p: Phone, args: Args) -> str:
    name = args["app_name"]
    app = p.d["app_statuses"].get(name)
    if app is None:
        return f"App '{name}' not found on this phone."
    granted = _granted(app)
    if not granted:
        return f"App '{name}' currently has no permissions granted."
    return f"App '{name}' has permission for: {', '.join(granted)}."


def _set_permission(p: Phone, app_name: Any, permission: Any, on: bool) -> tuple[bool, str]:
    app = p.d["app_statuses"].get(app_name)
    permission = str(permission).lower()
    if app is None:
        return False, f"App '{app_name}' not found. Cannot {'grant' if on else 'remove'} permission."
    if permission not in app["permissions"]:
        if on:
            return False, (f"Permission '{permission}' not tracked for app '{app_name}', available permissions: "
                           f"{list(app['permissions'])}")
        return False, f"Permission '{permission}' not tracked for app '{app_name}'."
    app["permissions"][permission] = on
    return True, f"Permission '{permission}' {'granted to' if on else 'removed from'} app '{app_name}'."


@_on_phone
def grant_app_permission(p: Phone, args: Args) -> str:
    ok, message = _set_permission(p, args["app_name"], args["permission"], True)
    return p.with_bar(f"{'Success. ' if ok else 'Error. '}{message}")


@_on_phone
def can_send_mms(p: Phone, args: Args) -> str:
    return ("Your messaging app can send MMS messages." if p.can_send_mms()
            else "Your messaging app cannot send MMS messages.")


@_on_phone
def reboot_device(p: Phone, args: Args) -> str:
    lines = []
    if p.d["active_apn_settings"].get("reset_at_reboot"):
        lines.append("Resetting APN settings...")
        p.d["active_apn_settings"] = dict(DEFAULT_APN)
    lines.append("Restarting network services...")
    p.d["network_connection_status"] = "searching"
    p.network_search()
    return p.with_bar("\n".join(lines))


@_on_phone
def check_payment_request(p: Phone, args: Args) -> str:
    request = p.s["payment_request"]
    if request is None:
        return "No payment request has been made."
    return f"You have a payment request for bill {request['bill_id']} of {request['amount_due']} USD."


@_on_phone
def make_payment(p: Phone, args: Args) -> str:
    request = p.s["payment_request"]
    if request is None:
        return "You do not have a payment request."
    request["paid"] = True
    return f"Payment of {request['amount_due']} USD has been made for bill {request['bill_id']}."


# -- the caller's setup steps (τ²'s initialization functions that are no tool) -----------------


@_on_phone
def set_user_info(p: Phone, args: Args) -> str:
    p.s.update(name=args["name"], phone_number=args["phone_number"])
    return f"User info set: {args['name']}, {args['phone_number']}"


@_on_phone
def set_user_location(p: Phone, args: Args) -> str:
    p.s["is_abroad"] = args["abroad"]
    return "The user is abroad." if args["abroad"] else "The user is at home."


@_on_phone
def turn_airplane_mode_on(p: Phone, args: Args) -> str:
    if not p.toggle_airplane():
        p.toggle_airplane()
    return "Airplane Mode is now ON."


@_on_phone
def turn_airplane_mode_off(p: Phone, args: Args) -> str:
    if p.toggle_airplane():
        p.toggle_airplane()
    return "Airplane Mode is now OFF."


@_on_phone
def unseat_sim_card(p: Phone, args: Args) -> str:
    p.d["sim_card_missing"] = True
    p.network_search()
    return "SIM card un-seated successfully."


@_on_phone
def lock_sim_card(p: Phone, args: Args) -> str:
    mode = args["mode"]
    if mode in ("pin", "puk"):
        p.d["sim_card_status"] = f"locked_{mode}"
    p.network_search()
    return f"SIM card locked successfully in {mode} mode."


@_on_phone
def turn_data_on(p: Phone, args: Args) -> str:
    p.d["data_enabled"] = True  # τ²'s: no network search
    return "Data connection restored."


@_on_phone
def turn_data_off(p: Phone, args: Args) -> str:
    if p.toggle("data_enabled", search=True):
        p.toggle("data_enabled", search=True)
    return "Data connection broken."


@_on_phone
def turn_roaming_on(p: Phone, args: Args) -> str:
    if not p.toggle("roaming_enabled", search=True):
        p.toggle("roaming_enabled", search=True)
    return "Data Roaming is now ON."


@_on_phone
def turn_roaming_off(p: Phone, args: Args) -> str:
    if p.toggle("roaming_enabled", search=True):
        p.toggle("roaming_enabled", search=True)
    return "Data Roaming is now OFF."


@_on_phone
def turn_data_saver_mode_on(p: Phone, args: Args) -> str:
    if not p.toggle("data_saver_mode", search=False):
        p.toggle("data_saver_mode", search=False)
    return "Data Saver Mode is now ON."


@_on_phone
def turn_data_saver_mode_off(p: Phone, args: Args) -> str:
    if p.toggle("data_saver_mode", search=False):
        p.toggle("data_saver_mode", search=False)
    return "Data Saver Mode is now OFF."


@_on_phone
def break_apn_settings(p: Phone, args: Args) -> str:
    p.d["active_apn_settings"]["apn_name"] = "broken"
    p.network_search()
    return "APN settings broken. Please call reset_apn_settings() to fix."


@_on_phone
def break_apn_mms_setting(p: Phone, args: Args) -> str:
    p.d["active_apn_settings"]["mmsc_url"] = None
    return "APN MMS setting broken. Please call reset_apn_settings() to fix."


@_on_phone
def set_wifi_calling(p: Phone, args: Args) -> str:
    enabled, mms = args["enabled"], args.get("mms_over_wifi")
    if p.d["wifi_calling_enabled"] != enabled:
        p.toggle("wifi_calling_enabled", search=False)
    text = f"Wi-Fi Calling is now {_onoff(enabled)}."
    if mms is not None:
        p.d["wifi_calling_mms_over_wifi"] = mms
        text += f"\nMMS over Wi-Fi is now {_onoff(mms)}."
    return text


@_on_phone
def break_vpn(p: Phone, args: Args) -> str:
    """A VPN connected to a poor server (slow mobile data)."""
    p.connect_vpn()
    if p.d["vpn_details"] is None:
        raise ValueError("break_vpn: the VPN is connected without details")
    p.d["vpn_details"]["server_performance"] = "poor"
    return "VPN connection broken."


@_on_phone
def remove_app_permission(p: Phone, args: Args) -> str:
    return _set_permission(p, args["app_name"], args["permission"], False)[1]


@_on_phone
def simulate_network_search(p: Phone, args: Args) -> str:
    p.network_search()
    return f"Status Bar: {p.status_bar()}"


# -- sync: what τ²'s environment keeps the same on both sides after every step ------------------


def sync(world: WorldHandle, ctx: HandlerContext) -> None:
    """τ²'s ``TelecomEnvironment.sync_tools``. Once the caller's phone number is known: the line's
    status, roaming and data allowance become the surroundings' ``line_active``,
    ``roaming_allowed`` and ``mobile_data_usage_exceeded``; a paid payment request marks its bill
    ``Paid`` and is cleared; with no request, the customer's first bill awaiting payment becomes it."""
    phone = Phone(world)
    number = phone.s["phone_number"]
    if number is None:
        return
    line = next((_plain(row) for row in world.list("lines") if row["phone_number"] == number), None)
    if line is None:
        raise ValueError(f"Wrong scenario, line not found for phone number: {number}")
    plan = world.get("plans", line["plan_id"])
    if plan is None:
        raise ValueError(f"Wrong scenario, invalid plan id ({line['plan_id']}) for the phone number {number}")
    s = phone.s
    s["line_active"] = line["status"] == "Active"
    s["roaming_allowed"] = bool(line["roaming_enabled"])
    s["mobile_data_usage_exceeded"] = line["data_used_gb"] >= plan["data_limit_gb"] + line["data_refueling_gb"]
    request = s["payment_request"]
    if request is not None and request.get("paid"):
        bill = _row(world, "bills", request["bill_id"], "Bill")
        if bill["status"] != "Paid":
            world.update("bills", bill["bill_id"], {"status": "Paid"})
        s["payment_request"] = None
    if s["payment_request"] is None:
        awaiting = _awaiting_payment(world, _customer_by_phone(world, number))
        if awaiting:
            s["payment_request"] = {"bill_id": awaiting[0]["bill_id"], "amount_due": awaiting[0]["total_due"],
                                    "paid": False}
    phone.save()


# -- assertions (τ²'s env_assertions): function(world, **args) on the final worlds -------------------


def _checked_line(world: WorldHandle, customer_id: Any, line_id: Any) -> tuple[Row | None, str]:
    try:
        return _target_line(world, customer_id, line_id), ""
    except ToolError as e:
        return None, e.args[1] if len(e.args) > 1 else str(e)


def assert_data_refueling_amount(world: WorldHandle, customer_id: Any, line_id: Any, expected_amount: Any) -> Any:
    line, why = _checked_line(world, customer_id, line_id)
    if line is None:
        return False, why
    got = line["data_refueling_gb"]
    return abs(got - expected_amount) < 1e-6, f"line {line_id} has {got} GB refueled, expected {expected_amount}"


def assert_line_status(world: WorldHandle, customer_id: Any, line_id: Any, expected_status: Any) -> Any:
    line, why = _checked_line(world, customer_id, line_id)
    if line is None:
        return False, why
    return line["status"] == expected_status, f"line {line_id} is {line['status']}, expected {expected_status}"


def assert_overdue_bill_exists(world: WorldHandle, customer_id: Any, overdue_bill_id: Any) -> Any:
    customer = world.get("customers", customer_id)
    if customer is None:
        return False, f"Customer with ID {customer_id} not found"
    if overdue_bill_id not in customer["bill_ids"]:
        return False, f"Overdue bill {overdue_bill_id} not found"
    bill = world.get("bills", overdue_bill_id)
    if bill is None:
        return False, f"Bill with ID {overdue_bill_id} not found"
    return bill["status"] == "Overdue", f"Overdue bill {overdue_bill_id} is not overdue"


def assert_no_overdue_bill(world: WorldHandle, overdue_bill_id: Any) -> Any:
    """The bill is gone or paid."""
    bill = world.get("bills", overdue_bill_id)
    return bill is None or bill["status"] == "Paid", f"bill {overdue_bill_id} is {bill and bill['status']}, not paid"


def _phone(world: WorldHandle) -> Phone:
    return Phone(world)


def assert_airplane_mode_status(world: WorldHandle, expected_status: Any) -> Any:
    got = _phone(world).d["airplane_mode"]
    return got == expected_status, f"airplane mode is {_onoff(got)}, expected {_onoff(expected_status)}"


def assert_service_status(world: WorldHandle, expected_status: Any) -> Any:
    if expected_status not in NETWORK_STATUSES:
        raise ValueError(f"'{expected_status}' is not a network status ({', '.join(NETWORK_STATUSES)})")
    got = _phone(world).d["network_connection_status"]
    return got == expected_status, f"the phone's service is {got}, expected {expected_status}"


def assert_mobile_data_status(world: WorldHandle, expected_status: Any) -> Any:
    got = _phone(world).mobile_data_working()
    return got == expected_status, f"mobile data {'works' if got else 'does not work'}, expected the opposite"


def assert_mobile_roaming_status(world: WorldHandle, expected_status: Any) -> Any:
    got = _phone(world).d["roaming_enabled"]
    return got == expected_status, f"data roaming is {_onoff(got)}, expected {_onoff(expected_status)}"


def assert_mobile_data_saver_mode_status(world: WorldHandle, expected_status: Any) -> Any:
    got = _phone(world).d["data_saver_mode"]
    return got == expected_status, f"data saver is {_onoff(got)}, expected {_onoff(expected_status)}"


def assert_internet_speed(world: WorldHandle, expected_speed: Any, expected_desc: Any = None) -> Any:
    speed, desc = _phone(world).speed_test()
    speed = speed or 0.0
    ok = speed >= expected_speed and (expected_desc is None or desc.lower() == str(expected_desc).lower())
    want = f"at least {expected_speed} Mbps" + (f" ({expected_desc})" if expected_desc is not None else "")
    return ok, f"the speed test gives {speed} Mbps ({desc}), expected {want}"


def assert_internet_not_excellent(world: WorldHandle) -> Any:
    speed, desc = _phone(world).speed_test()
    return desc.lower() != "excellent", f"the speed test gives {speed} Mbps ({desc})"


def assert_can_send_mms(world: WorldHandle, expected_status: Any) -> Any:
    got = _phone(world).can_send_mms()
    return got == expected_status, f"the phone {'can' if got else 'cannot'} send MMS, expected the opposite"


def assert_mobile_data_usage_exceeded(world: WorldHandle, expected_status: Any) -> Any:
    got = _phone(world).s["mobile_data_usage_exceeded"]
    return got == expected_status, f"data usage exceeded is {got}, expected {expected_status}"
