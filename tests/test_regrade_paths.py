"""``regrade`` finds the domain files a run names where the run was, reads no file outside
the current directory and the run's folder, parses no file before its sha256 says it is
the one the run used (or that one is in git), and imports an edited copy's handler
module from the copy's own folder. Runs are made by pytest or the real engine and
written by the real writer; the command runs as ``main`` does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _sandtable_shop import run_dirs
from test_regrade import DOMAIN, make_run, regrade

from pytest_sandtable.report.results_json import RunMeta, build_results, read_results, write_run

SHOP = """\
version: 1
name: shop
description: A shop.
policy: Refund delivered orders only.
world:
  orders:
    key: order_id
    rows:
      - { order_id: O-1, status: delivered, note: "" }
tools:
  - name: refund
    params: { order_id: { type: string } }
    handler: handlers:refund
tasks:
  - id: refund-o1
    user:
      persona: Kim, a customer.
      opening: "Please refund O-1."
      script: ["Thanks."]
    expect:
      state: [{ table: orders, key: O-1, fields: { status: refunded } }]
    reference:
      - call: refund
        args: { order_id: O-1 }
      - say: "Refunded O-1."
"""

HANDLERS = '''\
def refund(args, world, ctx):
    world.update("orders", args["order_id"], {"status": "refunded"})
    return {"refunded": args["order_id"]}
'''

# the copy's module: the same result for the call, one more field written
COPY_HANDLERS = HANDLERS.replace('{"status": "refunded"}', '{"status": "refunded", "note": "by the copy"}')


@pytest.fixture
def no_handlers_module() -> Iterator[None]:
    """The tests import a top-level ``handlers``: none before, none left after."""
    sys.modules.pop("handlers", None)
    yield
    sys.modules.pop("handlers", None)


def test_regrade_from_another_folder_finds_the_domain_where_pytest_ran(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (pytester.path / "sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    assert pytester.runpytest_subprocess("--sandtable-k=2").ret == 0
    (run,) = run_dirs(pytester.path)
    capsys.readouterr()
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    code, out, err = regrade(capsys, str(run / "results.json"), "-o", "regraded")
    assert (code, err) == (0, [])
    domain = pytester.path / "sandtable.yaml"
    assert out[0] == f"sandtable: regraded 2 trials of desk against {domain}: no verdict changed"
    assert read_results(Path("regraded"))["run"]["regraded"]["domains"][0]["path"] == str(domain)


def test_an_edited_copy_in_another_folder_is_graded_with_its_own_handler_module(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], no_handlers_module: None,
) -> None:
    (pytester.path / "sandtable.yaml").write_text(SHOP, encoding="utf-8")
    (pytester.path / "handlers.py").write_text(HANDLERS, encoding="utf-8")
    assert pytester.runpytest_subprocess("--sandtable-k=2").ret == 0
    (run,) = run_dirs(pytester.path)
    capsys.readouterr()
    copy = tmp_path_factory.mktemp("copy")
    (copy / "sandtable.yaml").write_text(
        SHOP.replace("fields: { status: refunded }", 'fields: { status: refunded, note: "by the copy" }'),
        encoding="utf-8")
    (copy / "handlers.py").write_text(COPY_HANDLERS, encoding="utf-8")
    monkeypatch.chdir(copy)
    # the run's own module would leave the note empty and fail both trials
    code, out, err = regrade(capsys, str(run), "sandtable.yaml", "-o", "regraded")
    assert (code, err) == (0, [])
    assert out[0] == "sandtable: regraded 2 trials of shop against sandtable.yaml: no verdict changed"
    trials = read_results(copy / "regraded")["trials"]
    assert [t["diff"]["changed"][0]["fields"]["note"] for t in trials] == [{"before": "", "after": "by the copy"}] * 2


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_file_edited_in_place_is_regraded_from_another_folder_with_the_original_from_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    run = project / ".sandtable" / "runs" / "20260301T093012Z-desk"
    run.parent.mkdir(parents=True)
    shutil.move(make_run(project), run)  # where pytest writes a run
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "sandtable.yaml"], ["commit", "-qm", "desk"]):
        subprocess.run([*git, *args], cwd=project, check=True)
    edited = DOMAIN.replace("    arg: rate\n", "    arg: rate\n    soft: true\n")
    (project / "sandtable.yaml").write_text(edited, encoding="utf-8")
    monkeypatch.chdir(elsewhere)
    code, out, err = regrade(capsys, str(run), "-o", "regraded")
    assert (code, err) == (1, [])  # trial 3 still fails
    assert out[0] == (f"sandtable: regraded 3 trials of desk against {project / 'sandtable.yaml'}: "
                      "1 verdict changed (1 failed → passed)")


def _run_naming(folder: Path, path: str) -> Path:
    """A run of one trial (by make_run's engine) whose run.domains names ``path``."""
    make_run(folder)
    doc = read_results(folder / "run")
    meta = RunMeta(domains=[dict(doc["run"]["domains"][0], path=path)], agent="desk", user="scripted", k=3,
                   run_seed=0)
    return write_run(build_results(doc["trials"], meta), folder / "named")


@pytest.mark.parametrize("path", ["/etc/passwd", "../../x", "sub/../../x"])
@pytest.mark.parametrize("given", [[], ["sandtable.yaml"]])
def test_a_recorded_path_outside_the_run_is_refused_and_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], path: str, given: list[str],
) -> None:
    here = tmp_path / "a" / "b"
    here.mkdir(parents=True)
    (tmp_path / "x").write_text("root:x:0:0:secret line\n", encoding="utf-8")
    monkeypatch.chdir(here)
    _run_naming(here, path)
    assert regrade(capsys, "named", *given, "-o", "regraded") == (2, [], [
        f"error: cannot regrade desk: named names its domain file '{path}', not a path inside the current "
        "directory or the run's folder, so it is not read",
    ])
    assert not (here / "regraded").exists()


