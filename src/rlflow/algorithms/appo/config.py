"""`APPOConfig`: asynchronous PPO settings, IMPALA's plus the clipped surrogate's.

`rlflow.algorithms.impala.config.IMPALAConfig`'s fields (and groups) plus, from
`rlflow.config.learning`, `SurrogateConfig` (``clip_param``, ``kl_coeff``: a fixed weight here)
and `TargetNetworkConfig`, and APPO's own ``use_kl_loss``. Defaults: IMPALA's, with APPO's own
in the class statement below.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.impala.config import IMPALAConfig
from rlflow.config.learning import SurrogateConfig, TargetNetworkConfig

__all__ = ["APPOConfig"]


@dataclass(frozen=True, kw_only=True)
class APPOConfig(
    IMPALAConfig,
    SurrogateConfig,
    TargetNetworkConfig,
    defaults={"clip_param": 0.4, "kl_coeff": 1.0, "target_network_update_freq": 1000},
):
    """APPO: IMPALA's dataflow with PPO's clipped surrogate against a target network (copied
    from the model every ``target_network_update_freq`` env steps trained)."""

    use_kl_loss: bool = False
    """Add ``kl_coeff * KL(mu || pi)`` (mu: the behaviour policy) to the loss."""
