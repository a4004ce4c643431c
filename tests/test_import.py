"""`python -m pytest_sandtable import tau-bench PATH -o DIR`: a τ-bench env as a domain.

Always run: the importer on a small fictional env in τ-bench's shape
(tests/data/tau_env/retail), its domain run by the real engine and by pytest, the
handlers' semantics on that data, the new `world_matches_reference` grading, and every
bad input. With TAU_BENCH_PATH set (the folder holding τ-bench's ``tau_bench/``), a
sample of τ-bench's own tasks is replayed through τ-bench's code and ours
(benchmarks/bench_tau_agreement.py runs them all).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.engine.reference_world import reference_world
from pytest_sandtable.engine.trial import apply_given
from pytest_sandtable.importer.tau_bench import tau_data

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "data" / "tau_env" / "retail"
TEMPLATE = HERE.parent / "pytest_sandtable" / "importer" / "templates" / "tau_retail_handlers.py"


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_sandtable", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def _import(folder: Path) -> Path:
    r = cli("import", "tau-bench", FIXTURE, "-o", folder / "out", cwd=folder)
    assert (r.returncode, r.stderr) == (0, "")
    return folder / "out" / "sandtable.yaml"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture env imported once for this module; the domain file's path. Once: a
    process imports a handler module from one folder only (a second folder's module of
    the same name is refused), and these tests load the domain in this process."""
    return _import(tmp_path_factory.mktemp("imported"))


