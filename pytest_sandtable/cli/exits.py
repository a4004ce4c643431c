"""Exit codes of the commands."""

EXIT_OK = 0
EXIT_FLAGGED = 1  # lint found an error or a warning
EXIT_GATE_FAILED = 1  # merge: its gate failed, or without a gate a trial failed or errored (as pytest exits)
EXIT_ERROR = 2  # bad input: a file that does not load, a bad option, a refused merge
