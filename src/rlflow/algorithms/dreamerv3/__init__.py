"""DreamerV3 (Hafner et al. 2023, "Mastering Diverse Domains through World Models"; RLlib 2.x's
model-based algorithm) as a dataflow plan.

The rollout workers act with the world model's posterior one step at a time (the RSSM's state
carried between steps like any recurrent policy's, `rlflow.models.memory`) and send fragments
with next observations; the learner keeps a replay of episodes as streams of observations
(`rlflow.algorithms.dreamerv3.replay`) and, at ``train_ratio`` replayed steps per sampled step,
trains the world model (RSSM with 32 categorical latents of 32 classes and 1% uniform mix,
symlog observations, two-hot rewards over 255 bins, a continue head, free bits and KL balancing)
and the actor and critic on trajectories imagined from every replayed state (lambda-returns,
returns normalized by their 5-95 percentile range, a slow critic, entropy bonus); the weights
go back to the workers. Model sizes are the paper's (``model_size``: ``XS`` .. ``XL``,
`rlflow.algorithms.dreamerv3.config.MODEL_SIZES`); observations are 1-D vectors (an MLP) or
images (a CNN), actions ``Discrete`` (REINFORCE) or a bounded 1-D ``Box`` (gradients through the
imagined dynamics). The math is in `rlflow.algorithms.dreamerv3.functions`.

Policy: :class:`DreamerV3Policy`. Config: :class:`DreamerV3Config`. Plan:
:func:`dreamerv3_plan`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.dreamerv3.config import DreamerV3Config
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.dreamerv3.plan import dreamerv3_plan
    from rlflow.algorithms.dreamerv3.policy import DreamerV3Policy

__all__ = ["DreamerV3Config", "DreamerV3Policy", "dreamerv3_plan"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"dreamerv3_plan": "plan", "DreamerV3Policy": "policy"}
)
