"""``python -m pytest_sandtable <command>``: see :mod:`pytest_sandtable.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
