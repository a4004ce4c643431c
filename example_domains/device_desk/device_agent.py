"""An example in-house agent for the device desk: a rule-based troubleshooter.

It follows the desk's policy without a model: it looks up the caller's line first,
resumes a suspended line whose bill is paid, and otherwise walks the caller through
their own phone one step at a time (status bar, airplane mode, mobile data, APN). It
never sees the caller's phone: only what the caller tells it. It keeps what it learned
in ``turn.state``, never on ``self``, so one instance serves every trial.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_sandtable import Turn

LINE_RE = re.compile(r"\bL-\d{4}\b")


class DeviceAgent:
    """The device desk's agent (``turn`` protocol: reply text, tool calls on the way)."""

    def __call__(self, turn: Turn) -> str:
        said = next((m["content"] for m in reversed(turn.messages) if m["role"] == "user"), "")
        text = said.lower()
        state = turn.state
        if "line" not in state:
            found = LINE_RE.search(said)
            if found is None:
                return "Which line is it? It starts with L-."
            r = turn.call_tool("get_line", {"line": found.group(0)})
            if not r.ok:
                return f"I can't find line {found.group(0)}. Could you read it to me again?"
            state["line"] = r.value
            if r.value["status"] == "suspended" and r.value["bill"] == "paid":
                turn.call_tool("resume_line", {"line": found.group(0)})
                return ("Your line was suspended for the bill; it's paid, so I've resumed it. "
                        "Could you look at your status bar and tell me what it shows?")
            return "Your line is active on our side. Could you look at your status bar and tell me what it shows?"
        if "airplane" in text and "no airplane" not in text:
            return "Please turn airplane mode off, then check the status bar again."
        if "mobile data is switched off" in text or "data is off" in text:
            return "Please turn mobile data on in your settings, then check the status bar again."
        if "no data icon" in text:
            return "Let's check your APN settings: what does the access point name say?"
        if "oldcarrier" in text or "wap." in text:
            return "That's your old carrier's. Please reset your APN to the default, then check the status bar."
        if "thank" in text or "great" in text:
            return "Glad it works again. Have a good day!"
        return "Could you tell me what you see on the status bar?"
