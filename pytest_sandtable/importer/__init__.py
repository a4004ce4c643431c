"""Importing other benchmarks' environments as sandtable domains.

:mod:`.tau_bench` reads a τ-bench environment folder and writes the domain file and
the handler module it needs; :mod:`.tau_common` holds what the handler modules of
both τ-bench environments share. May import ``engine`` and ``domain``.
"""
