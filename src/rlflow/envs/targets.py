"""Tiny envs with structured spaces whose right action is readable from the observation.

Each step draws fresh targets, one per action component, and shows them in the observation;
the reward is the fraction of components the action got right, so a policy that reads the
observation earns 1.0 a step (return ``episode_len``) and a uniformly random one about
``mean(1 / nvec)`` a step. They test that structured spaces reach the network intact:

- :class:`DictTargetEnv`: a nested ``Dict`` observation (the target a ``Discrete`` part beside
  noise parts), ``Discrete`` actions;
- :class:`TupleTargetEnv`: a nested ``Tuple`` observation, ``Discrete`` actions;
- :class:`MultiDiscreteTargetEnv`: a ``Box`` observation (the targets one-hot), ``MultiDiscrete``
  actions;
- :class:`MultiAgentDictTargetEnv`: two agents, each on its own :class:`DictTargetEnv`.

>>> env = MultiDiscreteTargetEnv(nvec=(2, 3), episode_len=2)
>>> obs, _ = env.reset(seed=0)
>>> right = [int(np.argmax(obs[:2])), int(np.argmax(obs[2:]))]
>>> env.step(np.array(right))[1:3]
(1.0, False)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.checks import check_int
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentEnv, MultiAgentStep

__all__ = [
    "DictTargetEnv",
    "MultiAgentDictTargetEnv",
    "MultiDiscreteTargetEnv",
    "TargetEnv",
    "TupleTargetEnv",
]

Array = npt.NDArray[Any]


class TargetEnv(gym.Env[Any, Any]):
    """Base of the target envs: targets drawn with the env's seeded RNG at every step, reward
    the fraction of action components equal to them, episodes of ``episode_len`` steps
    (terminated). Subclasses set the spaces and write :meth:`observation`."""

    def __init__(self, nvec: tuple[int, ...], episode_len: int) -> None:
        """Targets of ``nvec`` choices each; episodes of ``episode_len`` (>= 1) steps."""
        self.nvec = np.asarray(nvec, dtype=np.int64)
        """The number of choices of each target."""
        self.episode_len = check_int(episode_len, f"{type(self).__name__}: episode_len", low=1)
        """Steps per episode."""
        self.targets = np.zeros(len(nvec), dtype=np.int64)
        """The targets the current observation shows."""
        self._t = 0

    def observation(self) -> Any:
        """The observation showing :attr:`targets` (and noise)."""
        raise NotImplementedError

    def _draw(self) -> Any:
        self.targets = self.np_random.integers(0, self.nvec)
        return self.observation()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode with fresh targets."""
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Reward the fraction of components right, then show new targets."""
        right = np.asarray(action).reshape(-1) == self.targets
        self._t += 1
        return self._draw(), float(np.mean(right)), self._t >= self.episode_len, False, {}


class DictTargetEnv(TargetEnv):
    """``Dict`` observations: ``{"target": Discrete(n), "noise": Box(-1, 1, (2,)),
    "extra": Tuple((MultiBinary(2), Box(0, 1, (1,))))}``; actions ``Discrete(n)``."""

    def __init__(self, n: int = 3, episode_len: int = 8) -> None:
        """A target of ``n`` choices."""
        super().__init__((n,), episode_len)
        extra = spaces.Tuple((spaces.MultiBinary(2), spaces.Box(0.0, 1.0, (1,), np.float32)))
        self.observation_space = spaces.Dict(
            {
                "target": spaces.Discrete(n),
                "noise": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "extra": extra,
            }
        )
        self.action_space = spaces.Discrete(n)

    def observation(self) -> dict[str, Any]:
        """The target and noise."""
        rng = self.np_random
        extra = (rng.integers(0, 2, 2).astype(np.int8), rng.random(1, dtype=np.float32))
        noise = rng.uniform(-1.0, 1.0, 2).astype(np.float32)
        return {"target": int(self.targets[0]), "noise": noise, "extra": extra}


class TupleTargetEnv(TargetEnv):
    """``Tuple`` observations: ``(Box(-1, 1, (2,)), Discrete(n), Dict({"bits":
    MultiBinary(3)}))``, the target the ``Discrete`` part; actions ``Discrete(n)``."""

    def __init__(self, n: int = 3, episode_len: int = 8) -> None:
        """A target of ``n`` choices."""
        super().__init__((n,), episode_len)
        self.observation_space = spaces.Tuple(
            (
                spaces.Box(-1.0, 1.0, (2,), np.float32),
                spaces.Discrete(n),
                spaces.Dict({"bits": spaces.MultiBinary(3)}),
            )
        )
        self.action_space = spaces.Discrete(n)

    def observation(self) -> tuple[Any, ...]:
        """Noise, the target, noise."""
        rng = self.np_random
        noise = rng.uniform(-1.0, 1.0, 2).astype(np.float32)
        bits = rng.integers(0, 2, 3).astype(np.int8)
        return (noise, int(self.targets[0]), {"bits": bits})


class MultiDiscreteTargetEnv(TargetEnv):
    """``MultiDiscrete(nvec)`` actions; observations a ``Box`` of ``sum(nvec)`` values, each
    target one-hot, side by side."""

    def __init__(self, nvec: tuple[int, ...] = (3, 4), episode_len: int = 8) -> None:
        """Targets of ``nvec`` choices each."""
        super().__init__(tuple(nvec), episode_len)
        size = int(self.nvec.sum())
        self.observation_space = spaces.Box(0.0, 1.0, (size,), np.float32)
        self.action_space = spaces.MultiDiscrete(self.nvec)
        self._firsts = np.concatenate([[0], np.cumsum(self.nvec)[:-1]])

    def observation(self) -> Array:
        """The targets one-hot."""
        obs = np.zeros(int(self.nvec.sum()), np.float32)
        obs[self._firsts + self.targets] = 1.0
        return obs


class MultiAgentDictTargetEnv(MultiAgentEnv):
    """Agents ``"a"`` and ``"b"``, each on its own :class:`DictTargetEnv` (``Dict``
    observations, ``Discrete`` actions); both episodes end together after ``episode_len``
    steps, so an episode's return (the sum over agents) is at most ``2 * episode_len``."""

    def __init__(self, episode_len: int = 8) -> None:
        """Two target envs of ``episode_len`` steps."""
        self.possible_agents = ["a", "b"]
        self.agents = []
        self.envs = {a: DictTargetEnv(episode_len=episode_len) for a in self.possible_agents}
        """Each agent's env."""
        self.observation_spaces = {a: e.observation_space for a, e in self.envs.items()}
        self.action_spaces = {a: e.action_space for a, e in self.envs.items()}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Reset both agents' envs (seeds ``seed`` and ``seed + 1``)."""
        self.agents = list(self.possible_agents)
        obs = {
            a: env.reset(seed=None if seed is None else seed + i)[0]
            for i, (a, env) in enumerate(self.envs.items())
        }
        return obs, {a: {} for a in obs}

    def step(self, action_dict: Any) -> MultiAgentStep:
        """Step each agent's env with its action."""
        self._check_action_keys(action_dict)
        out = {a: self.envs[a].step(action_dict[a]) for a in self.agents}
        done = all(o[2] for o in out.values())
        self.agents = [] if done else list(self.agents)
        return MultiAgentStep(
            {a: o[0] for a, o in out.items()},
            {a: o[1] for a, o in out.items()},
            {**{a: o[2] for a, o in out.items()}, ALL_AGENTS: done},
            {**{a: False for a in out}, ALL_AGENTS: False},
            {a: {} for a in out},
        )
