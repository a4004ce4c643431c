"""`python -m pytest_sandtable import tau2 PATH -o DIR`: a τ²-bench domain as a sandtable domain.

Always run: the importer on a small fictional domain in τ²'s layout
(tests/data/tau2_repo: the data folder and the toolkit's source), its domain run by the
real engine and by pytest, and every bad input. With TAU2_BENCH_PATH set (τ²-bench's
checkout), τ²'s airline and retail import and lint; with SANDTABLE_TAU2_PYTHON set too
(the Python that has τ² installed), a sample of τ²'s tasks is graded by τ²'s own
evaluator and by us (benchmarks/bench_tau2_agreement.py runs them all).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_sandtable as st
from pytest_sandtable.engine.reference_world import reference_world
from pytest_sandtable.engine.trial import apply_given
from pytest_sandtable.importer.tau2 import tau2_data

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent
REPO = HERE / "data" / "tau2_repo"
FIXTURE = REPO / "data" / "tau2" / "domains" / "retail"
TEMPLATE = HERE.parent / "pytest_sandtable" / "importer" / "templates" / "tau2_retail_handlers.py"


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_sandtable", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture domain imported once for this module (a process imports a handler
    module from one folder only); the domain file's path."""
    out = tmp_path_factory.mktemp("imported") / "out"
    r = cli("import", "tau2", FIXTURE, "-o", out, cwd=out.parent)
    assert (r.returncode, r.stderr) == (0, "")
    return out / "sandtable.yaml"


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A copy of the fixture's checkout to break; the data folder of its domain."""
    return Path(shutil.copytree(REPO, tmp_path / "tau2-bench")) / "data" / "tau2" / "domains" / "retail"


def _fails(r: subprocess.CompletedProcess[str], message: str) -> None:
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"error: {message}\n")


# -- writing -------------------------------------------------------------------------------


