"""`EpisodeReplay`: DreamerV3's replay, episodes as streams of observations, drawn as windows.

The world model learns on sequences in which step ``t`` holds the observation ``o_t``, the
action ``a_{t-1}`` that led to it, the reward ``r_t`` received on arriving at it, whether it is
an episode's first observation and whether it is terminal (the paper's ``is_first``,
``is_terminal``). The rollout workers' rows hold ``(o_t, a_t, r_t, terminated_t, o_{t+1})``
instead (`NEXT_OBS` comes with every row for this policy), so :meth:`EpisodeReplay.add` turns an
episode's rows into its stream: its first observation (with no action, reward 0, first), then
one entry per row for the observation after it. Rows of one episode (`EPS_ID`) arriving in
several fragments extend the same stream; an episode id not seen before starts one.

:meth:`EpisodeReplay.sample` draws ``B`` windows of ``T`` consecutive entries, each starting at a
uniformly drawn entry; a window that reaches the end of its episode goes on at the start of
another drawn at random (its first entry says so: the RSSM starts over there), as the
authors' replay runs across episode boundaries. When the replay holds more than ``capacity``
entries, the oldest episodes go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.data.sample_batch import (
    ACTIONS,
    EPS_ID,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    SampleBatch,
)
from rlflow.errors import ConfigError

__all__ = ["IS_FIRST", "IS_TERMINAL", "EpisodeReplay"]

Array = npt.NDArray[Any]

IS_FIRST = "is_first"
"""Column ``[B, T]``: the entry is an episode's first observation."""
IS_TERMINAL = "is_terminal"
"""Column ``[B, T]``: the entry is an episode's terminal observation (not a time limit)."""


class _Stream:
    """One episode's entries, grown in place (capacity doubling)."""

    def __init__(self, obs: Array, action_dim: int) -> None:
        self.size = 0
        cap = 64
        self.obs = np.zeros((cap, *obs.shape), obs.dtype)
        self.actions = np.zeros((cap, action_dim), np.float32)
        self.rewards = np.zeros(cap, np.float32)
        self.terminal = np.zeros(cap, bool)
        self.append(obs[None], np.zeros((1, action_dim), np.float32), np.zeros(1), np.zeros(1))

    def append(self, obs: Array, actions: Array, rewards: Array, terminal: Array) -> None:
        n = len(obs)
        if self.size + n > len(self.obs):
            cap = max(2 * len(self.obs), self.size + n)
            for name in ("obs", "actions", "rewards", "terminal"):
                old = getattr(self, name)
                new = np.zeros((cap, *old.shape[1:]), old.dtype)
                new[: self.size] = old[: self.size]
                setattr(self, name, new)
        end = self.size + n
        self.obs[self.size : end] = obs
        self.actions[self.size : end] = actions
        self.rewards[self.size : end] = rewards
        self.terminal[self.size : end] = terminal
        self.size = end


