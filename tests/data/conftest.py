"""tests/data holds files other tests read, not tests: the fictional τ-bench env has a
``tasks_test.py`` (τ-bench names its tasks file so), which pytest would otherwise
collect and import."""

collect_ignore = ["tau_env"]
