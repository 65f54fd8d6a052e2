"""`RecordGameScore`: a game's own score, kept below the wrappers that reshape episodes.

The DeepMind wrappers end an episode at each lost life (`rlflow.envs.atari.EpisodicLifeEnv`)
and clip rewards to their sign (`rlflow.envs.atari.ClipRewardEnv`): good for learning, but the
sum of what reaches the learner is neither the game's score nor per game. `RecordGameScore`
wraps the raw game, below them, sums its rewards from a real reset to game over (or
truncation), and puts that sum in the step's ``info`` under `GAME_SCORE`. An env whose wrapper
chain has ``reports_game_score`` (`gymnasium.Env.has_wrapper_attr`) is counted by
`rlflow.envs.vector.VectorEnv` per game: an episode of its statistics is a whole game, whose
return is that score, whatever the wrappers above did to episodes and rewards.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

__all__ = ["GAME_SCORE", "RecordGameScore", "reports_game_score"]

GAME_SCORE = "game_score"
"""The ``info`` key of the step that ends a game: the game's score (the sum of its rewards)."""


class RecordGameScore(gym.Wrapper[Any, Any, Any, Any]):
    """Sum the wrapped game's rewards since its last reset; at game over (``terminated`` or
    ``truncated`` from the game itself) add ``info[GAME_SCORE] = that sum``.

    Put it directly around the game, below any wrapper that ends episodes early or changes
    rewards. Steps taken by wrappers above (no-ops after a reset, FIRE, the NOOP that goes on
    after a lost life) pass through it, so their rewards count too. Observations, rewards and
    flags are unchanged.
    """

    reports_game_score = True
    """Marks the chain for `reports_game_score`."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        """Wrap the raw game ``env``."""
        super().__init__(env)
        self.score = 0.0
        """The sum of the game's rewards since its last reset."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the game and the score."""
        self.score = 0.0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the game; at its end the step's ``info`` gains `GAME_SCORE`."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.score += float(reward)
        if terminated or truncated:
            info = {**info, GAME_SCORE: self.score}
        return obs, reward, terminated, truncated, info


def reports_game_score(env: Any) -> bool:
    """Whether ``env`` (a Gymnasium env) has a `RecordGameScore` (or another wrapper with
    ``reports_game_score = True``) in its wrapper chain."""
    has = getattr(env, "has_wrapper_attr", None)
    return bool(callable(has) and has("reports_game_score"))
