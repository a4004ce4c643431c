"""The handlers of τ²'s telecom domain (importer/templates/tau2_telecom_handlers.py),
driven directly through a WorldHandle over a World of the carrier's and the phone's tables.

Always run: a small fictional carrier and a phone, with the exact texts and writes of
the tools, the setup functions, the sync and the assertions. With TAU2_BENCH_PATH and
SANDTABLE_TAU2_PYTHON set (τ²-bench's checkout, and the Python that has τ² installed),
τ²'s own toolkits are the oracle (benchmarks/tau2_oracle.py, ``probe``): from the
initial state of a spread of the tasks of τ²'s ``base`` split, every tool of both sides is called
(each on a fresh copy of the state) and the task's gold actions are played, and the
texts, errors, final DBs and assertion values must equal τ²'s.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.engine.handlers import HandlerContext, WorldHandle, _Shared
from pytest_sandtable.engine.world import World, seed_for
from pytest_sandtable.importer.templates import tau2_telecom_handlers as tel

HERE = Path(__file__).resolve().parent
ORACLE = HERE.parent / "benchmarks" / "tau2_oracle.py"
NOW = "2025-02-25T12:08:00-05:00"

# -- a fictional carrier --------------------------------------------------------------------------

PLANS = [{"plan_id": "P1", "name": "Small", "data_limit_gb": 5.0, "price_per_month": 30.0,
          "data_refueling_price_per_gb": 4.0}]
CUSTOMERS = [
    {"customer_id": "C1", "full_name": "Ada Quill", "date_of_birth": "1980-01-02", "email": "ada@example.com",
     "phone_number": "555-000-0001", "address": {"street": "1 Elm St", "city": "Springfield", "state": "ZZ",
                                                 "zip_code": "00001"},
     "account_status": "Active", "payment_methods": [], "line_ids": ["L1", "L2"], "bill_ids": ["B1"],
     "created_at": "2025-01-01T00:00:00", "last_extension_date": None, "goodwill_credit_used_this_year": 0.0},
    {"customer_id": "C2", "full_name": "Bo Reed", "date_of_birth": "1990-03-04", "email": "bo@example.com",
     "phone_number": "555-000-0009", "address": {"street": "2 Oak St", "city": "Springfield", "state": "ZZ",
                                                 "zip_code": "00002"},
     "account_status": "Active", "payment_methods": [], "line_ids": ["L3"], "bill_ids": ["B2"],
     "created_at": "2025-01-01T00:00:00", "last_extension_date": None, "goodwill_credit_used_this_year": 0.0},
]
LINE = {"status": "Active", "plan_id": "P1", "device_id": None, "data_used_gb": 1.0, "data_refueling_gb": 0.0,
        "roaming_enabled": False, "contract_end_date": None, "last_plan_change_date": None,
        "last_sim_replacement_date": None, "suspension_start_date": None}
LINES = [{"line_id": "L1", "phone_number": "555-000-0101", **LINE},
         {"line_id": "L2", "phone_number": "555-000-0102", **LINE, "status": "Suspended"},
         {"line_id": "L3", "phone_number": "555-000-0103", **LINE}]
BILL = {"period_start": "2025-01-01", "period_end": "2025-01-31", "issue_date": "2025-02-01", "total_due": 30.0,
        "due_date": "2025-02-15", "line_items": []}
BILLS = [{"bill_id": "B1", "customer_id": "C1", **BILL, "status": "Issued"},
         {"bill_id": "B2", "customer_id": "C2", **BILL, "status": "Draft", "total_due": 0.0}]
DEVICES = [{"device_id": "D1", "device_type": "phone", "model": "Model One", "imei": None, "is_esim_capable": True,
            "activated": True, "activation_date": None, "last_esim_transfer_date": None}]


def domain_text(data: Mapping[str, list[dict[str, Any]]], device: Mapping[str, Any],
                surroundings: Mapping[str, Any]) -> str:
    """Both sides' tables in one `world` (what the engine makes of `world` and `user_world`)."""
    lines = ["version: 1", "name: telecom-handlers", "policy: Nothing.", f"clock: {{now: {json.dumps(NOW)}}}",
             "world:"]
    tables = {**{t: (k, data[t]) for t, k in tel.AGENT_TABLES.items()},
              tel.DEVICE[0]: ("id", [{"id": tel.DEVICE[1], **device}]),
              tel.SURROUNDINGS[0]: ("id", [{"id": tel.SURROUNDINGS[1], **surroundings}])}
    for name, (key, rows) in tables.items():
        fields = list(dict.fromkeys(f for row in rows for f in row)) or [key]
        lines += [f"  {name}:", f"    key: {key}", f"    fields: {json.dumps(fields)}", "    rows:"]
        lines += [f"      - {json.dumps(row, ensure_ascii=False)}" for row in rows]
    lines += ["tools:", "  - name: noop", "    ops: [{respond: {ok: true}}]", "tasks:",
              "  - id: t", "    user: {opening: Hello.}", "    reference: [{say: Hello.}]"]
    return "\n".join(lines) + "\n"


