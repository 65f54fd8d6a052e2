"""rlflow: distributed reinforcement learning written as dataflow.

The parallel iterator library lives in :mod:`rlflow.flow`; errors in :mod:`rlflow.errors`.
"""

__version__ = "0.1.0"
