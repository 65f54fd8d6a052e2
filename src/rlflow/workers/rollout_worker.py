"""`RolloutWorker`: a vector env and a policy map that sample experience and learn from it.

A rollout worker is the unit of parallelism of every plan: remote workers are actors that a plan
reads with ``flow.from_actors(workers).gather_async()`` (their shard generator is "sample
forever"); the local worker (index 0) is the learner and samples only when there are no remote
workers. It holds a policy map ``{policy_id: policy}``: one policy,
:data:`~rlflow.data.DEFAULT_POLICY_ID`, for single-agent envs; those of ``config.policies`` for
multi-agent envs, sampled by `rlflow.workers.multi_agent_sampler.MultiAgentSampler`.

Sampling steps all envs of the worker in one loop with batched inference and writes into numpy
buffers allocated once (no per-step dicts); each episode fragment is then postprocessed by the
policy (advantages, value targets) with the right bootstrap value.
"""

from __future__ import annotations

import contextvars
import logging
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    DEFAULT_POLICY_ID,
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
from rlflow.envs import EpisodeStat, VectorEnv, make_env_creator
from rlflow.errors import ConfigError
from rlflow.flow import ParallelIteratorWorker, ShardReply
from rlflow.policy import TorchPolicy
from rlflow.workers.multi_agent_sampler import (
    MultiAgentSampler,
    agent_policy_map,
    as_multi_agent_env,
    is_multi_agent_env,
)

__all__ = ["Gradients", "RolloutWorker", "current_worker"]

logger = logging.getLogger(__name__)

Array = npt.NDArray[Any]
PolicyID = str

_EPS_ID_STRIDE = 1_000_000_000
"""Episode ids of worker k are ``k * _EPS_ID_STRIDE + n``: unique across the workers of a run."""
_ENV_SEED_STRIDE = 10_000
"""Sub-env j of worker k is seeded ``seed + k * _ENV_SEED_STRIDE + j``."""
_POLICY_SEED_STRIDE = 100_003
"""Policy p (in the order of ``config.policies``) of worker k is seeded ``seed + k + p * this``."""

_CURRENT: contextvars.ContextVar[RolloutWorker | None] = contextvars.ContextVar(
    "rlflow_current_worker", default=None
)


def current_worker() -> RolloutWorker:
    """The rollout worker whose shard stream is being read right now.

    For functions shipped to rollout actors with ``ParallelIterator.for_each`` (e.g. "compute
    gradients on the batch this worker just sampled"). Set only while a worker serves a read of
    its stream, so it never leaks between workers, even when several share a process (local
    backend).
    """
    worker = _CURRENT.get()
    if worker is None:
        raise ConfigError(
            "current_worker() was called outside a rollout worker's stream: call it only in a "
            "function shipped to rollout workers (ParallelIterator.for_each on from_actors(...))"
        )
    return worker


class Gradients(NamedTuple):
    """Gradients of one batch: ``(grads, env_steps)`` plus the learner stats of the loss."""

    grads: dict[PolicyID, list[Array]]
    """Per policy, one array per trainable parameter (as ``TorchPolicy.compute_gradients``)."""
    env_steps: int
    """Env steps in the batch the gradients were computed on (the "count")."""
    stats: dict[PolicyID, dict[str, float]]
    """Per policy, the loss stats (``policy_loss``, ``vf_loss``, ...)."""


class _Buffers:
    """Rollout buffers ``[T, N, ...]`` allocated once, on the first sample."""

    def __init__(
        self,
        length: int,
        num_envs: int,
        obs: Array,
        actions: Array,
        dist: Array,
        *,
        next_obs: bool = False,
    ) -> None:
        shape = (length, num_envs)
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

    def fragment(self, a: int, b: int, env: int) -> SampleBatch:
        """Rows ``a:b`` of sub-env ``env`` as a batch of views."""
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
        return batch


