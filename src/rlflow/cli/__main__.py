"""``python -m rlflow.cli``: the ``rlflow`` command line."""

from rlflow.cli import run

run()
