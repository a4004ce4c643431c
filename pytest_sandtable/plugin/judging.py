"""``--sandtable-judge`` at the end of a run: each graded trial's ``judge:`` criteria asked
of the panel, the ``judged`` object put in results.json, the terminal's lines.

It runs in ``pytest_sessionfinish`` after the results were built and the gate evaluated
(artifacts.py), on the stored trials read back one at a time, so that nothing it finds
can reach a verdict, a gate or the exit status. A failure is one line and never the
run's end (docs/judges.md, "Never gating").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from .config import RUN_STATE, RunConfig

JUDGE_CACHE = ".sandtable/judge-cache"
"""Where verdicts are cached by content, under the rootdir (judge/cache.py)."""


def judge_results(config: pytest.Config, results: Any) -> list[str]:
    """Judge the run's trials into ``results["judged"]``; the terminal's lines."""
    run = RunConfig.of(config)
    if run.judge is None or not results["trials"]:
        return []
    try:
        from ..judge.calibrate import CALIBRATION_FILE
        from ..judge.panel import Panel, PanelOptions
        from ..judge.run import judge_trials
        from ..judge.spec import parse_panel
        from ..report.prices import all_prices
        from ..report.terminal import judged_lines

        root = Path(config.rootpath)
        options = PanelOptions(timeout=run.timeout, retries=run.retries, max_cost=run.judge_max_cost,
                               cache_dir=root / JUDGE_CACHE, replay_only=run.record == "none",
                               prices=run.prices if run.prices is not None else all_prices())
        panel = Panel(parse_panel(run.judge), options)
        judged = judge_trials(results["trials"], _domains(config, run, root), panel,
                              calibration=_calibration(root / CALIBRATION_FILE), concurrency=run.concurrency)
        if judged is None:
            return ["sandtable: --sandtable-judge: no trial of this run has a judge: criterion to ask"]
        results["judged"] = judged
        return judged_lines(judged)
    except Exception as e:  # judging is a report: never the run's end
        return [f"sandtable: judged scores not computed: {type(e).__name__}: {e}"]


def _domains(config: pytest.Config, run: RunConfig, root: Path) -> Any:
    """A stored trial's domain: the run's own when this process loaded it, else loaded
    from its file (the xdist controller loads none)."""
    loaded: dict[str, Any] = {}
    if RUN_STATE in config.stash:
        from .session import run_state

        for path, dom in run_state(config).domains.items():
            loaded[_rel(Path(path), root)] = dom

    def domain_of(t: Mapping[str, Any]) -> Any:
        location = str(t.get("location") or "")
        path = location.rpartition(":")[0] if ":" in location else location
        if path not in loaded:
            from ..domain.cache import load_domain_cached

            try:
                loaded[path] = load_domain_cached(root / path, run.domain_cache_dir if run.domain_cache else None)
            except Exception:  # a domain that no longer loads: its trials are not judged
                loaded[path] = None
        return loaded[path]

    return domain_of


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.name


def _calibration(path: Path) -> Mapping[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
