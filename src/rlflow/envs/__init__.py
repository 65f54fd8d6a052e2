"""Environment creation and in-process vector envs.

Importing this package registers the Gymnasium id :data:`POINT_NAV_ID`
(``rlflow/PointNav2D-v0``, `rlflow.envs.point_nav.PointNavigation2D`; once per process).
"""

from rlflow.envs.creator import EnvCreator, make_env_creator
from rlflow.envs.vector import AgentReturn, EpisodeStat, VectorEnv, VectorStep

__all__ = [
    "AgentReturn",
    "EnvCreator",
    "EpisodeStat",
    "VectorEnv",
    "VectorStep",
    "make_env_creator",
]

POINT_NAV_ID = "rlflow/PointNav2D-v0"
"""Gymnasium id of MAML's 2-D point navigation (`rlflow.envs.point_nav.PointNavigation2D`)."""


def _register_task_envs() -> None:
    """Register the shipped task envs with Gymnasium; registering twice is a no-op."""
    import gymnasium as gym

    if POINT_NAV_ID not in gym.registry:
        # The env truncates at its own horizon, so no TimeLimit; it checks its own actions.
        gym.register(
            POINT_NAV_ID,
            entry_point="rlflow.envs.point_nav:PointNavigation2D",
            disable_env_checker=True,
        )


_register_task_envs()
