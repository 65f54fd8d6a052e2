"""`VectorSampler`: the `Sampler` of single-agent envs, one `VectorEnv` and one policy.

Each step is one batched inference over every sub-env, one `VectorEnv.step` and a few numpy
row writes into buffers allocated once (no per-step dicts): this is the hot loop of sampling.
Each episode fragment is then postprocessed by the policy (advantages, value targets) with
bootstrap value 0 after a terminal step and V(s) after a truncation or at the fragment's end.

A sub-env that raises in ``step`` is rebuilt when ``restart_failed`` (see `VectorEnv`): the
row of the failed step (an action whose outcome never came) is dropped from the fragment, and
the episode's last good row before it, if it is in this fragment, is marked truncated and
bootstrapped from V(the observation the failed action was taken on), so no trajectory mixes
two episodes. The episode is not reported in the episode stats; the fragment has one row less.

With an observation filter (``obs_filter``, `rlflow.filters.MeanStdFilter`) every observation
is filtered as it arrives, each once: the first ones after a reset, then each step, in one
batch, the last observations of the episodes that ended (the terminal ones, which RLlib's
filters see too) and the observations to act on next. The policy acts on, and the
fragment records (OBS, NEXT_OBS, bootstrap values), the filtered observations. Without one the
step is unchanged.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    ADVANTAGES,
    EPS_ID,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VALUE_TARGETS,
    VF_PREDS,
    SampleBatch,
)
from rlflow.data.sequences import cut_sequences
from rlflow.envs.gym_vector import GymVectorEnv, make_vector_env
from rlflow.envs.nonfinite import all_finite, finite_array, nonfinite_message
from rlflow.envs.records import NO_LOGGED_ACTIONS, VectorStep
from rlflow.envs.validation import env_location
from rlflow.envs.vector import EpisodeStat, VectorEnv
from rlflow.errors import ConfigError, NonFiniteError
from rlflow.filters import MeanStdFilter
from rlflow.models.memory import AnyMemory, MemoryRow, NoMemory
from rlflow.returns import gae_columns
from rlflow.workers.sampler import Sampler, SamplerSpec

if TYPE_CHECKING:
    from rlflow.policy import TorchPolicy

__all__ = ["VectorSampler"]

Array = npt.NDArray[Any]


class _Buffers:
    """Rollout buffers ``[T, N, ...]`` allocated once, on the first recorded step."""

    def __init__(
        self,
        length: int,
        num_envs: int,
        obs: Array,
        actions: Array,
        dist: Array,
        memory: AnyMemory,
        *,
        next_obs: bool = False,
    ) -> None:
        shape = (length, num_envs)
        self.length = length
        self.obs = np.zeros(shape + obs.shape[1:], dtype=obs.dtype)
        self.next_obs: Array | None = np.zeros_like(self.obs) if next_obs else None
        self.actions = np.zeros(shape + actions.shape[1:], dtype=actions.dtype)
        self.dist_inputs = np.zeros(shape + dist.shape[1:], dtype=np.float32)
        self.logp = np.zeros(shape, dtype=np.float32)
        self.vf_preds = np.zeros(shape, dtype=np.float32)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.terminateds = np.zeros(shape, dtype=bool)
        self.truncateds = np.zeros(shape, dtype=bool)
        self.eps_id = np.zeros(shape, dtype=np.int64)
        self.boot_values = np.zeros(shape, dtype=np.float32)
        self.dropped = np.zeros(shape, dtype=bool)
        """Rows of failed steps (a sub-env rebuilt), left out of the fragment."""
        self.memory = memory.columns(length)
        """A policy with memory's inputs at each row (before its step): `Memory.columns`."""

    def head(self, steps: int) -> _Buffers:
        """The first ``steps`` rows of every buffer, as views (a fragment cut short)."""
        view = copy.copy(self)
        view.length = steps
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray):
                setattr(view, name, value[:steps])
        view.memory = {name: column[:steps] for name, column in self.memory.items()}
        return view

    def fragment(self, a: int, b: int, env: int | slice) -> SampleBatch:
        """Rows ``a:b`` of sub-env ``env`` (of every sub-env for ``slice(None)``: columns
        ``[b - a, N, ...]``) as a batch of views."""
        batch = SampleBatch(
            {
                OBS: self.obs[a:b, env],
                ACTIONS: self.actions[a:b, env],
                REWARDS: self.rewards[a:b, env],
                TERMINATEDS: self.terminateds[a:b, env],
                TRUNCATEDS: self.truncateds[a:b, env],
                LOGP: self.logp[a:b, env],
                VF_PREDS: self.vf_preds[a:b, env],
                ACTION_DIST_INPUTS: self.dist_inputs[a:b, env],
                EPS_ID: self.eps_id[a:b, env],
            }
        )
        if self.next_obs is not None:
            batch[NEXT_OBS] = self.next_obs[a:b, env]
        for name, column in self.memory.items():
            batch[name] = column[a:b, env]
        return batch


