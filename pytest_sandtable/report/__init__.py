"""Reports over finished trials: the run summary, the terminal tables, results.json,
report.html, CI gates, usage and prices, and merging shards.

May import: :mod:`pytest_sandtable.engine` (the result types) and
:mod:`pytest_sandtable.domain`. Never pytest, never an adapter.
"""
