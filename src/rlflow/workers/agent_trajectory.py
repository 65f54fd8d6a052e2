"""The per-env state of a `MultiAgentSampler`: `EnvSlot` (one env and its episode in progress),
`AgentTrajectory` (the rows of one agent in one episode that were not emitted yet: columns as
lists, one row per action whose outcome came back) and, for an agent whose policy has memory,
its `AgentMemory`."""

from __future__ import annotations

from collections.abc import Callable
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
    PREV_ACTIONS,
    PREV_REWARDS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VF_PREDS,
    SampleBatch,
)
from rlflow.envs.multi_agent import MultiAgentEnv
from rlflow.envs.vector import AgentReturn, EpisodeStat
from rlflow.models.memory import state_in_key

__all__ = ["AgentMemory", "AgentTrajectory", "EnvSlot"]

Array = npt.NDArray[Any]
_ACT_COLUMNS = (OBS, ACTIONS, LOGP, VF_PREDS, ACTION_DIST_INPUTS)
"""Columns written when an agent acts (the others when the outcome of its action is known)."""


class AgentMemory:
    """One agent's inputs to a policy with memory: the model's state (one array per state
    tensor, no batch axis), the action it took last and the reward it got since (the initial
    state and zeros when it joins)."""

    __slots__ = ("prev_action", "prev_reward", "state")

    def __init__(self, state: list[Array], prev_action: Array) -> None:
        self.state = state
        self.prev_action = prev_action
        self.prev_reward = 0.0


class AgentTrajectory:
    """Rows of one agent in one episode that were not emitted yet.

    With ``memory`` (its policy is recurrent) each row also keeps the agent's inputs before
    its action (``state_in_k``, `PREV_ACTIONS`, `PREV_REWARDS`), and ``memory`` follows the
    agent: the state after each action, the action, the reward since.
    """

    __slots__ = (
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
        self, policy_id: str, eps_id: int, agent_index: int, memory: AgentMemory | None = None
    ) -> None:
        self.policy_id = policy_id
        self.eps_id = eps_id
        self.agent_index = agent_index
        self.columns: dict[str, list[Any]] = {
            name: [] for name in (*_ACT_COLUMNS, REWARDS, TERMINATEDS, TRUNCATEDS, NEXT_OBS)
        }
        self.memory = memory
        if memory is not None:
            for k in range(len(memory.state)):
                self.columns[state_in_key(k)] = []
            self.columns[PREV_ACTIONS] = []
            self.columns[PREV_REWARDS] = []
        self.rows = 0  # complete rows (action, reward and outcome known)
        self.last_next_obs: Any = None
        self.unassigned_reward = 0.0  # late reward that came after the last row was taken

    @property
    def pending(self) -> bool:
        """True after an action whose outcome has not come back yet."""
        return len(self.columns[OBS]) > self.rows

    def act(
        self,
        ob: Any,
        action: Any,
        logp: float,
        vf: float,
        dist: Array,
        state_out: list[Array] | None = None,
    ) -> None:
        """A new (pending) row; with memory, ``state_out`` is the state after the action."""
        cols = self.columns
        cols[OBS].append(ob)
        cols[ACTIONS].append(action)
        cols[LOGP].append(logp)
        cols[VF_PREDS].append(vf)
        cols[ACTION_DIST_INPUTS].append(dist)
        memory = self.memory
        if memory is not None:
            assert state_out is not None
            for k, state in enumerate(memory.state):
                cols[state_in_key(k)].append(state)
            cols[PREV_ACTIONS].append(memory.prev_action)
            cols[PREV_REWARDS].append(memory.prev_reward)
            memory.state = state_out
            memory.prev_action = np.asarray(action, dtype=memory.prev_action.dtype).reshape(
                memory.prev_action.shape
            )
            memory.prev_reward = 0.0

    def outcome(self, reward: float, next_ob: Any, *, terminated: bool, truncated: bool) -> None:
        cols = self.columns
        reward += self.unassigned_reward
        cols[REWARDS].append(reward)
        if self.memory is not None:
            self.memory.prev_reward = reward
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
        if self.memory is not None:
            self.memory.prev_reward += reward
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
        if self.memory is not None and self.pending:
            cols, k = self.columns, self.rows
            self.memory.state = [cols[state_in_key(i)][k] for i in range(len(self.memory.state))]
            self.memory.prev_action = cols[PREV_ACTIONS][k]
            self.memory.prev_reward = cols[PREV_REWARDS][k]
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
        if self.memory is not None:
            for k in range(len(self.memory.state)):
                batch[state_in_key(k)] = np.asarray(cols[state_in_key(k)][:n])
            batch[PREV_ACTIONS] = np.asarray(cols[PREV_ACTIONS][:n])
            batch[PREV_REWARDS] = np.asarray(cols[PREV_REWARDS][:n], dtype=np.float32)
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
