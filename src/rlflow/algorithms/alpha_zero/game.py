"""The game a search plays in: a turn-based two-player env, copied for each node it expands.

What an env must support (checked by :func:`check_game` before any actor starts, a
`ConfigError` naming what is missing otherwise):

- it is a multi-agent env with exactly two agents that take turns: after ``reset`` and after
  every step that does not end the game, exactly one agent is in ``agents`` (PettingZoo's AEC
  classic games through `rlflow.envs.multi_agent.PettingZooAECEnv`: ``tictactoe_v3``,
  ``connect_four_v3``, ...);
- each agent's observation carries its legal-action mask (a ``Dict`` observation with an
  ``action_mask``, flattened with the mask last: `rlflow.envs.flatten.ActionMaskBox`) and its
  actions are ``Discrete``;
- the game is zero-sum and its outcome is the rewards of the step that ends it (win +1,
  loss -1, draw 0; rewards before the end are not searched);
- its state can be copied: an env with a ``clone()`` method (the state API) is copied with it;
  any other by :func:`copy_game`, a structural copy of its attributes (lists, dicts, sets,
  numpy arrays and plain objects are copied; spaces, RNGs, functions and classes are shared).
  ``copy.deepcopy`` is not used: PettingZoo's envs pickle as their constructor's arguments
  (``EzPickle``), so a deep copy is a new game, not the position. A copy stepped must leave
  the original as it was; :func:`check_game` plays a move on two copies and compares.
"""

from __future__ import annotations

import types
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from rlflow.envs.flatten import ActionMaskBox
from rlflow.errors import ConfigError

__all__ = ["GameStep", "TurnGame", "check_game", "copy_game"]

Array = npt.NDArray[Any]

_SHARED_TYPES: tuple[type, ...] = (
    gym.Space,
    np.random.Generator,
    np.random.RandomState,
    np.random.BitGenerator,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    type,
)
_ATOMS: tuple[type, ...] = (int, float, bool, str, bytes, complex, type(None), np.generic)


def copy_game(env: Any) -> Any:
    """A copy of ``env`` in its current position: ``env.clone()`` when it has one, else a
    structural copy (module docstring). Stepping the copy leaves ``env`` unchanged."""
    clone = getattr(env, "clone", None)
    if callable(clone):
        return clone()
    return _copy(env, {})


def _copy(value: Any, memo: dict[int, Any]) -> Any:
    if isinstance(value, _ATOMS):
        return value
    key = id(value)
    if key in memo:
        return memo[key]
    if isinstance(value, _SHARED_TYPES):
        return value
    if isinstance(value, list | dict) or hasattr(value, "__dict__"):
        return _copy_container(value, memo)
    if isinstance(value, np.ndarray):
        out: Any = value.copy()
    elif isinstance(value, tuple):
        items = [_copy(v, memo) for v in value]
        out = type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    elif isinstance(value, set | frozenset):
        out = type(value)(_copy(v, memo) for v in value)
    else:
        raise ConfigError(
            f"copy_game: cannot copy a {type(value).__name__} in the game's state; give the env "
            "a clone() method that copies its position"
        )
    memo[key] = out
    return out


def _copy_container(value: Any, memo: dict[int, Any]) -> Any:
    """A list, dict or plain object: registered in ``memo`` before its items are copied, so
    references back to it (an env's wrapper and its inner env) stay one object."""
    if isinstance(value, list):
        out: Any = []
        memo[id(value)] = out
        out.extend(_copy(v, memo) for v in value)
        return out
    if isinstance(value, dict):
        out = type(value)() if type(value) is dict else value.copy()
        memo[id(value)] = out
        for k, v in value.items():
            out[k] = _copy(v, memo)
        return out
    out = object.__new__(type(value))
    memo[id(value)] = out
    state = out.__dict__
    for k, v in vars(value).items():
        state[k] = _copy(v, memo)
    return out


class GameStep(NamedTuple):
    """A position of the game: whose turn, what they see, and how it ended if it did."""

    player: str | None
    """The agent to move (None once the game is over)."""
    obs: Array | None
    """The mover's flat observation, its action mask last (None once over)."""
    rewards: dict[str, float]
    """Each agent's reward of the step that led here (the outcome, once over)."""

    @property
    def over(self) -> bool:
        """Whether the game ended."""
        return self.player is None


