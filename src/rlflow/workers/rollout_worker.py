"""`RolloutWorker`: a vector env and a policy map that sample experience and learn from it.

A rollout worker is the unit of parallelism of every plan: remote workers are actors that a plan
reads with ``flow.from_actors(workers).gather_async()`` (their shard generator is "sample
forever"); the local worker (index 0) is the learner and samples only when there are no remote
workers. It holds a policy map ``{policy_id: policy}``: one policy,
:data:`~rlflow.config.DEFAULT_POLICY_ID`, for single-agent envs; those of
``config.policy_specs()`` for multi-agent envs.

Sampling and evaluation go through the worker's `rlflow.workers.sampler.Sampler` (a
`VectorSampler` for single-agent envs, a `MultiAgentSampler` for multi-agent ones, picked by
`make_sampler`): the one env-stepping loop, which also plays the evaluation episodes of
`RolloutWorker.evaluate` on fresh envs. The worker builds the sampler's settings (a
`SamplerSpec`) once, in its constructor; evaluation runs a variant of them.

Observation filters (``observation_filter``, `rlflow.filters`): a worker holds one filter per
policy in `RolloutWorker.filters` (none with ``"NoFilter"``), which its sampler updates. The
learner's sync (`rlflow.ops.filters.SyncObservationFilters`) gets every worker's filters with
`RolloutWorker.get_filters` (flushing their deltas), merges them into the local worker's with
`RolloutWorker.apply_filter_changes`, and broadcasts the result back with
`RolloutWorker.sync_filters`: the paper's message passing between dataflow stages. Evaluation
uses frozen copies; the filters are part of the worker's state (checkpoints).

While a worker serves a read of its shard stream, it is :func:`current_worker`: functions
shipped to the workers (``ParallelIterator.for_each``) reach it that way.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from rlflow.checks import check_bool, check_int
from rlflow.config import DEFAULT_POLICY_ID, AlgorithmConfig, resolve_policies
from rlflow.data import NUM_GRAD_UPDATES, MultiAgentBatch, SampleBatch
from rlflow.envs import EpisodeStat, config_env_creator
from rlflow.envs.gym_vector import resolve_vector_env
from rlflow.envs.validation import check_calls, check_env_api, env_name
from rlflow.errors import ConfigError
from rlflow.filters import MeanStdFilter, make_filter
from rlflow.flow import ParallelIteratorWorker, ShardReply
from rlflow.lazy import resolve_ref
from rlflow.offline.writer import ExperienceWriter
from rlflow.workers.multi_agent_sampler import MultiAgentSampler
from rlflow.workers.records import Gradients, WorkerMetrics
from rlflow.workers.sampler import (
    MappingFn,
    Sampler,
    SamplerSpec,
    env_observation_spaces,
    is_multi_agent_env,
    policy_spaces,
)
from rlflow.workers.vector_sampler import VectorSampler

if TYPE_CHECKING:
    import torch

    from rlflow.policy import TorchPolicy

__all__ = ["RolloutWorker", "current_worker", "make_sampler"]

logger = logging.getLogger(__name__)

Array = npt.NDArray[Any]
PolicyID = str

_EPS_ID_STRIDE = 1_000_000_000
"""Episode ids of worker k are ``k * _EPS_ID_STRIDE + n``: unique across the workers of a run."""
_ENV_SEED_STRIDE = 10_000
"""Sub-env j of worker k is seeded ``seed + k * _ENV_SEED_STRIDE + j``."""
_POLICY_SEED_STRIDE = 100_003
"""Policy p (in the order of ``config.policy_specs()``) of worker k is seeded ``seed + k + p *
this``."""

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


def make_sampler(
    spec: SamplerSpec,
    policies: Mapping[PolicyID, TorchPolicy],
    *,
    new_eps_id: Callable[[], int],
    filters: Mapping[PolicyID, MeanStdFilter] | None = None,
) -> Sampler:
    """The sampler for ``spec``'s env: a `MultiAgentSampler` of ``policies`` when
    ``spec.multi_agent``, else a `VectorSampler` of the one policy.

    ``new_eps_id`` gives the episode ids (unique across the run's workers). ``filters``:
    ``{policy id: observation filter}`` (`rlflow.filters`; a policy without one sees raw
    observations), used in place: the sampler updates them unless they are frozen.
    """
    filters = dict(filters or {})
    if spec.multi_agent:
        return MultiAgentSampler(spec, policies, new_eps_id, filters=filters)
    ((pid, policy),) = policies.items()
    return VectorSampler(spec, policy, new_eps_id, obs_filter=filters.get(pid))


class RolloutWorker(ParallelIteratorWorker):
    """Vector env + policy map: samples postprocessed batches, computes and applies gradients.

    Args:
        config: the algorithm config (``env``, ``num_envs_per_worker``,
            ``rollout_fragment_length``, ``seed``, and the policy's keys).
        policy_cls: the algorithm's policy class (a `PolicySpec` may name another), or where
            it is (``"module:Class"``, imported here: a driver that starts remote workers
            before it imports torch passes that, `rlflow.workers.placement`); each policy is
            built with its typed config (`rlflow.config.resolve_policies`).
        worker_index: 0 for the local worker (the learner), 1..N for remote workers. Seeds the
            envs (``seed + index * 10000 + j`` for sub-env j), the policy's sampling RNG
            (``seed + index``) and the minibatch shuffling RNG.
        algorithm: the algorithm's registered name, for the `ConfigError` raised when a policy
            cannot take the env's spaces or ``observation_filter`` cannot filter its
            observations (it names the algorithm, the env and both spaces); default: the config
            class's name.

    The local worker builds its envs only when it samples (``num_workers == 0``); to build its
    policy it reads the spaces from one env made and closed at once.
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        policy_cls: type[TorchPolicy] | str,
        *,
        worker_index: int,
        algorithm: str | None = None,
    ) -> None:
        """Build the policy map; envs are built on the first ``sample()``."""
        super().__init__(self._sample_forever, repeat=False)
        policy_class: type[TorchPolicy] = resolve_ref(policy_cls)
        worker_index = check_int(worker_index, "RolloutWorker: worker_index", low=0)
        self.config = config
        self.worker_index = worker_index
        seed = config.seed
        policy_seed = None if seed is None else seed + worker_index
        self.sampler_spec, spaces_of, probe = self._probe_env(config, worker_index)
        """The settings of this worker's sampler (`SamplerSpec`), built once; evaluation runs
        a variant of them."""
        self.env_observation_spaces: dict[PolicyID, Any] = {}
        """``{policy id: the space of the env's own observations}`` for the policies whose
        observations the env creator flattens (`env_observation_spaces`): what an export
        records, so that the loaded policy takes the env's observations as they are."""
        self.policy_map: dict[PolicyID, TorchPolicy] = {}
        self.filters: dict[PolicyID, MeanStdFilter] = {}
        """``{policy id: observation filter}``: empty with ``observation_filter="NoFilter"``."""
        try:
            self.env_observation_spaces = env_observation_spaces(
                probe,
                config.policy_specs(),
                config.agent_mapping(),
                multi_agent=self.sampler_spec.multi_agent,
            )
            self._build_policies(policy_class, spaces_of, policy_seed, algorithm)
            external = getattr(getattr(probe, "unwrapped", probe), "external", False)
            if worker_index == 0 and not self.sampler_spec.multi_agent and not external:
                # The learner's worker, built before any actor starts: after the policies took
                # the env's spaces, its probe is reset and stepped once (an old Gym env). An
                # external env (rlflow.serve) is not: its steps are its clients' episodes.
                check_calls(probe, env_name(config.env))
            if worker_index == 0:  # a policy's own demands on the env (its class's hook)
                policy_class.check_env(probe, env_name(config.env))
        finally:
            probe.close()
        self._sampler: Sampler | None = None
        self._writer: ExperienceWriter | None = None
        self.global_vars: dict[str, Any] = {}
        """Values pushed with the weights (``{"timestep": env steps sampled}``)."""
        self._rng = np.random.default_rng(policy_seed)
        self._next_eps = 0

    def _build_policies(
        self,
        policy_cls: type[TorchPolicy],
        spaces_of: dict[PolicyID, tuple[Any, Any]],
        policy_seed: int | None,
        algorithm: str | None,
    ) -> None:
        """Fill `policy_map` and `filters`: each policy on the env's spaces."""
        config, worker_index = self.config, self.worker_index
        # Typed per-policy configs, then each policy on the env's spaces: a bad override or a
        # space a policy cannot take raises here, on the driver's local worker, before
        # WorkerSet starts any remote one (the learner's worker is the run's check of its env).
        for k, (pid, (cls, policy_config)) in enumerate(
            resolve_policies(config, policy_cls).items()
        ):
            obs_space, act_space = spaces_of[pid]
            try:
                policy = cls(
                    obs_space,
                    act_space,
                    policy_config,
                    seed=None if policy_seed is None else policy_seed + k * _POLICY_SEED_STRIDE,
                    worker_index=worker_index,
                )
                obs_filter = make_filter(config.observation_filter, policy.observation_space)
            except ConfigError as err:
                owner = repr(algorithm or type(config).__name__)
                owner += "" if pid == DEFAULT_POLICY_ID else f" (policy {pid!r}, {cls.__name__})"
                raise ConfigError(
                    f"algorithm {owner} cannot use env {env_name(config.env)!r}: its action "
                    f"space is {act_space}, its observation space {obs_space}; {err}"
                ) from None
            policy.policy_id = pid
            self.policy_map[pid] = policy
            if obs_filter is not None:
                self.filters[pid] = obs_filter

    @staticmethod
    def _probe_env(
        config: AlgorithmConfig, worker_index: int
    ) -> tuple[SamplerSpec, dict[PolicyID, tuple[Any, Any]], Any]:
        """The sampler's settings, ``{policy id: (observation space, action space)}`` from the
        policy specs and one env, and that env (the caller closes it); a single-agent env is
        checked against the Gymnasium API as far as it shows unstepped (`check_env_api`)."""
        creator = config_env_creator(config)
        probe = creator()
        try:
            multi_agent = is_multi_agent_env(probe)
            if not multi_agent:
                check_env_api(probe, env_name(config.env))
            spaces_of = policy_spaces(
                probe,
                config.policy_specs(),
                config.agent_mapping(),
                config.env,
                multi_agent=multi_agent,
            )
            vector_env = resolve_vector_env(
                config.vector_env,
                creator,
                restart_failed=config.restart_failed_sub_environments,
                multi_agent=multi_agent,
                skip_nonfinite=config.on_nonfinite == "skip",
            )
        except BaseException:
            probe.close()
            raise
        spec = SamplerSpec(
            creator=creator,
            num_envs=config.envs_per_worker(),
            multi_agent=multi_agent,
            seed=None if config.seed is None else config.seed + worker_index * _ENV_SEED_STRIDE,
            mapping_fn=config.agent_mapping(),
            restart_failed=config.restart_failed_sub_environments,
            on_nonfinite=config.on_nonfinite,
            vector_env=vector_env,
            worker_index=worker_index,
        )
        return spec, spaces_of, probe

    @property
    def multi_agent(self) -> bool:
        """True when the env is multi-agent (sampling returns `MultiAgentBatch`)."""
        return self.sampler_spec.multi_agent

    # ------------------------------------------------------------------------ sampling
    def _sample_forever(self) -> Iterator[SampleBatch | MultiAgentBatch]:
        while True:
            yield self.sample()

    def _ensure_sampler(self) -> Sampler:
        if self._sampler is None:
            self._sampler = make_sampler(
                self.sampler_spec,
                self.policy_map,
                new_eps_id=self._new_eps_id,
                filters=self.filters,
            )
        return self._sampler

    def _new_eps_id(self) -> int:
        self._next_eps += 1
        return self.worker_index * _EPS_ID_STRIDE + self._next_eps

    def sample(
        self, *, preempt: Callable[[int], bool] | None = None
    ) -> SampleBatch | MultiAgentBatch:
        """Step every env ``rollout_fragment_length`` times; return the postprocessed batch.

        A single-agent env gives a `SampleBatch` of ``rollout_fragment_length *
        num_envs_per_worker`` rows, ordered by sub-env, then time (see `VectorSampler`); each
        episode fragment is postprocessed by the policy with bootstrap value 0 after a terminal
        step and V(s_T) after a truncation or at the fragment's end (0 there too when the
        policy has no critic: its value head is untrained). Columns: OBS, ACTIONS, REWARDS,
        TERMINATEDS, TRUNCATEDS, LOGP, VF_PREDS, ACTION_DIST_INPUTS, EPS_ID, ADVANTAGES,
        VALUE_TARGETS (the last two from the default postprocessing; a policy may postprocess
        differently), and NEXT_OBS when the policy has a true ``requires_next_obs``.

        A multi-agent env gives a `MultiAgentBatch` (see `MultiAgentSampler`: rows per policy,
        env steps ``rollout_fragment_length * num_envs_per_worker``). Every row records its
        policy's ``num_grad_updates`` in ``NUM_GRAD_UPDATES`` (for the learner's policy lag).

        ``preempt(steps)``, asked after each step, may end the fragment early (DD-PPO's
        straggler preemption; `Sampler.sample`): the batch then holds ``steps`` steps of
        each env.
        """
        batch = self._ensure_sampler().sample(self.config.rollout_fragment_length, preempt=preempt)
        parts = (
            batch.policy_batches
            if isinstance(batch, MultiAgentBatch)
            else {DEFAULT_POLICY_ID: batch}
        )
        for pid, part in parts.items():
            version = self.get_policy(pid).update.num_grad_updates
            part[NUM_GRAD_UPDATES] = np.full(part.count, version, dtype=np.int64)
        if self.config.output is not None:
            self._output_writer().write(batch)
        return batch

    def _output_writer(self) -> ExperienceWriter:
        """This worker's writer of ``config.output`` (built on first use)."""
        if self._writer is None:
            assert self.config.output is not None  # sample() asks only when it is set
            self._writer = ExperienceWriter(
                self.config.output,
                worker_index=self.worker_index,
                max_rows_per_file=self.config.output_max_rows_per_file,
            )
        return self._writer

    def output_stats(self) -> dict[str, float]:
        """What this worker wrote to ``config.output``: ``rows``, ``files``, ``bytes`` and
        ``seconds`` (encoding and writing); zeros when it wrote nothing."""
        w = self._writer
        if w is None:
            return {"rows": 0, "files": 0, "bytes": 0, "seconds": 0.0}
        return {
            "rows": w.rows_written,
            "files": w.files_written,
            "bytes": w.bytes_written,
            "seconds": w.seconds_writing,
        }

    def flush_output(self) -> None:
        """Write the rows buffered for ``config.output`` (each policy's last file)."""
        if self._writer is not None:
            self._writer.flush()

    def evaluate(
        self,
        num_episodes: int,
        *,
        seed: int | None = None,
        explore: bool = False,
        creator: Callable[[], Any] | None = None,
        mapping_fn: MappingFn | None = None,
        policies: Mapping[PolicyID, Any] | None = None,
    ) -> list[EpisodeStat]:
        """Play ``num_episodes`` episodes one after the other on one fresh env; their stats.

        The env is built for this call (by ``creator``, default the config's env creator) and
        closed after it, reset with ``seed`` first (then unseeded); the policies act greedily
        unless ``explore``. It steps through the same sampler as :meth:`sample`, so actions
        are converted and clipped, observations filtered (by frozen copies of the worker's
        filters), and episodes counted, exactly as in training. The worker's envs, filters,
        episode ids and stats are untouched (with ``explore`` the actions draw from the
        policies' generators). Multi-agent: ``mapping_fn`` (default the run's) maps the agents
        to ``policies`` (default the worker's policy map; others may be added, e.g. a fixed
        opponent, `rlflow.ops.self_play.RandomLegalPolicy`); episode ids count from 1.
        """
        num_episodes = check_int(num_episodes, "RolloutWorker.evaluate: num_episodes", low=1)
        explore = check_bool(explore, "RolloutWorker.evaluate: explore")
        spec = self.sampler_spec._replace(
            creator=self.sampler_spec.creator if creator is None else creator,
            mapping_fn=self.sampler_spec.mapping_fn if mapping_fn is None else mapping_fn,
            num_envs=1,
            seed=seed,
            explore=explore,
            # One env seeded exactly with ``seed``: rlflow's own engine (a Gymnasium vector
            # engine may draw its first state differently, see `rlflow.envs.gym_vector`).
            vector_env="rlflow",
        )
        sampler = make_sampler(
            spec,
            self.policy_map if policies is None else policies,
            new_eps_id=itertools.count(1).__next__,
            filters={pid: f.frozen_copy() for pid, f in self.filters.items()},
        )
        try:
            return sampler.run_episodes(num_episodes)
        finally:
            sampler.close()

    def foreach_env(self, fn: Callable[[Any], Any]) -> list[Any]:
        """``fn(env)`` on each of this worker's sub-envs (built first if needed), in order."""
        return [fn(env) for env in self._ensure_sampler().envs]

    def set_task(self, task: Any) -> None:
        """Set ``task`` on every sub-env (each must have ``set_task``, see
        `rlflow.envs.point_nav.TaskSettableEnv`) and start new episodes under it.

        Episodes in progress are dropped (not counted in the episode stats): the next
        ``sample()`` starts from fresh resets on the new task.
        """
        sampler = self._ensure_sampler()
        if not isinstance(sampler, VectorSampler):
            raise ConfigError(
                f"RolloutWorker {self.worker_index}.set_task: env {self.config.env!r} is "
                "multi-agent; set_task needs single-agent TaskSettableEnvs"
            )
        sampler.set_task(task)

    def pop_episode_stats(self) -> list[EpisodeStat]:
        """Episodes finished since the last call, in the order they ended."""
        return [] if self._sampler is None else self._sampler.pop_episode_stats()

    def pop_env_restarts(self) -> int:
        """Sub-envs rebuilt since the last call (``restart_failed_sub_environments``)."""
        return 0 if self._sampler is None else self._sampler.pop_env_restarts()

    def pop_metrics(self) -> WorkerMetrics:
        """`pop_episode_stats`, `pop_env_restarts` and the episodes dropped for non-finite
        numbers (`Sampler.pop_nonfinite_episodes`) in one call (one round trip)."""
        dropped = 0 if self._sampler is None else self._sampler.pop_nonfinite_episodes()
        return WorkerMetrics(self.pop_episode_stats(), self.pop_env_restarts(), dropped)

    def num_nonfinite_updates(self) -> int:
        """Learner updates skipped for a non-finite loss or gradient, over all policies
        (`PolicyUpdate.num_nonfinite_updates`)."""
        return sum(p.update.num_nonfinite_updates for p in self.policy_map.values())

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
            grads[pid], stats[pid] = self.get_policy(pid).update.compute_gradients(b)
        return Gradients(
            grads, batch.env_steps(), stats, self.num_grad_updates_per_policy(list(grads))
        )

    def apply_gradients(self, grads: Mapping[PolicyID, Sequence[Array]]) -> None:
        """One optimizer step per policy with gradients from :meth:`compute_gradients`."""
        for pid, g in grads.items():
            # Arrays from Ray's object store are read-only; torch warns on those.
            arrays = [a if a.flags.writeable else a.copy() for a in map(np.asarray, g)]
            self.get_policy(pid).update.apply_gradients(arrays)

    def stage_batch(
        self, batch: SampleBatch | MultiAgentBatch, policies: Sequence[PolicyID] | None = None
    ) -> SampleBatch | MultiAgentBatch:
        """``batch`` with each trained policy's part (all, or ``policies``) sent ahead to that
        policy's device (`PolicyUpdate.stage`); :meth:`learn_on_batch` then uses those tensors.
        The learner thread's prefetch."""
        staged = {
            pid: self.get_policy(pid).update.stage(b)
            for pid, b in self._policy_batches(batch, policies).items()
        }
        if isinstance(batch, SampleBatch):
            return next(iter(staged.values()), batch)
        return MultiAgentBatch({**batch.policy_batches, **staged}, batch.env_steps())

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
                out[pid] = policy.update.learn_on_batch(b)
            else:
                out[pid] = policy.update.learn_on_minibatches(
                    b,
                    num_sgd_iter=num_sgd_iter,
                    sgd_minibatch_size=sgd_minibatch_size or b.count,
                    rng=self._rng,
                )
        return out

    # ------------------------------------------------------------------------ filters
    def get_filters(self, *, flush_after: bool = False) -> dict[PolicyID, MeanStdFilter]:
        """Copies of the observation filters (RLlib's name), each with its running
        statistics and its delta (observations since the delta was last taken); with
        ``flush_after`` the deltas are then taken (emptied): the learner is merging them."""
        out = {pid: f.copy() for pid, f in self.filters.items()}
        if flush_after:
            for f in self.filters.values():
                f.take_delta()
        return out

    def apply_filter_changes(self, filters: Mapping[PolicyID, MeanStdFilter]) -> None:
        """Learner side: add the deltas of another worker's `get_filters` to these filters'
        running statistics (policies this worker has no filter for are ignored)."""
        for pid, other in filters.items():
            mine = self.filters.get(pid)
            if mine is not None:
                mine.apply_changes(other)

    def sync_filters(self, filters: Mapping[PolicyID, MeanStdFilter]) -> None:
        """Worker side: take the learner's filters (RLlib's name), keeping this worker's
        delta on top (`rlflow.filters.MeanStdFilter.sync`); the filters are updated in place
        (the sampler holds them)."""
        for pid, other in filters.items():
            mine = self.filters.get(pid)
            if mine is not None:
                mine.sync(other)

    # ------------------------------------------------------------------------ shard reads
    @contextlib.contextmanager
    def _as_current(self) -> Iterator[None]:
        token = _CURRENT.set(self)
        try:
            yield
        finally:
            _CURRENT.reset(token)

    def par_iter_next(self, key: int) -> Any:
        """As :meth:`ParallelIteratorWorker.par_iter_next`, with this worker as
        :func:`current_worker` (the slot reads, ``par_iter_next_<slot>``, come through here)."""
        with self._as_current():
            return super().par_iter_next(key)

    def par_iter_next_batch(self, key: int, batch_ms: float) -> ShardReply:
        """As :meth:`ParallelIteratorWorker.par_iter_next_batch`, with the worker current."""
        with self._as_current():
            return super().par_iter_next_batch(key, batch_ms)

    def par_iter_slice(self, key: int, step: int, start: int) -> Any:
        """As :meth:`ParallelIteratorWorker.par_iter_slice`, with the worker current."""
        with self._as_current():
            return super().par_iter_slice(key, step, start)

    # ------------------------------------------------------------------------ state
    def get_weights(self, policies: Sequence[PolicyID] | None = None) -> dict[PolicyID, Any]:
        """``{policy_id: weights}`` of all policies (or ``policies``), as plain numpy."""
        ids = list(self.policy_map) if policies is None else list(policies)
        return {pid: self.get_policy(pid).get_weights() for pid in ids}

    def weights_snapshot(
        self, policies: Sequence[PolicyID] | None = None
    ) -> dict[PolicyID, dict[str, torch.Tensor]]:
        """``{policy_id: TorchPolicy.weights_snapshot()}`` of all policies (or ``policies``):
        copies on their devices, for :meth:`get_weights` outside a learner's lock."""
        ids = list(self.policy_map) if policies is None else list(policies)
        return {pid: self.get_policy(pid).weights_snapshot() for pid in ids}

    def set_weights(
        self, weights: Mapping[PolicyID, Any], global_vars: Mapping[str, Any] | None = None
    ) -> None:
        """Load weights from :meth:`get_weights` (a subset of policies is fine)."""
        for pid, w in weights.items():
            self.get_policy(pid).set_weights(w)
        if global_vars is not None:
            self.set_global_vars(global_vars)

    def num_grad_updates_per_policy(self, policies: Sequence[PolicyID] | None = None) -> Any:
        """``{policy_id: num_grad_updates}`` of all policies (or ``policies``): the global var
        ``num_grad_updates_per_policy`` that goes with :meth:`get_weights` to the workers."""
        ids = list(self.policy_map) if policies is None else list(policies)
        return {pid: self.get_policy(pid).update.num_grad_updates for pid in ids}

    def set_global_vars(self, global_vars: Mapping[str, Any]) -> None:
        """Update ``global_vars`` with these and hand them to every policy that has an
        ``on_global_var_update(global_vars)`` method (e.g. an epsilon schedule on the timestep);
        ``num_grad_updates_per_policy`` sets the policies' ``num_grad_updates``.
        """
        self.global_vars = {**self.global_vars, **global_vars}
        for pid, count in global_vars.get("num_grad_updates_per_policy", {}).items():
            self.get_policy(pid).update.num_grad_updates = count
        for policy in self.policy_map.values():
            hook = getattr(policy, "on_global_var_update", None)
            if hook is not None:
                hook(self.global_vars)

    def get_state(self) -> dict[str, Any]:
        """A picklable snapshot: policy states, RNG, observation filters, and the envs with
        their episode trackers.

        Restoring it with :meth:`set_state` makes the next samples (and, on the local backend,
        a whole synchronous run) continue exactly as they would have.
        """
        sampler_state = None if self._sampler is None else self._sampler.get_state()
        env_state = None if sampler_state is None else pickle.dumps(sampler_state)
        return {
            "policies": {pid: p.get_state() for pid, p in self.policy_map.items()},
            "rng": self._rng.bit_generator.state,
            "next_eps": self._next_eps,
            "global_vars": dict(self.global_vars),
            "filters": {pid: f.get_state() for pid, f in self.filters.items()},
            "env": env_state,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot made by :meth:`get_state`."""
        for pid, policy_state in state["policies"].items():
            self.get_policy(pid).set_state(policy_state)
        self._rng.bit_generator.state = state["rng"]
        self._next_eps = int(state["next_eps"])
        self.global_vars = dict(state["global_vars"])
        for pid, filter_state in state.get("filters", {}).items():
            if pid in self.filters:
                self.filters[pid].set_state(filter_state)
        if state["env"] is not None:
            self._ensure_sampler().set_state(pickle.loads(state["env"]))

    def set_rng_state(self, state: Mapping[str, Any]) -> None:
        """Set the RNG that shuffles minibatches (``get_state()["rng"]`` of a worker): a
        learner group hands learner 0's to the driver's worker before a checkpoint."""
        self._rng.bit_generator.state = state

    def apply(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn(self, *args)`` here (on the actor) and return its result."""
        return fn(self, *args)

    def ping(self) -> str:
        """Answer ``"ok"``: a liveness check."""
        return "ok"

    def stop(self) -> None:
        """Write the rows buffered for ``config.output``; close the envs."""
        self.flush_output()
        if self._sampler is not None:
            self._sampler.close()

    def __repr__(self) -> str:
        return f"RolloutWorker(index={self.worker_index})"
