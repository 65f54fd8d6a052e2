"""The per-env state of a `MultiAgentSampler`: `EnvSlot` (one env and its episode in progress)
and `AgentTrajectory` (the rows of one agent in one episode that were not emitted yet: columns
as lists, one row per action whose outcome came back)."""

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
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VF_PREDS,
    SampleBatch,
)
from rlflow.envs.multi_agent import MultiAgentEnv
from rlflow.envs.vector import AgentReturn, EpisodeStat

__all__ = ["AgentTrajectory", "EnvSlot"]

Array = npt.NDArray[Any]
_ACT_COLUMNS = (OBS, ACTIONS, LOGP, VF_PREDS, ACTION_DIST_INPUTS)
"""Columns written when an agent acts (the others when the outcome of its action is known)."""


class AgentTrajectory:
    """Rows of one agent in one episode that were not emitted yet."""

    __slots__ = (
        "agent_index",
        "columns",
        "eps_id",
        "last_next_obs",
        "policy_id",
        "rows",
        "unassigned_reward",
    )

    def __init__(self, policy_id: str, eps_id: int, agent_index: int) -> None:
        self.policy_id = policy_id
        self.eps_id = eps_id
        self.agent_index = agent_index
        self.columns: dict[str, list[Any]] = {
            name: [] for name in (*_ACT_COLUMNS, REWARDS, TERMINATEDS, TRUNCATEDS, NEXT_OBS)
        }
        self.rows = 0  # complete rows (action, reward and outcome known)
        self.last_next_obs: Any = None
        self.unassigned_reward = 0.0  # late reward that came after the last row was taken

    @property
    def pending(self) -> bool:
        """True after an action whose outcome has not come back yet."""
        return len(self.columns[OBS]) > self.rows

    def act(self, ob: Any, action: Any, logp: float, vf: float, dist: Array) -> None:
        cols = self.columns
        cols[OBS].append(ob)
        cols[ACTIONS].append(action)
        cols[LOGP].append(logp)
        cols[VF_PREDS].append(vf)
        cols[ACTION_DIST_INPUTS].append(dist)

    def outcome(self, reward: float, next_ob: Any, *, terminated: bool, truncated: bool) -> None:
        cols = self.columns
        cols[REWARDS].append(reward + self.unassigned_reward)
        self.unassigned_reward = 0.0
        cols[TERMINATEDS].append(terminated)
        cols[TRUNCATEDS].append(truncated)
        cols[NEXT_OBS].append(next_ob)
        self.last_next_obs = next_ob
        self.rows += 1

    def add_late_reward(self, reward: float) -> None:
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
        and end the trajectory at its last complete row as a truncation."""
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