@pytest.fixture
def env_copy(tmp_path: Path) -> Path:
    """A copy of the fixture env to break."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "envs" / "retail"))


# -- writing -------------------------------------------------------------------------------


def test_import_writes_the_domain_and_the_handler_module(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = cli("import", "tau-bench", FIXTURE, "-o", out, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.splitlines() == [
        f"wrote {out / 'sandtable.yaml'} (8 tools, 3 tasks, 1 rule from the policy; 2 users, 3 orders, 1 products)",
        f"wrote {out / 'tau_retail_handlers.py'}",
        f"next: python -m pytest_sandtable lint {out / 'sandtable.yaml'}",
    ]
    assert (out / "tau_retail_handlers.py").read_bytes() == TEMPLATE.read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["sandtable.yaml", "tau_retail_handlers.py"]


def test_the_domain_keeps_tools_tasks_data_and_policy(imported: Path) -> None:
    domain = st.load_domain(imported)
    assert domain.name == "tau-retail"
    assert domain.policy == (FIXTURE / "wiki.md").read_text(encoding="utf-8")
    # ALL_TOOLS' order, each named by its handler; the handoff tool ends the conversation
    assert list(domain.tools) == [
        "find_user_id_by_email", "get_user_details", "get_order_details", "cancel_pending_order",
        "modify_pending_order_payment", "calculate", "think", "transfer_to_human_agents",
    ]
    assert domain.tools["cancel_pending_order"].handler == "tau_retail_handlers:cancel_pending_order"
    assert domain.tools["transfer_to_human_agents"].handoff is True
    assert domain.tools["cancel_pending_order"].input_schema()["properties"]["reason"]["enum"] == [
        "no longer needed", "ordered by mistake"]
    # users.json has no id field: the key is added as user_id, and taken away again for τ-bench
    assert [t.key for t in domain.tables.values()] == ["user_id", "order_id", "product_id"]
    assert domain.tables["users"].rows[0]["user_id"] == "ada_lane_1"
    assert [t.id for t in domain.tasks] == ["retail-test-000", "retail-test-001", "retail-test-002"]
    first, second = domain.tasks[0], domain.tasks[1]
    assert first.description == "τ-bench retail test task 0, user ada_lane_1."
    assert first.user.instructions.startswith("You are Ada Lane (ada.lane@example.com). You ordered")
    assert first.expect.world_matches_reference is True
    assert [(s.call, s.args) for s in first.reference[:-1]] == [
        ("find_user_id_by_email", {"email": "ada.lane@example.com"}),
        ("get_order_details", {"order_id": "#C100"}),
        ("cancel_pending_order", {"order_id": "#C100", "reason": "ordered by mistake"}),
    ]
    assert second.expect.reply_includes == ["50.25"]
    assert second.reference[-1].say == "Here is what you asked for: 50.25."
    # of the policy's rules, only those whose sentence this wiki.md states, word for word
    [rule] = domain.invariants
    assert (rule.id, rule.kind, rule.tool) == ("cancel-pending-orders-only", "require", "cancel_pending_order")
    assert rule.source_quote == ("An order can only be cancelled if its status is 'pending', and you should check "
                                 "its status before taking the action.")


def test_a_schema_keyword_params_lack_goes_into_the_description(env_copy: Path, tmp_path: Path) -> None:
    tool = env_copy / "tools" / "calculate.py"
    tool.write_text(tool.read_text(encoding="utf-8").replace(
        '"description": "Such as \'2 + 2\'."', '"description": "Such as \'2 + 2\'.", "maxLength": 200'),
        encoding="utf-8")
    assert cli("import", "tau-bench", env_copy, "-o", "out", cwd=tmp_path).returncode == 0
    text = (tmp_path / "out" / "sandtable.yaml").read_text(encoding="utf-8")
    want = '      expression: {"type": "string", "description": "Such as \'2 + 2\'. (schema: maxLength: 200)"}\n'
    assert want in text


def test_lint_replays_every_reference(imported: Path, tmp_path: Path) -> None:
    r = cli("lint", imported, cwd=tmp_path)
    line = imported.read_text(encoding="utf-8").splitlines().index("  - id: retail-test-002") + 1
    lines = r.stdout.splitlines()
    start = next(i for i, text in enumerate(lines) if text.startswith("policy coverage: "))
    assert (r.returncode, lines[:start]) == (0, [
        f"{imported}:{line}: note: retail-test-002: reference call 3 modify_pending_order_payment returns an "
        "error (409 insufficient gift card balance to pay for the order); fine if the task is about that",
        f"{imported}:{line}: note: retail-test-002: passes when the agent does nothing (every expectation says "
        "what must not happen); a `called` expectation would check the agent engaged",
    ])


def test_the_imported_domain_runs_under_pytest(imported: Path, pytester: pytest.Pytester) -> None:
    for p in imported.parent.iterdir():
        shutil.copy(p, pytester.path / p.name)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=3)


# -- the handlers, through the engine -------------------------------------------------------


def _world_after(domain: st.Domain, task_id: str) -> dict[str, Any]:
    task = domain.task(task_id)
    world = reference_world(domain, task, 0, apply_given)
    return tau_data("retail", {t: world.rows(t) for t in domain.tables})


def test_cancelling_refunds_a_gift_card_at_once(imported: Path) -> None:
    domain = st.load_domain(imported)
    data = _world_after(domain, "retail-test-000")
    assert data["users"]["ada_lane_1"]["payment_methods"]["gift_card_11"]["balance"] == 64.75
    assert "user_id" not in data["users"]["ada_lane_1"]
    order = data["orders"]["#C100"]
    assert (order["status"], order["cancel_reason"]) == ("cancelled", "ordered by mistake")
    assert order["payment_history"] == [
        {"transaction_type": "payment", "amount": 24.25, "payment_method_id": "gift_card_11"},
        {"transaction_type": "refund", "amount": 24.25, "payment_method_id": "gift_card_11"},
    ]
    untouched = _world_after(domain, "retail-test-001")
    assert untouched["orders"]["#C100"]["status"] == "pending"


def test_a_wrong_cancellation_fails_field_by_field(imported: Path) -> None:
    domain = st.load_domain(imported)
    wrong = [("find_user_id_by_email", {"email": "ada.lane@example.com"}),
             ("cancel_pending_order", {"order_id": "#C100", "reason": "no longer needed"}), "Done."]
    result = st.run_trial(domain, domain.task("retail-test-000"), Playbook(wrong), st.ScriptedUser())
    assert result.verdict == "failed"
    [check] = result.failed_checks
    assert (check.kind, check.id) == ("state", "state:world_matches_reference")
    assert check.detail == (
        '1 row differs from the reference\'s world: orders #C100: cancel_reason is "no longer needed", '
        'expected "ordered by mistake"'
    )


def test_doing_nothing_fails_and_names_every_field(imported: Path) -> None:
    domain = st.load_domain(imported)
    result = st.run_trial(domain, domain.task("retail-test-000"), Playbook(["Sorry."]), st.ScriptedUser())
    [check] = result.failed_checks
    assert check.detail == (
        "2 rows differ from the reference's world: users ada_lane_1: payment_methods.gift_card_11.balance is 40.5, "
        'expected 64.75 | orders #C100: status is "pending", expected "cancelled"; payment_history lacks 1 item '
        'at the end: [{"amount": 24.25, "payment_method_id": "gift_card_11", "transaction_type": "refund"}]; '
        'cancel_reason is absent, expected "ordered by mistake"'
    )


def test_errors_are_tool_errors_with_tau_benchs_words(imported: Path) -> None:
    domain = st.load_domain(imported)
    calls = [
        ("cancel_pending_order", {"order_id": "#C101", "reason": "no longer needed"}),
        ("cancel_pending_order", {"order_id": "#C999", "reason": "no longer needed"}),
        ("get_user_details", {"user_id": "nobody"}),
        ("modify_pending_order_payment", {"order_id": "#C200", "payment_method_id": "paypal_21"}),
        ("find_user_id_by_email", {"email": "BO.REYES@example.com"}),
        ("get_user_details", {"user_id": "bo_reyes_2"}),
    ]
    result = st.run_trial(domain, domain.task("retail-test-001"), Playbook([*calls, "ok"]), st.ScriptedUser())
    shown = [c["error"] if not c["ok"] else c["result"] for c in result.calls]
    # the policy's rule saw the attempt before the tool refused it
    assert [(v.invariant, v.call) for v in result.violations] == [("cancel-pending-orders-only", 0)]
    assert shown[:5] == [
        {"code": 409, "message": "non-pending order cannot be cancelled"},
        {"code": 404, "message": "order not found"},
        {"code": 404, "message": "user not found"},
        {"code": 409, "message": "the new payment method should be different from the current one"},
        "bo_reyes_2",
    ]
    assert list(shown[5]) == ["name", "address", "email", "payment_methods", "orders"]  # no user_id, as τ-bench


@pytest.mark.parametrize(("expression", "shown"), [
    ("24.25 + 26.0", "50.25"),
    ("  2 ** 3 ", "8.0"),
    ("7 // 2 - -1", "4.0"),
    ("(1 + 2) / 3 * 100", "100.0"),
    ("1 / 3", "0.33"),
    ("1 / 0", {"code": 400, "message": "division by zero"}),
    ("2 + a", {"code": 400, "message": "invalid characters in expression"}),
    ("2 +", {"code": 400, "message": "invalid syntax (<string>, line 1)"}),
    ("9 ** 9 ** 9", {"code": 400, "message": "exponent too large"}),
])
def test_calculate_reads_arithmetic_without_eval(imported: Path, expression: str, shown: Any) -> None:
    domain = st.load_domain(imported)
    agent = Playbook([("calculate", {"expression": expression}), "ok"])
    [call] = st.run_trial(domain, domain.task("retail-test-001"), agent, st.ScriptedUser()).calls
    assert (call["result"] if call["ok"] else call["error"]) == shown


class Playbook:
    """Plays one turn: tool calls (tool, args) and a reply string, in order."""

    def __init__(self, steps: list[Any]) -> None:
        self.steps = steps

    def __call__(self, turn: st.Turn) -> str:
        if turn.state.get("done"):
            return ""
        turn.state["done"] = True
        reply = ""
        for step in self.steps:
            if isinstance(step, str):
                reply = step
            else:
                turn.call_tool(*step)
        return reply


# -- bad input -----------------------------------------------------------------------------


def _fails(r: subprocess.CompletedProcess[str], message: str) -> None:
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"error: {message}\n")


def test_a_folder_that_is_not_an_env(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    _fails(cli("import", "tau-bench", "empty", "-o", "out", cwd=tmp_path),
           "empty: not a τ-bench env folder (no tools, data, wiki.md, tasks_test.py); expected a folder such as "
           "tau_bench/envs/retail with tools/, data/, wiki.md and tasks_test.py")
    _fails(cli("import", "tau-bench", "nowhere", "-o", "out", cwd=tmp_path),
           "nowhere: no such folder; expected a τ-bench env folder such as tau_bench/envs/retail")
    assert not (tmp_path / "out").exists()


def test_an_env_without_handlers(env_copy: Path, tmp_path: Path) -> None:
    bank = env_copy.rename(env_copy.parent / "bank")
    _fails(cli("import", "tau-bench", bank, "-o", "out", cwd=tmp_path),
           f"{bank}: τ-bench env 'bank' has no handler module here; known: airline, retail")


def test_a_missing_data_file(env_copy: Path, tmp_path: Path) -> None:
    (env_copy / "data" / "orders.json").unlink()
    _fails(cli("import", "tau-bench", env_copy, "-o", "out", cwd=tmp_path),
           f"{env_copy / 'data' / 'orders.json'}: missing; a τ-bench env's data/ holds users.json, orders.json, "
           "products.json")
    assert not (tmp_path / "out").exists()


def test_a_data_file_that_is_not_json(env_copy: Path, tmp_path: Path) -> None:
    (env_copy / "data" / "products.json").write_text('{"700": {"name": "Teapot",}\n', encoding="utf-8")
    _fails(cli("import", "tau-bench", env_copy, "-o", "out", cwd=tmp_path),
           f"{env_copy / 'data' / 'products.json'}:1: not valid JSON: "
           "Expecting property name enclosed in double quotes")


def test_an_unknown_tool(env_copy: Path, tmp_path: Path) -> None:
    text = (env_copy / "tools" / "think.py").read_text(encoding="utf-8")
    (env_copy / "tools" / "refund_all.py").write_text(text.replace('"think"', '"refund_all"'), encoding="utf-8")
    init = env_copy / "tools" / "__init__.py"
    init.write_text(init.read_text(encoding="utf-8").replace(
        "from .think import Think\n", "from .think import Think\nfrom .refund_all import RefundAll\n").replace(
        "    Think,\n", "    Think,\n    RefundAll,\n"), encoding="utf-8")
    _fails(cli("import", "tau-bench", env_copy, "-o", "out", cwd=tmp_path),
           f"{env_copy / 'tools' / 'refund_all.py'}: unknown tool 'refund_all': tau_retail_handlers.py has no handler "
           "for it (it has: calculate, cancel_pending_order, exchange_delivered_order_items, find_user_id_by_email, "
           "find_user_id_by_name_zip, get_order_details, get_product_details, get_user_details, "
           "list_all_product_types, modify_pending_order_address, modify_pending_order_items, "
           "modify_pending_order_payment, modify_user_address, return_delivered_order_items, think, "
           "transfer_to_human_agents)")


def test_a_schema_that_is_computed_is_refused_not_run(env_copy: Path, tmp_path: Path) -> None:
    tool = env_copy / "tools" / "think.py"
    tool.write_text(tool.read_text(encoding="utf-8").replace('"name": "think"', '"name": "th" + "ink".upper()'),
                    encoding="utf-8")
    line = next(i for i, t in enumerate(tool.read_text(encoding="utf-8").splitlines(), 1) if "return {" in t)
    _fails(cli("import", "tau-bench", env_copy, "-o", "out", cwd=tmp_path),
           f"{tool}:{line}: get_info()'s return value is not a literal "
           "(the import reads τ-bench's files, never runs them)")


def test_a_task_calling_a_tool_the_env_lacks(env_copy: Path, tmp_path: Path) -> None:
    tasks = env_copy / "tasks_test.py"
    text = tasks.read_text(encoding="utf-8")
    tasks.write_text(text.replace('name="calculate"', 'name="calculator"'), encoding="utf-8")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if 'name="calculate"' in t)
    _fails(cli("import", "tau-bench", env_copy, "-o", "out", cwd=tmp_path),
           f"{tasks}:{line}: task 1 calls 'calculator', which is not a tool of this env")


def test_an_output_path_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("x", encoding="utf-8")
    _fails(cli("import", "tau-bench", FIXTURE, "-o", "out", cwd=tmp_path), "out: exists and is not a folder")


def test_an_output_folder_in_use_needs_force(tmp_path: Path) -> None:
    imported = _import(tmp_path)
    out = imported.parent
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    before = imported.read_bytes()
    _fails(cli("import", "tau-bench", FIXTURE, "-o", out, cwd=tmp_path),
           f"{out}: exists and is not empty; pass --force to write into it")
    imported.write_text("edited", encoding="utf-8")
    r = cli("import", "tau-bench", FIXTURE, "-o", out, "--force", cwd=tmp_path)
    assert r.returncode == 0
    assert imported.read_bytes() == before
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"


# -- τ-bench itself (TAU_BENCH_PATH) ----------------------------------------------------------

TAU_BENCH = os.environ.get("TAU_BENCH_PATH")
needs_tau_bench = pytest.mark.skipif(
    not TAU_BENCH, reason="TAU_BENCH_PATH is not set (the folder holding τ-bench's tau_bench/ package)")
# a spread of tasks: the first, ones in the middle, the last
SAMPLE = {"retail": "0,27,63,114", "airline": "0,13,37,49"}


@needs_tau_bench
@pytest.mark.parametrize("env", ["retail", "airline"])
def test_tau_benchs_tasks_agree_with_tau_bench(env: str, tmp_path: Path) -> None:
    # a process of its own: the benchmark imports τ-bench (the oracle) and its own copy of the domain
    r = subprocess.run([sys.executable, str(HERE.parent / "benchmarks" / "bench_tau_agreement.py"),
                        "--tau-bench", str(TAU_BENCH), "--env", env, "--task-ids", SAMPLE[env]],
                       cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert (r.returncode, r.stderr) == (0, "")
    head, verdicts, data, observations = r.stdout.splitlines()
    lists = int(head.split(", ")[1].split()[0])
    assert head.startswith(f"{env}: 4 tasks, {lists} action lists (")
    assert verdicts == f"  verdict = τ-bench reward: {lists}/{lists}"
    assert data == f"  same final data:          {lists}/{lists}"
    calls = int(observations.split("/")[1].split()[0])
    assert observations == f"  same observation:         {calls}/{calls} calls"
