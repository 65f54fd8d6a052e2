"""The MATD3 plan: MADDPG's (`rlflow.algorithms.maddpg.plan`), with MATD3Policy's updates.

Ackermann et al., "Reducing Overestimation Bias in Multi-Agent Domains Using Double Centralized
Critics" (2019), on the replay dataflow (DQN's: `rlflow.algorithms.dqn.plan.store_and_replay`)::

    (1) sample (each member's actor on its own observation, + exploration) -> store
    | (2) replay -> every member's twin critics (the actors every policy_delay) -> priorities
        -> Polyak targets after actor steps, in turn (training_intensity)
    (3) standard_metrics_reporting
"""

from __future__ import annotations

from typing import Any

from rlflow.algorithms.maddpg.plan import maddpg_plan
from rlflow.algorithms.matd3.config import MATD3Config
from rlflow.flow import LocalIterator
from rlflow.workers import WorkerSet

__all__ = ["matd3_plan"]


def matd3_plan(workers: WorkerSet, config: MATD3Config) -> LocalIterator[dict[str, Any]]:
    """Build the MATD3 plan over ``workers``; each item is one iteration's result dict."""
    # (1)-(3) MADDPG's dataflow; the policy (MATD3Policy) delays and smooths.
    return maddpg_plan(workers, config)
