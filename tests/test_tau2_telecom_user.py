"""The imported τ² telecom caller does what the agent asks, and only that (issue 37, item 2).

On main the scripted user of an imported telecom task made the gold fixes (toggle_data,
reset_apn_settings, ...) whatever the agent said, so an agent that only says "I cannot help
with that." passed 23 of τ²'s 114 base tasks, where τ²'s own evaluator gives it 0. Always
run: the importer on the small fictional carrier of tests/data/tau2_repo, each task run by
pytest with the reference agent, a do-nothing agent and an agent that gives one wrong
instruction. With TAU2_BENCH_PATH set, the same on τ²'s own 114 base tasks. The comparison
with τ²'s own rewards (SANDTABLE_TAU2_PYTHON) is in tests/test_tau2_telecom_import.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "data" / "tau2_repo" / "data" / "tau2" / "domains" / "telecom"
TAU2 = os.environ.get("TAU2_BENCH_PATH")
AGENTS = '''\
from pytest_sandtable.domain.model import RefStep
from pytest_sandtable.engine.reference import ReferenceAgent


def do_nothing(turn):
    return "I cannot help with that."


do_nothing.inline = True


class OneWrong(ReferenceAgent):
    """The reference, with its request to toggle mobile data replaced by one to toggle roaming."""

    def for_task(self, task):
        return OneWrong([RefStep(say=s.say.replace("toggle mobile data", "toggle data roaming"))
                         if s.say else s for s in task.reference])


one_wrong = OneWrong()
'''
DATA_OFF = "telecom-mobile_data_issue-data_mode_off-PERSONA-None"
ROAMING = "telecom-mobile_data_issue-user_abroad_roaming_disabled_off.data_usage_exceeded-PERSONA-Easy"
HISTORY = "telecom-service_issue-history-PERSONA-None"


def imported(tmp_path: Path, source: Path) -> Path:
    out = tmp_path / "telecom"
    r = subprocess.run([sys.executable, "-m", "pytest_sandtable", "import", "tau2", str(source), "-o", str(out)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert (r.returncode, r.stderr) == (0, "")
    (tmp_path / "agents.py").write_text(AGENTS, encoding="utf-8")
    return out


def run(tmp_path: Path, agent: str) -> tuple[int, list[str], str]:
    """pytest on the imported domain with ``agent``: its exit status, the tasks that failed, and
    its summary counts."""
    r = subprocess.run([sys.executable, "-m", "pytest", "telecom", f"--sandtable-agent={agent}", "--sandtable-k=1",
                        "-q", "-rf", "-p", "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=900)
    failed = sorted(re.findall(r"^FAILED telecom/sandtable\.yaml::(\S+)\[1-1\]", r.stdout, re.MULTILINE))
    counts = re.findall(r"^=* ?(\d+ (?:passed|failed)(?:, \d+ (?:passed|failed))*) in ", r.stdout, re.MULTILINE)
    return r.returncode, failed, counts[-1] if counts else r.stdout[-2000:]


def test_a_do_nothing_agent_passes_no_imported_task(tmp_path: Path) -> None:
    imported(tmp_path, FIXTURE)
    assert run(tmp_path, "agents:do_nothing") == (1, [DATA_OFF, ROAMING, HISTORY], "3 failed")


def test_the_reference_agent_still_passes_every_task(tmp_path: Path) -> None:
    imported(tmp_path, FIXTURE)
    assert run(tmp_path, "reference") == (0, [], "3 passed")


def test_one_wrong_instruction_is_followed_and_fails(tmp_path: Path) -> None:
    """Asked to toggle roaming where the gold toggles mobile data, the caller toggles roaming (and
    not mobile data): the data-off task fails on its assertion; the roaming task, whose reference
    never asks for mobile data, and the history task pass."""
    imported(tmp_path, FIXTURE)
    assert run(tmp_path, "agents:one_wrong") == (1, [DATA_OFF], "1 failed, 2 passed")
    results = sorted((tmp_path / ".sandtable" / "runs").glob("*/results.json"))[-1].read_text(encoding="utf-8")
    line = next(line for line in results.splitlines() if f'"task":"{DATA_OFF}"' in line)
    trial = json.loads(line.strip().rstrip(","))
    assert [(c["tool"], c["args"]) for c in trial["calls"] if c.get("by") == "user"] == [
        ("toggle_roaming", {}), ("set_network_mode_preference", {"mode": "4g_5g_preferred"})]
    assert [(c["id"], c.get("counted", True)) for c in trial["checks"] if not c["passed"]] == [
        ("called:user:toggle_data", False), ("assert:assert_mobile_data_status", True)]


def test_each_request_is_heard_as_its_own_instruction_only() -> None:
    """The words the reference says for each instruction match that instruction's pattern and no
    other's, so that the caller makes the call it was asked for, and no second one."""
    from pytest_sandtable.importer.tau2_telecom import INSTRUCTIONS, ask

    for name, args, _, _ in INSTRUCTIONS:
        heard = [(n, a) for n, a, _, pattern in INSTRUCTIONS if re.search(pattern, ask(name, args), re.IGNORECASE)]
        assert heard == [(name, args)], ask(name, args)
    assert ask("toggle_airplane_mode", {}) == "Please toggle airplane mode on your phone, and tell me when it is done."


@pytest.mark.skipif(not TAU2, reason="TAU2_BENCH_PATH is not set (τ²-bench's checkout)")
def test_tau2s_telecom_a_do_nothing_agent_passes_none_of_114(tmp_path: Path) -> None:
    imported(tmp_path, Path(str(TAU2)) / "data" / "tau2" / "domains" / "telecom")
    status, failed, counts = run(tmp_path, "agents:do_nothing")
    assert (status, len(failed), counts) == (1, 114, "114 failed")
    assert run(tmp_path, "reference") == (0, [], "114 passed")


def test_lint_notes_the_instructions_the_reference_never_gives(tmp_path: Path) -> None:
    """The call lines the reference never triggers are what the caller does if asked: one note per
    task, not a warning per line (lint exits 0); no task passes when the agent does nothing."""
    out = imported(tmp_path, FIXTURE)
    r = subprocess.run([sys.executable, "-m", "pytest_sandtable", "lint", str(out / "sandtable.yaml")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    notes = [line.split(": note: ", 1)[1] for line in r.stdout.splitlines() if ": note: " in line]
    assert (r.returncode, notes) == (0, [
        f"{DATA_OFF}: 2 call lines of the scripted user never said when the reference runs (toggle_roaming, "
        "set_network_mode_preference): what the caller does if an agent asks for it; no expectation needs them",
        f"{ROAMING}: 3 call lines of the scripted user never said when the reference runs (toggle_data, "
        "set_network_mode_preference): what the caller does if an agent asks for it; no expectation needs them",
        f"{HISTORY}: 4 call lines of the scripted user never said when the reference runs (toggle_data, "
        "toggle_roaming, set_network_mode_preference): what the caller does if an agent asks for it; no "
        "expectation needs them",
    ])
