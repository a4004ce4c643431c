"""A `matches` or `reply_matches` pattern is at most 10,000 characters (docs/spec.md,
"Limits"; issue 21 #14): a 10 MB one took 1.6 GB and 10 s of CPU to compile, and
validated "ok". Past the cap it is refused at its line, without being compiled."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_validate import GOOD

import pytest_sandtable as st

PATTERN_MAX = 10_000  # docs/spec.md, "Limits"


def domain_with(tmp_path: Path, state: str = "", script: str = "") -> Path:
    text = GOOD.replace(
        '    user: { opening: "Hi, about L-1001." }\n',
        '    user: { opening: "Hi, about L-1001."' + script + " }\n" + state,
    )
    path = tmp_path / "sandtable.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(st.DomainError) as caught:
        st.load_domain(path)
    return [str(p) for p in caught.value.problems]


def state(pattern: str) -> str:
    return (
        "    expect:\n      state:\n"
        f'        - {{ table: loads, where: {{ status: {{ matches: "{pattern}" }} }}, count: 0 }}\n'
    )


def test_the_cap_is_the_documented_one() -> None:
    from pytest_sandtable.domain import check

    assert check.PATTERN_MAX == PATTERN_MAX
    assert "| A `matches` or `reply_matches` pattern | 10,000 characters" in (
        Path(__file__).parent.parent / "docs" / "spec.md"
    ).read_text(encoding="utf-8")


def test_a_pattern_at_the_cap_loads(tmp_path: Path) -> None:
    path = domain_with(tmp_path, state("a" * PATTERN_MAX))
    assert st.load_domain(path).tasks[0].id == "book-happy-path"


def test_a_matches_pattern_past_the_cap_is_refused_at_its_line(tmp_path: Path) -> None:
    path = domain_with(tmp_path, state("a" * (PATTERN_MAX + 1)))
    line = path.read_text(encoding="utf-8").splitlines().index(state("a" * (PATTERN_MAX + 1)).splitlines()[2]) + 1
    assert problems(path) == [
        f"{path}:{line}:55: tasks[0].expect.state[0].where.status.matches: found a pattern of 10,001 characters, "
        "expected a regular expression of at most 10,000 characters; write a shorter one"
    ]


def test_a_reply_matches_pattern_past_the_cap_is_refused_too(tmp_path: Path) -> None:
    script = ', script: [{ say: "Book it.", when: { reply_matches: "' + "b" * 20_000 + '" } }]'
    path = domain_with(tmp_path, script=script)
    line = next(i for i, x in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "reply_matches" in x)
    col = path.read_text(encoding="utf-8").splitlines()[line - 1].index('"bbb') + 1
    assert problems(path) == [
        f"{path}:{line}:{col}: tasks[0].user.script[0].when.reply_matches: found a pattern of 20,000 characters, "
        "expected a regular expression of at most 10,000 characters; write a shorter one"
    ]
