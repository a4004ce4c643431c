"""Files tests read (a package, so that its conftest.py is imported as data.conftest and
never shadows tests/conftest.py)."""
