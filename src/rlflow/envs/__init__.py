"""Environment creation and in-process vector envs; flattened structured observations
(`rlflow.envs.flatten`: the env creator of a config applies `FlattenObservations`); agent
groups that act as one team (`rlflow.envs.groups`: `GroupAgents`, `TeamBox`); a common reward
for every agent (`rlflow.envs.common_reward`: `CommonReward`, EPyMARL's ``common_reward``).

Importing this package registers the Gymnasium ids :data:`POINT_NAV_ID`
(``rlflow/PointNav2D-v0``, `rlflow.envs.point_nav.PointNavigation2D`),
:data:`~rlflow.envs.crashing.CARTPOLE_CRASHING_ID` (``rlflow/CartPoleCrashing-v1``,
`rlflow.envs.crashing.make_cartpole_crashing`) and
:data:`~rlflow.envs.stateless.STATELESS_CARTPOLE_ID` (``rlflow/StatelessCartPole-v1``:
CartPole-v1 without its velocities, `rlflow.envs.stateless`), once per process.
"""

from rlflow.envs.common_reward import CommonReward
from rlflow.envs.crashing import CARTPOLE_CRASHING_ID
from rlflow.envs.creator import EnvCreator, config_env_creator, make_env_creator
from rlflow.envs.flatten import FlattenObservations, flatten_observation, flatten_space
from rlflow.envs.groups import GroupAgents, TeamBox, TeamObs
from rlflow.envs.stateless import STATELESS_CARTPOLE_ID
from rlflow.envs.vector import AgentReturn, EpisodeStat, VectorEnv, VectorStep

__all__ = [
    "AgentReturn",
    "CARTPOLE_CRASHING_ID",
    "CommonReward",
    "EnvCreator",
    "EpisodeStat",
    "FlattenObservations",
    "GroupAgents",
    "STATELESS_CARTPOLE_ID",
    "TeamBox",
    "TeamObs",
    "VectorEnv",
    "VectorStep",
    "config_env_creator",
    "flatten_observation",
    "flatten_space",
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
    if CARTPOLE_CRASHING_ID not in gym.registry:
        # The inner CartPole-v1 has its TimeLimit and env checker already.
        gym.register(
            CARTPOLE_CRASHING_ID,
            entry_point="rlflow.envs.crashing:make_cartpole_crashing",
            disable_env_checker=True,
        )
    if STATELESS_CARTPOLE_ID not in gym.registry:
        # The inner CartPole-v1 has its TimeLimit and env checker already.
        gym.register(
            STATELESS_CARTPOLE_ID,
            entry_point="rlflow.envs.stateless:make_stateless_cartpole",
            disable_env_checker=True,
        )


_register_task_envs()
