"""`import tau2 data/tau2/domains/telecom -o DIR`: τ²'s telecom domain (dual control) as a domain file.

Always run: the importer on a small fictional carrier in τ²'s telecom layout
(tests/data/tau2_repo: TOML data, the two toolkits' source, three tasks), the written
YAML read back with yaml.safe_load and compared key for key, and the bad inputs. With
TAU2_BENCH_PATH set (τ²-bench's checkout), τ²'s own telecom domain: its counts and two
of its tasks, key for key. The domain file uses the dual-control keys (user_world,
user_tools, sync, setup, expect.assert, basis) that the loader learns with issue 22's
other parts, so it is read here as YAML, not loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_sandtable.importer.templates import tau2_telecom_handlers as tel

HERE = Path(__file__).resolve().parent
REPO = HERE / "data" / "tau2_repo"
FIXTURE = REPO / "data" / "tau2" / "domains" / "telecom"
TEMPLATE = HERE.parent / "pytest_sandtable" / "importer" / "templates" / "tau2_telecom_handlers.py"
H = "tau2_telecom_handlers"
NEXT = "OK. What next?"
DATA = {"reply_matches": "toggle_data(?!_)|(?:turn|switch|toggle|enable|disable)[^.?!]{0,20}mobile data(?! saver)"}
ROAM = {"reply_matches": "toggle_roaming|(?:turn|switch|toggle|enable|disable)[^.?!]{0,20}roaming"}
MODE = "(?:set_network_mode_preference|network (?:mode|type))[^.?!]{0,40}(?:"
FOUR = {"reply_matches": MODE + "4g_5g_preferred|4g ?/ ?5g)"}
TWO = {"reply_matches": MODE + "2g[ _]only)"}


def asks(what: str) -> dict[str, str]:
    return {"say": f"Please {what} on your phone, and tell me when it is done."}


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_sandtable", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


def _fails(r: subprocess.CompletedProcess[str], message: str) -> None:
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"error: {message}\n")


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("telecom") / "out"
    r = cli("import", "tau2", FIXTURE, "-o", out, cwd=out.parent)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.splitlines() == [
        f"wrote {out / 'sandtable.yaml'} (8 tools, 3 tasks of the base split; 1 plans, 1 customers, 1 lines, "
        "1 bills, 1 devices, 1 device, 1 surroundings)",
        f"wrote {out / 'tau2_telecom_handlers.py'}",
        f"next: python -m pytest_sandtable lint {out / 'sandtable.yaml'}",
    ]
    assert (out / "tau2_telecom_handlers.py").read_bytes() == TEMPLATE.read_bytes()
    return yaml.safe_load((out / "sandtable.yaml").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A copy of the fixture's checkout to break; its telecom data folder."""
    return Path(shutil.copytree(REPO, tmp_path / "tau2-bench")) / "data" / "tau2" / "domains" / "telecom"


def test_both_worlds_both_toolkits_and_the_sync(doc: dict[str, Any]) -> None:
    assert list(doc) == ["version", "name", "description", "policy", "clock", "world", "user_world", "tools",
                         "user_tools", "sync", "tasks"]
    assert doc["policy"] == ("<main_policy>\n# Fictional carrier policy\n\nHelp callers with their phone.\n\n"
                             "</main_policy>\n<tech_support_policy>\n# Fictional tech support manual\n\nAsk the "
                             "caller to check the status bar.\n\n</tech_support_policy>")
    assert doc["clock"] == {"now": "2025-02-25T12:08:00-05:00"}
    assert list(doc["world"]) == ["plans", "customers", "lines", "bills", "devices"]
    assert doc["world"]["lines"]["key"] == "line_id"
    assert doc["world"]["lines"]["rows"] == [{
        "line_id": "L1", "phone_number": "555-000-0101", "status": "Active", "plan_id": "P1", "data_used_gb": 1.0,
        "data_refueling_gb": 0.0, "roaming_enabled": False, "device_id": None, "contract_end_date": None,
        "last_plan_change_date": None, "last_sim_replacement_date": None, "suspension_start_date": None}]
    assert doc["world"]["devices"]["rows"][0]["imei"] is None  # τ²'s None default, absent from db.toml
    assert list(doc["user_world"]) == ["device", "surroundings"]
    assert doc["user_world"]["device"]["rows"] == [{"id": "phone", **tel.DEFAULT_DEVICE, "battery_level": 64}]
    assert doc["user_world"]["surroundings"]["rows"] == [{"id": "user", **tel.DEFAULT_SURROUNDINGS}]
    assert [t["name"] for t in doc["tools"]] == ["get_customer_by_id", "enable_roaming", "refuel_data",
                                                 "transfer_to_human_agents"]
    assert doc["tools"][3] == {"name": "transfer_to_human_agents", "description": "Transfer the user to a human agent.",
                               "params": {"summary": {"type": "string",
                                                      "description": "A summary of the user's issue."}},
                               "handler": f"{H}:transfer_to_human_agents", "handoff": True}
    assert doc["user_tools"] == [
        {"name": "check_status_bar", "description": "Shows the phone's status bar.",
         "handler": f"{H}:check_status_bar"},
        {"name": "toggle_data", "description": "Toggles mobile data ON or OFF.", "handler": f"{H}:toggle_data"},
        {"name": "toggle_roaming", "description": "Toggles data roaming ON or OFF.",
         "handler": f"{H}:toggle_roaming"},
        {"name": "set_network_mode_preference", "description": "Changes the network the phone prefers.",
         "params": {"mode": {"type": "string", "enum": ["4g_5g_preferred", "2g_only"]}},  # the Enum's values
         "handler": f"{H}:set_network_mode_preference"},
    ]
    assert doc["sync"] == f"{H}:sync"


