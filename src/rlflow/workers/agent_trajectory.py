"""The per-env state of a `MultiAgentSampler`: `EnvSlot` (one env and its episode in progress)
and `AgentTrajectory` (the rows of one agent in one episode that were not emitted yet: columns
as lists, one row per action whose outcome came back, and the agent's memory: its policy's
inputs besides the observation, `rlflow.models.memory`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    AGENT_INDEX,
    EPS_ID,
    LOGP,
    NEXT_OBS,
    OBS,
    PREV_REWARDS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VF_PREDS,
    SampleBatch,
)
from rlflow.envs.multi_agent import MultiAgentEnv
from rlflow.envs.vector import AgentReturn, EpisodeStat
from rlflow.models.memory import AnyMemory, NoMemory

__all__ = ["AgentTrajectory", "EnvSlot"]

Array = npt.NDArray[Any]
_ACT_COLUMNS = (OBS, ACTIONS, LOGP, VF_PREDS, ACTION_DIST_INPUTS)
"""Columns written when an agent acts (the others when the outcome of its action is known)."""


class AgentTrajectory:
    """Rows of one agent in one episode that were not emitted yet.

    ``memory`` (its policy's `TorchPolicy.memory` of one row) follows the agent: the state after
    each action, the action, the reward since; a policy with memory's rows also keep the
    agent's inputs before its action (``state_in_k``, `PREV_ACTIONS`, `PREV_REWARDS`).
    """

    __slots__ = (
        "_memory_columns",
        "agent_index",
        "columns",
        "eps_id",
        "last_next_obs",
        "memory",
        "policy_id",
        "rows",
        "unassigned_reward",
    )

    def __init__(
        self, policy_id: str, eps_id: int, agent_index: int, memory: AnyMemory | None = None
    ) -> None:
        self.policy_id = policy_id
        self.eps_id = eps_id
        self.agent_index = agent_index
        self.memory: AnyMemory = NoMemory() if memory is None else memory
        self.columns: dict[str, list[Any]] = {
            name: [] for name in (*_ACT_COLUMNS, REWARDS, TERMINATEDS, TRUNCATEDS, NEXT_OBS)
        }
        self._memory_columns = list(self.memory.row_columns())
        """The batch columns of the memory's inputs (none without memory)."""
        for name in self._memory_columns:
            self.columns[name] = []
        self.rows = 0  # complete rows (action, reward and outcome known)
        self.last_next_obs: Any = None
        self.unassigned_reward = 0.0  # late reward that came after the last row was taken

    @property
    def pending(self) -> bool:
        """True after an action whose outcome has not come back yet."""
        return len(self.columns[OBS]) > self.rows

    def act(self, ob: Any, actions: Array, extra: Mapping[str, Array], k: int) -> None:
        """A new (pending) row: the agent acted on ``ob`` as row ``k`` of its policy's batched
        step (``actions`` and the ``extra`` outputs of `TorchPolicy.compute_actions`); its
        memory takes the state after the action (row ``k`` of ``extra``'s)."""
        cols = self.columns
        cols[OBS].append(ob)
        cols[ACTIONS].append(actions[k])
        cols[LOGP].append(float(extra[LOGP][k]))
        cols[VF_PREDS].append(float(extra[VF_PREDS][k]))
        cols[ACTION_DIST_INPUTS].append(extra[ACTION_DIST_INPUTS][k])
        for name, value in self.memory.row_columns().items():
            cols[name].append(value)
        # The state after the action, the action; the reward comes with the outcome.
        self.memory.advance(extra, actions[k : k + 1], np.zeros(1), rows=slice(k, k + 1))

    def outcome(self, reward: float, next_ob: Any, *, terminated: bool, truncated: bool) -> None:
        cols = self.columns
        reward += self.unassigned_reward
        cols[REWARDS].append(reward)
        self.memory.add_reward(reward)
        self.unassigned_reward = 0.0
        cols[TERMINATEDS].append(terminated)
        cols[TRUNCATEDS].append(truncated)
        cols[NEXT_OBS].append(next_ob)
        self.last_next_obs = next_ob
        self.rows += 1

    def defer_reward(self, reward: float) -> None:
        """A reward for the pending action whose next observation has not come yet (the
        other agents' turns): it joins the row when the outcome comes."""
        self.unassigned_reward += reward

    def add_late_reward(self, reward: float) -> None:
        self.memory.add_reward(reward)
        if self.rows:
            self.columns[REWARDS][self.rows - 1] += reward
        else:  # the last row went out with the previous fragment: the next row gets it
            self.unassigned_reward += reward

    def end_idle(self, final_ob: Any, *, terminated: bool, truncated: bool) -> None:
        """The agent left in a step it did not act in: its last row now ends its trajectory."""
        if not self.rows:
            return
        cols, k = self.columns, self.rows - 1
        cols[TERMINATEDS][k] = terminated
        cols[TRUNCATEDS][k] = truncated
        if final_ob is not None:
            cols[NEXT_OBS][k] = self.last_next_obs = final_ob

    def cut(self) -> None:
        """The env failed: drop the pending action (its outcome never came) and a late reward,
        and end the trajectory at its last complete row as a truncation (with memory, the
        inputs go back to those of the dropped action's row)."""
        if self.pending:
            self.memory.set_row(0, self.memory.recorded(self.columns, self.rows))
        for values in self.columns.values():
            del values[self.rows :]
        self.unassigned_reward = 0.0
        if self.rows:
            self.columns[TERMINATEDS][self.rows - 1] = False
            self.columns[TRUNCATEDS][self.rows - 1] = True

    def take(self) -> SampleBatch:
        """The complete rows as a batch; a pending row stays."""
        n = self.rows
        cols = self.columns
        batch = SampleBatch(
            {
                OBS: np.asarray(cols[OBS][:n]),
                ACTIONS: np.asarray(cols[ACTIONS][:n]),
                REWARDS: np.asarray(cols[REWARDS], dtype=np.float32),
                TERMINATEDS: np.asarray(cols[TERMINATEDS], dtype=bool),
                TRUNCATEDS: np.asarray(cols[TRUNCATEDS], dtype=bool),
                LOGP: np.asarray(cols[LOGP][:n], dtype=np.float32),
                VF_PREDS: np.asarray(cols[VF_PREDS][:n], dtype=np.float32),
                ACTION_DIST_INPUTS: np.asarray(cols[ACTION_DIST_INPUTS][:n], dtype=np.float32),
                NEXT_OBS: np.asarray(cols[NEXT_OBS]),
                EPS_ID: np.full(n, self.eps_id, dtype=np.int64),
                AGENT_INDEX: np.full(n, self.agent_index, dtype=np.int64),
            }
        )
        for name in self._memory_columns:
            batch[name] = np.asarray(cols[name][:n])
        if PREV_REWARDS in batch:
            batch[PREV_REWARDS] = batch[PREV_REWARDS].astype(np.float32)
        for values in cols.values():
            del values[:n]  # the pending action (if any) stays
        self.rows = 0
        return batch


class EnvSlot:
    """One multi-agent env of a sampler and its episode in progress."""

    __slots__ = (
        "env",
        "eps_id",
        "finished",
        "length",
        "obs",
        "policy_of",
        "returns",
        "trajectories",
    )

    def __init__(self, env: MultiAgentEnv) -> None:
        self.env = env
        self.obs: dict[str, Any] = {}
        self.eps_id = 0
        self.length = 0
        self.returns: dict[str, float] = {}
        self.finished: list[AgentReturn] = []
        self.policy_of: dict[str, str] = {}
        self.trajectories: dict[str, AgentTrajectory] = {}

    def close_agent(self, agent: str) -> AgentTrajectory:
        """The agent left: its return is counted as finished; its trajectory, removed."""
        traj = self.trajectories.pop(agent)
        self.finished.append(AgentReturn(agent, traj.policy_id, self.returns.pop(agent, 0.0)))
        return traj

    def episode_stat(self, policy_for: Callable[[str], str]) -> EpisodeStat:
        """The episode's stats: the finished agent lives, then the agents still in it."""
        agents = (
            *self.finished,
            *(AgentReturn(agent, policy_for(agent), ret) for agent, ret in self.returns.items()),
        )
        return EpisodeStat(float(sum(a.return_ for a in agents)), self.length, agents)
