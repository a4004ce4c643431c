"""Big domain files: every problem at its line and column however big the file is,
with or without anchors and aliases (which take the fast path too), and a file past
the size cap refused at once with one line (docs/spec.md, "Limits")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_sandtable.cli import main
from pytest_sandtable.domain import yaml_reader as _yaml
from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import MAX_FILE_BYTES, load_domain, load_domain_text

# More rows than the 200,000 values after which positions used to stop being
# recorded (11 values a row: the row and its 10 fields), and still a load of about a
# second.
ROWS = 20_000
LINES_BEFORE_ROWS = 7


def row(i: int) -> str:
    return (
        f"      - {{ load_id: P-{i}, origin: Town {i % 500}, destination: Town {(i * 7) % 500}, "
        f"equipment: dry_van, pickup: '2026-06-01', weight: {20000 + i}, posted: {1500 + i % 90}, "
        f"max_rate: {300000 + i}, status: available, note: row {i} }}"
    )


def big_domain(rows: list[str], *, params: str, tail: str) -> str:
    """A domain whose tables come first (``rows`` of loads), then two tools (the first
    with ``params``) and a task ending in ``tail``."""
    return (
        "version: 1\n"
        "name: big\n"
        "world:\n"
        "  loads:\n"
        "    key: load_id\n"
        "    rows:\n"
        "      - { load_id: L-1, origin: Atlanta, status: &available available }\n" + "\n".join(rows) + "\ntools:\n"
        f"  - name: search_loads\n    params: {params}\n"
        "    ops: [{ list: { table: loads, where: { origin: $origin } } }]\n"
        "  - name: book_load\n    params: { load_id: { type: string } }\n"
        "    ops: [{ update: { table: loads, key: $load_id, set: { status: booked } } }]\n"
        "tasks:\n"
        "  - id: find-a-load\n"
        "    user: { opening: 'Anything out of Atlanta?' }\n"
        "    expect: { called: [search_loads] }\n"
        f"    reference:\n{tail}"
    )


def problems(text: str) -> list[str]:
    with pytest.raises(DomainError) as info:
        load_domain_text(text, "big.sandtable.yaml")
    return [str(p) for p in info.value.problems]


def test_problems_at_the_end_of_a_big_file_have_their_line_and_column() -> None:
    rows = [row(i) for i in range(ROWS)]
    rows[ROWS - 2] = rows[ROWS - 2].replace(f"load_id: P-{ROWS - 2},", "load_id: P-17,")  # a key twice
    text = big_domain(
        rows,
        params="{ origin: { type: strng } }",
        tail="      - { call: search_lodas, args: { origin: Atlanta } }\n      - say: Here they are.\n",
    )
    assert _yaml._fast_load(text, "big.sandtable.yaml") is not None
    end = LINES_BEFORE_ROWS + ROWS
    assert problems(text) == [
        f"big.sandtable.yaml:{end - 1}:20: world.loads.rows[{ROWS - 1}].load_id: duplicate key 'P-17' in table "
        f"loads (first at line {LINES_BEFORE_ROWS + 1 + 17})",
        f"big.sandtable.yaml:{end + 3}:31: tools[0].params.origin.type: found 'strng', expected one of string, "
        "number, integer, boolean, object, array; did you mean 'string'?",
        f"big.sandtable.yaml:{end + 13}:17: tasks[0].reference[0].call: unknown tool 'search_lodas'; "
        "did you mean 'search_loads'?",
    ]


def test_a_big_file_with_anchors_and_aliases_takes_the_fast_path_and_points_at_the_same_places() -> None:
    # a status aliased in most rows, a row merged into every 1,000th, params shared by
    # two tools: about 30,000 values repeated, under the cap of 100,000
    rows = [row(i).replace("status: available", "status: *available") for i in range(ROWS)]
    rows[0] = rows[0].replace("- {", "- &row {", 1)
    for i in range(1000, ROWS, 1000):
        rows[i] = rows[i].replace("- { load_id:", "- { <<: *row, load_id:", 1)
    rows[ROWS - 2] = rows[ROWS - 2].replace(f"load_id: P-{ROWS - 2},", "load_id: P-17,")
    text = big_domain(
        rows,
        params="&params { origin: { type: strng } }",
        tail="      - { call: search_lodas, args: { origin: Atlanta } }\n      - say: Here they are.\n",
    ).replace("params: { load_id: { type: string } }", "params: *params")
    fast = _yaml._fast_load(text, "big.sandtable.yaml")
    assert fast is not None
    assert fast.data["world"]["loads"]["rows"][5]["status"] == "available"
    assert fast.data["world"]["loads"]["rows"][ROWS - 1]["load_id"] == "P-17"
    end = LINES_BEFORE_ROWS + ROWS
    assert problems(text) == [
        f"big.sandtable.yaml:{end - 1}:20: world.loads.rows[{ROWS - 1}].load_id: duplicate key 'P-17' in table "
        f"loads (first at line {LINES_BEFORE_ROWS + 1 + 17})",
        # the shared params are wrong once, where they are written, for both tools
        f"big.sandtable.yaml:{end + 3}:39: tools[0].params.origin.type: found 'strng', expected one of string, "
        "number, integer, boolean, object, array; did you mean 'string'?",
        f"big.sandtable.yaml:{end + 3}:39: tools[1].params.origin.type: found 'strng', expected one of string, "
        "number, integer, boolean, object, array; did you mean 'string'?",
        # (book_load's ops are its own, and it now has search_loads' params)
        f"big.sandtable.yaml:{end + 7}:42: tools[1].ops[0].update.key: unknown param '$load_id' of tool "
        "book_load; expected one of: $origin",
        f"big.sandtable.yaml:{end + 13}:17: tasks[0].reference[0].call: unknown tool 'search_lodas'; "
        "did you mean 'search_loads'?",
    ]


def test_a_problem_merged_into_a_row_is_where_the_merged_value_is_written() -> None:
    rows = [row(i) for i in range(ROWS)]
    rows[0] = "      - &row { load_id: P-0, origin: Town 0, wieght: 5, status: *available }"
    rows[ROWS - 1] = f"      - {{ <<: *row, load_id: P-{ROWS - 1} }}"
    fields = "load_id, origin, destination, equipment, pickup, weight, posted, max_rate, status, note"
    text = big_domain(rows, params="{ origin: { type: string } }", tail="      - say: Here they are.\n")
    text = text.replace("    key: load_id\n", f"    key: load_id\n    fields: [{fields}]\n", 1)
    assert _yaml._fast_load(text, "big.sandtable.yaml") is not None
    typo = "unknown field 'wieght' of table loads; did you mean 'weight'?"
    assert problems(text) == [
        f"big.sandtable.yaml:9:46: world.loads.rows[1].wieght: {typo}",
        f"big.sandtable.yaml:9:46: world.loads.rows[{ROWS}].wieght: {typo}",
    ]


# --------------------------------------------------------------------------- the size cap


@pytest.fixture
def file_of_100_mb(tmp_path: Path) -> Path:
    path = tmp_path / "sandtable.yaml"
    with path.open("wb") as f:  # sparse: no disk, and refused before a byte is read
        f.truncate(100 * 2**20)
    assert os.stat(path).st_size > MAX_FILE_BYTES
    return path


CAP = "the file is 104,857,600 bytes; a domain file may be at most 64 MB (67,108,864 bytes)"


def test_a_100_mb_domain_file_is_refused_with_one_line(file_of_100_mb: Path) -> None:
    with pytest.raises(DomainError) as info:
        load_domain(file_of_100_mb)
    assert str(info.value) == f"{file_of_100_mb}: {CAP}"


def test_validate_refuses_a_100_mb_domain_file_with_one_line(
    file_of_100_mb: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(file_of_100_mb.parent)
    assert main(["validate", "sandtable.yaml"]) == 2
    out = capsys.readouterr()
    assert out.out == f"sandtable.yaml: {CAP}\n"
    assert out.err == ""


def test_pytest_reports_a_100_mb_domain_file_as_one_collection_error(
    pytester: pytest.Pytester, file_of_100_mb: Path
) -> None:
    os.replace(file_of_100_mb, pytester.path / "sandtable.yaml")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the gate: a domain file did not load
    result.stdout.fnmatch_lines(["*ERROR collecting sandtable.yaml*", f"sandtable.yaml: {CAP}"])
    assert "Traceback" not in result.stdout.str()
