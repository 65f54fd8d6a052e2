"""The error hierarchy of rlflow.

Every error rlflow raises on purpose is one of these. Messages follow one shape: where, what is
wrong, the value given, and how to fix it.
"""

from __future__ import annotations


class RLFlowError(Exception):
    """Base class of every error raised on purpose by rlflow."""


class ConfigError(RLFlowError, ValueError):
    """A bad argument or config value, raised before any actor starts."""


class ConfigTypeError(ConfigError, TypeError):
    """A bad argument or config value of the wrong type (a bool where a number is wanted).

    A ``TypeError``, and a `ConfigError` too, so that one ``except ConfigError`` still catches
    every bad input. Raised by the checks of `rlflow.checks`.
    """


class PlanError(RLFlowError, TypeError):
    """A plan is built or used wrongly (e.g. iterating a ParallelIterator without gathering)."""


class WorkerError(RLFlowError, RuntimeError):
    """An actor (shard, rollout worker, replay shard) died or could not be reached."""


class ActorDiedError(WorkerError):
    """The actor a remote call went to is dead or unreachable (raised by the backends).

    A `WorkerError` that says only "this actor is gone", as opposed to an error the actor's code
    raised; a gather with a replacement hook (`rlflow.flow.ShardRecovery`) replaces the actor.
    """


class ObjectLostError(WorkerError):
    """An object a remote call needed is gone from the object store (raised by the Ray backend).

    Typically a batch passed by reference whose owner, the rollout worker that sampled it,
    died before it was read: the data is lost, the actor that was to read it is fine.
    """


class ContextError(RLFlowError, RuntimeError):
    """The plan's shared context was read outside a running operator."""


class NonFiniteError(RLFlowError, ArithmeticError):
    """A NaN or infinite number where a run needs finite ones: a reward or observation an env
    returned (caught by the samplers as it arrives), or a loss or gradient that kept being
    non-finite for ``max_nonfinite_updates`` updates in a row (`rlflow.policy.TorchPolicy`).
    The message names where it came from and the setting that governs it."""


class OfflineDataError(RLFlowError, ValueError):
    """Recorded experience that cannot be written or read (`rlflow.offline`): a column that is
    not numeric, a file that is not Parquet, is truncated, or was not written by rlflow. The
    message names the file or the column."""