class Worlds:
    """A World over both sides' tables, the handlers' handle, and one ctx per call (as a trial has)."""

    def __init__(self, domain: st.Domain, seed: int = 7) -> None:
        self.domain = domain
        self.world = World(seed_for(domain))
        self.handle = WorldHandle(self.world, domain)
        self.shared = _Shared(seed, domain.clock_now, None)
        self.calls = 0

    def ctx(self, name: str) -> HandlerContext:
        self.calls += 1
        return HandlerContext(self.shared, name, self.calls - 1)

    def call(self, name: str, args: Mapping[str, Any] | None = None) -> tuple[Any, bool]:
        """A tool or setup function, then the sync when it did not fail, as τ²'s environment
        does; its result (a tool error as τ²'s ``Error: <text>``) and whether it failed."""
        fn = getattr(tel, name)
        try:
            result = fn(dict(args or {}), self.handle, self.ctx(name))
        except st.ToolError as e:
            return f"Error: {e.args[1]}", True
        tel.sync(self.handle, self.ctx("sync"))
        return result, False

    def table(self, name: str) -> list[dict[str, Any]]:
        return json.loads(json.dumps(self.handle.list(name)))  # type: ignore[no-any-return]

    def row(self, table: str, key: str) -> dict[str, Any]:
        row = self.handle.get(table, key)
        assert row is not None
        return json.loads(json.dumps(row))  # type: ignore[no-any-return]


def make(tmp_path: Path, data: Mapping[str, list[dict[str, Any]]] | None = None,
         device: Mapping[str, Any] | None = None, surroundings: Mapping[str, Any] | None = None) -> Worlds:
    data = data or {"plans": PLANS, "customers": CUSTOMERS, "lines": LINES, "bills": BILLS, "devices": DEVICES}
    text = domain_text(data, device or tel.DEFAULT_DEVICE, surroundings or tel.DEFAULT_SURROUNDINGS)
    file = tmp_path / f"d{len(list(tmp_path.iterdir()))}" / "sandtable.yaml"
    file.parent.mkdir()
    file.write_text(text, encoding="utf-8")
    return Worlds(st.load_domain(file))


@pytest.fixture
def w(tmp_path: Path) -> Worlds:
    worlds = make(tmp_path)
    worlds.call("set_user_info", {"name": "Ada Quill", "phone_number": "555-000-0101"})
    worlds.call("simulate_network_search")  # as τ²'s tasks do: the phone finds the 5G network where the user is
    return worlds


# -- the phone ------------------------------------------------------------------------------------------


def test_the_status_bar_and_airplane_mode(w: Worlds) -> None:
    assert w.call("check_status_bar") == ("Status Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔋 80%", False)
    assert w.call("toggle_airplane_mode") == (
        "Airplane Mode is now ON.\nStatus Bar: ✈️ Airplane Mode | 🔋 80%", False)
    phone = w.row("device", "phone")
    assert (phone["airplane_mode"], phone["network_connection_status"], phone["network_technology_connected"],
            phone["network_signal_strength"]) == (True, "no_service", "none", "none")
    assert w.call("run_speed_test") == ("Speed test failed: No Connection.", False)
    assert w.call("toggle_wifi") == (
        "Cannot change Wi-Fi settings while Airplane Mode is ON.\nStatus Bar: ✈️ Airplane Mode | 🔋 80%", False)
    assert w.call("toggle_airplane_mode")[0].startswith("Airplane Mode is now OFF.\nStatus Bar: 📶⁴ Excellent | 5G")