def test_setup_steps_user_calls_and_assertions(doc: dict[str, Any]) -> None:
    task = doc["tasks"][0]
    assert task == {
        "id": "telecom-mobile_data_issue-data_mode_off-PERSONA-None",
        "description": "τ² telecom task [mobile_data_issue]data_mode_off[PERSONA:None] (base split); reward basis: "
                       "ENV_ASSERTION. Purpose: Data is off on the phone.",
        "setup": [
            {"handler": f"{H}:set_user_info", "args": {"name": "Ada Quill", "phone_number": "555-000-0101"}},
            {"handler": f"{H}:turn_data_off", "args": {}},
            {"call": "set_network_mode_preference", "args": {"mode": "2g_only"}, "by": "user"},  # a user tool
        ],
        "user": {"instructions": "Your mobile data does not work.\n\nYou are Ada Quill with phone number "
                                 "555-000-0101.\n\nDo what the agent asks.",
                 "say_unknown": NEXT,  # what the caller says after acting, or when asked nothing it can do
                 # each gold user action waits for the agent to ask for it; then every other instruction
                 "script": ["Hi, I need some help.", {"call": "toggle_data", "args": {}, "when": DATA},
                            {"call": "set_network_mode_preference", "args": {"mode": "4g_5g_preferred"},
                             "when": FOUR},
                            {"call": "toggle_roaming", "args": {}, "when": ROAM},
                            {"call": "set_network_mode_preference", "args": {"mode": "2g_only"}, "when": TWO}]},
        "expect": {
            "called": [{"tool": "toggle_data", "by": "user"},
                       {"tool": "set_network_mode_preference", "args": {"mode": "4g_5g_preferred"}, "by": "user"}],
            "assert": [{"function": f"{H}:assert_mobile_data_status", "args": {"expected_status": True}}],
            "basis": ["assert"],  # τ²'s ENV_ASSERTION: the called checks are recorded, not counted
        },
        "reference": [asks("toggle mobile data"), asks("set your network mode preference to 4G/5G preferred"),
                      {"say": "Done. Is there anything else?"}],
    }