def test_a_file_that_is_not_the_one_the_run_used_is_never_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    run = make_run(tmp_path)
    sha = read_results(run)["run"]["domains"][0]["sha256"]
    (tmp_path / "sandtable.yaml").write_text("secret: [not a domain\n", encoding="utf-8")
    assert regrade(capsys, "run", "-o", "regraded") == (2, [], [
        f"error: cannot regrade desk: sandtable.yaml is not the domain file the run used (sha256 {sha[:12]}) and "
        "no git history holds that one, so what the agent was given cannot be compared: save the edit as a copy, "
        "put the file the run used back at sandtable.yaml (or in git), and regrade with the copy: "
        "regrade run COPY.yaml -o DIR",
    ])


def test_the_run_folder_is_searched_and_a_pipe_there_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    run = make_run(project)
    shutil.move(project / "sandtable.yaml", run / "sandtable.yaml")  # the run folder as its own rootdir
    monkeypatch.chdir(elsewhere)
    code, out, err = regrade(capsys, str(run), "-o", "regraded")
    assert (code, err) == (1, [])
    assert out[0] == f"sandtable: regraded 3 trials of desk against {run / 'sandtable.yaml'}: no verdict changed"
    # a pipe in place of the file: neither read (it would block) nor parsed
    (run / "sandtable.yaml").unlink()
    os.mkfifo(run / "sandtable.yaml")
    sha = read_results(run)["run"]["domains"][0]["sha256"]
    assert regrade(capsys, str(run), "-o", "regraded2") == (2, [], [
        f"error: cannot regrade desk: {run / 'sandtable.yaml'} is not the domain file the run used (sha256 "
        f"{sha[:12]}) and no git history holds that one, so what the agent was given cannot be compared: save the "
        f"edit as a copy, put the file the run used back at {run / 'sandtable.yaml'} (or in git), and regrade with "
        f"the copy: regrade {run} COPY.yaml -o DIR",
    ])


def test_two_folders_handler_modules_of_one_name_are_each_their_own(tmp_path: Path, no_handlers_module: None) -> None:
    from pytest_sandtable import load_domain
    from pytest_sandtable.domain.handlers import handler_folder, resolve_handler

    domains = []
    for name, module in (("run", HANDLERS), ("copy", COPY_HANDLERS), ("run", HANDLERS)):
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        (folder / "handlers.py").write_text(module, encoding="utf-8")
        (folder / "sandtable.yaml").write_text(SHOP, encoding="utf-8")
        domains.append(load_domain(folder / "sandtable.yaml"))
    first, copy, again = (resolve_handler("handlers:refund", handler_folder(d.path)) for d in domains)
    assert first is again and first is not copy
    assert [Path(f.__code__.co_filename).parent.name for f in (first, copy)] == ["run", "copy"]
    assert Path(sys.modules["handlers"].__file__ or "").parent.name == "run"  # the first one imported stays
