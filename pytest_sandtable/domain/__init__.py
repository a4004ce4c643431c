"""The domain: what a ``sandtable.yaml`` says, read, checked and built.

Owns the in-memory model (:mod:`.model`), YAML reading with line and column for
every node (:mod:`.yaml_reader`), values, ``$arg`` references and conditions
(:mod:`.conditions`), problems with their positions (:mod:`.errors`), finding
domain files (:mod:`.files`) and loading: translate → check → build
(:mod:`.loader`).

May import: nothing else of this package. Everything above builds on it.
"""
