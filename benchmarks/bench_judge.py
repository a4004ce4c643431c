"""Cost and time per judged trial (--sandtable-judge, docs/judges.md), against the fake
Anthropic and OpenAI servers of the tests (the real SDK and httpx talk to them over
127.0.0.1; no key, no internet).

    python benchmarks/bench_judge.py [--trials 100] [--criteria 3] [--turns 6]

Each trial is a synthetic conversation of ``--turns`` user and agent messages and a tool
call; each is judged on ``--criteria`` criteria by a panel of three (two Claude judges,
one OpenAI-compatible), so a trial costs ``3 x criteria`` judge calls. The fakes answer
at once with a verdict quoting the transcript and report tokens as the real APIs would
count them, roughly (a token per 4 characters of the system prompt and the message; the
answer's likewise), so the cost is the list price of what the prompt really holds:
claude-haiku-4-5 and claude-sonnet-4-5 at the built-in prices, gpt-4.1-mini at an
assumed $0.40 / $1.60 per million tokens (no built-in OpenAI price). Three passes:
cold (every verdict asked), warm (the judge cache answers: 0 calls, the regrade and
rerun case), and cold again with one judge timing out on every call (0.2 s timeout,
no retry): what a stuck judge costs the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fakes import FakeAnthropic, FakeOpenAI, Hang, claude_text, claude_usage, openai_text, openai_usage  # noqa: E402

from pytest_sandtable.domain.model import Criterion  # noqa: E402
from pytest_sandtable.judge.panel import Panel, PanelOptions  # noqa: E402
from pytest_sandtable.judge.prompt import SYSTEM  # noqa: E402
from pytest_sandtable.judge.spec import parse_panel  # noqa: E402
from pytest_sandtable.report.prices import builtin_prices  # noqa: E402

PANEL = "claude:claude-haiku-4-5,claude:claude-sonnet-4-5,openai:gpt-4.1-mini"
POLICY = ("A delivery more than a day late gets its $35 late fee refunded. Apologise for the delay. "
          "Never promise a date the carrier has not confirmed. ") * 3


def trial(n: int, turns: int) -> dict[str, Any]:
    transcript: list[dict[str, Any]] = [{"role": "user", "text": f"Load L-{n} came two days late.", "turn": 0},
                                        {"role": "tool", "call": 0}]
    for t in range(1, turns):
        transcript.append({"role": "agent", "text": f"I am sorry about the delay on L-{n}. Let me check what "
                           f"applies to it; step {t} of the review is done.", "turn": t})
        transcript.append({"role": "user", "text": "Thanks. What about the fee?", "turn": t})
    transcript.append({"role": "agent", "text": f"The $35 late fee on L-{n} is refunded because it arrived two "
                       "days late.", "turn": turns})
    calls = [{"index": 0, "turn": 1, "tool": "lookup_load", "args": {"load_id": f"L-{n}"}, "ok": True,
              "result": {"status": "late", "days": 2, "fee": 35}, "error": None}]
    return {"domain": "freight", "task": "late", "trial": n, "verdict": "passed", "transcript": transcript,
            "calls": calls}


def answer(message: str) -> str:
    quote = "The $35 late fee" if "fee" in message.split("Criterion", 1)[1].split("\n", 1)[0] else "I am sorry"
    return json.dumps({"verdict": "yes", "quote": quote})


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--criteria", type=int, default=3)
    ap.add_argument("--turns", type=int, default=6)
    args = ap.parse_args()
    criteria = [Criterion(id=f"c{i}", question=q) for i, q in enumerate(
        ["Did the agent state the $35 fee and why it applies?", "Did the agent apologise for the delay?",
         "Did the agent avoid promising an unconfirmed date?", "Did the agent stay polite?"][: args.criteria])]
    stuck = {"on": False}

    def claude(req: Any) -> Any:
        body = req.json
        text = body["messages"][-1]["content"]
        if stuck["on"] and body["model"] == "claude-sonnet-4-5":
            return Hang(5.0)
        got = answer(body["messages"][0]["content"])
        return claude_text(got, usage=claude_usage(tokens(SYSTEM + text), tokens(got)))

    def openai(req: Any) -> Any:
        body = req.json
        text = body["messages"][1]["content"]
        got = answer(text)
        return openai_text(got, usage=openai_usage(tokens(SYSTEM + text), tokens(got)))

    prices = dict(builtin_prices())
    prices["gpt-4.1-mini"] = {"input": 0.4, "output": 1.6}
    folder = Path(tempfile.mkdtemp(prefix="bench-judge-"))
    trials = [trial(n, args.turns) for n in range(1, args.trials + 1)]
    try:
        with FakeAnthropic(responder=claude) as fa, FakeOpenAI(responder=openai) as fo:
            os.environ.update({"ANTHROPIC_API_KEY": "sk-ant-bench", "ANTHROPIC_BASE_URL": fa.base_url,
                               "OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": fo.base_url})
            print(f"{args.trials} trials x {args.criteria} criteria x 3 judges ({PANEL}); "
                  f"{args.turns} agent turns a trial")
            print(f"{'pass':<22} {'calls':>6} {'cached':>6} {'wall s':>7} {'ms/trial':>9} {'$/trial':>10} "
                  f"{'in tok/call':>11}")
            for label, cache, timeout in (("cold", "a", 60.0), ("warm (cache)", "a", 60.0),
                                          ("cold, 1 judge stuck", "b", 0.2)):
                stuck["on"] = label.endswith("stuck")
                panel = Panel(parse_panel(PANEL), PanelOptions(cache_dir=folder / cache, prices=prices,
                                                               timeout=timeout, retries=0))
                import asyncio

                async def judge_all(p: Panel = panel) -> None:
                    for t in trials:
                        await p.judge_trial(POLICY, criteria, t)

                started = time.perf_counter()
                asyncio.run(judge_all())
                wall = time.perf_counter() - started
                inputs = sum(u["input"] for u in panel.usage.models.values())
                per_call = inputs / panel.calls if panel.calls else 0
                print(f"{label:<22} {panel.calls:>6} {panel.cached:>6} {wall:>7.2f} {wall / len(trials) * 1000:>9.1f} "
                      f"{panel.cost() / len(trials):>10.5f} {per_call:>11.0f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