class RolloutWorker(ParallelIteratorWorker):
    """Vector env + policy map: samples postprocessed batches, computes and applies gradients.

    Args:
        config: the algorithm config (``env``, ``num_envs_per_worker``,
            ``rollout_fragment_length``, ``seed``, and the policy's keys).
        policy_cls: the policy class; built with ``config.to_dict()``.
        worker_index: 0 for the local worker (the learner), 1..N for remote workers. Seeds the
            envs (``seed + index * 10000 + j`` for sub-env j), the policy's sampling RNG
            (``seed + index``) and the minibatch shuffling RNG.

    The local worker builds its envs only when it samples (``num_workers == 0``); to build its
    policy it reads the spaces from one env made and closed at once.
    """

    def __init__(
        self, config: AlgorithmConfig, policy_cls: type[TorchPolicy], *, worker_index: int
    ) -> None:
        """Build the policy map; envs are built on the first ``sample()``."""
        super().__init__(self._sample_forever, repeat=False)
        if isinstance(worker_index, bool) or not isinstance(worker_index, int) or worker_index < 0:
            raise ConfigError(f"RolloutWorker: worker_index={worker_index!r} must be an int >= 0")
        self.config = config
        self.worker_index = worker_index
        self._creator = make_env_creator(config.env, **config.env_config)
        seed = config.seed
        self._seed = seed
        policy_seed = None if seed is None else seed + worker_index
        probe = self._creator()
        try:
            self.multi_agent = is_multi_agent_env(probe)
            """True when the env is multi-agent (sampling returns `MultiAgentBatch`)."""
            spaces_of = self._policy_spaces(probe)
        finally:
            probe.close()
        self.policy_map: dict[PolicyID, TorchPolicy] = {}
        for k, (pid, spec) in enumerate(config.policy_specs().items()):
            # The policy also learns which worker it acts for (e.g. Ape-X's per-worker epsilon).
            policy_config = {**spec.policy_config(config), "worker_index": worker_index}
            cls = spec.policy_class or policy_cls
            self.policy_map[pid] = cls(
                *spaces_of[pid],
                policy_config,
                seed=None if policy_seed is None else policy_seed + k * _POLICY_SEED_STRIDE,
            )
        self._ma_sampler: MultiAgentSampler | None = None
        self.global_vars: dict[str, Any] = {}
        """Values pushed with the weights (``{"timestep": env steps sampled}``)."""
        self._rng = np.random.default_rng(policy_seed)
        self._venv: VectorEnv | None = None
        self._obs: Array | None = None
        self._eps_ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._next_eps = 0
        self._buffers: _Buffers | None = None

    def _policy_spaces(self, probe: Any) -> dict[PolicyID, tuple[Any, Any]]:
        """``{policy id: (observation space, action space)}`` from the specs and the env."""
        specs = self.config.policy_specs()
        if not self.multi_agent:
            if list(specs) != [DEFAULT_POLICY_ID]:
                raise ConfigError(
                    f"policies={sorted(specs)}: env {self.config.env!r} is single-agent, so its "
                    f"one policy must be {DEFAULT_POLICY_ID!r} (give a multi-agent env, e.g. "
                    "'multi_cartpole', to train several policies)"
                )
            spec = specs[DEFAULT_POLICY_ID]
            return {
                DEFAULT_POLICY_ID: (
                    spec.observation_space or probe.observation_space,
                    spec.action_space or probe.action_space,
                )
            }
        env = as_multi_agent_env(probe)
        policy_of = agent_policy_map(
            list(env.possible_agents), self.config.policy_mapping_fn, list(specs)
        )
        out: dict[PolicyID, tuple[Any, Any]] = {}
        for pid, spec in specs.items():
            agent = next((a for a, p in policy_of.items() if p == pid), None)
            obs_space, act_space = spec.observation_space, spec.action_space
            if agent is not None:
                obs_space = obs_space or env.observation_spaces[agent]
                act_space = act_space or env.action_spaces[agent]
            if obs_space is None or act_space is None:
                raise ConfigError(
                    f"policy {pid!r}: no agent of {self.config.env!r} (possible agents "
                    f"{list(env.possible_agents)}) maps to it, so give its observation_space "
                    "and action_space in its PolicySpec"
                )
            out[pid] = (obs_space, act_space)
        return out

    # ------------------------------------------------------------------------ sampling
    def _sample_forever(self) -> Iterator[SampleBatch | MultiAgentBatch]:
        while True:
            yield self.sample()

    def _env_seed(self) -> int | None:
        return None if self._seed is None else self._seed + self.worker_index * _ENV_SEED_STRIDE

    def _ensure_sampler(self) -> MultiAgentSampler:
        if self._ma_sampler is None:
            self._ma_sampler = MultiAgentSampler(
                self._creator,
                self.config.num_envs_per_worker,
                self.policy_map,
                self.config.policy_mapping_fn,
                self._env_seed(),
                self._new_eps_id,
            )
        return self._ma_sampler

    def _ensure_env(self) -> VectorEnv:
        if self.multi_agent:
            raise ConfigError(
                f"RolloutWorker {self.worker_index}: env {self.config.env!r} is multi-agent; "
                "it has no single-agent vector env"
            )
        if self._venv is None:
            n = self.config.num_envs_per_worker
            env_seed = self._env_seed()
            self._venv = VectorEnv(self._creator, n, env_seed)
            self._obs = self._venv.reset()
            self._eps_ids = np.array([self._new_eps_id() for _ in range(n)], dtype=np.int64)
        return self._venv

    def _new_eps_id(self) -> int:
        self._next_eps += 1
        return self.worker_index * _EPS_ID_STRIDE + self._next_eps

    def sample(self) -> SampleBatch | MultiAgentBatch:
        """Step every env ``rollout_fragment_length`` times; return the postprocessed batch.

        A multi-agent env gives a `MultiAgentBatch` (see `MultiAgentSampler`: rows per policy,
        env steps ``rollout_fragment_length * num_envs_per_worker``); the rest of this
        docstring is about single-agent envs.

        The batch has ``rollout_fragment_length * num_envs_per_worker`` rows, ordered by
        sub-env, then time; each episode fragment is postprocessed by the policy with bootstrap
        value 0 after a terminal step and V(s_T) after a truncation or at the fragment's end
        (0 there too when the policy has no critic: its value head is untrained).
        Columns: OBS, ACTIONS, REWARDS, TERMINATEDS, TRUNCATEDS, LOGP, VF_PREDS,
        ACTION_DIST_INPUTS, EPS_ID, ADVANTAGES, VALUE_TARGETS (the last two from the default
        postprocessing; a policy may postprocess differently), and NEXT_OBS (the true next
        observation, the episode's last one where it ended) when the policy has a true
        ``requires_next_obs`` attribute (replay-based policies).
        """
        if self.multi_agent:
            return self._ensure_sampler().sample(self.config.rollout_fragment_length)
        venv = self._ensure_env()
        policy = self.policy_map[DEFAULT_POLICY_ID]
        length = self.config.rollout_fragment_length
        obs = self._obs
        assert obs is not None
        truncated_obs: list[tuple[int, int, Array]] = []
        buf = self._buffers
        for t in range(length):
            actions, extra = policy.compute_actions(obs)
            if buf is None:
                buf = self._buffers = _Buffers(
                    length,
                    venv.num_envs,
                    obs,
                    actions,
                    extra[ACTION_DIST_INPUTS],
                    next_obs=bool(getattr(policy, "requires_next_obs", False)),
                )
            buf.obs[t] = obs
            buf.actions[t] = actions
            buf.logp[t] = extra[LOGP]
            buf.vf_preds[t] = extra[VF_PREDS]
            buf.dist_inputs[t] = extra[ACTION_DIST_INPUTS]
            buf.eps_id[t] = self._eps_ids
            step = venv.step(actions, copy=False)
            buf.rewards[t] = step.rewards
            buf.terminateds[t] = step.terminateds
            buf.truncateds[t] = step.truncateds
            if buf.next_obs is not None:
                buf.next_obs[t] = step.final_obs
            for i in np.flatnonzero(step.terminateds | step.truncateds):
                if step.truncateds[i] and not step.terminateds[i]:
                    truncated_obs.append((t, int(i), step.final_obs[i].copy()))
                self._eps_ids[i] = self._new_eps_id()
            obs = step.next_obs
        self._obs = obs.copy()
        assert buf is not None
        self._fill_bootstrap_values(buf, policy, truncated_obs)
        return self._postprocess(buf, policy)

    def _fill_bootstrap_values(
        self, buf: _Buffers, policy: TorchPolicy, truncated: list[tuple[int, int, Array]]
    ) -> None:
        """V(s) to bootstrap from after each truncated step and after the fragment's end.

        Without a critic the value head is never trained, so its output would only add noise
        to the returns: REINFORCE returns are then cut at the fragment's end (bootstrap 0).
        """
        assert self._obs is not None
        if not policy.use_critic:
            return
        buf.boot_values[-1] = policy.value(self._obs)
        if truncated:
            values = policy.value(np.stack([ob for _, _, ob in truncated]))
            for (t, i, _), v in zip(truncated, values, strict=True):
                buf.boot_values[t, i] = v

    def _postprocess(self, buf: _Buffers, policy: TorchPolicy) -> SampleBatch:
        """Split each sub-env's rows into episode fragments and postprocess each."""
        length, num_envs = buf.rewards.shape
        pieces: list[SampleBatch] = []
        for i in range(num_envs):
            ends = np.flatnonzero(buf.terminateds[:, i] | buf.truncateds[:, i]).tolist()
            if not ends or ends[-1] != length - 1:
                ends.append(length - 1)
            start = 0
            for end in ends:
                last_value = 0.0 if buf.terminateds[end, i] else float(buf.boot_values[end, i])
                if not policy.use_critic:
                    last_value = 0.0
                fragment = buf.fragment(start, end + 1, i)
                pieces.append(policy.postprocess_trajectory(fragment, last_value=last_value))
                start = end + 1
        return SampleBatch.concat_samples(pieces)

    def foreach_env(self, fn: Callable[[Any], Any]) -> list[Any]:
        """``fn(env)`` on each of this worker's sub-envs (built first if needed), in order."""
        if self.multi_agent:
            return [fn(slot.env) for slot in self._ensure_sampler().slots]
        venv = self._ensure_env()
        return [fn(env) for env in venv.envs]

    def set_task(self, task: Any) -> None:
        """Set ``task`` on every sub-env (each must have ``set_task``, see
        `rlflow.envs.point_nav.TaskSettableEnv`) and start new episodes under it.

        Episodes in progress are dropped (not counted in the episode stats): the next
        ``sample()`` starts from fresh resets on the new task.
        """
        venv = self._ensure_env()
        for i, env in enumerate(venv.envs):
            target: Any = getattr(env, "unwrapped", env)
            if not callable(getattr(target, "set_task", None)):
                raise ConfigError(
                    f"RolloutWorker {self.worker_index}.set_task: sub-env {i} "
                    f"({type(target).__name__}) has no set_task(task); meta-learning needs a "
                    "TaskSettableEnv such as rlflow.envs.point_nav.PointNavigation2D"
                )
            target.set_task(task)
        self._obs = venv.reset()
        self._eps_ids = np.array([self._new_eps_id() for _ in range(venv.num_envs)], dtype=np.int64)

    def pop_episode_stats(self) -> list[EpisodeStat]:
        """Episodes finished since the last call, in the order they ended."""
        if self._ma_sampler is not None:
            return self._ma_sampler.pop_episode_stats()
        return [] if self._venv is None else self._venv.pop_episode_stats()

    # ------------------------------------------------------------------------ learning
    def get_policy(self, policy_id: PolicyID = DEFAULT_POLICY_ID) -> TorchPolicy:
        """The policy named ``policy_id``; ConfigError naming the known ids if unknown."""
        try:
            return self.policy_map[policy_id]
        except KeyError:
            raise ConfigError(
                f"RolloutWorker {self.worker_index}: no policy {policy_id!r}; the policy map "
                f"has {sorted(self.policy_map)}"
            ) from None

    def _policy_batches(
        self, batch: SampleBatch | MultiAgentBatch, policies: Sequence[PolicyID] | None
    ) -> dict[PolicyID, SampleBatch]:
        per_policy = batch.as_multi_agent().policy_batches
        wanted = list(self.policy_map) if policies is None else list(policies)
        return {pid: per_policy[pid] for pid in wanted if pid in per_policy}

    def compute_gradients(self, batch: SampleBatch | MultiAgentBatch) -> Gradients:
        """Gradients of each policy's loss on its part of ``batch``; weights are unchanged."""
        grads: dict[PolicyID, list[Array]] = {}
        stats: dict[PolicyID, dict[str, float]] = {}
        for pid, b in self._policy_batches(batch, None).items():
            grads[pid], stats[pid] = self.get_policy(pid).compute_gradients(b)
        return Gradients(grads, batch.count, stats)

    def apply_gradients(self, grads: Mapping[PolicyID, Sequence[Array]]) -> None:
        """One optimizer step per policy with gradients from :meth:`compute_gradients`."""
        for pid, g in grads.items():
            # Arrays from Ray's object store are read-only; torch warns on those.
            arrays = [a if a.flags.writeable else a.copy() for a in map(np.asarray, g)]
            self.get_policy(pid).apply_gradients(arrays)

    def learn_on_batch(
        self,
        batch: SampleBatch | MultiAgentBatch,
        *,
        num_sgd_iter: int = 1,
        sgd_minibatch_size: int = 0,
        policies: Sequence[PolicyID] | None = None,
    ) -> dict[PolicyID, dict[str, float]]:
        """Train each policy (all, or ``policies``) on its part of ``batch``; return stats.

        With ``num_sgd_iter == 1`` and ``sgd_minibatch_size == 0``: one step on the whole batch.
        Otherwise ``num_sgd_iter`` epochs over shuffled minibatches of ``sgd_minibatch_size``
        rows (0: the whole batch), shuffled by this worker's seeded RNG.
        """
        out: dict[PolicyID, dict[str, float]] = {}
        for pid, b in self._policy_batches(batch, policies).items():
            policy = self.get_policy(pid)
            if num_sgd_iter == 1 and sgd_minibatch_size == 0:
                out[pid] = policy.learn_on_batch(b)
            else:
                out[pid] = policy.learn_on_minibatches(
                    b,
                    num_epochs=num_sgd_iter,
                    minibatch_size=sgd_minibatch_size or b.count,
                    rng=self._rng,
                )
        return out

    # ------------------------------------------------------------------------ state
    def get_weights(self, policies: Sequence[PolicyID] | None = None) -> dict[PolicyID, Any]:
        """``{policy_id: weights}`` of all policies (or ``policies``), as plain numpy."""
        ids = list(self.policy_map) if policies is None else list(policies)
        return {pid: self.get_policy(pid).get_weights() for pid in ids}

    def set_weights(
        self, weights: Mapping[PolicyID, Any], global_vars: Mapping[str, Any] | None = None
    ) -> None:
        """Load weights from :meth:`get_weights` (a subset of policies is fine)."""
        for pid, w in weights.items():
            self.get_policy(pid).set_weights(w)
        if global_vars is not None:
            self.set_global_vars(global_vars)

    def set_global_vars(self, global_vars: Mapping[str, Any]) -> None:
        """Keep ``global_vars`` and hand them to every policy that has an
        ``on_global_var_update(global_vars)`` method (e.g. an epsilon schedule on the timestep).
        """
        self.global_vars = dict(global_vars)
        for policy in self.policy_map.values():
            hook = getattr(policy, "on_global_var_update", None)
            if hook is not None:
                hook(self.global_vars)

    def get_state(self) -> dict[str, Any]:
        """A picklable snapshot: policy states, RNG, and the envs with their episode trackers.

        Restoring it with :meth:`set_state` makes the next samples (and, on the local backend,
        a whole synchronous run) continue exactly as they would have.
        """
        env_state = None
        if self._venv is not None:
            env_state = pickle.dumps((self._venv, self._obs, self._eps_ids))
        if self._ma_sampler is not None:
            env_state = pickle.dumps(self._ma_sampler.get_state())
        return {
            "policies": {pid: p.get_state() for pid, p in self.policy_map.items()},
            "rng": self._rng.bit_generator.state,
            "next_eps": self._next_eps,
            "global_vars": dict(self.global_vars),
            "env": env_state,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot made by :meth:`get_state`."""
        for pid, policy_state in state["policies"].items():
            self.get_policy(pid).set_state(policy_state)
        self._rng.bit_generator.state = state["rng"]
        self._next_eps = int(state["next_eps"])
        self.global_vars = dict(state["global_vars"])
        if state["env"] is not None and self.multi_agent:
            self._ensure_sampler().set_state(pickle.loads(state["env"]))
        elif state["env"] is not None:
            if self._venv is not None:
                self._venv.close()
            self._venv, self._obs, self._eps_ids = pickle.loads(state["env"])

    def apply(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn(self, *args)`` here (on the actor) and return its result."""
        return fn(self, *args)

    def ping(self) -> str:
        """Answer ``"ok"``: a liveness check."""
        return "ok"

    def stop(self) -> None:
        """Close the envs."""
        if self._venv is not None:
            self._venv.close()
        if self._ma_sampler is not None:
            self._ma_sampler.close()

    # ----------------------------------------------- shard reads run with this worker current
    def par_iter_next(self, key: int) -> Any:
        """As :meth:`ParallelIteratorWorker.par_iter_next`, with :func:`current_worker` set."""
        token = _CURRENT.set(self)
        try:
            return super().par_iter_next(key)
        finally:
            _CURRENT.reset(token)

    def par_iter_next_batch(self, key: int, batch_ms: float) -> ShardReply:
        """As :meth:`ParallelIteratorWorker.par_iter_next_batch`, with the worker current."""
        token = _CURRENT.set(self)
        try:
            return super().par_iter_next_batch(key, batch_ms)
        finally:
            _CURRENT.reset(token)

    def par_iter_slice(self, key: int, step: int, start: int) -> Any:
        """As :meth:`ParallelIteratorWorker.par_iter_slice`, with the worker current."""
        token = _CURRENT.set(self)
        try:
            return super().par_iter_slice(key, step, start)
        finally:
            _CURRENT.reset(token)

    def __repr__(self) -> str:
        return f"RolloutWorker(index={self.worker_index})"
