"""An agent's reply reaches the terminal with its control characters written as
escapes (issue 21 #8): an ESC sequence, OSC 0 (the window title) or OSC 52 (a
clipboard write) in a failing trial's transcript must not drive the terminal."""

from __future__ import annotations

import pytest
from test_plugin import DOMAIN

pytest_plugins = ["pytester"]

REPLY = "nul\x00 clear\x1b[2J title\x1b]0;owned\x07 clip\x1b]52;c;ZXZpbA==\x07 csi\x9b31m del\x7f tab\tkept\nnext line"

AGENT = f"""\
def agent(turn):
    return {REPLY!r}
"""


def test_a_reply_with_control_characters_is_shown_escaped(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.makepyfile(noisy=AGENT)
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "ceiling", "--sandtable-agent=noisy:agent")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*- Captured sandtable transcript call -*",
        "[[]0] user : I need 2,600 for L-1001.",
        "[[]1] agent: nul\\x00 clear\\x1b[[]2J title\\x1b]0;owned\\x07 clip\\x1b]52;c;ZXZpbA==\\x07 "
        "csi\\x9b31m del\\x7f tab\tkept",
        "        next line",
    ], consecutive=True)
    out = result.stdout.str()
    assert "\\x1b]0;" in out
    assert not any(ch in out for ch in "\x00\x1b\x07\x7f\x9b")
