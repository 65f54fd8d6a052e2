"""`MultiAgentSampler`: the `rlflow.workers.sampler.Sampler` of multi-agent envs.

A rollout worker whose env is a `rlflow.envs.multi_agent.MultiAgentEnv` (or a PettingZoo env)
samples and evaluates through this class. Each step it groups the observations of the acting
agents of all its envs by policy (``policy_mapping_fn(agent_id)``, fixed per agent and
episode), runs one batched inference per policy, and steps every env with its action dict.
Rows are kept per agent and episode; an agent's trajectory is postprocessed by its policy
when the agent leaves (bootstrap 0 after a terminal step, V(last observation) after a
truncation) and at the end of each fragment (bootstrap V of the agent's next observation),
exactly like single-agent fragments. ``sample()`` returns a `MultiAgentBatch` whose env-step
count is ``rollout_fragment_length * num_envs``, while each policy's rows count agent steps.

Agents may join mid-episode (they appear in ``obs``) and leave (their ``terminateds`` or
``truncateds`` entry is True). A reward given to an agent that did not act in that step is
added to its last row (to its next row when the last one already went out with a fragment).

Episode stats (`rlflow.envs.EpisodeStat`) hold one `rlflow.envs.AgentReturn` per agent life:
from when the agent joined to when it left (or the episode ended), so an agent that leaves
and re-joins counts each stay as one agent episode. Evaluation (`Sampler.run_episodes`) takes
the same steps and keeps these stats, but emits no rows.
"""

from __future__ import annotations

import logging
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
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VF_PREDS,
    MultiAgentBatch,
    SampleBatch,
)
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentEnv
from rlflow.envs.vector import AgentReturn, EpisodeStat, env_action
from rlflow.policy import TorchPolicy
from rlflow.workers.sampler import (
    MappingFn,
    Sampler,
    agent_policy_map,
    as_multi_agent_env,
    is_multi_agent_env,
)

__all__ = [
    "MultiAgentSampler",
    "agent_policy_map",
    "as_multi_agent_env",
    "env_action",
    "is_multi_agent_env",
]

logger = logging.getLogger(__name__)

Array = npt.NDArray[Any]
_ACT_COLUMNS = (OBS, ACTIONS, LOGP, VF_PREDS, ACTION_DIST_INPUTS)
"""Columns written when an agent acts (the others when the outcome of its action is known)."""


class _Trajectory:
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


class _EnvSlot:
    """One multi-agent env of the sampler and its episode in progress."""

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
        self.trajectories: dict[str, _Trajectory] = {}


