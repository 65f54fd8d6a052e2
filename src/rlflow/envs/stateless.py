"""`StatelessCartPole`: CartPole-v1 without its velocities, a task that needs memory.

Importing `rlflow.envs` registers :data:`STATELESS_CARTPOLE_ID` (``rlflow/StatelessCartPole-v1``).
The observation keeps the cart position and the pole angle (CartPole's components 0 and 2) and
drops the cart velocity and the pole's angular velocity (1 and 3): a policy that sees one
observation cannot tell which way the pole is falling, so it needs memory (a recurrent model,
or a stack of past frames) to balance it. Dynamics, rewards, episode ends and the 500-step
limit are CartPole-v1's (RLlib's ``StatelessCartPole`` is the same task).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["STATELESS_CARTPOLE_ID", "StatelessCartPole", "make_stateless_cartpole"]

STATELESS_CARTPOLE_ID = "rlflow/StatelessCartPole-v1"
"""Gymnasium id of `make_stateless_cartpole` (CartPole-v1's kwargs, e.g. ``render_mode``)."""

_KEPT = np.array([0, 2])
"""The components of CartPole's observation that stay: cart position, pole angle."""


class StatelessCartPole(gym.ObservationWrapper[Any, Any, Any]):
    """Wraps a CartPole env; observations keep the cart position and the pole angle only.

    Example:
        >>> env = StatelessCartPole(gym.make("CartPole-v1"))
        >>> obs, _ = env.reset(seed=0)
        >>> obs.shape, env.observation_space.shape
        ((2,), (2,))
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        """Wrap ``env`` (a CartPole: a 4-component Box observation)."""
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or space.shape != (4,):
            raise ValueError(
                f"StatelessCartPole wraps a CartPole env (Box observations of shape (4,)), got "
                f"{space}"
            )
        self.observation_space = gym.spaces.Box(
            low=space.low[_KEPT], high=space.high[_KEPT], dtype=space.dtype
        )

    def observation(self, observation: Any) -> Any:
        """Cart position and pole angle of CartPole's observation."""
        return np.asarray(observation)[_KEPT]


def make_stateless_cartpole(**kwargs: Any) -> StatelessCartPole:
    """``StatelessCartPole(gym.make("CartPole-v1", **kwargs))``: the registered entry point."""
    return StatelessCartPole(gym.make("CartPole-v1", **kwargs))
