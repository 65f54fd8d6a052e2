"""``entropy_coeff_schedule``: the entropy bonus's weight on a schedule, for every algorithm
with an ``entropy_coeff`` (PG, A2C, A3C, PPO, IMPALA, APPO).

The config fields are `rlflow.config.learning.LossWeightsConfig`'s (RLlib's shape, as
``lr_schedule``: ``[[timestep, value], ...]``, see `rlflow.schedules.PiecewiseSchedule`);
`EntropyCoeffSchedule` is the policy side: it sets the ``entropy_coeff`` attribute the losses
read and moves it with the global ``timestep`` (env steps sampled) that the learner is told
after every train item, exactly as ``lr_schedule`` moves the learning rate. Unset,
``entropy_coeff`` is the config's constant and nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlflow.config.learning import LossWeightsConfig
from rlflow.policy.policy import TorchPolicy
from rlflow.schedules import PiecewiseSchedule

__all__ = ["EntropyCoeffSchedule"]


class EntropyCoeffSchedule(TorchPolicy):
    """Policy base (listed before the policy base it extends): ``entropy_coeff`` from the
    config's ``entropy_coeff_schedule`` on the global ``timestep``, else its constant
    ``entropy_coeff``. The loss reads ``self.entropy_coeff``.
    """

    entropy_coeff: float
    """The entropy bonus's weight the loss uses now."""
    entropy_coeff_schedule: PiecewiseSchedule | None
    """The config's ``entropy_coeff_schedule``, or None."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Build the policy, then set ``entropy_coeff`` (the schedule's value at timestep 0
        when there is one)."""
        super().__init__(*args, **kwargs)
        config: LossWeightsConfig = self.config  # type: ignore[assignment]
        points = config.entropy_coeff_schedule
        label = f"{type(config).__name__}.entropy_coeff_schedule"
        schedule = None if points is None else PiecewiseSchedule.from_points(points, label)
        self.entropy_coeff_schedule = schedule
        self.entropy_coeff = config.entropy_coeff if schedule is None else schedule.value(0)

    def on_global_var_update(self, global_vars: Mapping[str, Any]) -> None:
        """Follow ``entropy_coeff_schedule`` (and the base's schedules) to ``timestep``."""
        super().on_global_var_update(global_vars)
        if self.entropy_coeff_schedule is not None and "timestep" in global_vars:
            self.entropy_coeff = self.entropy_coeff_schedule.value(int(global_vars["timestep"]))
