"""``python -m rlflow``: the ``rlflow`` command line (`rlflow.cli.main`), for when the script
is not on ``PATH``; ``python -m rlflow --version`` prints the installed version."""

from rlflow.cli import run

if __name__ == "__main__":
    run()
