"""Reports over finished trials: one typed run summary (:mod:`.types`, built by
:mod:`.summary`) read by the terminal tables (:mod:`.terminal`), results.json
(:mod:`.results_json`), report.html (:mod:`.html`) and the CI gates (:mod:`.gates`);
usage and prices (:mod:`.usage`, :mod:`.prices`), a trial's failure text
(:mod:`.text`), merging CI shards (:mod:`.merge`), every number format
(:mod:`.fmt`), and what makes all of it safe to show and keep (:mod:`.safe`: secrets
redacted, lone surrogates replaced, sizes capped).

May import: :mod:`pytest_sandtable.engine` (the result types) and
:mod:`pytest_sandtable.domain`. Never pytest, never an adapter.
"""