def _dropped_rows_stand_alone(buf: Any) -> bool:
    """Whether every dropped row of ``buf`` (`_Buffers.dropped`) is the first of the fragment
    or follows an episode's end (or another dropped row), as after a next-step engine's
    episode end: then the rows
    before it are whole pieces, and GAE over the whole rollout, the dropped rows left out,
    gives the per-fragment postprocessing's batch."""
    dropped = buf.dropped
    if not dropped.any():
        return True
    ended = buf.terminateds | buf.truncateds
    before = np.ones_like(dropped)
    before[1:] = ended[:-1] | dropped[:-1]
    return bool(np.all(before[dropped]))


def _by_env(column: Array) -> Array:
    """A new array of the rows of ``column`` ``[T, N, ...]`` ordered by sub-env, then time."""
    rows = np.array(column.swapaxes(0, 1), order="C")
    return rows.reshape(-1, *column.shape[2:])


_Truncated = tuple[int, int, Array, "MemoryRow | None"]
"""A truncated episode's last row ``t`` of sub-env ``i``: the observation after it and, for a
policy with memory, its inputs after it (to bootstrap V from)."""


class _BootstrapObs:
    """The observation after row ``t`` of sub-env ``i`` where a sequence ends there: the
    truncated episode's last one, the terminated episode's placeholder (its last row's own
    observation: a terminal step bootstraps from nothing), or the one to act on next at the
    fragment's end."""

    def __init__(self, buf: _Buffers, last_obs: Array, truncated: list[_Truncated]):
        self.buf = buf
        self.last_obs = last_obs
        self.truncated = {(t, i): ob for t, i, ob, _ in truncated}

    def __call__(self, t: int, i: int) -> Array:
        ob = self.truncated.get((t, i))
        if ob is not None:
            return ob
        source = self.buf.obs[t] if self.buf.terminateds[t, i] else self.last_obs
        return np.asarray(source[i])


