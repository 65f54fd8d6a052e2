"""The package's version, ``rlflow.__version__``: its one place (``pyproject.toml`` reads it)."""

__version__ = "0.1.0"
