"""An agent that calls its tools over MCP, rehearsed by sandtable with ``--sandtable-serve``.

Many agents do not take sandtable's ``turn.call_tool``: they are built on an MCP
client (or an agent framework that speaks MCP) and find their tools on a server.
With ``--sandtable-serve``, every trial's world is such a server, and the agent
learns where from ``turn.mcp_url``. Nothing else changes: each call is checked
against the domain's rules, logged and graded like any other.

This one needs no model, so it runs anywhere: a small rule-based booking agent for
``example_domains/freight`` that vets the carrier, quotes the posted rate and books
when the caller accepts. It never checks the carrier's insurance or authority, so
it passes ``book-at-posted-rate`` and fails ``expired-insurance``, as a rehearsal
should show::

    pip install 'pytest-sandtable[serve]'
    pytest example_domains/freight --noconftest --sandtable-serve \\
        --sandtable-agent=examples.mcp_agent:agent -k "book-at-posted-rate or expired-insurance"

(from the repository's root, so that ``examples`` imports; ``--noconftest`` leaves out the
freight folder's conftest.py, whose fixture would rehearse its own desk agent instead.)
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from mcp import Client

if TYPE_CHECKING:
    from pytest_sandtable import Turn

MC_RE = re.compile(r"\bMC\s*#?\s*(\d{5,8})\b", re.I)
LOAD_RE = re.compile(r"\b(L-\d{3,5})\b", re.I)
ACCEPT_RE = re.compile(r"\b(book it|works for us|deal|i'll take it)\b", re.I)


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
    """A tool call over MCP: (ok, the result's JSON value, or the error's message)."""
    result = await client.call_tool(tool, arguments)
    text = getattr(result.content[0], "text", None) if result.content else None
    if result.is_error:  # the error said once as text; its code and message as structured content
        error = result.structured_content or {}
        return False, error.get("message") or text
    return True, json.loads(text) if text is not None else None


class McpBookingAgent:
    """Keeps what it learned in ``turn.state`` (never on ``self``: trials may run at once)."""

    async def __call__(self, turn: Turn) -> str:
        if turn.mcp_url is None:
            raise RuntimeError("run with --sandtable-serve: this agent finds its tools over MCP")
        memo = turn.state
        text = turn.last_user_message
        for key, pattern in (("mc", MC_RE), ("load", LOAD_RE)):
            found = pattern.search(text)
            if found:
                memo[key] = found.group(1).upper()
        async with Client(turn.mcp_url) as client:
            if "rate" in memo and ACCEPT_RE.search(text):
                return await self.book(client, memo)
            if "mc" in memo and "load" in memo:
                return await self.quote(client, memo)
        return "Happy to help. What's your MC number and the load id?"

    async def quote(self, client: Client, memo: dict[str, Any]) -> str:
        ok, carrier = await call(client, "verify_carrier", {"mc_number": memo["mc"]})
        if not ok:
            return f"I can't find MC {memo['mc']}: {carrier}. Could you check the number?"
        ok, loads = await call(client, "search_loads", {"load_id": memo["load"]})
        if not ok or not loads:
            return f"Sorry, {memo['load']} is not available any more."
        memo["rate"] = loads[0]["posted_rate"]
        return f"{carrier['name']} is verified. {memo['load']} pays ${memo['rate']:,} all-in. Want it?"

    async def book(self, client: Client, memo: dict[str, Any]) -> str:
        ok, booking = await call(client, "book_load",
                                 {"load_id": memo["load"], "mc_number": memo["mc"], "rate": memo["rate"]})
        if not ok:
            return f"I couldn't book {memo['load']}: {booking}."
        return (f"You're booked on {memo['load']} at ${memo['rate']:,}. "
                f"Your confirmation number is {booking['booking_id']}.")


agent = McpBookingAgent()
