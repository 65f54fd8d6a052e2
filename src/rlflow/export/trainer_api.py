"""`PolicyUse`: the `rlflow.Trainer` methods that use a trained policy (RLlib's names).

They act with the learner's policies (the local worker's, in the driver process) and export
one of them for `rlflow.load_policy`, each while the plan's learner threads (IMPALA, APPO,
Ape-X) are held between updates (`rlflow.ops.learner_thread.learners_paused`), so a call sees
one version of the weights. An asynchronous run keeps learning between two calls. With an
``observation_filter`` they take raw observations: the learner's filter normalizes them,
frozen (its statistics are not updated), and the export holds it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.checks import check_bool
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.export.loaded import batch_actions, obs_batch, single_action
from rlflow.export.writer import export_policy
from rlflow.ops.learner_thread import learners_paused

__all__ = ["PolicyUse"]


class PolicyUse:
    """Acting with and exporting a trainer's policies; `rlflow.Trainer` inherits these."""

    workers: Any  # the trainer's WorkerSet

    @property
    def algorithm(self) -> str:
        """The algorithm's registered name (the trainer's)."""
        raise NotImplementedError

    @property
    def config(self) -> Any:
        """The run's config (the trainer's)."""
        raise NotImplementedError

    def _check_running(self, what: str) -> None:
        raise NotImplementedError  # the trainer's own

    def _policy(self, what: str, policy_id: str) -> Any:
        self._check_running(what)
        return self.workers.local_worker().get_policy(policy_id)

    def compute_actions(
        self,
        obs_batch_: npt.ArrayLike,
        *,
        explore: bool = False,
        policy_id: str = DEFAULT_POLICY_ID,
    ) -> npt.NDArray[Any]:
        """Actions ``[B, ...]`` of policy ``policy_id`` for raw observations ``[B,
        *obs_shape]`` (normalized first by the learner's observation filter, frozen, if the
        run has one): greedy, or sampled with ``explore=True`` (drawing from the policy's
        generator, and for DQN counting towards its epsilon schedule, as sampling does). Box
        actions are clipped to the bounds, as the env gets them. `ConfigError` for an unknown
        ``policy_id`` or observations that are not a batch of the policy's observation space."""
        explore = check_bool(explore, "Trainer.compute_actions: explore")
        policy = self._policy("compute_actions", policy_id)
        obs = obs_batch(policy.observation_space, obs_batch_, "Trainer.compute_actions")
        local = self.workers.local_worker()
        with learners_paused(local):
            obs_filter = local.filters.get(policy_id)
            if obs_filter is not None:
                obs = obs_filter(obs, update=False)
            actions, _ = policy.compute_actions(obs, explore=explore)
        return batch_actions(policy.action_space, np.asarray(actions))

    def compute_single_action(
        self, obs: npt.ArrayLike, *, explore: bool = False, policy_id: str = DEFAULT_POLICY_ID
    ) -> Any:
        """The action of policy ``policy_id`` for one observation (an ``int`` for a Discrete
        action space); as :meth:`compute_actions` otherwise."""
        batch = np.expand_dims(np.asarray(obs), 0)
        actions = self.compute_actions(batch, explore=explore, policy_id=policy_id)
        space = self._policy("compute_single_action", policy_id).action_space
        return single_action(space, actions)

    def export_policy(self, path: str | Path, *, policy_id: str = DEFAULT_POLICY_ID) -> str:
        """Write policy ``policy_id`` as the directory ``path`` for `rlflow.load_policy`, which
        rebuilds it without Ray or workers; return the path.

        ``policy.json`` holds the spaces, the model options, the algorithm and policy class
        and the env (id, ``env_config``, wrappers: observations must be preprocessed as in
        training); ``weights.pt`` the tensors (loaded with ``torch.load(weights_only=True)``).
        A policy class exports its own network by defining ``export_model()``
        (`rlflow.models.actors`); without one, its `ActorCritic` model is exported. The
        learner's observation filter of the policy (``observation_filter``) is saved with its
        current statistics: the loaded policy takes raw observations, as this trainer does.
        """
        policy = self._policy("export_policy", policy_id)
        local = self.workers.local_worker()
        with learners_paused(local):
            return export_policy(
                policy,
                path,
                algorithm=self.algorithm,
                policy_id=policy_id,
                config=self.config,
                obs_filter=local.filters.get(policy_id),
            )
