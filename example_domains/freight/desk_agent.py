"""An example in-house agent for the freight domain: the "desk agent".

This file shows what wrapping your own agent looks like. sandtable calls an
agent once per turn with a ``Turn`` (the conversation so far, the domain's tools,
a per-trial ``state`` dict and the trial's identity) and wants the reply text
back. Anything that fits that shape can be rehearsed: an LLM pipeline, a call
into your service, or, as here, a plain rule-based class with no model at all.

``DeskAgent`` reads the caller's latest message (MC number, load id, rate,
intent), keeps what it learned in ``turn.state`` and follows the freight policy:
vet first, quote the posted rate, counter below the ceiling, book, hand off. When a
system fails (the tasks with ``faults``), it does what a careful desk does: a search
that is rate-limited is made again, and a booking that timed out is looked up with
``find_booking`` before anything is booked again.

To show what pass^k is for, it is deliberately imperfect. Per trial,
``random.Random(turn.trial.seed)`` decides whether the trial is *flawed* (with
probability ``flaw_rate``); a flawed trial makes one realistic slip, picked by the
same generator: it skips carrier verification, lets the ceiling slip out while
negotiating, or gives in to a request above a limit. A slip only hurts on tasks
where it matters, so most tasks pass every time and a few are flaky, like a real
agent. Seeds come from sandtable, so a run is reproducible.

The agent holds no per-trial data on ``self``: trials may run concurrently.
"""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_sandtable import Turn

SLIPS = ("skip_verify", "leak_ceiling", "concede")
ADVANCE_CAP = 300  # policy: fuel advances above $300 go to a human

MC_RE = re.compile(r"\bMC\s*(?:number\s*)?(?:is\s*)?#?\s*(\d{5,8})\b", re.I)
LOAD_RE = re.compile(r"\bL-(\d{3,5})\b", re.I)
MONEY_RE = re.compile(r"\$?\b(\d{1,3}(?:,\d{3})+|\d{3,6})(?:\.\d\d)?\b")
PLACE_RE = re.compile(r"\b(?:in|out of|from|near)\s+((?:[A-Z][A-Za-z.]*\s)+[A-Z]{2})\b")
HANDOFF_RE = re.compile(
    r"\b(manager|supervisor|(?:talk|speak) to (?:a |an )?(?:person|human|someone)|claim|damaged?"
    r"|accident|invoice|payment|paid)\b",
    re.I,
)
ASK_MAX_RE = re.compile(r"\b(your max|maximum|most you can|ceiling|top dollar|highest)\b", re.I)
BOOK_RE = re.compile(
    r"\b(book|booked|deal|i'll take|we'll take|lock it in|got a truck|it's mine|works for (?:us|me))\b", re.I
)
FUEL_RE = re.compile(r"\b(fuel advance|advance)\b", re.I)
CLOSE_RE = re.compile(r"\b(thanks|thank you|that's all|bye|can't do business)\b", re.I)
EQUIPMENT = {"dry van": "dry_van", "reefer": "reefer", "flatbed": "flatbed"}


def money(value: float) -> str:
    """2300 -> '$2,300' (whole dollars when the amount is whole)."""
    return f"${int(value):,}" if float(value).is_integer() else f"${value:,.2f}"


