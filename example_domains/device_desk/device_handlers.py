"""Handlers of the device desk (a fictional mobile carrier's troubleshooting line).

``check_status_bar`` is a user tool: what the caller sees at the top of their own
phone, read from the user's world only. ``sync`` keeps the two worlds consistent after
every step, as the network would: the phone has data only while the carrier's line is
active and the phone itself is set up for it.
"""

from __future__ import annotations

from typing import Any


def check_status_bar(args: dict[str, Any], world: Any, ctx: Any) -> str:
    """The icons at the top of the caller's screen, as they would describe them."""
    phone = world.get("device", "phone")
    icons = []
    if phone["airplane_mode"]:
        icons.append("an airplane icon")
    icons.append("4G and full bars" if phone["has_data"] else "no data icon")
    if not phone["mobile_data"]:
        icons.append("mobile data switched off")
    return "The status bar shows " + ", ".join(icons) + "."


def sync(world: Any, ctx: Any) -> None:
    """Data works when the line is active, airplane mode is off, mobile data is on and the
    APN is the carrier's."""
    phone = world.get("device", "phone")
    line = world.get("lines", phone["line"])
    works = (line is not None and line["status"] == "active" and not phone["airplane_mode"]
             and phone["mobile_data"] and phone["apn"] == "internet.example")
    if phone["has_data"] != works:
        world.update("device", "phone", {"has_data": works})


def phone_has_data(world: Any, line: str) -> tuple[bool, str]:
    """An assertion (`expect.assert`): at the end, the caller's phone is on ``line`` and has
    data, with the message a failed check shows."""
    phone = world.get("device", "phone")
    carrier = world.get("lines", line)
    if phone["line"] != line:
        return False, f"the phone is on line {phone['line']}, expected {line}"
    if not phone["has_data"]:
        status = carrier["status"] if carrier is not None else "unknown"
        return False, (f"the phone has no data (line {line} is {status}, airplane mode "
                       f"{'on' if phone['airplane_mode'] else 'off'}, APN {phone['apn']})")
    return True, ""
