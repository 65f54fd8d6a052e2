"""``python -m rlflow``: the ``rlflow`` command line (`rlflow.cli.main`), for when the script
is not on ``PATH``; ``python -m rlflow --version`` prints the installed version."""

import sys

from rlflow.cli import main

if __name__ == "__main__":
    sys.exit(main())
