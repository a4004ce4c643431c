"""docs/results.md tells the schema version the writer writes (its example was left at
1.1 while files were 1.3)."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_sandtable.report.results_json import SCHEMA_VERSION

DOC = Path(__file__).parent.parent / "docs" / "results.md"


def test_the_layout_example_and_the_versioning_name_the_current_schema_version() -> None:
    text = DOC.read_text(encoding="utf-8")
    layout = text[text.index("## Layout") :]
    assert re.findall(r'"schema_version": "([0-9.]+)"', layout)[:1] == [SCHEMA_VERSION]
    assert re.findall(r"`schema_version` is `MAJOR.MINOR` \(now `([0-9.]+)`\)", text) == [SCHEMA_VERSION]
