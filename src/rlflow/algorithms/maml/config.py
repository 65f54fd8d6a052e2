"""`MAMLConfig`: model-agnostic meta-learning settings (RLlib's names where they match).

Groups: `AlgorithmConfig`'s and, from `rlflow.config.learning`, `SurrogateConfig` (the outer
step's clipped ratio and KL penalty) and `AdaptiveKLConfig`; MAML's own fields are the inner
loop's. Defaults: the groups', with MAML's own in the class statement below (its 2-D point
navigation env, whose horizon is 100 steps).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config import AlgorithmConfig
from rlflow.config.learning import AdaptiveKLConfig, SurrogateConfig
from rlflow.envs import POINT_NAV_ID, make_env_creator
from rlflow.errors import ConfigError

__all__ = ["MAMLConfig"]


@dataclass(frozen=True, kw_only=True)
class MAMLConfig(
    AlgorithmConfig,
    SurrogateConfig,
    AdaptiveKLConfig,
    defaults={
        "env": POINT_NAV_ID,
        "num_envs_per_worker": 20,
        "rollout_fragment_length": 100,
        "lr": 1e-3,
        "kl_coeff": 0.0005,
    },
):
    """MAML: one task per remote worker, inner PG steps there, a clipped meta-update here.

    The meta-batch is ``num_workers`` (>= 1) tasks; each task's samples are one ``sample()`` per
    adaptation step (``rollout_fragment_length * num_envs_per_worker`` env steps; set
    ``rollout_fragment_length`` to the env's horizon so every sample holds whole episodes).
    ``train_batch_size`` is not used. ``inner_adaptation_steps=0`` turns the plan into plain
    multi-task PPO (the "pretrained" baseline MAML is compared with). ``env`` must be a
    task-settable env (``sample_tasks(n)``, ``set_task(task)``, ``get_task()``), checked here by
    building one.
    """

    inner_lr: float = 0.1
    """Inner SGD step size (MAML's alpha), > 0."""
    inner_adaptation_steps: int = 1
    """Inner PG steps per task, >= 0 (0: no adaptation, i.e. multi-task PPO)."""
    maml_optimizer_steps: int = 5
    """Adam steps of the meta-update on each meta-batch, >= 1."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_learners:
            raise ConfigError(
                f"MAMLConfig: num_learners={self.num_learners}: MAML's inner steps run on the "
                "rollout workers and its meta-update on the driver's learner; learner actors "
                "are not supported, set num_learners=0"
            )
        self._check_int("num_workers", 1)
        self._check_positive("inner_lr")
        self._check_int("inner_adaptation_steps", 0)
        self._check_int("maml_optimizer_steps", 1)
        self._check_task_env()

    def _check_task_env(self) -> None:
        """Build one env; reject it unless it has ``sample_tasks``, ``set_task``, ``get_task``."""
        env = make_env_creator(self.env, **self.env_config)()
        try:
            target = getattr(env, "unwrapped", env)
            missing = [
                m
                for m in ("sample_tasks", "set_task", "get_task")
                if not callable(getattr(target, m, None))
            ]
        finally:
            env.close()
        if missing:
            raise ConfigError(
                f"{type(self).__name__}.env={self.env!r} must be a task-settable env "
                f"(sample_tasks(n), set_task(task), get_task()); {type(target).__name__} has no "
                f"{' or '.join(missing)}. Use {POINT_NAV_ID!r} or an env implementing "
                "rlflow.envs.point_nav.TaskSettableEnv"
            )
