"""The MARWIL plan: recorded experience in, advantage-weighted imitation out.

Wang et al., "Exponentially Weighted Imitation Learning for Batched Historical Data" (NeurIPS
2018), as a dataflow plan of the RLlib Flow paper's shape::

    (1) experience(input) -> (2) MarwilReturns (discounted returns with the learner's
        critic at fragment ends) -> (3) ConcatBatches(train_batch_size)
        -> (4) TrainOneStep -> (5) standard_metrics_reporting (+ evaluation on a live env)

The env is only stepped by evaluation (``evaluation_interval``); rollout workers, if any, sit
idle (``num_workers`` is 0 by default).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlflow.algorithms.marwil.config import MARWILConfig
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.data.sample_batch import NEXT_OBS, OBS, REWARDS, TERMINATEDS, VALUE_TARGETS
from rlflow.flow import LocalIterator
from rlflow.ops import ConcatBatches, TrainOneStep, experience, standard_metrics_reporting
from rlflow.returns import discounted_returns
from rlflow.workers import WorkerSet

__all__ = ["MarwilReturns", "marwil_plan"]


class MarwilReturns:
    """Add `VALUE_TARGETS`: each row's discounted return to the end of its episode fragment.

    Items: ``SampleBatch | MultiAgentBatch -> same``. A fragment that ends its episode
    (`TERMINATEDS`) bootstraps with 0; any other (cut by a fragment's end or a time limit)
    with the learner's value of the observation after its last row (`NEXT_OBS`, when
    recorded), else of its last row's observation (the next one was not recorded). The values
    come from one call of the learner policy's ``value`` per batch.
    """

    def __init__(self, workers: WorkerSet, gamma: float) -> None:
        """Read the learner's policies from ``workers``; discount with ``gamma``."""
        self.workers = workers
        self.gamma = gamma

    def __call__(self, batch: SampleBatch | MultiAgentBatch) -> SampleBatch | MultiAgentBatch:
        if isinstance(batch, MultiAgentBatch):
            parts = {pid: self._returns(pid, b) for pid, b in batch.policy_batches.items()}
            return MultiAgentBatch(parts, batch.env_steps())
        return self._returns("default_policy", batch)

    def _returns(self, policy_id: str, batch: SampleBatch) -> SampleBatch:
        pieces = batch.split_by_episode()
        if not pieces:
            return batch
        after = NEXT_OBS if NEXT_OBS in batch else OBS
        last_obs = np.stack([piece[after][-1] for piece in pieces])
        policy = self.workers.local_worker().get_policy(policy_id)
        values = policy.value(last_obs)
        out = []
        for piece, value in zip(pieces, values, strict=True):
            bootstrap = 0.0 if bool(piece[TERMINATEDS][-1]) else float(value)
            returns = discounted_returns(piece[REWARDS], self.gamma, bootstrap_value=bootstrap)
            piece[VALUE_TARGETS] = returns.astype(np.float32)
            out.append(piece)
        return SampleBatch.concat_samples(out)


def marwil_plan(workers: WorkerSet, config: MARWILConfig) -> LocalIterator[dict[str, Any]]:
    """Build the MARWIL plan over ``workers``; each item is one iteration's result dict."""
    # (1) Recorded batches, read in parallel and shuffled; (2) their returns.
    batches = experience(workers, config, recorded_only=True).for_each(
        MarwilReturns(workers, config.gamma)
    )
    # (3) train_batch_size rows; (4) epochs of minibatches on them.
    train_op = batches.combine(ConcatBatches(config.train_batch_size)).for_each(
        TrainOneStep(
            workers,
            policies=config.policies_to_train,
            num_sgd_iter=config.num_sgd_iter,
            sgd_minibatch_size=config.sgd_minibatch_size,
        )
    )
    # (5) One result per iteration, with an evaluation every evaluation_interval.
    return standard_metrics_reporting(train_op, workers, config)
