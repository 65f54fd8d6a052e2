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
``truncateds`` entry is True). An agent's row is complete when its next observation comes:
at once for an agent in the step's ``obs`` (or leaving in it), else (a turn-based game, where
the others move in between: `rlflow.envs.multi_agent.PettingZooAECEnv`) at the agent's next
turn, its reward being all it got until then. A reward given to an agent with no open row is
added to its last row (to its next row when the last one already went out with a fragment).

An env that raises in ``reset`` or ``step`` gets a note naming the env, the worker and its
index, and the error propagates; with ``restart_failed`` the env is closed and rebuilt instead
(first reset with `rlflow.envs.validation.restart_seed`), its episode is not reported, each
agent's pending action (whose outcome never came) is dropped and its trajectory ends at its
last complete row as a truncation (bootstrap V(that row's next observation)), as in
`VectorSampler`. Agents' observations are checked against their spaces on the first
`OBS_CHECK_STEPS` steps after each env is built (`ConfigError` naming the env and the agent).

Episode stats (`rlflow.envs.EpisodeStat`) hold one `rlflow.envs.AgentReturn` per agent life:
from when the agent joined to when it left (or the episode ended), so an agent that leaves
and re-joins counts each stay as one agent episode. Evaluation (`Sampler.run_episodes`) takes
the same steps and keeps these stats, but emits no rows.

Observation filters (``filters``: ``{policy id: MeanStdFilter}``, RLlib's choice of one filter
per policy): an agent's observations go through the filter of its policy as they arrive, once
each, one batch per policy per env and step: those of a reset, and after a step those of the
agents that acted (their next or last observations) or will act; when the episode ended,
the next episode's first observations come in their own batch. Rows hold the filtered
observations. A policy without a filter sees raw observations.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from rlflow.checks import check_bool
from rlflow.config.self_play import EpisodeInfo
from rlflow.data.sample_batch import (
    ACTIONS,
    NEXT_OBS,
    OBS,
    MultiAgentBatch,
    SampleBatch,
)
from rlflow.data.sequences import cut_sequences
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentStep
from rlflow.envs.nonfinite import MAX_RESET_ATTEMPTS, all_finite, nonfinite_message
from rlflow.envs.validation import (
    MAX_RESTART_ATTEMPTS,
    OBS_CHECK_STEPS,
    check_observation,
    check_returned,
    close_quietly,
    env_failure_note,
    env_location,
    env_name,
    pickles_by_constructor,
    restart_seed,
)
from rlflow.envs.vector import EpisodeStat, env_action
from rlflow.errors import ConfigError, NonFiniteError
from rlflow.filters import MeanStdFilter
from rlflow.models.memory import AnyMemory
from rlflow.workers.agent_trajectory import AgentTrajectory, EnvSlot
from rlflow.workers.sampler import (
    Sampler,
    SamplerSpec,
    agent_policy_map,
    as_multi_agent_env,
    mapping_takes_episode,
)

if TYPE_CHECKING:
    from rlflow.policy import TorchPolicy

__all__ = ["MultiAgentSampler"]

logger = logging.getLogger(__name__)

Array = npt.NDArray[Any]


class MultiAgentSampler(Sampler):
    """Steps ``num_envs`` multi-agent envs with a policy map; see the module docstring.

    Args:
        spec: the settings (`rlflow.workers.sampler.SamplerSpec`; ``creator`` builds one
            `MultiAgentEnv` or PettingZoo env, ``num_envs`` envs are stepped together,
            ``mapping_fn`` maps agent ids to policy ids, ``restart_failed``: see the module
            docstring; ``env_id`` defaults to the env's class name).
        policies: the worker's policy map.
        new_eps_id: gives a fresh episode id (unique across the run's workers).
        filters: ``{policy id: observation filter}`` (see the module docstring); updated here
            unless frozen.

    Every row has `AGENT_INDEX`, and `NEXT_OBS` (replay learners read it), but for policies
    with a true ``requires_bootstrap_rows`` (V-trace): their trajectories are sequences closed
    by a bootstrap row (`rlflow.data.sequences`).
    """

    def __init__(
        self,
        spec: SamplerSpec,
        policies: Mapping[str, TorchPolicy],
        new_eps_id: Callable[[], int],
        *,
        filters: Mapping[str, MeanStdFilter] | None = None,
    ) -> None:
        """Build the envs (reset on the first ``sample()``)."""
        super().__init__(spec)
        self.filters = dict(filters or {})
        """``{policy id: observation filter}``; policies not in it see raw observations."""
        num_envs = spec.num_envs
        self.slots = [EnvSlot(as_multi_agent_env(spec.creator())) for _ in range(num_envs)]
        self.restart_failed = check_bool(spec.restart_failed, "MultiAgentSampler: restart_failed")
        """Rebuild an env that raises (True) or let the error propagate."""
        self.env_id = spec.env_id if spec.env_id is not None else env_name(self.slots[0].env)
        self._restarts = [0] * num_envs
        self._num_restarts = 0
        self._obs_checks = [OBS_CHECK_STEPS] * num_envs
        self.policies = policies
        self._policy_ids = list(policies)
        self._initial_memories: dict[str, AnyMemory] = {}
        self._new_eps_id = new_eps_id
        self._started = False
        self._episodes: list[EpisodeStat] = []
        env = self.slots[0].env
        self._possible_agents = tuple(env.possible_agents)
        self._mapping_takes_episode = mapping_takes_episode(spec.mapping_fn)
        self._agent_index = {a: i for i, a in enumerate(self._possible_agents)}
        self._action_spaces = dict(env.action_spaces)
        self._length = 0
        self._out: dict[str, list[SampleBatch]] = {pid: [] for pid in self._policy_ids}

    # ------------------------------------------------------------------ episodes
    def _start_episode(self, j: int, slot: EnvSlot, seed: int | None) -> None:
        for attempt in range(MAX_RESET_ATTEMPTS + 1):
            try:
                result = slot.env.reset(seed=seed if attempt == 0 else None)
                if self._obs_checks[j]:  # before unpacking: an old API's return is named
                    check_returned(result, "reset", where=self._where(j))
                obs, _ = result
            except ConfigError:
                raise
            except Exception as err:  # noqa: BLE001 - any env error: rebuild it or name it
                obs = self._rebuild(j, slot, err, "reset")
            if self._obs_checks[j]:
                self._check_obs(j, slot, obs, "reset")
            bad = _nonfinite_field({}, obs)
            if bad is None:
                break
            if self.spec.on_nonfinite == "raise" or attempt == MAX_RESET_ATTEMPTS:
                where = f"{self._where(j)}, agent {bad[0]!r}"
                tries = "" if attempt == 0 else f" ({attempt + 1} resets in a row)"
                raise NonFiniteError(
                    nonfinite_message(where, f"observation of reset(){tries}", bad[2], 0)
                )
            self._nonfinite_episodes += 1
        self._begin_episode(slot, obs)

    def _begin_episode(self, slot: EnvSlot, obs: dict[str, Any]) -> None:
        slot.eps_id = self._new_eps_id()
        slot.length = 0
        slot.returns = {}
        slot.finished = []
        slot.policy_of = {}
        slot.trajectories = {}
        active = slot.env.agents
        slot.obs = {a: ob for a, ob in obs.items() if a in active}
        if self.filters:
            slot.obs = self._filtered(slot, slot.obs, slot.obs)

    def _filtered(self, slot: EnvSlot, obs: Mapping[str, Any], agents: Any) -> dict[str, Any]:
        """``obs`` with the observations of ``agents`` (those that are in it) filtered by their
        policies' filters, one batch per policy; the others unchanged."""
        groups: dict[str, list[str]] = {}
        for agent in obs:
            if agent in agents:
                pid = self._policy_for(slot, agent)
                if pid in self.filters:
                    groups.setdefault(pid, []).append(agent)
        out = dict(obs)
        for pid, members in groups.items():
            batch = self.filters[pid](np.stack([np.asarray(obs[a]) for a in members]))
            for k, agent in enumerate(members):
                out[agent] = batch[k]
        return out

    def _policy_for(self, slot: EnvSlot, agent: str) -> str:
        pid = slot.policy_of.get(agent)
        if pid is None:
            episode = EpisodeInfo(slot.eps_id, self._possible_agents)
            pid = agent_policy_map(
                [agent],
                self.spec.mapping_fn,
                self._policy_ids,
                episode,
                takes_episode=self._mapping_takes_episode,
            )[agent]
            slot.policy_of[agent] = pid
        return pid

    def _trajectory(self, slot: EnvSlot, agent: str) -> AgentTrajectory:
        traj = slot.trajectories.get(agent)
        if traj is None:
            pid = self._policy_for(slot, agent)
            memory = self._new_memory(pid)
            traj = AgentTrajectory(pid, slot.eps_id, self._agent_index.get(agent, -1), memory)
            slot.trajectories[agent] = traj
        return traj

    def _new_memory(self, pid: str) -> AnyMemory:
        """An agent's inputs when it joins: policy ``pid``'s memory of one row (its initial
        state, no previous action or reward; made once per policy, then copied)."""
        memory = self._initial_memories.get(pid)
        if memory is None:
            memory = self._initial_memories[pid] = self.policies[pid].memory(1)
        return memory.copy()

    def pop_episode_stats(self) -> list[EpisodeStat]:
        """Episodes finished since the last call, in the order they ended."""
        out, self._episodes = self._episodes, []
        return out

    # ------------------------------------------------------------------ sampling
    def _start(self, length: int) -> None:
        self._length = length
        if not self._started:
            for j, slot in enumerate(self.slots):
                self._start_episode(j, slot, None if self.spec.seed is None else self.spec.seed + j)
            self._started = True

    def _step(self, t: int, *, record: bool) -> None:
        self._act_all()
        for j, slot in enumerate(self.slots):
            self._step_slot(j, slot, record=record)

    def _take_fragment(self, steps: int) -> MultiAgentBatch:
        """Every agent's rows so far, postprocessed per policy; env steps = steps * envs."""
        for slot in self.slots:
            for traj in slot.trajectories.values():
                if traj.rows:
                    self._emit(traj, terminated=False)
        out, self._out = self._out, {pid: [] for pid in self._policy_ids}
        batches = {pid: SampleBatch.concat_samples(b) for pid, b in out.items() if b}
        return MultiAgentBatch(batches, steps * len(self.slots))

    def _act_all(self) -> None:
        """One batched inference per policy over the acting agents of every env."""
        groups: dict[str, list[tuple[EnvSlot, str]]] = {}
        for slot in self.slots:
            for agent in slot.obs:
                groups.setdefault(self._policy_for(slot, agent), []).append((slot, agent))
        for pid, members in groups.items():
            policy = self.policies[pid]
            obs = np.stack([np.asarray(slot.obs[agent]) for slot, agent in members])
            trajs = [self._trajectory(slot, agent) for slot, agent in members]
            # Each agent's own inputs, stacked (none without memory).
            memory = trajs[0].memory.stack([traj.memory.row(0) for traj in trajs])
            actions, extra = policy.compute_actions(obs, explore=self.spec.explore, memory=memory)
            for k, ((slot, agent), traj) in enumerate(zip(members, trajs, strict=True)):
                traj.act(slot.obs[agent], actions, extra, k)

    def _step_slot(self, j: int, slot: EnvSlot, *, record: bool) -> None:
        env = slot.env
        step = self._env_step(j, slot, record=record)
        if step is None:
            return
        slot.length += 1
        all_term = bool(step.terminateds.get(ALL_AGENTS, False))
        all_trunc = bool(step.truncateds.get(ALL_AGENTS, False))
        over = all_term or all_trunc
        obs = step.obs
        if self.filters:  # those of agents that acted, and (unless it is over) of all to act
            readers = set(slot.trajectories) if over else {*slot.trajectories, *env.agents}
            obs = self._filtered(slot, obs, readers)
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
                    traj.end_idle(obs.get(agent), terminated=terminated, truncated=truncated)
                    self._close(slot, agent, record=record, terminated=terminated)
                continue
            if agent not in obs and not (terminated or truncated):
                # Not its turn again yet (a turn-based game): the row stays open, its reward
                # accruing, until the agent's next observation comes.
                traj.defer_reward(reward)
                continue
            next_ob = obs.get(agent, traj.columns[OBS][-1])
            traj.outcome(reward, next_ob, terminated=terminated, truncated=truncated)
            if terminated or truncated:
                self._close(slot, agent, record=record, terminated=terminated)
        if over:
            self._record_episode(slot)
            self._start_episode(j, slot, None)
            return
        active = set(env.agents)
        slot.obs = {a: ob for a, ob in obs.items() if a in active}

    def _env_step(self, j: int, slot: EnvSlot, *, record: bool) -> MultiAgentStep | None:
        """Step env ``j`` with its agents' actions; None if it raised and was rebuilt."""
        actions = {
            agent: env_action(
                self._action_spaces.get(agent), slot.trajectories[agent].columns[ACTIONS][-1]
            )
            for agent in slot.obs
        }
        try:
            step = slot.env.step(actions)
        except ConfigError:
            raise
        except Exception as err:  # noqa: BLE001 - any env error: rebuild it or name it
            obs = self._rebuild(j, slot, err, "step")
            for traj in slot.trajectories.values():  # the episode ends at its last good rows
                traj.cut()
                if record and traj.rows:
                    self._emit(traj, terminated=False)
            self._begin_episode(slot, obs)  # the partial episode is not reported
            return None
        if self._obs_checks[j]:
            self._obs_checks[j] -= 1
            check_returned(step, "step", where=self._where(j))
            self._check_obs(j, slot, step.obs, "step")
        bad = _nonfinite_field(step.rewards, step.obs)
        if bad is not None:
            self._nonfinite(j, slot, bad, episode_step=slot.length + 1, record=record)
            return None
        return step

    def _nonfinite(
        self, j: int, slot: EnvSlot, bad: tuple[str, str, Any], *, episode_step: int, record: bool
    ) -> None:
        """Env ``j`` gave agent ``bad[0]`` a NaN or infinite ``bad[1]`` (``bad[2]``):
        `NonFiniteError`, or with ``on_nonfinite="skip"`` the episode is dropped (not reported;
        each agent's trajectory ends at its last complete row as a truncation, as after a
        failed step) and the env reset."""
        agent, field, value = bad
        if self.spec.on_nonfinite == "raise":
            where = f"{self._where(j)}, agent {agent!r}"
            raise NonFiniteError(nonfinite_message(where, field, value, episode_step))
        for traj in slot.trajectories.values():
            traj.cut()
            if record and traj.rows:
                self._emit(traj, terminated=False)
        self._nonfinite_episodes += 1
        self._start_episode(j, slot, None)

    def _rebuild(self, j: int, slot: EnvSlot, err: Exception, method: str) -> dict[str, Any]:
        """Close env ``j``, build and reset a new one; its first observations (see the module
        docstring). Raises ``err`` with a note when restarts are off or keep failing."""
        note = env_failure_note(self.env_id, self.spec.worker_index, j, method)
        if not self.restart_failed:
            err.add_note(note)
            raise err
        logger.warning("%s: %r; rebuilding the env", note, err)
        for _ in range(MAX_RESTART_ATTEMPTS):
            close_quietly(slot.env)
            self._restarts[j] += 1
            try:
                slot.env = as_multi_agent_env(self.spec.creator())
                obs, _ = slot.env.reset(seed=restart_seed(self.spec.seed, j, self._restarts[j]))
            except ConfigError:
                raise
            except Exception as again:  # noqa: BLE001 - the rebuilt env failed too: once more
                err = again
                continue
            self._num_restarts += 1
            self._obs_checks[j] = OBS_CHECK_STEPS
            self._check_obs(j, slot, obs, "reset")
            return dict(obs)
        err.add_note(f"{note}; rebuilt {MAX_RESTART_ATTEMPTS} times, each failed to reset")
        raise err

    def _where(self, j: int) -> str:
        """Env ``j`` in messages: the env, the worker and the index."""
        return env_location(self.env_id, self.spec.worker_index, j, unit="env")

    def _check_obs(self, j: int, slot: EnvSlot, obs: Mapping[str, Any], method: str) -> None:
        """`check_observation` of each agent's observation from env ``j``'s ``method``."""
        for agent, ob in obs.items():
            space = slot.env.observation_spaces.get(agent)
            if space is not None:
                where = f"{self._where(j)}, agent {agent!r}, {method}()"
                check_observation(space, ob, where=where)

    @property
    def num_env_restarts(self) -> int:
        """Envs rebuilt after they raised, so far."""
        return self._num_restarts

    def _close(self, slot: EnvSlot, agent: str, *, record: bool, terminated: bool) -> None:
        """The agent left: count its return; emit its rows (evaluation drops them)."""
        traj = slot.close_agent(agent)
        if record and traj.rows:
            self._emit(traj, terminated=terminated)

    def _emit(self, traj: AgentTrajectory, *, terminated: bool) -> None:
        """Postprocess the trajectory's complete rows with the right bootstrap value."""
        policy = self.policies[traj.policy_id]
        last_value = 0.0
        if not terminated and policy.use_critic:
            last_obs = np.asarray(traj.last_next_obs)[None]
            inputs = traj.memory.inputs()  # after its last action
            last_value = float(policy.value(last_obs, memory=inputs)[0])
        batch = traj.take()
        bootstrap_obs = None
        if policy.requires_bootstrap_rows:
            # Sequences closed by bootstrap rows instead of a NEXT_OBS per row.
            del batch[NEXT_OBS]
            bootstrap_obs = traj.last_next_obs
        batch = cut_sequences(
            batch, max_seq_len=traj.memory.max_seq_len, bootstrap_obs=bootstrap_obs
        )
        self._out[traj.policy_id].append(
            policy.postprocess_trajectory(batch, last_value=last_value)
        )

    def _record_episode(self, slot: EnvSlot) -> None:
        self._episodes.append(slot.episode_stat(lambda agent: self._policy_for(slot, agent)))

    def get_state(self) -> dict[str, Any]:
        """The envs, episodes in progress and finished-episode stats (picklable)."""
        return {"slots": self.slots, "started": self._started, "episodes": self._episodes}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state` (the envs built in ``__init__`` are closed first).

        An env that pickles as its constructor arguments (`pickles_by_constructor`: the
        PettingZoo classic games) comes back unreset, so its episode in progress cannot go
        on: it starts a new one (unseeded), and the unfinished episode is dropped."""
        self.close()
        self.slots = state["slots"]
        self._started = state["started"]
        self._episodes = list(state["episodes"])
        self._restarts = [0] * len(self.slots)
        self._obs_checks = [0] * len(self.slots)
        if self._started:
            for j, slot in enumerate(self.slots):
                if pickles_by_constructor(slot.env):
                    logger.info("%s: restored unreset, so it starts a new episode", self._where(j))
                    self._start_episode(j, slot, None)

    @property
    def envs(self) -> list[Any]:
        """The envs, in order."""
        return [slot.env for slot in self.slots]

    def close(self) -> None:
        """Close every env."""
        for slot in self.slots:
            slot.env.close()


def _nonfinite_field(
    rewards: Mapping[str, Any], obs: Mapping[str, Any]
) -> tuple[str, str, Any] | None:
    """``(agent, "reward" or "observation", value)`` of the first NaN or infinite reward or
    observation of a step (or reset), None when all are finite."""
    for agent, reward in rewards.items():
        if not math.isfinite(float(reward)):
            return agent, "reward", reward
    for agent, ob in obs.items():
        if not all_finite(ob):
            return agent, "observation", ob
    return None
