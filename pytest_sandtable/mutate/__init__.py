"""``mutate``: how much a task's checks can be trusted (docs/mutate.md).

Each task's ``reference`` is rewritten into small faults (:mod:`.operators`), each
rewrite replayed by the reference agent against the task's scripted user through the
engine, and classified killed, survived, equivalent, accepted or invalid
(:mod:`.run`). No model is called. Nothing here is imported by the pytest plugin.
May import ``policy_coverage`` (the replays' policy coverage), ``engine``, ``domain``
and ``report``.
"""