def test_import_writes_the_domain_and_the_handler_module(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = cli("import", "tau2", FIXTURE, "-o", out, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.splitlines() == [
        f"wrote {out / 'sandtable.yaml'} (5 tools, 3 tasks of the base split; 1 products, 2 users, 2 orders)",
        f"wrote {out / 'tau2_retail_handlers.py'}",
        f"next: python -m pytest_sandtable lint {out / 'sandtable.yaml'}",
    ]
    assert (out / "tau2_retail_handlers.py").read_bytes() == TEMPLATE.read_bytes()
    r = cli("import", "tau2", FIXTURE, "-o", tmp_path / "test", "--split", "test", cwd=tmp_path)
    assert r.stdout.splitlines()[0] == (
        f"wrote {tmp_path / 'test' / 'sandtable.yaml'} (5 tools, 1 task of the test split; "
        "1 products, 2 users, 2 orders)")
    assert [t.id for t in st.load_domain(tmp_path / "test" / "sandtable.yaml").tasks] == ["retail-002"]


def test_the_toolkit_is_read_from_its_source(imported: Path) -> None:
    domain = st.load_domain(imported)
    assert domain.name == "tau2-retail"
    assert domain.policy == (FIXTURE / "policy.md").read_text(encoding="utf-8")
    # the @is_tool methods in source order; a helper without the decorator is not a tool
    assert list(domain.tools) == ["get_user_details", "get_order_details", "cancel_pending_order",
                                  "get_item_details", "transfer_to_human_agents"]
    cancel = domain.tools["cancel_pending_order"]
    assert cancel.description == "Cancel a pending order."
    # a Literal alias of data_model.py becomes an enum; a docstring entry continued on a line is one text
    schema = cancel.input_schema()
    assert schema["properties"]["reason"] == {
        "type": "string", "description": "Why the order is cancelled.",
        "enum": ["no longer needed", "ordered by mistake"]}
    assert domain.tools["get_order_details"].input_schema()["properties"]["order_id"]["description"] == (
        "The order id, such as '#W0000001'. Be careful to include the '#'.")
    # Optional[List[Model]] with a default: an optional array of the model's fields
    notes = domain.tools["get_item_details"].input_schema()
    assert notes["required"] == ["item_id"]
    assert notes["properties"]["notes"]["items"]["properties"]["text"] == {
        "type": "string", "description": "What the note says"}
    assert domain.tools["transfer_to_human_agents"].handoff


def test_tasks_keep_the_reward_basis(imported: Path) -> None:
    domain = st.load_domain(imported)
    by_id = {t.id: t for t in domain.tasks}
    assert list(by_id) == ["retail-000", "retail-001", "retail-002"]
    # DB: the final world must be the gold actions' world
    assert by_id["retail-000"].expect.world_matches_reference
    assert [s.call for s in by_id["retail-000"].reference] == ["get_order_details", "cancel_pending_order", None]
    # NL_ASSERTION: the task's judged criteria (never counted), the task graded on the rest of its basis
    assert by_id["retail-001"].description == (
        "τ² retail task 1 (base split); reward basis: DB, NL_ASSERTION. NL assertions: the task's judge: "
        "criteria (nl-assertion-1), judged with --sandtable-judge, never counted in the verdict.")
    [criterion] = by_id["retail-001"].judge
    assert (criterion.id, criterion.question) == (
        "nl-assertion-1", "Did the agent do as this says: Agent should refuse to cancel a delivered order.")
    assert by_id["retail-001"].expect.reply_includes == []
    assert by_id["retail-000"].judge == ()
    # COMMUNICATE: communicate_info as reply checks, said by the reference's last reply
    assert by_id["retail-002"].expect.reply_includes == ["10.0"]
    assert by_id["retail-002"].reference[-1].say == "Here is what you asked for: 10.0."


def test_the_gold_actions_make_the_reference_world(imported: Path) -> None:
    domain = st.load_domain(imported)
    world = reference_world(domain, domain.task("retail-000"), 0, apply_given)
    data = tau2_data("retail", {t: world.rows(t) for t in domain.tables})
    order = data["orders"]["#W0000001"]
    assert (order["status"], order["cancel_reason"]) == ("cancelled", "ordered by mistake")
    assert order["payment_history"][-1] == {"transaction_type": "refund", "amount": 25.5,
                                            "payment_method_id": "gift_card_1"}
    assert data["users"]["ada_park_1001"]["payment_methods"]["gift_card_1"]["balance"] == 35.5


def test_the_imported_domain_passes_with_the_reference_agent(imported: Path, pytester: pytest.Pytester) -> None:
    for p in imported.parent.iterdir():
        if p.is_file():
            shutil.copy(p, pytester.path / p.name)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "--sandtable-k=1")
    result.assert_outcomes(passed=3)


# -- bad input -------------------------------------------------------------------------------


def test_a_folder_that_is_not_a_tau2_domain(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    _fails(cli("import", "tau2", "empty", "-o", "out", cwd=tmp_path),
           "empty: not a τ² domain folder (no db.json, tasks.json, policy.md); expected a folder such as "
           "data/tau2/domains/airline with db.json, tasks.json and policy.md")
    _fails(cli("import", "tau2", "nowhere", "-o", "out", cwd=tmp_path),
           "nowhere: no such folder; expected a τ² domain folder such as data/tau2/domains/airline")
    assert not (tmp_path / "out").exists()


def test_banking_waits_for_hidden_tools_and_retrieval(tmp_path: Path) -> None:
    (tmp_path / "banking_knowledge").mkdir()
    _fails(cli("import", "tau2", "banking_knowledge", "-o", "out", cwd=tmp_path),
           "banking_knowledge: τ² domain 'banking_knowledge' cannot be imported yet: its agent unlocks hidden tools "
           "and searches a knowledge base, which sandtable domains cannot say yet; importable: airline, retail, "
           "telecom")


def test_a_task_file_that_does_not_parse(repo_copy: Path, tmp_path: Path) -> None:
    (repo_copy / "tasks.json").write_text('[\n  {"id": "0",\n', encoding="utf-8")
    _fails(cli("import", "tau2", repo_copy, "-o", "out", cwd=tmp_path),
           f"{repo_copy / 'tasks.json'}:3: not valid JSON: Expecting property name enclosed in double quotes")


def test_a_tool_without_a_handler(repo_copy: Path, tmp_path: Path) -> None:
    tools = repo_copy.parents[3] / "src" / "tau2" / "domains" / "retail" / "tools.py"
    text = tools.read_text(encoding="utf-8")
    tools.write_text(text + '\n    @is_tool(ToolType.WRITE)\n    def refund_everything(self, order_id: str) -> str:\n'
                     '        """Refund it all."""\n', encoding="utf-8")
    line = len(text.splitlines()) + 3
    _fails(cli("import", "tau2", repo_copy, "-o", "out", cwd=tmp_path),
           f"{tools}:{line}: unknown tool 'refund_everything': tau2_retail_handlers.py has no handler for it "
           "(it has: calculate, cancel_pending_order, exchange_delivered_order_items, find_user_id_by_email, "
           "find_user_id_by_name_zip, get_item_details, get_order_details, get_product_details, get_user_details, "
           "list_all_product_types, modify_pending_order_address, modify_pending_order_items, "
           "modify_pending_order_payment, modify_user_address, return_delivered_order_items, "
           "transfer_to_human_agents)")


def test_a_task_calling_a_tool_the_domain_lacks(repo_copy: Path, tmp_path: Path) -> None:
    tasks = json.loads((repo_copy / "tasks.json").read_text(encoding="utf-8"))
    tasks[0]["evaluation_criteria"]["actions"][1]["name"] = "refund_everything"
    (repo_copy / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    _fails(cli("import", "tau2", repo_copy, "-o", "out", cwd=tmp_path),
           f"{repo_copy / 'tasks.json'}: task '0': action 2 calls 'refund_everything', which is not a tool of "
           "this domain")


def test_a_split_the_domain_lacks(repo_copy: Path, tmp_path: Path) -> None:
    _fails(cli("import", "tau2", repo_copy, "-o", "out", "--split", "small", cwd=tmp_path),
           f"{repo_copy / 'split_tasks.json'}: no split 'small' (it has: base, test, train)")


def test_a_missing_toolkit_source(repo_copy: Path, tmp_path: Path) -> None:
    src = repo_copy.parents[3] / "src" / "tau2" / "domains" / "retail"
    (src / "tools.py").unlink()
    _fails(cli("import", "tau2", repo_copy, "-o", "out", cwd=tmp_path),
           f"{src / 'tools.py'}: missing; expected τ²'s toolkit source (give --source <src/tau2/domains/NAME>)")


# -- τ² itself (TAU2_BENCH_PATH, SANDTABLE_TAU2_PYTHON) -------------------------------------------

TAU2 = os.environ.get("TAU2_BENCH_PATH")
TAU2_PYTHON = os.environ.get("SANDTABLE_TAU2_PYTHON")
needs_tau2 = pytest.mark.skipif(not TAU2, reason="TAU2_BENCH_PATH is not set (τ²-bench's checkout)")
needs_oracle = pytest.mark.skipif(
    not (TAU2 and TAU2_PYTHON),
    reason="TAU2_BENCH_PATH or SANDTABLE_TAU2_PYTHON is not set (τ²-bench's checkout, and the Python 3.12 "
    "that has it installed: benchmarks/README.md, 'τ²-bench agreement')")
COUNTS = {"airline": "14 tools, 50 tasks of the base split; 300 flights, 500 users, 2000 reservations",
          "retail": "16 tools, 114 tasks of the base split; 50 products, 500 users, 1000 orders"}
# a spread of tasks: the first, ones in the middle (retail 5: judge-gated), the last
SAMPLE = {"retail": "0,5,63,113", "airline": "0,13,37,49"}


@needs_tau2
@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_tau2s_domains_import_and_lint(domain: str, tmp_path: Path) -> None:
    out = tmp_path / domain
    r = cli("import", "tau2", Path(str(TAU2)) / "data" / "tau2" / "domains" / domain, "-o", out, cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout.splitlines()[0]) == (
        0, "", f"wrote {out / 'sandtable.yaml'} ({COUNTS[domain]})")
    r = cli("lint", out / "sandtable.yaml", cwd=tmp_path)
    assert (r.returncode, [line for line in r.stdout.splitlines() if ": error: " in line]) == (0, [])


@needs_oracle
@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_tau2s_tasks_agree_with_tau2s_evaluator(domain: str, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(HERE.parent / "benchmarks" / "bench_tau2_agreement.py"),
                        "--tau2", str(TAU2), "--python", str(TAU2_PYTHON), "--domain", domain,
                        "--task-ids", SAMPLE[domain]],
                       cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert (r.returncode, r.stderr) == (0, "")
    head, verdicts, data = r.stdout.splitlines()
    lists = int(head.split(", ")[1].split()[0])
    assert head.startswith(f"{domain}: 4 tasks (base split), {lists} action lists (")
    assert verdicts.startswith(f"  verdict = τ² reward: {lists}/{lists} (")
    assert data == f"  same final data:     {lists}/{lists}"