class MultiAgentSampler(Sampler):
    """Steps ``num_envs`` multi-agent envs with a policy map; see the module docstring.

    Args:
        creator: builds one env (a `MultiAgentEnv` or a PettingZoo env).
        num_envs: envs stepped together.
        policies: the worker's policy map.
        mapping_fn: agent id -> policy id (None: the only policy).
        seed: env ``j`` is reset with ``seed + j`` first (None: unseeded).
        new_eps_id: gives a fresh episode id (unique across the run's workers).
        explore: sample actions (True) or take the greedy ones.

    Every row has `NEXT_OBS` (replay and V-trace learners read it) and `AGENT_INDEX`.
    """

    def __init__(
        self,
        creator: Callable[[], Any],
        num_envs: int,
        policies: Mapping[str, TorchPolicy],
        mapping_fn: MappingFn | None,
        seed: int | None,
        new_eps_id: Callable[[], int],
        *,
        explore: bool = True,
    ) -> None:
        """Build the envs (reset on the first ``sample()``)."""
        super().__init__(explore=explore)
        self.slots = [_EnvSlot(as_multi_agent_env(creator())) for _ in range(num_envs)]
        self.policies = policies
        self.mapping_fn = mapping_fn
        self._policy_ids = list(policies)
        self._seed = seed
        self._new_eps_id = new_eps_id
        self._started = False
        self._episodes: list[EpisodeStat] = []
        env = self.slots[0].env
        self._agent_index = {a: i for i, a in enumerate(env.possible_agents)}
        self._action_spaces = dict(env.action_spaces)
        self._length = 0
        self._out: dict[str, list[SampleBatch]] = {pid: [] for pid in self._policy_ids}

    # ------------------------------------------------------------------ episodes
    def _start_episode(self, slot: _EnvSlot, seed: int | None) -> None:
        obs, _ = slot.env.reset(seed=seed)
        slot.obs = {a: ob for a, ob in obs.items() if a in slot.env.agents}
        slot.eps_id = self._new_eps_id()
        slot.length = 0
        slot.returns = {}
        slot.finished = []
        slot.policy_of = {}
        slot.trajectories = {}

    def _policy_for(self, slot: _EnvSlot, agent: str) -> str:
        pid = slot.policy_of.get(agent)
        if pid is None:
            pid = agent_policy_map([agent], self.mapping_fn, self._policy_ids)[agent]
            slot.policy_of[agent] = pid
        return pid

    def _trajectory(self, slot: _EnvSlot, agent: str) -> _Trajectory:
        traj = slot.trajectories.get(agent)
        if traj is None:
            traj = _Trajectory(
                self._policy_for(slot, agent), slot.eps_id, self._agent_index.get(agent, -1)
            )
            slot.trajectories[agent] = traj
        return traj

    def pop_episode_stats(self) -> list[EpisodeStat]:
        """Episodes finished since the last call, in the order they ended."""
        out, self._episodes = self._episodes, []
        return out

    # ------------------------------------------------------------------ sampling
    def _start(self, length: int) -> None:
        self._length = length
        if not self._started:
            for j, slot in enumerate(self.slots):
                self._start_episode(slot, None if self._seed is None else self._seed + j)
            self._started = True

    def _step(self, t: int, *, record: bool) -> None:
        self._act_all()
        for slot in self.slots:
            self._step_slot(slot, record=record)

    def _take_fragment(self) -> MultiAgentBatch:
        """Every agent's rows so far, postprocessed per policy; env steps = length * envs."""
        for slot in self.slots:
            for traj in slot.trajectories.values():
                if traj.rows:
                    self._emit(traj, terminated=False)
        out, self._out = self._out, {pid: [] for pid in self._policy_ids}
        batches = {pid: SampleBatch.concat_samples(b) for pid, b in out.items() if b}
        return MultiAgentBatch(batches, self._length * len(self.slots))

    def _act_all(self) -> None:
        """One batched inference per policy over the acting agents of every env."""
        groups: dict[str, list[tuple[_EnvSlot, str]]] = {}
        for slot in self.slots:
            for agent in slot.obs:
                groups.setdefault(self._policy_for(slot, agent), []).append((slot, agent))
        for pid, members in groups.items():
            obs = np.stack([np.asarray(slot.obs[agent]) for slot, agent in members])
            actions, extra = self.policies[pid].compute_actions(obs, explore=self.explore)
            logp, vf, dist = extra[LOGP], extra[VF_PREDS], extra[ACTION_DIST_INPUTS]
            for k, (slot, agent) in enumerate(members):
                self._trajectory(slot, agent).act(
                    slot.obs[agent], actions[k], float(logp[k]), float(vf[k]), dist[k]
                )

    def _step_slot(self, slot: _EnvSlot, *, record: bool) -> None:
        env = slot.env
        actions = {
            agent: env_action(
                self._action_spaces.get(agent), slot.trajectories[agent].columns[ACTIONS][-1]
            )
            for agent in slot.obs
        }
        step = env.step(actions)
        slot.length += 1
        all_term = bool(step.terminateds.get(ALL_AGENTS, False))
        all_trunc = bool(step.truncateds.get(ALL_AGENTS, False))
        over = all_term or all_trunc
        for agent, reward in step.rewards.items():
            slot.returns[agent] = slot.returns.get(agent, 0.0) + float(reward)
        for agent in list(slot.trajectories):
            traj = slot.trajectories[agent]
            reward = float(step.rewards.get(agent, 0.0))
            terminated = bool(step.terminateds.get(agent, False)) or all_term
            truncated = not terminated and (bool(step.truncateds.get(agent, False)) or all_trunc)
            if not traj.pending:  # it sat this step out, yet may be rewarded or leave
                traj.add_late_reward(reward)
                if terminated or truncated:
                    traj.end_idle(step.obs.get(agent), terminated=terminated, truncated=truncated)
                    self._close(slot, agent, record=record, terminated=terminated)
                continue
            next_ob = step.obs.get(agent, traj.columns[OBS][-1])
            traj.outcome(reward, next_ob, terminated=terminated, truncated=truncated)
            if terminated or truncated:
                self._close(slot, agent, record=record, terminated=terminated)
        if over:
            self._record_episode(slot)
            self._start_episode(slot, None)
            return
        active = set(env.agents)
        slot.obs = {a: ob for a, ob in step.obs.items() if a in active}

    def _close(self, slot: _EnvSlot, agent: str, *, record: bool, terminated: bool) -> None:
        """The agent left: count its return; emit its rows (evaluation drops them)."""
        traj = slot.trajectories.pop(agent)
        slot.finished.append(AgentReturn(agent, traj.policy_id, slot.returns.pop(agent, 0.0)))
        if record and traj.rows:
            self._emit(traj, terminated=terminated)

    def _emit(self, traj: _Trajectory, *, terminated: bool) -> None:
        """Postprocess the trajectory's complete rows with the right bootstrap value."""
        policy = self.policies[traj.policy_id]
        last_value = 0.0
        if not terminated and policy.use_critic:
            last_value = float(policy.value(np.asarray(traj.last_next_obs)[None])[0])
        batch = traj.take()
        self._out[traj.policy_id].append(
            policy.postprocess_trajectory(batch, last_value=last_value)
        )

    def _record_episode(self, slot: _EnvSlot) -> None:
        agents = (
            *slot.finished,
            *(
                AgentReturn(agent, self._policy_for(slot, agent), ret)
                for agent, ret in slot.returns.items()
            ),
        )
        total = float(sum(a.return_ for a in agents))
        self._episodes.append(EpisodeStat(total, slot.length, agents))

    def get_state(self) -> dict[str, Any]:
        """The envs, episodes in progress and finished-episode stats (picklable)."""
        return {"slots": self.slots, "started": self._started, "episodes": self._episodes}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state` (the envs built in ``__init__`` are closed first)."""
        self.close()
        self.slots = state["slots"]
        self._started = state["started"]
        self._episodes = list(state["episodes"])

    @property
    def envs(self) -> list[Any]:
        """The envs, in order."""
        return [slot.env for slot in self.slots]

    def close(self) -> None:
        """Close every env."""
        for slot in self.slots:
            slot.env.close()
