"""``python -m rlflow.cli``: the ``rlflow`` command line."""

import sys

from rlflow.cli import main

sys.exit(main())