def test_the_speed_test_follows_the_network_the_vpn_and_data_saver(w: Worlds) -> None:
    assert w.call("run_speed_test") == ("Speed Test Result: 275.00 Mbps (Excellent). Connection is very fast.", False)
    w.call("set_network_mode_preference", {"mode": "3g_only"})
    assert w.call("run_speed_test") == (
        "Speed Test Result: 1.50 Mbps (Poor). Connection is slow. Web browsing may be sluggish, streaming "
        "difficult.", False)
    w.call("set_network_mode_preference", {"mode": "4g_5g_preferred"})
    w.call("break_vpn")
    w.call("toggle_data_saver_mode")
    assert w.call("run_speed_test")[0].startswith("Speed Test Result: 5.50 Mbps (Fair).")
    assert w.call("check_vpn_status") == (
        "VPN is ON and connected. Details: {'server_address': '192.168.1.1', 'protocol': 'OpenVPN', "
        "'server_performance': <PerformanceLevel.POOR: 'poor'>}", False)
    assert tel.assert_internet_speed(w.handle, expected_speed=200, expected_desc="excellent") == (
        False, "the speed test gives 5.5 Mbps (Fair), expected at least 200 Mbps (excellent)")
    w.call("disconnect_vpn")
    w.call("toggle_data_saver_mode")
    assert tel.assert_internet_speed(w.handle, expected_speed=200, expected_desc="excellent")[0] is True


def test_a_broken_apn_is_reset_at_the_next_reboot(w: Worlds) -> None:
    w.call("break_apn_settings")
    assert w.row("device", "phone")["network_connection_status"] == "no_service"
    assert tel.assert_service_status(w.handle, expected_status="connected")[0] is False
    assert w.call("reset_apn_settings") == ("APN settings will reset at reboot.\nStatus Bar: 📵 No Signal | "
                                            "📵 Data Disabled | 🔋 80%", False)
    assert w.call("reboot_device")[0].startswith("Resetting APN settings...\nRestarting network services...\n")
    assert w.row("device", "phone")["active_apn_settings"] == tel.DEFAULT_APN
    assert tel.assert_service_status(w.handle, expected_status="connected") == (
        True, "the phone's service is connected, expected connected")


def test_mms_needs_data_3g_the_mmsc_and_the_apps_permissions(w: Worlds) -> None:
    assert w.call("can_send_mms") == ("Your messaging app can send MMS messages.", False)
    w.call("remove_app_permission", {"app_name": "messaging", "permission": "storage"})
    assert w.call("check_app_permissions", {"app_name": "messaging"}) == (
        "App 'messaging' has permission for: sms, phone.", False)
    assert tel.assert_can_send_mms(w.handle, expected_status=True)[0] is False
    assert w.call("grant_app_permission", {"app_name": "messaging", "permission": "camera"})[0].startswith(
        "Error. Permission 'camera' not tracked for app 'messaging', available permissions: "
        "['sms', 'storage', 'phone', 'network']\n")
    w.call("grant_app_permission", {"app_name": "messaging", "permission": "Storage"})
    assert tel.assert_can_send_mms(w.handle, expected_status=True)[0] is True
    w.call("break_apn_mms_setting")
    assert w.call("check_apn_settings") == (
        "Current APN Name: internet\nMMSC URL (for picture messages): Not Set\n(These are technical settings, "
        "usually best left unchanged.)", False)
    assert w.call("check_app_status", {"app_name": "maps"}) == ("App 'maps' not found on this phone.", False)


def test_roaming_needs_the_phone_and_the_line(w: Worlds) -> None:
    w.call("set_user_location", {"abroad": True})
    assert tel.assert_mobile_data_status(w.handle, expected_status=True)[0] is False
    w.call("toggle_roaming")
    assert tel.assert_mobile_data_status(w.handle, expected_status=True)[0] is False  # the line has no roaming
    assert w.call("enable_roaming", {"customer_id": "C1", "line_id": "L1"}) == ("Roaming enabled successfully", False)
    assert w.row("surroundings", "user")["roaming_allowed"] is True  # the sync
    assert tel.assert_mobile_data_status(w.handle, expected_status=True) == (
        True, "mobile data works, expected the opposite")
    assert w.call("enable_roaming", {"customer_id": "C1", "line_id": "L1"}) == ("Roaming was already enabled", False)


# -- the carrier ------------------------------------------------------------------------------------------


