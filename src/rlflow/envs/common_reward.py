"""A common reward for every agent of a multi-agent env (EPyMARL's ``common_reward``).

With ``common_reward=True`` in a config (a field of `rlflow.config.rollouts.RolloutConfig`),
the env creator wraps the multi-agent env in :class:`CommonReward`: in every step each agent is
paid the same reward, the **sum** of all the agents' rewards of that step
(``reward_scalarisation="sum"``) or their **mean** (``"mean"``). These are EPyMARL's names and
meanings (Papoudakis et al. 2021, uoe-agents/epymarl: ``common_reward: True``,
``reward_scalarisation: "sum"``), where the independent learners of its benchmark (IQL, IPPO)
learn from the same team reward as the team algorithms (QMIX, MAPPO): credit assignment is then
every learner's problem, not only the team algorithms'. Without it an independent learner on
PettingZoo's MPE ``simple_spread_v3`` (``local_ratio`` 0.5) is paid its own collision penalty
besides the shared part, a signal the team algorithms, learning from the sum, do not get.

The wrapper goes around the env after any ``groups`` are formed, so a group counts as one agent
(paid the sum of its members, `rlflow.envs.groups.GroupAgents`); a single group alone is paid
what it already was.

Mind the results: ``episode_return_mean`` sums the rewards the agents were paid, so with
``"sum"`` it is the number of agents times the env's team return (each agent holds the whole
sum); with ``"mean"`` it equals the env's team return.

>>> from rlflow.envs.ma_envs import make_multi_agent_env
>>> env = CommonReward(make_multi_agent_env("multi_cartpole", num_agents=2), "sum")
>>> _ = env.reset(seed=0)
>>> step = env.step({"agent_0": 0, "agent_1": 1})
>>> step.rewards
{'agent_0': 2.0, 'agent_1': 2.0}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from rlflow.config.rollouts import check_reward_scalarisation
from rlflow.envs.multi_agent import AgentID, MultiAgentDict, MultiAgentEnv, MultiAgentStep
from rlflow.errors import ConfigError

__all__ = ["CommonReward", "common_reward"]


class CommonReward(MultiAgentEnv):
    """A multi-agent env whose agents are all paid the sum (or mean) of the step's rewards.

    The agents, spaces, observations, flags and infos are the wrapped env's; only ``rewards``
    change: every agent in a step's ``rewards`` gets the sum of all of them (``"sum"``) or that
    sum over their number (``"mean"``). An agent that left keeps its last step's share and is
    paid nothing after, as before.
    """

    def __init__(self, env: MultiAgentEnv, reward_scalarisation: str = "sum") -> None:
        """Wrap ``env``; ``reward_scalarisation`` ``"sum"`` or ``"mean"``
        (`rlflow.config.rollouts.REWARD_SCALARISATIONS`; `ConfigError` otherwise)."""
        check_reward_scalarisation(reward_scalarisation)
        self.env = env
        """The wrapped env."""
        self.reward_scalarisation = reward_scalarisation
        """``"sum"`` or ``"mean"``."""
        self.possible_agents = list(env.possible_agents)
        self.agents = list(env.agents)
        self.observation_spaces = dict(env.observation_spaces)
        self.action_spaces = dict(env.action_spaces)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset the wrapped env."""
        out = self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        return out

    def step(self, action_dict: Mapping[AgentID, Any]) -> MultiAgentStep:
        """Step the wrapped env; every agent of the step is paid the common reward."""
        step = self.env.step(action_dict)
        self.agents = list(self.env.agents)
        if not step.rewards:
            return step
        total = float(sum(step.rewards.values()))
        if self.reward_scalarisation == "mean":
            total /= len(step.rewards)
        return step._replace(rewards=dict.fromkeys(step.rewards, total))

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()


def common_reward(creator: Any, reward_scalarisation: str) -> CommonReward:
    """``creator()`` (a multi-agent env, PettingZoo ones adapted) wrapped in
    :class:`CommonReward`; `ConfigError` for a single-agent env."""
    from rlflow.envs.multi_agent import from_pettingzoo

    env = creator()
    if isinstance(env, gym.Env) or getattr(env, "possible_agents", None) is None:
        raise ConfigError(
            f"common_reward: the env is single-agent ({type(env).__name__}); a common reward "
            "is shared by the agents of a multi-agent env (a PettingZoo env or an rlflow "
            "MultiAgentEnv)"
        )
    adapted = env if isinstance(env, MultiAgentEnv) else from_pettingzoo(env)
    return CommonReward(adapted, reward_scalarisation)