class EpisodeReplay:
    """Episodes as streams, drawn as windows of ``T`` entries (module docstring).

    Args:
        capacity: entries (about env steps) kept, the oldest episodes dropped first.
        encode_actions: the env's actions ``[N, ...]`` as the world model's inputs ``[N, dim]``
            (`rlflow.algorithms.dreamerv3.model.ActionCodec.encode`).
        action_dim: the width of those inputs.
        seed: seeds the draws.
    """

    def __init__(
        self,
        capacity: int,
        encode_actions: Callable[[Array], Array],
        action_dim: int,
        *,
        seed: int | None = None,
    ) -> None:
        """An empty replay."""
        self.capacity = int(capacity)
        self.encode_actions = encode_actions
        self.action_dim = int(action_dim)
        self.episodes: OrderedDict[int, _Stream] = OrderedDict()
        self.size = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        """Entries held."""
        return self.size

    def add(self, batch: SampleBatch) -> int:
        """Add a sampled batch's rows (any number of episodes' fragments, each episode's rows in
        order); returns the env steps added. `ConfigError` unless the rows carry `NEXT_OBS`
        and `EPS_ID`."""
        for column in (OBS, NEXT_OBS, ACTIONS, REWARDS, TERMINATEDS, EPS_ID):
            if column not in batch:
                raise ConfigError(
                    f"EpisodeReplay.add: the batch has no {column!r} column (columns: "
                    f"{sorted(batch)}); DreamerV3's policy asks the workers for next_obs"
                )
        eps = np.asarray(batch[EPS_ID])
        if not len(eps):
            return 0
        # Runs of equal episode ids, in row order.
        cuts = np.flatnonzero(eps[1:] != eps[:-1]) + 1
        starts = np.concatenate([[0], cuts])
        ends = np.concatenate([cuts, [len(eps)]])
        actions = self.encode_actions(np.asarray(batch[ACTIONS]))
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            key = int(eps[a])
            stream = self.episodes.get(key)
            if stream is None:
                stream = self.episodes[key] = _Stream(np.asarray(batch[OBS][a]), self.action_dim)
                self.size += 1
            stream.append(
                np.asarray(batch[NEXT_OBS][a:b]),
                actions[a:b],
                np.asarray(batch[REWARDS][a:b], np.float32),
                np.asarray(batch[TERMINATEDS][a:b], bool),
            )
            self.size += b - a
        self._evict()
        return len(eps)

    def get_state(self) -> dict[str, Any]:
        """The held episodes (arrays trimmed to their entries, oldest first) and the draws'
        RNG state, for checkpoints (``checkpoint_replay_buffers``)."""
        return {
            "episodes": [
                {
                    "obs": s.obs[: s.size].copy(),
                    "actions": s.actions[: s.size].copy(),
                    "rewards": s.rewards[: s.size].copy(),
                    "terminal": s.terminal[: s.size].copy(),
                }
                for s in self.episodes.values()
            ],
            "rng": self.rng.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Hold the episodes of :meth:`get_state` instead of this replay's, and draw on from its
        RNG state. Their episode ids are not kept (each gets a negative key): no episode
        sampled after a restore extends one of them."""
        self.episodes = OrderedDict()
        self.size = 0
        for k, ep in enumerate(state["episodes"]):
            obs = np.asarray(ep["obs"])
            stream = _Stream(obs[0], self.action_dim)
            stream.append(
                obs[1:],
                np.asarray(ep["actions"], np.float32)[1:],
                np.asarray(ep["rewards"], np.float32)[1:],
                np.asarray(ep["terminal"], bool)[1:],
            )
            self.episodes[-1 - k] = stream
            self.size += stream.size
        self.rng.bit_generator.state = state["rng"]
        self._evict()

    def _evict(self) -> None:
        while self.size > self.capacity and len(self.episodes) > 1:
            _, old = self.episodes.popitem(last=False)
            self.size -= old.size

    def sample(self, batch_size: int, length: int) -> SampleBatch:
        """``batch_size`` windows of ``length`` entries: columns `OBS` ``[B, T, ...]``,
        `ACTIONS` ``[B, T, dim]`` (the action before each entry), `REWARDS`, `IS_FIRST`,
        `IS_TERMINAL` ``[B, T]``."""
        if not self.size:
            raise ConfigError("EpisodeReplay.sample: the replay is empty")
        streams = list(self.episodes.values())
        sizes = np.asarray([s.size for s in streams], np.float64)
        probs = sizes / sizes.sum()
        first = next(iter(streams))
        obs = np.zeros((batch_size, length, *first.obs.shape[1:]), first.obs.dtype)
        actions = np.zeros((batch_size, length, self.action_dim), np.float32)
        rewards = np.zeros((batch_size, length), np.float32)
        is_first = np.zeros((batch_size, length), bool)
        terminal = np.zeros((batch_size, length), bool)
        for b in range(batch_size):
            k = int(self.rng.choice(len(streams), p=probs))
            start = int(self.rng.integers(0, streams[k].size))
            filled = 0
            while filled < length:
                stream = streams[k]
                n = min(length - filled, stream.size - start)
                sl = slice(filled, filled + n)
                obs[b, sl] = stream.obs[start : start + n]
                actions[b, sl] = stream.actions[start : start + n]
                rewards[b, sl] = stream.rewards[start : start + n]
                terminal[b, sl] = stream.terminal[start : start + n]
                is_first[b, filled] = start == 0
                filled += n
                k, start = int(self.rng.integers(0, len(streams))), 0
        return SampleBatch(
            {
                OBS: obs,
                ACTIONS: actions,
                REWARDS: rewards,
                IS_FIRST: is_first,
                IS_TERMINAL: terminal,
            }
        )