class TurnGame:
    """A turn-based game for search: an env in a position, copied by :meth:`play`.

    Args:
        env: the game (module docstring), already reset.
        position: where it stands (the first mover's observation after ``reset``).
        mask_size: how many of an observation's last values are the action mask.
    """

    def __init__(self, env: Any, position: GameStep, mask_size: int) -> None:
        """Hold ``env`` at ``position``."""
        self.env, self.position, self.mask_size = env, position, int(mask_size)

    @classmethod
    def start(cls, env: Any, *, seed: int | None = None) -> TurnGame:
        """Reset ``env`` (with ``seed``) and hold it at the first position."""
        obs, _ = env.reset(seed=seed)
        (player,) = obs  # one mover (check_game)
        space = env.observation_spaces[player]
        mask = space.action_mask_size if isinstance(space, ActionMaskBox) else 0
        return cls(env, GameStep(player, np.asarray(obs[player], np.float32), {}), mask)

    def legal(self) -> npt.NDArray[np.bool_]:
        """The mover's legal actions (bool ``[A]``)."""
        assert self.position.obs is not None, "the game is over"
        return self.position.obs[-self.mask_size :] > 0.5

    def step(self, action: int) -> GameStep:
        """Play ``action`` for the mover in this env (not a copy) and return the new position."""
        player = self.position.player
        assert player is not None, "the game is over"
        out = self.env.step({player: int(action)})
        over = bool(out.terminateds.get("__all__")) or bool(out.truncateds.get("__all__"))
        movers = [a for a in self.env.agents]
        if over or not movers:
            self.position = GameStep(None, None, dict(out.rewards))
        else:
            (mover,) = movers
            self.position = GameStep(mover, np.asarray(out.obs[mover], np.float32), out.rewards)
        return self.position

    def play(self, action: int) -> TurnGame:
        """A copy of this game with ``action`` played (this one unchanged)."""
        game = TurnGame(copy_game(self.env), self.position, self.mask_size)
        game.step(action)
        return game


def check_game(env: Any, name: str) -> None:
    """Raise `ConfigError` unless ``env`` is a game AlphaZero can search (module docstring):
    two agents taking turns, masked Discrete actions, a state that copies. Resets and steps
    ``env`` and copies of it (the caller closes it)."""
    where = f"alpha_zero: env {name!r}"
    agents = getattr(env, "possible_agents", None)
    if agents is None or not hasattr(env, "observation_spaces"):
        raise ConfigError(
            f"{where} is not a multi-agent game; AlphaZero plays two-player turn-based games "
            "(PettingZoo AEC classic envs such as pettingzoo.classic.tictactoe_v3)"
        )
    if len(agents) != 2:
        raise ConfigError(f"{where} has {len(agents)} agents {list(agents)}; AlphaZero needs 2")
    for agent in agents:
        space, act = env.observation_spaces[agent], env.action_spaces[agent]
        if not isinstance(space, ActionMaskBox):
            raise ConfigError(
                f"{where}: agent {agent!r}'s observations {space} carry no action mask; "
                "AlphaZero needs a Dict observation with an 'action_mask' (PettingZoo's "
                "convention)"
            )
        if not isinstance(act, gym.spaces.Discrete):
            raise ConfigError(f"{where}: agent {agent!r}'s actions {act} are not Discrete")
    obs, _ = env.reset(seed=0)
    if len(obs) != 1:
        raise ConfigError(
            f"{where} is not turn-based: {sorted(obs)} act at once after reset; AlphaZero "
            "needs one mover per step (an AEC game)"
        )
    game = TurnGame.start(env, seed=0)
    action = int(np.flatnonzero(game.legal())[0])
    try:
        first, second = game.play(action), game.play(action)
    except ConfigError as err:
        raise ConfigError(f"{where}: its state cannot be copied for search: {err}") from None
    before = game.position.obs
    assert before is not None
    same = _same(first.position, second.position) and not _same(first.position, game.position)
    if (
        not same
        or game.position.obs is not before
        or not np.array_equal(game.legal(), game.legal())
    ):
        raise ConfigError(
            f"{where}: its state cannot be copied for search (a copy stepped did not show the "
            "move, or changed the original); give the env a clone() method that copies its "
            "position"
        )
    game.step(action)  # the original still takes the move: it was not played on it
    if not _same(game.position, first.position):
        raise ConfigError(
            f"{where}: its state cannot be copied for search (the original moved with its "
            "copy); give the env a clone() method that copies its position"
        )


def _same(a: GameStep, b: GameStep) -> bool:
    if a.player != b.player:
        return False
    if a.obs is None or b.obs is None:
        return a.obs is b.obs
    return bool(np.array_equal(a.obs, b.obs))
