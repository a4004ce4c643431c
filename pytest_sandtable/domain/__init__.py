"""The domain: what a ``sandtable.yaml`` says, read, checked and built.

Owns the in-memory model (:mod:`.model`), YAML reading with line and column for
every node (:mod:`.yaml_reader`), values, ``$arg`` references and conditions
(:mod:`.conditions`), problems with their positions (:mod:`.errors`), finding
domain files (:mod:`.files`) and loading (:mod:`.loader`), in three stages:
:mod:`.translate` words the JSON Schema's errors, :mod:`.check` checks what the
schema cannot (cross-references), :mod:`.build` makes the model; both reporting
stages word values and "did you mean" alike (:mod:`.wording`).

May import: nothing else of this package. Everything above builds on it.
"""