def test_lookups_and_their_errors(w: Worlds) -> None:
    assert w.call("get_customer_by_phone", {"phone_number": "555-000-0102"})[0]["customer_id"] == "C1"
    assert w.call("get_customer_by_phone", {"phone_number": "555-999-9999"}) == (
        "Error: Customer with phone number 555-999-9999 not found", True)
    assert [c["customer_id"] for c in w.call("get_customer_by_name", {"full_name": "ADA QUILL",
                                                                      "dob": "1980-01-02"})[0]] == ["C1"]
    assert w.call("get_details_by_id", {"id": "P1"})[0] == PLANS[0]
    assert w.call("get_details_by_id", {"id": "X1"}) == ("Error: Unknown ID format or type: X1", True)
    assert w.call("get_details_by_id", {"id": "L9"}) == ("Error: Line with ID L9 not found", True)
    assert w.call("suspend_line", {"customer_id": "C1", "line_id": "L3", "reason": "travel"}) == (
        "Error: Line L3 not found for customer C1", True)
    assert w.call("resume_line", {"customer_id": "C1", "line_id": "L1"}) == (
        "Error: Line must be suspended to resume", True)
    assert w.call("get_data_usage", {"customer_id": "C1", "line_id": "L1"})[0] == {
        "line_id": "L1", "data_used_gb": 1.0, "data_limit_gb": 5.0, "data_refueling_gb": 0.0,
        "cycle_end_date": "2025-02-28"}


def test_suspending_a_line_cuts_the_phones_service_after_its_next_search(w: Worlds) -> None:
    result, failed = w.call("suspend_line", {"customer_id": "C1", "line_id": "L1", "reason": "travel"})
    assert not failed and result["line"]["status"] == "Suspended"
    assert w.row("lines", "L1")["suspension_start_date"] == "2025-02-25"  # the clock's date
    assert w.row("surroundings", "user")["line_active"] is False
    assert w.row("device", "phone")["network_connection_status"] == "connected"  # until it searches
    w.call("reboot_device")
    assert w.row("device", "phone")["network_connection_status"] == "no_service"
    w.call("resume_line", {"customer_id": "C1", "line_id": "L1"})
    w.call("reboot_device")
    assert w.row("device", "phone")["network_connection_status"] == "connected"


def test_a_refuel_charges_the_draft_bill_or_makes_one(w: Worlds) -> None:
    assert w.call("refuel_data", {"customer_id": "C1", "line_id": "L1", "gb_amount": 0}) == (
        "Error: Refuel amount must be positive", True)
    result, _ = w.call("refuel_data", {"customer_id": "C1", "line_id": "L1", "gb_amount": 2.0})
    assert result == {"message": "Successfully added 2.0 GB of data for line L1 for $8.00",
                      "new_data_refueling_gb": 2.0, "charge": 8.0}
    new = [b for b in w.table("bills") if b["bill_id"] not in ("B1", "B2")]
    assert len(new) == 1 and new[0]["bill_id"].startswith("B") and len(new[0]["bill_id"]) == 9
    assert {k: v for k, v in new[0].items() if k != "bill_id"} == {
        "customer_id": "C1", "period_start": "2025-03-01", "period_end": "2025-03-31", "issue_date": "2025-03-01",
        "total_due": 8.0, "due_date": "2025-03-15", "status": "Draft",
        "line_items": [{"description": "Data refueling: 2.0 GB at $4.0/GB", "amount": 8.0, "date": "2025-02-25",
                        "item_type": "Charge"}]}
    assert w.row("customers", "C1")["bill_ids"] == ["B1", new[0]["bill_id"]]
    assert tel.assert_data_refueling_amount(w.handle, customer_id="C1", line_id="L1", expected_amount=2.0)[0]
    w.call("refuel_data", {"customer_id": "C2", "line_id": "L3", "gb_amount": 1.0})
    assert w.row("bills", "B2")["total_due"] == 4.0 and len(w.table("bills")) == 3  # B2 is C2's draft


def test_a_payment_request_reaches_the_phone_and_its_payment_the_bill(w: Worlds) -> None:
    assert w.call("check_payment_request") == ("No payment request has been made.", False)
    assert w.call("send_payment_request", {"customer_id": "C1", "bill_id": "B1"}) == (
        "Payment request sent to the customer for bill B1", False)
    assert w.call("check_payment_request") == ("You have a payment request for bill B1 of 30.0 USD.", False)
    assert w.call("send_payment_request", {"customer_id": "C1", "bill_id": "B1"}) == (
        "Error: A bill is already awaiting payment for this customer", True)
    assert w.call("make_payment") == ("Payment of 30.0 USD has been made for bill B1.", False)
    assert w.row("bills", "B1")["status"] == "Paid"
    assert w.row("surroundings", "user")["payment_request"] is None
    assert tel.assert_no_overdue_bill(w.handle, overdue_bill_id="B1")[0] is True


