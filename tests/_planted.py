"""The planted domain of the adaptive tests (tests/test_adaptive_*.py): one note and one
tool; each task asks for the note and expects `read_note` called, so a planted agent
decides a trial's outcome by calling it or not."""

from __future__ import annotations

TASK = """\
  - id: {id}
    user: {{ opening: "Read note n-1 please.", script: ["Thanks."] }}
    expect: {{ called: [read_note] }}
"""

HEAD = """\
version: 1
name: planted
world:
  notes:
    key: id
    rows:
      - { id: n-1, text: hello }
tools:
  - name: read_note
    params: { id: { type: string } }
    ops:
      - get: { table: notes, key: $id }
tasks:
"""


def planted_domain(*tasks: str) -> str:
    """The domain file's text with these task ids, in order."""
    return HEAD + "".join(TASK.format(id=t) for t in tasks)
