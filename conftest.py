"""Repository-level pytest configuration.

Keeps a bare `pytest` at the repository root to the test suite and the example
domains: the benchmark scripts and the example HTTP service are programs, not tests.
"""

collect_ignore = ["benchmarks", "examples"]
collect_ignore_glob = [".sandtable/*", ".venv/*"]