def test_an_overdue_bill_suspends_the_line(w: Worlds) -> None:
    w.call("suspend_line_for_overdue_bill", {"customer_id": "C1", "line_id": "L1", "new_bill_id": "B9",
                                             "contract_ended": True})
    assert w.row("bills", "B9") == {
        "bill_id": "B9", "customer_id": "C1", "period_start": "2025-01-01", "period_end": "2025-01-31",
        "issue_date": "2025-01-01", "total_due": 30.0, "due_date": "2025-01-15", "status": "Overdue",
        "line_items": [{"description": "Charge for line L1", "amount": 30.0, "date": "2025-02-25",
                        "item_type": "Charge"}]}
    assert w.row("lines", "L1")["contract_end_date"] == "2025-01-31"
    assert tel.assert_overdue_bill_exists(w.handle, customer_id="C1", overdue_bill_id="B9") is not False
    assert tel.assert_no_overdue_bill(w.handle, overdue_bill_id="B9") == (False, "bill B9 is Overdue, not paid")
    assert tel.assert_line_status(w.handle, customer_id="C1", line_id="L1", expected_status="Suspended")[0]


def test_a_tool_writes_only_what_it_changed(w: Worlds) -> None:
    before = w.row("device", "phone")
    w.call("toggle_data")
    after = w.row("device", "phone")
    assert {k for k in after if after[k] != before[k]} == {"data_enabled"}


def test_sync_with_no_phone_number_changes_nothing(tmp_path: Path) -> None:
    worlds = make(tmp_path)
    tel.sync(worlds.handle, worlds.ctx("sync"))
    assert worlds.row("surroundings", "user") == {"id": "user", **tel.DEFAULT_SURROUNDINGS}


def test_sync_on_a_number_no_line_has_is_the_domains_fault(tmp_path: Path) -> None:
    worlds = make(tmp_path)
    with pytest.raises(ValueError, match="Wrong scenario, line not found for phone number: 555-404"):
        worlds.call("set_user_info", {"name": "Nobody", "phone_number": "555-404"})


# -- against τ²'s own toolkits ------------------------------------------------------------------------------

TAU2 = os.environ.get("TAU2_BENCH_PATH")
TAU2_PYTHON = os.environ.get("SANDTABLE_TAU2_PYTHON")
needs_oracle = pytest.mark.skipif(
    not (TAU2 and TAU2_PYTHON),
    reason="TAU2_BENCH_PATH or SANDTABLE_TAU2_PYTHON is not set (τ²-bench's checkout, and the Python 3.12 "
    "that has it installed: benchmarks/README.md, 'τ²-bench agreement')")


_DATETIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")