def floor50(value: float) -> int:
    return int(value // 50 * 50)


class DeskAgent:
    """A rule-based carrier-sales agent implementing sandtable's Turn protocol.

    Args:
        flaw_rate: the chance that a trial is flawed (makes one policy slip).
        brokerage: the name the agent answers with.
    """

    def __init__(self, flaw_rate: float = 0.25, brokerage: str = "Harborline Logistics") -> None:
        self.flaw_rate = flaw_rate
        self.brokerage = brokerage

    # ------------------------------------------------------------------ turn
    def __call__(self, turn: Turn) -> str:
        """One agent turn: read the caller's newest line, call tools, return the reply."""
        mem = self._memory(turn)
        text = turn.last_user_message
        said = self._parse(text)
        if said["handoff"]:
            return self._transfer(turn, f"Caller asked for a person or raised a claim/payment issue: {text}")
        if said["mc"] and said["mc"] != mem["mc"]:
            mem.update(mc=said["mc"], carrier=None, blocked=None)
        if said["load_id"]:
            mem["wanted"] = said["load_id"]
        if not mem["mc"]:
            return f"Thanks for calling {self.brokerage}. What's your MC number?"
        problem = self._vet(turn, mem)
        if problem:
            return problem
        if said["fuel"]:
            return self._fuel_advance(turn, mem, said)
        if said["close"] and said["rate"] is None and not said["book"]:
            return f"Understood. Thanks for calling {self.brokerage}, and keep us in mind."

        parts: list[str] = []
        if mem["wanted"] and (mem["load"] is None or mem["load"]["load_id"] != mem["wanted"]):
            parts.append(self._focus(turn, mem, mem["wanted"], said["origin"]))
        elif mem["load"] is None and mem["candidates"]:
            self._pick_candidate(mem, text)
        elif mem["load"] is None:
            parts.append(self._search_lane(turn, mem, said))
        if mem["load"] is not None and (said["rate"] is not None or said["book"] or said["ask_max"]):
            parts.append(self._negotiate(turn, mem, said))
        elif not parts:
            parts.append("What rate do you need to make it work?")
        return " ".join(p for p in parts if p)

    # ------------------------------------------------------------------ memory and parsing
    def _memory(self, turn: Turn) -> dict[str, Any]:
        """Per-trial memory, including this trial's (seeded) slip, if any."""
        if "desk" not in turn.state:
            rng = random.Random(turn.trial.seed)
            flawed = rng.random() < self.flaw_rate
            slip = rng.choice(SLIPS)
            turn.state["desk"] = {
                "slip": slip if flawed else None, "mc": None, "carrier": None, "blocked": None,
                "wanted": None, "load": None, "candidates": [], "counters": [], "agreed": None,
            }
        memory: dict[str, Any] = turn.state["desk"]
        return memory

    def _slip(self, mem: dict[str, Any], kind: str) -> bool:
        """True (once) when this trial's slip is `kind`: the flawed moment."""
        if mem["slip"] == kind:
            if kind != "skip_verify":  # skipping verification lasts the whole call
                mem["slip"] = "spent"
            return True
        return False

    @staticmethod
    def _parse(text: str) -> dict[str, Any]:
        """What the caller's line contains: MC number, load id, a rate, a place, intents."""
        mc = MC_RE.search(text)
        load = LOAD_RE.search(text)
        # rates are the numbers left once MC numbers and load ids are taken out
        rest = LOAD_RE.sub(" ", MC_RE.sub(" ", text))
        amounts = [float(m.group(1).replace(",", "")) for m in MONEY_RE.finditer(rest)]
        place = PLACE_RE.search(text)
        lower = text.lower()
        return {
            "mc": mc.group(1) if mc else None,
            "load_id": f"L-{load.group(1)}" if load else None,
            "rate": amounts[0] if amounts else None,
            "origin": place.group(1) if place else None,
            "equipment": next((v for k, v in EQUIPMENT.items() if k in lower), None),
            "handoff": bool(HANDOFF_RE.search(text)),
            "ask_max": bool(ASK_MAX_RE.search(text)),
            "book": bool(BOOK_RE.search(text)),
            "posted": "posted" in lower,
            "fuel": bool(FUEL_RE.search(text)),
            "close": bool(CLOSE_RE.search(text)),
        }

    # ------------------------------------------------------------------ policy steps
    def _vet(self, turn: Turn, mem: dict[str, Any]) -> str | None:
        """Verify the carrier once; return why we cannot work with it, if so."""
        if mem["blocked"]:
            return f"I understand, but I still can't book you: {mem['blocked']}."
        if mem["carrier"] is not None:
            return None
        if self._slip(mem, "skip_verify"):  # the flaw: trusting the caller's word
            mem["carrier"] = {"mc_number": mem["mc"], "name": "your company", "equipment": None}
            return None
        result = turn.call_tool("verify_carrier", {"mc_number": mem["mc"]})
        if not result.ok:
            bad, mem["mc"] = mem["mc"], None
            return f"I can't find MC {bad} in our system. Could you double-check the number?"
        carrier = result.value
        if carrier.get("authority") != "active":
            mem["blocked"] = "your operating authority shows as not active"
        elif carrier.get("insurance_status") != "valid":
            mem["blocked"] = f"the insurance we have on file expired on {carrier.get('insurance_expires')}"
        if mem["blocked"]:
            return (f"I'm sorry, I can't book {carrier['name']} right now: {mem['blocked']}. "
                    "Please send updated paperwork to carrier relations.")
        mem["carrier"] = carrier
        return None

    def _focus(self, turn: Turn, mem: dict[str, Any], load_id: str, origin: str | None) -> str:
        """Look up the load the caller named and pitch it, or something that fits."""
        result = self._search(turn, {"load_id": load_id})
        loads = result.value if result.ok else []
        equipment = mem["carrier"].get("equipment")
        if not loads:
            mem["wanted"] = None
            return f"You're verified, but {load_id} has already been covered. " + self._alternatives(
                turn, mem, origin, load_id)
        load = loads[0]
        if equipment and load["equipment"] != equipment:
            mem["wanted"] = None
            return (f"You're verified, but {load_id} needs a {load['equipment'].replace('_', ' ')} and you run "
                    f"{equipment.replace('_', ' ')}s. " + self._alternatives(turn, mem, load["origin"], load_id))
        mem["load"] = load
        return f"You're verified. I have {self._describe(load)}."

    def _alternatives(self, turn: Turn, mem: dict[str, Any], origin: str | None, exclude: str) -> str:
        args = {"origin": origin, "equipment": mem["carrier"].get("equipment")}
        result = self._search(turn, {k: v for k, v in args.items() if v})
        loads = [x for x in (result.value if result.ok else []) if x["load_id"] != exclude]
        mem["candidates"] = loads
        if len(loads) == 1:
            mem["load"] = loads[0]
        if not loads:
            return "I don't have anything else that fits right now."
        return "I have " + "; and ".join(self._describe(x) for x in loads) + ". Interested?"

    @staticmethod
    def _search(turn: Turn, args: dict[str, Any]) -> Any:
        """search_loads, made once more when the load board is rate-limited or down."""
        result = turn.call_tool("search_loads", args)
        if not result.ok and (result.error == 429 or (result.error or 0) >= 500):
            result = turn.call_tool("search_loads", args)
        return result

    def _search_lane(self, turn: Turn, mem: dict[str, Any], said: dict[str, Any]) -> str:
        if not said["origin"]:
            return "You're verified. Which load are you calling about, or where is your truck empty?"
        mem["wanted"] = None
        return "You're verified. " + self._alternatives(turn, mem, said["origin"], exclude="")

    def _pick_candidate(self, mem: dict[str, Any], text: str) -> None:
        lower = text.lower()
        for load in mem["candidates"]:
            city = load["destination"].rsplit(" ", 1)[0].lower()
            if city in lower:
                mem["load"] = load

    @staticmethod
    def _describe(load: dict[str, Any]) -> str:
        return (f"{load['load_id']}, {load['origin']} to {load['destination']}, "
                f"{load['equipment'].replace('_', ' ')}, picking up {load['pickup_date']}, "
                f"at {money(load['posted_rate'])} all-in")

    def _negotiate(self, turn: Turn, mem: dict[str, Any], said: dict[str, Any]) -> str:
        load, ask = mem["load"], said["rate"]
        ceiling = float(load["max_rate"])
        if said["ask_max"] and ask is None:
            if self._slip(mem, "leak_ceiling"):
                return f"Between us, the most I can pay on {load['load_id']} is {money(ceiling)}."
            return f"I can't share internal pricing. What rate do you need on {load['load_id']}?"
        if ask is not None and ask >= ceiling:
            if self._slip(mem, "concede"):  # the flaw: giving the caller what they asked
                return self._book(turn, mem, ask)
            return self._counter(turn, mem)
        if ask is not None:
            if said["book"]:
                return self._book(turn, mem, ask)
            mem["agreed"] = ask
            return f"I can do {money(ask)} on {load['load_id']}. Want me to book it?"
        rate = load["posted_rate"] if said["posted"] else (
            mem["agreed"] or (mem["counters"][-1] if mem["counters"] else load["posted_rate"]))
        return self._book(turn, mem, rate)

    def _counter(self, turn: Turn, mem: dict[str, Any]) -> str:
        """Counter in two steps from the posted rate, staying below the ceiling."""
        load = mem["load"]
        posted, ceiling = float(load["posted_rate"]), float(load["max_rate"])
        steps = [posted + floor50((ceiling - posted) / 2), floor50(ceiling - (ceiling - posted) * 0.15)]
        if len(mem["counters"]) >= len(steps):
            return f"I'm sorry, {money(mem['counters'][-1])} is the best I can do on {load['load_id']}."
        rate = min(steps[len(mem["counters"])], ceiling - 50)
        turn.call_tool("log_offer", {"load_id": load["load_id"], "mc_number": mem["mc"], "rate": rate})
        mem["counters"].append(rate)
        if self._slip(mem, "leak_ceiling"):
            return f"My ceiling on {load['load_id']} is {money(ceiling)}, so I can do {money(rate)}."
        if len(mem["counters"]) == 1:
            return f"I can't get there on {load['load_id']}. I can do {money(rate)}."
        return f"I can stretch to {money(rate)}, and that's about as far as this one goes."

    def _book(self, turn: Turn, mem: dict[str, Any], rate: float) -> str:
        load = mem["load"]
        result = turn.call_tool("book_load", {"load_id": load["load_id"], "mc_number": mem["mc"], "rate": rate})
        if not result.ok and (result.error or 0) >= 500:  # it may have gone through: look before booking again
            booking = self._booking_made(turn, load["load_id"], mem["mc"])
            if booking is not None:
                return (f"You're booked on {load['load_id']} at {money(booking['rate'])}. "
                        f"Your confirmation number is {booking['booking_id']}.")
        if not result.ok:
            return f"I couldn't book {load['load_id']}: {result.message}."
        booking = result.value or {}
        return (f"You're booked on {load['load_id']} at {money(rate)}. "
                f"Your confirmation number is {booking.get('booking_id', 'on its way')}.")

    @staticmethod
    def _booking_made(turn: Turn, load_id: str, mc: str) -> dict[str, Any] | None:
        """The carrier's booking on the load, if a book_load that failed went through."""
        found = turn.call_tool("find_booking", {"load_id": load_id})
        mine = [b for b in (found.value if found.ok else []) if b.get("mc_number") == mc]
        return mine[0] if mine else None

    def _fuel_advance(self, turn: Turn, mem: dict[str, Any], said: dict[str, Any]) -> str:
        load_id, amount = said["load_id"] or mem["wanted"], said["rate"]
        if not load_id or amount is None:
            return "Which load is it for, and how much do you need?"
        if amount > ADVANCE_CAP and not self._slip(mem, "concede"):
            return self._transfer(turn, f"MC {mem['mc']} requests a {money(amount)} fuel advance on {load_id}.")
        mem["wanted"] = None  # the load is already ours; don't try to sell it again
        args = {"load_id": load_id, "mc_number": mem["mc"], "amount": amount}
        result = turn.call_tool("issue_fuel_advance", args)
        if not result.ok:
            return f"I couldn't issue that advance: {result.message}."
        return f"Done: a {money(amount)} fuel advance on {load_id} has been issued."

    def _transfer(self, turn: Turn, reason: str) -> str:
        turn.call_tool("transfer_to_human", {"reason": reason})
        return "That needs one of my colleagues, so I'm transferring you now. One moment."
