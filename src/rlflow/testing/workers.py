"""Tiny worker sets over :class:`~rlflow.testing.envs.CountingEnv`, for operator tests."""

from __future__ import annotations

from typing import Any

from rlflow.config import AlgorithmConfig
from rlflow.policy.policy import TorchPolicy
from rlflow.testing.envs import CountingEnv
from rlflow.workers import WorkerSet

COUNTING_DEFAULTS: dict[str, Any] = {
    "env": CountingEnv,
    "env_config": {"episode_len": 3},
    "num_workers": 2,
    "num_envs_per_worker": 1,
    "rollout_fragment_length": 4,
    "model": {"hidden": (8,)},
}
"""Config fields of :func:`counting_workers` unless overridden: 3-step episodes, 4-step
fragments, one env per worker, 2 remote workers, a hidden layer of 8 units."""


def counting_workers(
    config_cls: type[AlgorithmConfig], policy_cls: type[TorchPolicy], **overrides: Any
) -> WorkerSet:
    """A :class:`WorkerSet` on CountingEnv with :data:`COUNTING_DEFAULTS` and ``overrides``."""
    return WorkerSet(config_cls(**{**COUNTING_DEFAULTS, **overrides}), policy_cls)
