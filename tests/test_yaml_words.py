"""A YAML syntax error in plain words, at the place to fix (issue 23).

The parser words its errors in its own terms (``expected <block end>, but found
'<block sequence start>'``); the common mistakes are told in the user's terms, at
file:line:col, by ``validate`` and by pytest's collection error alike."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_validate import GOOD

# Each common mistake, made in the good file: (file, the good text, the broken text).
MISTAKES = [
    ("bracket", "rate: { type: number } }", "rate: { type: number }"),
    ("colon", "name: freight", "name: Freight: the loads desk"),
    ("escape", "id: book-happy-path", 'id: book-happy-path\n    tags: ["\\d+"]'),
    ("indent", "name: freight\n", "name: freight\n  policy: Book loads at or under the posted rate.\n"),
    ("item", "available }\n", "available }\n     - { load_id: L-1002, max_rate: 1900, status: available }\n"),
    ("quote", 'L-1001." }', "L-1001. }"),
    ("tab", "    key: load_id", "\tkey: load_id"),
]


def where(text: str, needle: str, offset: int = 0) -> str:
    """``line:col`` (1-based) of the first ``needle`` in ``text``, ``offset`` characters on."""
    at = text.index(needle) + offset
    line = text.count("\n", 0, at) + 1
    return f"{line}:{at - text.rfind(chr(10), 0, at)}"


def broken() -> dict[str, str]:
    texts = {}
    for name, good, bad in MISTAKES:
        assert good in GOOD, name
        texts[name] = GOOD.replace(good, bad, 1)
    return texts


def test_validate_words_the_common_mistakes_plainly(tmp_path: Path) -> None:
    texts = broken()
    for name, text in texts.items():
        (tmp_path / f"{name}.sandtable.yaml").write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_sandtable", "validate", "."],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    at = {name: where(texts[name], needle) for name, needle in [
        ("colon", ": the loads"), ("escape", "\\d"), ("indent", "policy"), ("item", "- { load_id: L-1002"),
        ("quote", '"Hi'), ("tab", "\t"),
    ]}
    assert proc.stdout.splitlines() == [
        f"bracket.sandtable.yaml:{where(texts['bracket'], 'params: {', len('params: '))}: invalid YAML: this '{{' "
        f"is never closed (found 'ops' at line {where(texts['bracket'], 'ops:').replace(':', ', column ')} "
        "before a '}'); close it, or put the value in quotes if the '{' is text",
        f"colon.sandtable.yaml:{at['colon']}: invalid YAML: this ': ' is inside a value "
        "without quotes, where YAML takes it for the start of a key; put the whole value in quotes",
        f"escape.sandtable.yaml:{at['escape']}: invalid YAML: '\\d' is not an escape YAML "
        "knows inside \"...\": write a backslash as '\\\\', or put the value in '...', where a backslash is itself",
        f"indent.sandtable.yaml:{at['indent']}: invalid YAML: this line is indented more than "
        "the key above it expects (a key at the wrong depth? or, if it goes on with the value above, that value "
        "needs quotes)",
        f"item.sandtable.yaml:{at['item']}: invalid YAML: this list item is not "
        "lined up with the items or keys above it (a '-' at the wrong depth?)",
        f"quote.sandtable.yaml:{at['quote']}: invalid YAML: this \" is never closed: the value "
        "runs on to the end of the file; close it where the value ends",
        f"tab.sandtable.yaml:{at['tab']}: invalid YAML: a tab in the indentation: YAML indents "
        "with spaces only; replace the tab with spaces",
    ]
    assert proc.returncode == 2


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("version: 1\nname: x\ntools:\n  - name: a\n  b: 1\n",
         "sandtable.yaml:5:3: invalid YAML: a key where the list above expects an item: add its '- ', "
         "or line the key up with its mapping"),
        ("version: 1\nname: x\nworld:\n    a: 1\n  b: 2\n",
         "sandtable.yaml:5:3: invalid YAML: this line is indented less than the key above it and more than "
         "that key's parent (a key at the wrong depth?)"),
        ("version: 1\nname: 'it's'\n",
         "sandtable.yaml:2:11: invalid YAML: text after the closing ' of a value: put the whole value in quotes, "
         "writing a quote inside it as '' in '...' or as \\\" in \"...\""),
        ("version: 1\nname: x\npolicy: |\nBook loads.\n",
         "sandtable.yaml:4:1: invalid YAML: the text of the '|' above must be indented more than its key"),
        ("version: 1\nname: *desk\n",
         "sandtable.yaml:2:7: invalid YAML: '*desk' stands for an anchor '&desk' that is not defined above; "
         "put a value that starts with '*' in quotes"),
        ("version: 1\nname: x\ntasks:\n  - id: a\n    user: { opening: hi }\n      expect: {}\n",
         "sandtable.yaml:6:7: invalid YAML: this line is indented more than the key above it expects (a key at "
         "the wrong depth? or, if it goes on with the value above, that value needs quotes)"),
        ('version: 1\nname: x\npolicy: "Files go to C:\\Users\\dana"\n',
         "sandtable.yaml:3:24: invalid YAML: '\\U' takes 8 hexadecimal digits inside \"...\": write a backslash "
         "as '\\\\', or put the value in '...', where a backslash is itself"),
        ("version: 1\nname: x\n]\n",
         "sandtable.yaml:3:1: invalid YAML: this ']' closes nothing: no '[' is open before it"),
    ],
    ids=["key-in-a-list", "key-between-depths", "quote-in-quotes", "block-text-not-indented", "undefined-alias",
         "key-deeper-after-braces", "windows-path", "stray-bracket"],
)
def test_more_mistakes_in_plain_words(text: str, line: str) -> None:
    from pytest_sandtable.domain.errors import DomainError
    from pytest_sandtable.domain.yaml_reader import load_yaml

    with pytest.raises(DomainError) as caught:
        load_yaml(text, "sandtable.yaml")
    assert [str(p) for p in caught.value.problems] == [line]


def test_a_collection_error_words_the_mistake_plainly(pytester: pytest.Pytester) -> None:
    text = broken()["indent"]
    pytester.path.joinpath("sandtable.yaml").write_text(text, encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([
        "*_ ERROR collecting sandtable.yaml _*",
        f"sandtable.yaml:{where(text, 'policy')}: invalid YAML: this line is indented more than the key above it "
        "expects (a key at the wrong depth[?] or, if it goes on with the value above, that value needs quotes)",
    ], consecutive=True)
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*block end*")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the gate: a domain did not load