def test_both_sides_setup_compare_args_communicate_info_and_judge(doc: dict[str, Any]) -> None:
    task = doc["tasks"][1]
    assert task["id"] == "telecom-mobile_data_issue-user_abroad_roaming_disabled_off.data_usage_exceeded-PERSONA-Easy"
    assert task["user_given"] == [{"update": {"table": "device", "key": "phone", "set": {"battery_level": 20}}}]
    assert task["setup"][2:] == [
        {"handler": f"{H}:set_data_usage", "args": {"customer_id": "C1", "line_id": "L1", "data_used_gb": 5.5}},
        {"call": "enable_roaming", "args": {"customer_id": "C1", "line_id": "L1"}},  # an agent tool: by agent
    ]
    assert task["user"]["instructions"].startswith("You are patient.\n\nYou are abroad")  # the persona first
    assert task["expect"] == {
        "reply_includes": ["2.0 GB"],
        "called": [{"tool": "toggle_roaming", "by": "user"},
                   {"tool": "refuel_data", "args": {"line_id": "L1", "gb_amount": 2.0}},  # compare_args
                   {"tool": "check_status_bar", "by": "user"}],  # compare_args []: the name alone
        "assert": [{"function": f"{H}:assert_mobile_data_status", "args": {"expected_status": True}},
                   {"function": f"{H}:assert_data_refueling_amount",
                    "args": {"customer_id": "C1", "line_id": "L1", "expected_amount": 2.0}}],
        "basis": ["assert", "called"],
    }
    assert task["judge"] == {"nl-assertion-1": "Did the agent do as this says: The agent confirms the price before "
                                               "refueling."}
    # τ²'s order: the user's action, the agent's, the user's; each user action asked for in a turn of its own
    assert task["user"]["script"] == [
        "Hi, I need some help.", {"call": "toggle_roaming", "args": {}, "when": ROAM},
        {"call": "check_status_bar", "args": {}, "when": {"reply_matches": "\\bcheck_status_bar\\b"}},  # no wording
        {"call": "toggle_data", "args": {}, "when": DATA},
        {"call": "set_network_mode_preference", "args": {"mode": "4g_5g_preferred"}, "when": FOUR},
        {"call": "set_network_mode_preference", "args": {"mode": "2g_only"}, "when": TWO}]
    assert task["reference"] == [
        asks("toggle data roaming"),
        {"call": "refuel_data", "args": {"customer_id": "C1", "line_id": "L1", "gb_amount": 2.0}},
        asks("use check_status_bar"), {"say": "Here is what you asked for: 2.0 GB."}]


def test_a_message_history_is_the_conversation_prefix(doc: dict[str, Any]) -> None:
    task = doc["tasks"][2]
    assert task["history"] == [
        {"role": "user", "say": "My phone is broken."},
        {"role": "agent", "say": "I found your account.",
         "calls": [{"call": "get_customer_by_id", "args": {"customer_id": "C1"}}]},
        {"role": "user", "say": "Get me a human."},
    ]
    # the history ends with the user's message: the agent speaks first, no opening; a plain line to start from
    assert task["user"]["script"] == [
        {"call": "toggle_data", "args": {}, "when": DATA}, {"call": "toggle_roaming", "args": {}, "when": ROAM},
        {"call": "set_network_mode_preference", "args": {"mode": "4g_5g_preferred"}, "when": FOUR},
        {"call": "set_network_mode_preference", "args": {"mode": "2g_only"}, "when": TWO}, NEXT]
    assert task["expect"] == {"called": [{"tool": "transfer_to_human_agents"}], "basis": ["called"]}


def test_a_split(tmp_path: Path) -> None:
    r = cli("import", "tau2", FIXTURE, "-o", tmp_path / "o", "--split", "test", cwd=tmp_path)
    assert r.stdout.splitlines()[0].startswith(f"wrote {tmp_path / 'o' / 'sandtable.yaml'} (8 tools, 1 task of the "
                                               "test split;")
    doc = yaml.safe_load((tmp_path / "o" / "sandtable.yaml").read_text(encoding="utf-8"))
    assert [t["id"] for t in doc["tasks"]] == ["telecom-service_issue-history-PERSONA-None"]


# -- bad input ---------------------------------------------------------------------------------------


def test_a_folder_without_telecoms_files(tmp_path: Path) -> None:
    (tmp_path / "telecom").mkdir()
    (tmp_path / "telecom" / "tasks.json").write_text("[]", encoding="utf-8")
    _fails(cli("import", "tau2", "telecom", "-o", "out", cwd=tmp_path),
           "telecom: not τ²'s telecom folder (no db.toml, user_db.toml, main_policy.md, tech_support_manual.md); "
           "expected data/tau2/domains/telecom with db.toml, user_db.toml, tasks.json, main_policy.md and "
           "tech_support_manual.md")
    assert not (tmp_path / "out").exists()