class VectorSampler(Sampler):
    """Steps ``num_envs`` copies of a single-agent env with ``policy``.

    Args:
        spec: the settings (`rlflow.workers.sampler.SamplerSpec`; ``creator`` builds one
            Gymnasium env, ``num_envs`` sub-envs are stepped together, ``restart_failed``: see
            the module docstring, ``vector_env``: the env engine).
        policy: the worker's one policy.
        new_eps_id: gives a fresh episode id (unique across the run's workers).
        obs_filter: the policy's observation filter (None: raw observations); updated here
            unless it is frozen (see the module docstring).

    The envs are built on the first `sample` (or `run_episodes`). Fragment rows are ordered by
    sub-env, then time; columns: OBS, ACTIONS, REWARDS, TERMINATEDS, TRUNCATEDS, LOGP,
    VF_PREDS, ACTION_DIST_INPUTS, EPS_ID, what the policy's postprocessing adds, NEXT_OBS
    (the true next observation, the episode's last one where it ended) when the policy has a
    true ``requires_next_obs`` attribute (replay-based policies), and a bootstrap row closing
    each episode fragment when it has a true ``requires_bootstrap_rows`` (V-trace policies,
    `rlflow.data.sequences`).
    """

    def __init__(
        self,
        spec: SamplerSpec,
        policy: TorchPolicy,
        new_eps_id: Callable[[], int],
        *,
        obs_filter: MeanStdFilter | None = None,
    ) -> None:
        """Keep the parts; envs are built on the first step."""
        super().__init__(spec)
        self.obs_filter = obs_filter
        """The observation filter (None: observations reach the policy as the env gives them)."""
        self.policy = policy
        """The policy that acts and postprocesses."""
        self._new_eps_id = new_eps_id
        self.venv: VectorEnv | GymVectorEnv | None = None
        """The vector env (None until the first step)."""
        self._obs: Array | None = None
        self._eps_ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._buffers: _Buffers | None = None
        self._length = 0
        self._truncated: list[_Truncated] = []
        self._memory: AnyMemory = NoMemory()
        """The policy's inputs per sub-env besides the observations (`TorchPolicy.memory`)."""
        self._logged: Mapping[int, Any] = NO_LOGGED_ACTIONS
        """``{sub-env: action}`` its `rlflow.serve` client took itself for the observation to
        act on next (`VectorStep.logged_actions`)."""
        self._num_steps = 0  # steps of the envs so far, for the episode step in messages
        self._ep_first_step: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    def _start(self, length: int) -> None:
        self._length = length
        if self.venv is None:
            spec = self.spec
            self.venv = make_vector_env(
                spec.creator,
                spec.num_envs,
                spec.seed,
                vector_env=spec.vector_env,
                restart_failed=spec.restart_failed,
                skip_nonfinite=spec.on_nonfinite == "skip",
                env_id=spec.env_id,
                worker_index=spec.worker_index,
            )
            self._reset(self.venv)

    def _built(self) -> VectorEnv | GymVectorEnv:
        """The vector env, built and reset (seeded) first if needed."""
        self._start(self._length)
        assert self.venv is not None
        return self.venv

    def restart(self) -> None:
        """Reset every sub-env and give each a new episode id (episodes in progress are dropped).

        Only the first reset of each sub-env is seeded: one made here on a fresh sampler
        follows the seeded one.
        """
        self._reset(self._built())

    def set_task(self, task: Any) -> None:
        """Set ``task`` on every sub-env (each must have ``set_task``, see
        `rlflow.envs.point_nav.TaskSettableEnv`), then `restart` (new episodes under it)."""
        for i, env in enumerate(self.envs):
            target: Any = getattr(env, "unwrapped", env)
            if not callable(getattr(target, "set_task", None)):
                raise ConfigError(
                    f"RolloutWorker {self.spec.worker_index}.set_task: sub-env {i} "
                    f"({type(target).__name__}) has no set_task(task); meta-learning needs a "
                    "TaskSettableEnv such as rlflow.envs.point_nav.PointNavigation2D"
                )
            target.set_task(task)
        self.restart()

    def _reset(self, venv: VectorEnv | GymVectorEnv) -> None:
        obs = venv.reset()
        for i in [] if all_finite(obs) else range(venv.num_envs):
            if all_finite(obs[i]):
                continue
            if self.spec.on_nonfinite == "raise":
                where = env_location(venv.env_id, self.spec.worker_index, i)
                raise NonFiniteError(nonfinite_message(where, "observation of reset()", obs[i], 0))
            assert isinstance(venv, VectorEnv)  # resolve_vector_env: "skip" needs rlflow's loop
            obs[i] = venv.ensure_finite_start(i)
            self._nonfinite_episodes += 1
        self._ep_first_step = np.full(venv.num_envs, self._num_steps + 1, dtype=np.int64)
        self._obs = obs if self.obs_filter is None else self.obs_filter(obs)
        self._eps_ids = np.array([self._new_eps_id() for _ in range(venv.num_envs)], dtype=np.int64)
        self._memory = self.policy.memory(venv.num_envs)
        self._logged = venv.logged_actions

    def _step(self, t: int, *, record: bool) -> None:
        """The hot loop's body: act on every sub-env at once, step them, write row ``t``."""
        venv, obs = self.venv, self._obs
        assert venv is not None and obs is not None
        memory = self._memory
        actions, extra = self._act(obs, memory)
        buf = self._buffers
        if record and (buf is None or buf.length != self._length):
            buf = self._buffers = self._allocate(obs, actions, extra)
        if record and buf is not None:
            self._record_inputs(buf, t, obs, actions, extra)
        self._num_steps += 1
        step = venv.step(actions, copy=False)
        done = np.flatnonzero(step.terminateds | step.truncateds)
        if not (finite_array(step.rewards) and finite_array(step.next_obs)) or (
            done.size and not finite_array(step.final_obs[done])
        ):
            self._nonfinite(step, buf.obs[t] if record and buf is not None else step.final_obs)
            done = np.flatnonzero(step.terminateds | step.truncateds)
        if self.obs_filter is not None:
            step = self._filtered(step, obs)
        if venv.restarted and record and buf is not None:
            self._cut_failed(buf, t, venv.restarted, step.final_obs)
        if record and buf is not None:
            buf.rewards[t] = step.rewards
            buf.terminateds[t] = step.terminateds
            buf.truncateds[t] = step.truncateds
            if buf.next_obs is not None:
                buf.next_obs[t] = step.final_obs
        memory.advance(extra, actions, step.rewards)
        self._logged = step.logged_actions
        self._end_episodes(step, done, t, record=record)
        # The env's own buffer, overwritten by the next step only after it was read.
        self._obs = step.next_obs

    def _act(self, obs: Array, memory: AnyMemory) -> tuple[Array, dict[str, Array]]:
        """The policy's actions for ``obs`` and its extra outputs (an external client's own
        actions in their place: `VectorStep.logged_actions`)."""
        actions, extra = self.policy.compute_actions(
            obs, explore=self.spec.explore, memory=memory.inputs()
        )
        for i, logged in self._logged.items():
            # An external env's client took this one itself (`rlflow.serve`, local inference):
            # it replaces the policy's, with its log-likelihood under the policy's distribution.
            actions[i] = logged
            extra[LOGP][i] = self.policy.action_logp(
                extra[ACTION_DIST_INPUTS][i : i + 1], actions[i : i + 1]
            )[0]
        return actions, extra

    def _record_inputs(
        self, buf: _Buffers, t: int, obs: Array, actions: Array, extra: dict[str, Array]
    ) -> None:
        """Row ``t``'s observations, the policy's outputs and its other inputs (a policy with
        memory's)."""
        self._memory.record(buf.memory, t)
        buf.obs[t] = obs
        buf.actions[t] = actions
        buf.logp[t] = extra[LOGP]
        buf.vf_preds[t] = extra[VF_PREDS]
        buf.dist_inputs[t] = extra[ACTION_DIST_INPUTS]
        buf.eps_id[t] = self._eps_ids

    def _end_episodes(self, step: VectorStep, done: Array, t: int, *, record: bool) -> None:
        """The episodes of the sub-envs ``done`` ended at row ``t``: a truncated one's last
        observation (and the policy's inputs after it) kept to bootstrap from, new episode ids,
        and the policy's inputs back to the initial ones (also for rebuilt sub-envs)."""
        memory = self._memory
        for i in done:
            if record and step.truncateds[i] and not step.terminateds[i]:
                after = memory.row(int(i))
                self._truncated.append((t, int(i), step.final_obs[i].copy(), after))
            self._eps_ids[i] = self._new_eps_id()
            self._ep_first_step[i] = self._num_steps + 1
        assert self.venv is not None
        restarted = self.venv.restarted
        memory.reset(np.union1d(done, np.asarray(restarted, dtype=np.int64)) if restarted else done)

    def _nonfinite(self, step: VectorStep, acted_on: Array) -> None:
        """A NaN or infinite reward or observation in ``step`` (before any filter saw it):
        `NonFiniteError` naming the first one, or with ``on_nonfinite="skip"`` each such
        episode dropped (`VectorEnv.drop_episodes`: its row of this step then goes like a failed
        step's, cut from the fragment with its earlier rows ending as a truncation) and a bad
        first observation of a new episode reset again; each one counted."""
        venv = self.venv
        assert venv is not None
        bad_rows, bad_starts = [], []
        for i in range(venv.num_envs):
            if not (math.isfinite(step.rewards[i]) and all_finite(step.final_obs[i])):
                bad_rows.append(i)
            elif not all_finite(step.next_obs[i]):
                bad_starts.append(i)
        if self.spec.on_nonfinite == "raise":
            i = (bad_rows or bad_starts)[0]
            field, value = (
                ("reward", step.rewards[i])
                if not math.isfinite(step.rewards[i])
                else ("observation", step.final_obs[i])
                if i in bad_rows
                else ("observation of reset()", step.next_obs[i])
            )
            where = env_location(venv.env_id, self.spec.worker_index, i)
            episode_step = self._num_steps - int(self._ep_first_step[i]) + 1
            if i in bad_starts:
                episode_step = 0
            raise NonFiniteError(nonfinite_message(where, field, value, episode_step))
        assert isinstance(venv, VectorEnv)  # resolve_vector_env: "skip" needs rlflow's loop
        venv.drop_episodes(bad_rows, acted_on)
        for i in bad_starts:
            venv.ensure_finite_start(i)
        # Both kinds now end an episode in this step: the caller gives them new episode ids.
        self._nonfinite_episodes += len(bad_rows) + len(bad_starts)

    def _filtered(self, step: VectorStep, acted_on: Array) -> VectorStep:
        """``step`` with filtered observations (each new one added to the filter's statistics
        once, in one batch): the terminal ones of the episodes that ended and those to act on
        next. A failed step's final row (and a next-step engine's reset row,
        `VectorEnv.restarted` alike) is the already filtered one its action was taken on; a
        next-step engine's terminal observations are its next ones, filtered once as such."""
        obs_filter, venv = self.obs_filter, self.venv
        assert obs_filter is not None and venv is not None
        done = np.flatnonzero(step.terminateds | step.truncateds)
        if not done.size:
            next_obs = obs_filter(step.next_obs)
            return step._replace(next_obs=next_obs, final_obs=next_obs)
        failed = venv.restarted
        if getattr(venv, "step_mode", "same") == "next":
            ended: Any = []  # a next-step engine's last observations are its next ones
        else:
            ended = [i for i in done.tolist() if i not in failed] if failed else done
        if len(ended):  # one batch: the last observations, then the next ones
            k = len(ended)
            both = obs_filter(np.concatenate([step.final_obs[ended], step.next_obs]))
            next_obs = both[k:]
            final_obs = next_obs.copy()
            final_obs[ended] = both[:k]
        else:
            next_obs = obs_filter(step.next_obs)
            final_obs = next_obs.copy()
        for i in failed:
            final_obs[i] = acted_on[i]
        return step._replace(next_obs=next_obs, final_obs=final_obs)

    def _cut_failed(self, buf: _Buffers, t: int, failed: list[int], last_obs: Array) -> None:
        """Drop row ``t`` of each sub-env in ``failed`` (its step raised; the env was rebuilt)
        and end its episode at row ``t - 1`` as a truncation bootstrapped from ``last_obs``."""
        for i in failed:
            buf.dropped[t, i] = True
            if t > 0 and not (buf.terminateds[t - 1, i] or buf.truncateds[t - 1, i]):
                buf.truncateds[t - 1, i] = True
                # The policy's inputs on that observation: those of the failed row.
                after = self._memory.recorded(buf.memory, (t, i))
                self._truncated.append((t - 1, i, last_obs[i].copy(), after))

    def _allocate(self, obs: Array, actions: Array, extra: dict[str, Array]) -> _Buffers:
        return _Buffers(
            self._length,
            self.spec.num_envs,
            obs,
            actions,
            extra[ACTION_DIST_INPUTS],
            self._memory,
            next_obs=self.policy.requires_next_obs,
        )

    def _take_fragment(self, steps: int) -> SampleBatch:
        assert self._obs is not None and self._buffers is not None
        self._obs = obs = self._obs.copy()
        truncated, self._truncated = self._truncated, []
        buf = self._buffers if steps == self._buffers.length else self._buffers.head(steps)
        self._fill_bootstrap_values(buf, obs, truncated)
        bootstrap_obs = None
        if self.policy.requires_bootstrap_rows:
            bootstrap_obs = _BootstrapObs(buf, obs, truncated)
        return self._postprocess(buf, bootstrap_obs)

    def _fill_bootstrap_values(
        self, buf: _Buffers, last_obs: Array, truncated: list[_Truncated]
    ) -> None:
        """V(s) to bootstrap from after each truncated step and after the fragment's end (a
        policy with memory's from its inputs there: the state after the step).

        Without a critic the value head is never trained, so its output would only add noise
        to the returns: REINFORCE returns are then cut at the fragment's end (bootstrap 0).
        """
        policy, memory = self.policy, self._memory
        if not policy.use_critic:
            return
        buf.boot_values[-1] = policy.value(last_obs, memory=memory.inputs())
        if truncated:
            inputs = memory.stack([after for _, _, _, after in truncated])
            last = np.stack([ob for _, _, ob, _ in truncated])
            values = policy.value(last, memory=inputs)
            for (t, i, _, _), v in zip(truncated, values, strict=True):
                buf.boot_values[t, i] = v

    def _postprocess(self, buf: _Buffers, bootstrap_obs: _BootstrapObs | None) -> SampleBatch:
        """Split each sub-env's rows into episode fragments, cut each into sequences as the
        policy's memory and its bootstrap rows ask (`rlflow.data.sequences.cut_sequences`:
        closed by bootstrap rows when ``bootstrap_obs`` is given) and postprocess it."""
        policy, max_seq_len = self.policy, self._memory.max_seq_len
        length, num_envs = buf.rewards.shape
        gae = policy.gae_parameters()
        no_sequences = max_seq_len is None and bootstrap_obs is None
        if gae is not None and no_sequences and _dropped_rows_stand_alone(buf):
            return self._postprocess_gae(buf, *gae)
        pieces: list[SampleBatch] = []
        for i in range(num_envs):
            ends = np.flatnonzero(buf.terminateds[:, i] | buf.truncateds[:, i]).tolist()
            if not ends or ends[-1] != length - 1:
                ends.append(length - 1)
            start = 0
            for end in ends:
                if buf.dropped[end, i]:  # a failed step's row, alone in its piece
                    start = end + 1
                    continue
                last_value = 0.0 if buf.terminateds[end, i] else float(buf.boot_values[end, i])
                if not policy.use_critic:
                    last_value = 0.0
                fragment = cut_sequences(
                    buf.fragment(start, end + 1, i),
                    max_seq_len=max_seq_len,
                    bootstrap_obs=None if bootstrap_obs is None else bootstrap_obs(end, i),
                )
                pieces.append(policy.postprocess_trajectory(fragment, last_value=last_value))
                start = end + 1
        buf.dropped[:] = False
        return SampleBatch.concat_samples(pieces)

    def _postprocess_gae(self, buf: _Buffers, gamma: float, lam: float) -> SampleBatch:
        """`_postprocess` of a policy whose postprocessing is GAE (`TorchPolicy.gae_parameters`)
        and whose fragments need no sequences: every episode fragment's advantages at once
        (`rlflow.returns.gae_columns`, the same numbers as the policy's own per fragment), and
        each column copied once from ``[T, N]`` to rows ordered by sub-env, then time."""
        ends = buf.terminateds | buf.truncateds | buf.dropped
        ends[-1] = True
        last_values = np.where(buf.terminateds, np.float32(0.0), buf.boot_values)
        result = gae_columns(buf.rewards, buf.vf_preds, ends, last_values, gamma=gamma, lam=lam)
        columns = buf.fragment(0, buf.length, slice(None))
        columns[ADVANTAGES] = result.advantages
        columns[VALUE_TARGETS] = result.value_targets
        if not buf.dropped.any():
            return SampleBatch({name: _by_env(column) for name, column in columns.items()})
        # Rows of failed steps and of next-step engines' resets: each its own one-row
        # episode above (the row before ends an episode), left out here.
        keep = _by_env(~buf.dropped)
        buf.dropped[:] = False
        return SampleBatch({name: _by_env(column)[keep] for name, column in columns.items()})

    @property
    def envs(self) -> list[Any]:
        """The sub-envs, in order (built first if needed)."""
        return list(self._built().envs)

    def pop_episode_stats(self) -> list[EpisodeStat]:
        """Episodes finished since the last call, in the order they ended."""
        return [] if self.venv is None else self.venv.pop_episode_stats()

    @property
    def num_env_restarts(self) -> int:
        """Sub-env rebuilds of this sampler's vector env so far."""
        return 0 if self.venv is None else self.venv.num_restarts

    def get_state(self) -> tuple[Any, ...] | None:
        """``(vector env, observations to act on, episode ids, recurrent inputs or None)``
        (pickle it whole); None before the envs are built, and for an engine whose state
        cannot be saved (`GymVectorEnv.saves_state`: EnvPool, ``ale-vector``, async): a
        worker restored without it builds new envs and starts new episodes."""
        if self.venv is None or self._obs is None:
            return None
        if isinstance(self.venv, GymVectorEnv) and not self.venv.saves_state:
            return None
        return self.venv, self._obs, self._eps_ids, self._memory.get_state()

    def set_state(self, state: Any) -> None:
        """Restore :meth:`get_state` (the envs built here, if any, are closed first)."""
        self.close()
        self.venv, self._obs, self._eps_ids = state[:3]
        self._memory = self.policy.memory(len(self._eps_ids))
        self._memory.set_state(state[3] if len(state) > 3 else None)  # older: 3 parts
        # Not in the state: a restored episode's steps (in messages) count from the restore.
        self._ep_first_step = np.full(len(self._eps_ids), self._num_steps + 1, dtype=np.int64)
        self._logged = NO_LOGGED_ACTIONS  # a restored client episode acts anew
        if self.venv is not None:
            self.venv.creator = self.spec.creator  # not pickled with it
        self._env_restarts_popped = self.num_env_restarts

    def close(self) -> None:
        """Close the sub-envs."""
        if self.venv is not None:
            self.venv.close()
