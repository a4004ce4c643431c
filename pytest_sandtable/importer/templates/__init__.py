"""The handler modules the τ-bench import copies next to the domain it writes
(``tau_<env>_handlers.py``): the files are templates, kept importable so that the
type checker and the tests read them as the code they are."""