def test_a_data_file_that_does_not_parse(repo_copy: Path, tmp_path: Path) -> None:
    (repo_copy / "db.toml").write_text("[[plans]\nplan_id = 1\n", encoding="utf-8")
    r = cli("import", "tau2", repo_copy, "-o", "out", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith(f"error: {repo_copy / 'db.toml'}: not valid TOML: ") and r.stderr.count("\n") == 1
    (repo_copy / "tasks.json").write_text('[\n  {"id": "0",\n', encoding="utf-8")
    (repo_copy / "db.toml").write_text("", encoding="utf-8")
    _fails(cli("import", "tau2", repo_copy, "-o", "out", cwd=tmp_path),
           f"{repo_copy / 'tasks.json'}:3: not valid JSON: Expecting property name enclosed in double quotes")


def test_a_user_tool_without_a_handler(repo_copy: Path, tmp_path: Path) -> None:
    tools = repo_copy.parents[3] / "src" / "tau2" / "domains" / "telecom" / "user_tools.py"
    text = tools.read_text(encoding="utf-8")
    tools.write_text(text + '\n    @is_tool(ToolType.WRITE)\n    def factory_reset(self) -> str:\n'
                     '        """Erase the phone."""\n', encoding="utf-8")
    line = len(text.splitlines()) + 3
    r = cli("import", "tau2", repo_copy, "-o", "out", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith(f"error: {tools}:{line}: unknown tool 'factory_reset': tau2_telecom_handlers.py has "
                               "no handler for it (it has: can_send_mms, check_apn_settings, ")


def test_a_task_calling_a_tool_the_side_lacks(repo_copy: Path, tmp_path: Path) -> None:
    tasks = json.loads((repo_copy / "tasks.json").read_text(encoding="utf-8"))
    tasks[0]["evaluation_criteria"]["actions"][0]["requestor"] = "assistant"  # toggle_data is the phone's
    (repo_copy / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    _fails(cli("import", "tau2", repo_copy, "-o", "out", cwd=tmp_path),
           f"{repo_copy / 'tasks.json'}: task '[mobile_data_issue]data_mode_off[PERSONA:None]': action 1 calls "
           "'toggle_data', which is not a tool of this domain")
    tasks[0]["evaluation_criteria"]["actions"][0]["requestor"] = "user"
    tasks[0]["initial_state"]["initialization_actions"][1]["func_name"] = "melt_sim_card"
    (repo_copy / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    _fails(cli("import", "tau2", repo_copy, "-o", "out", cwd=tmp_path),
           f"{repo_copy / 'tasks.json'}: task '[mobile_data_issue]data_mode_off[PERSONA:None]': initialization "
           "action 2: user function 'melt_sim_card' has no handler in tau2_telecom_handlers.py")


def test_a_split_the_domain_lacks(repo_copy: Path, tmp_path: Path) -> None:
    splits = json.loads((repo_copy / "split_tasks.json").read_text(encoding="utf-8"))
    del splits["small"]
    (repo_copy / "split_tasks.json").write_text(json.dumps(splits), encoding="utf-8")
    _fails(cli("import", "tau2", repo_copy, "-o", "out", "--split", "small", cwd=tmp_path),
           f"{repo_copy / 'split_tasks.json'}: no split 'small' (it has: base, test, train)")


def test_a_missing_toolkit_source(repo_copy: Path, tmp_path: Path) -> None:
    src = repo_copy.parents[3] / "src" / "tau2" / "domains" / "telecom"
    (src / "user_tools.py").unlink()
    _fails(cli("import", "tau2", repo_copy, "-o", "out", cwd=tmp_path),
           f"{src / 'user_tools.py'}: missing; expected τ²'s toolkit source (give --source <src/tau2/domains/NAME>)")


# -- τ²'s own telecom (TAU2_BENCH_PATH) ---------------------------------------------------------------------

TAU2 = os.environ.get("TAU2_BENCH_PATH")
needs_tau2 = pytest.mark.skipif(not TAU2, reason="TAU2_BENCH_PATH is not set (τ²-bench's checkout)")


@needs_tau2
def test_tau2s_telecom(tmp_path: Path) -> None:
    out = tmp_path / "telecom"
    r = cli("import", "tau2", Path(str(TAU2)) / "data" / "tau2" / "domains" / "telecom", "-o", out, cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout.splitlines()[0]) == (
        0, "", f"wrote {out / 'sandtable.yaml'} (43 tools, 114 tasks of the base split; 5 plans, 4 customers, "
               "9 lines, 6 bills, 9 devices, 1 device, 1 surroundings)")
    doc = yaml.safe_load((out / "sandtable.yaml").read_text(encoding="utf-8"))
    assert (len(doc["tools"]), len(doc["user_tools"])) == (13, 30)
    tasks = {t["id"]: t for t in doc["tasks"]}
    assert len(tasks) == 114
    refuel = tasks["telecom-mobile_data_issue-data_mode_off.data_usage_exceeded-PERSONA-None"]
    assert refuel["setup"] == [
        {"handler": f"{H}:set_user_info", "args": {"name": "John Smith", "phone_number": "555-123-2002"}},
        {"handler": f"{H}:turn_data_off", "args": {}},
        {"handler": f"{H}:set_data_usage", "args": {"customer_id": "C1001", "line_id": "L1002", "data_used_gb": 15.1}},
    ]
    assert refuel["expect"] == {
        "called": [{"tool": "toggle_data", "by": "user"},
                   {"tool": "refuel_data", "args": {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 2.0}}],
        "assert": [{"function": f"{H}:assert_mobile_data_status", "args": {"expected_status": True}},
                   {"function": f"{H}:assert_internet_speed", "args": {"expected_speed": 200,
                                                                      "expected_desc": "excellent"}},
                   {"function": f"{H}:assert_data_refueling_amount",
                    "args": {"customer_id": "C1001", "line_id": "L1002", "expected_amount": 2.0}}],
        "basis": ["assert"],
    }
    assert refuel["user"]["script"][:2] == ["Hi, I need some help.", {"call": "toggle_data", "args": {}, "when": DATA}]
    assert len(refuel["user"]["script"]) == 25  # the opening, the gold toggle_data, 23 other instructions
    assert refuel["reference"] == [
        asks("toggle mobile data"),
        {"call": "refuel_data", "args": {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 2.0}},
        {"say": "Done. Is there anything else?"}]
    bases = [t["expect"]["basis"] for t in tasks.values()]
    assert (bases.count(["assert"]), bases.count(["assert", "called"])) == (94, 20)


TAU2_PYTHON = os.environ.get("SANDTABLE_TAU2_PYTHON")
needs_oracle = pytest.mark.skipif(
    not (TAU2 and TAU2_PYTHON),
    reason="TAU2_BENCH_PATH or SANDTABLE_TAU2_PYTHON is not set (τ²-bench's checkout, and the Python 3.12 "
    "that has it installed: benchmarks/README.md, 'τ²-bench agreement')")
# a service issue with a payment (dropping its reboot after the line is resumed still gets reward 1.0: the
# reseat of the SIM that follows searches the network anyway), a mobile data issue, an MMS issue
SAMPLE = ("[service_issue]airplane_mode_on|overdue_bill_suspension|unseat_sim_card[PERSONA:Easy],"
          "[mobile_data_issue]data_mode_off|data_usage_exceeded[PERSONA:None],"
          "[mms_issue]airplane_mode_on|bad_network_preference|bad_wifi_calling|break_apn_mms_setting|"
          "break_app_storage_permission|data_mode_off|data_usage_exceeded|unseat_sim_card[PERSONA:Easy]")


@needs_oracle
@pytest.mark.parametrize(("level", "how"), [
    ("engine", "an engine trial each (reference agent, scripted user)"),
    ("handlers", "the handlers graded on τ²'s basis"),
])
def test_the_engines_verdicts_and_worlds_agree_with_tau2s(tmp_path: Path, level: str, how: str) -> None:
    """Each list of the three tasks (gold, each agent write dropped, each argument of one changed,
    each user action dropped; the do-nothing agent's; each user action replaced by one wrong
    instruction) as an engine trial of the imported domain (its scripted user as imported, doing
    what the agent asks; the reference agent playing the list, or the do-nothing agent), and as the
    handlers alone: the verdicts equal τ²'s rewards (and each reward component), the final carrier
    DB and phone equal τ²'s field by field, and (engine) each call of the trial succeeds or fails as
    τ²'s. The do-nothing agent passes none, as in τ²; a wrong instruction passes where τ² says so."""
    r = subprocess.run([sys.executable, str(HERE.parent / "benchmarks" / "bench_tau2_agreement.py"),
                        "--tau2", str(TAU2), "--python", str(TAU2_PYTHON), "--domain", "telecom",
                        "--level", level, "--task-ids", SAMPLE], cwd=tmp_path, capture_output=True, text=True,
                       timeout=1800)
    assert (r.returncode, r.stderr) == (0, "")
    head, verdicts, data, parts, *rest = r.stdout.splitlines()
    assert head.startswith("telecom: 3 tasks (base split), 46 action lists (")
    assert head.endswith(f" s); {how}")
    assert verdicts == "  verdict = τ² reward: 46/46 (ours passed 6, τ² gave 1.0 to 6)"
    assert data == "  same final data:     46/46"
    assert parts == "  per component:       ENV_ASSERTION 46/46"
    assert rest == [
        *(["  same calls:          46/46 (each call's tool, side and failure as τ²'s)"] if level == "engine" else []),
        "  reference agent, each list: 30/30 (ours passed 4, τ² gave 1.0 to 4)",
        "  do-nothing agent:         3/3 (ours passed 0, τ² gave 1.0 to 0)",
        "  one wrong instruction:     13/13 (ours passed 2, τ² gave 1.0 to 2)",
    ]
