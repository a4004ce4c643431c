"""The engine: one trial, from a fresh world to a graded :class:`~.results.TrialResult`.

Owns the agent API types (:mod:`.api`), the copy-on-write world (:mod:`.world`),
running a tool call (:mod:`.tools`), the policy rules checked before each call
(:mod:`.rules`), grading (:mod:`.grading`), the trial loop (:mod:`.trial`), calling
an agent or user within the trial's deadline (:mod:`.invoke`), the built-in
reference agent and scripted user, the result type every report reads
(:mod:`.results`), redaction of credentials (:mod:`.redact`) and lint, which
replays each task's reference through the engine (:mod:`.lint`).

May import: :mod:`pytest_sandtable.domain`. Never pytest, never an adapter: an
agent or user that may run inline on the trial's event loop says so with an
``inline = True`` attribute.
"""