def _norm(value: Any) -> Any:
    """τ²'s tool output with its numbers and booleans as text (its ``to_json_str`` writes those of a
    returned dict as strings, those of a model as JSON values): both sides compared so."""
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if isinstance(value, str) and _DATETIME.fullmatch(value):  # τ²'s str(datetime): a space for the T
        return value.replace(" ", "T")
    if isinstance(value, (bool, int, float)):
        return str(float(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
    return value


def _content(text: str) -> Any:
    try:
        return _norm(json.loads(text))
    except json.JSONDecodeError:
        return text


def probes_for(task: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    """From the task's initial state: every read tool of both sides in one list; each write tool
    alone (its own fresh copy); the gold actions in order, then the task's assertions."""
    reads_user = [n for n in tel.USER_TOOLS if n.startswith(("check_", "run_", "can_"))]
    app = [{"app_name": "messaging"}, {"app_name": "browser"}, {"app_name": "maps"}]
    steps: list[dict[str, Any]] = []
    for name in reads_user:
        for args in (app if name in ("check_app_status", "check_app_permissions") else [{}]):
            steps.append({"name": name, "arguments": args, "requestor": "user"})
    c, line = "C1001", "L1002"
    agent_reads = [("get_customer_by_phone", {"phone_number": "555-123-2002"}),
                   ("get_customer_by_phone", {"phone_number": "555-000-0000"}),
                   ("get_customer_by_id", {"customer_id": "C1002"}), ("get_customer_by_id", {"customer_id": "C9"}),
                   ("get_customer_by_name", {"full_name": "john smith", "dob": "1985-06-15"}),
                   ("get_details_by_id", {"id": "L1002"}), ("get_details_by_id", {"id": "B1003"}),
                   ("get_details_by_id", {"id": "D1001"}), ("get_details_by_id", {"id": "P1002"}),
                   ("get_details_by_id", {"id": "X1"}), ("get_bills_for_customer", {"customer_id": c}),
                   ("get_bills_for_customer", {"customer_id": "C1002", "limit": 1}),
                   ("get_data_usage", {"customer_id": c, "line_id": line}),
                   ("get_data_usage", {"customer_id": c, "line_id": "L1004"})]
    steps += [{"name": n, "arguments": a, "requestor": "assistant"} for n, a in agent_reads]
    with_args = ("set_network_mode_preference", "grant_app_permission", "set_apn_settings")
    writes_user: list[tuple[str, dict[str, Any]]] = [
        (n, {}) for n in tel.USER_TOOLS if not n.startswith(("check_", "run_", "can_")) and n not in with_args]
    writes_user += [("set_network_mode_preference", {"mode": m}) for m in ("2g_only", "3g_only", "4g_only",
                                                                          "4g_5g_preferred")]
    writes_user += [("grant_app_permission", {"app_name": "messaging", "permission": p}) for p in ("sms", "storage")]
    writes_user += [("set_apn_settings", {"apn_settings": {"apn_name": "internet", "mmsc_url": "http://mms.x"}})]
    writes_agent = [("suspend_line", {"customer_id": c, "line_id": line, "reason": "trip"}),
                    ("resume_line", {"customer_id": c, "line_id": line}),
                    ("resume_line", {"customer_id": c, "line_id": "L1003"}),
                    ("send_payment_request", {"customer_id": c, "bill_id": "B1002"}),
                    ("send_payment_request", {"customer_id": "C1002", "bill_id": "B1005"}),
                    ("enable_roaming", {"customer_id": c, "line_id": line}),
                    ("disable_roaming", {"customer_id": c, "line_id": line}),
                    ("refuel_data", {"customer_id": c, "line_id": line, "gb_amount": 2.0}),
                    ("refuel_data", {"customer_id": "C1002", "line_id": "L1004", "gb_amount": 1.5}),
                    ("transfer_to_human_agents", {"summary": "help"})]
    after = [{"name": n, "arguments": {}, "requestor": "user"}
             for n in ("check_status_bar", "check_network_status", "run_speed_test", "can_send_mms")]
    lists = [steps]
    lists += [[{"name": n, "arguments": a, "requestor": "user"}, *after] for n, a in writes_user]
    lists += [[{"name": n, "arguments": a, "requestor": "assistant"}, *after] for n, a in writes_agent]
    criteria = task["evaluation_criteria"]
    gold = [{"name": a["name"], "arguments": a["arguments"], "requestor": a["requestor"]}
            for a in criteria.get("actions") or []]
    gold += [{"assert": e["func_name"], "env_type": e["env_type"], "arguments": e["arguments"]}
             for e in criteria.get("env_assertions") or []]
    lists.append(gold + after)
    # from the fixed phone: each network mode, and the VPN broken and mended
    lists += [[*gold, {"name": "set_network_mode_preference", "arguments": {"mode": m}, "requestor": "user"}, *after]
              for m in ("2g_only", "3g_only", "4g_only")]
    setup = [a["func_name"] for a in (task.get("initial_state") or {}).get("initialization_actions") or []]
    if "break_vpn" not in setup:  # τ²'s break_vpn spoils the toolkit's shared VPN details: a reconnect is
        # poor in τ² for the rest of the process (docs/import.md, "τ² telecom"), fresh here
        lists.append([*gold, {"name": "connect_vpn", "arguments": {}, "requestor": "user"}, *after,
                      {"name": "toggle_data_saver_mode", "arguments": {}, "requestor": "user"}, *after,
                      {"name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"}, *after])
    return lists


def ours(domain: st.Domain, task: Mapping[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    worlds = Worlds(domain)
    for step in (task.get("initial_state") or {}).get("initialization_actions") or []:
        _, failed = worlds.call(step["func_name"], step["arguments"])
        assert not failed, step
    done = []
    for step in steps:
        if "assert" in step:
            value = getattr(tel, step["assert"])(worlds.handle, **step["arguments"])
            done.append({"value": value[0] if isinstance(value, tuple) else value})
            continue
        result, failed = worlds.call(step["name"], step["arguments"])
        done.append({"content": result if isinstance(result, str) else json.dumps(result), "error": failed})
    agent = {t: worlds.table(t) for t in tel.AGENT_TABLES}
    device = {k: v for k, v in worlds.row(*tel.DEVICE).items() if k != "id"}
    around = {k: v for k, v in worlds.row(*tel.SURROUNDINGS).items() if k != "id"}
    return {"steps": done, "db": agent, "user_db": {"device": device, "surroundings": around}}


def _same_bills(db: dict[str, Any], seed: set[str]) -> dict[str, Any]:
    """A DB with the ids of bills made during the run (τ²'s from uuid4, ours from ctx.random) as ``NEW``."""
    text = json.dumps(db)
    for bill in db["bills"]:
        if bill["bill_id"] not in seed:
            text = text.replace(json.dumps(bill["bill_id"]), '"NEW"')
    return json.loads(text)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def telecom(tmp_path_factory: pytest.TempPathFactory) -> tuple[st.Domain, list[dict[str, Any]]]:
    from pytest_sandtable.importer.tau2_telecom import read_telecom

    path = Path(str(TAU2)) / "data" / "tau2" / "domains" / "telecom"
    read = read_telecom(path, "base")
    file = tmp_path_factory.mktemp("telecom") / "sandtable.yaml"
    file.write_text(domain_text(read.data, read.user_data["device"], read.user_data["surroundings"]),
                    encoding="utf-8")
    tasks = json.loads((path / "tasks.json").read_text(encoding="utf-8"))
    base = set(json.loads((path / "split_tasks.json").read_text(encoding="utf-8"))["base"])
    return st.load_domain(file), [t for t in tasks if t["id"] in base]


def _oracle(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = subprocess.run([str(TAU2_PYTHON), str(ORACLE)], input=json.dumps(requests), capture_output=True, text=True,
                       timeout=1800, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def _disagreements(domain: st.Domain, tasks: list[dict[str, Any]]) -> Iterator[str]:
    requests = [{"domain": "telecom", "task_id": t["id"], "probe": probes_for(t)} for t in tasks]
    seed = {b["bill_id"] for b in json.loads(json.dumps(domain.tables["bills"].rows))}
    for task, request, answer in zip(tasks, requests, _oracle(requests)):
        assert "error" not in answer, answer
        for steps, theirs in zip(request["probe"], answer["probes"]):
            mine = ours(domain, task, steps)
            for n, (step, a, b) in enumerate(zip(steps, mine["steps"], theirs["steps"])):
                if "assert" in step:
                    if a != b:
                        yield f"{task['id']}: {step['assert']} gives {a}, τ² {b}"
                    continue
                if (a["error"], _content(a["content"])) != (b["error"], _content(b["content"])):
                    yield f"{task['id']}: step {n} {step['name']}{step['arguments']}: {a} | τ²: {b}"
            if _same_bills(mine["db"], seed) != _same_bills(theirs["db"], seed):
                yield f"{task['id']}: {[s.get('name', s.get('assert')) for s in steps][:2]}: the carrier's DB differs"
            if mine["user_db"] != theirs["user_db"]:
                yield f"{task['id']}: {[s.get('name', s.get('assert')) for s in steps][:2]}: the phone differs: " + \
                    json.dumps({k: (v, theirs['user_db']['device'].get(k)) for k, v in mine['user_db']['device'].items()
                                if theirs['user_db']['device'].get(k) != v})


@needs_oracle
def test_every_tool_from_a_spread_of_base_tasks_starts_agrees_with_tau2(
        telecom: tuple[st.Domain, list[dict[str, Any]]]) -> None:
    """Every tenth base task (12; all 114 take minutes: ``SANDTABLE_TAU2_TELECOM_ALL=1``)."""
    domain, tasks = telecom
    assert len(tasks) == 114
    picked = tasks if os.environ.get("SANDTABLE_TAU2_TELECOM_ALL") else tasks[::10]
    assert list(_disagreements(domain, picked)) == []


def test_the_worlds_helper_copies_nothing_it_should_not(w: Worlds) -> None:
    phone = w.row("device", "phone")
    phone["airplane_mode"] = True
    assert w.row("device", "phone")["airplane_mode"] is False
    assert copy.deepcopy(tel.DEFAULT_DEVICE)["active_apn_settings"] == tel.DEFAULT_APN
