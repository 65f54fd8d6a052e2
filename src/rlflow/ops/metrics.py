"""Metric operators: the filters that define one iteration and the metrics collector.

:func:`standard_metrics_reporting` ends every plan: it pulls the train stream until an iteration
is complete (enough env steps sampled and enough time passed), then emits one result dict built
by :class:`CollectMetrics`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from rlflow import flow
from rlflow.checks import check_int, check_number
from rlflow.config import AlgorithmConfig
from rlflow.envs import EpisodeStat
from rlflow.errors import ActorDiedError, WorkerError
from rlflow.ops import keys
from rlflow.ops.filters import SyncObservationFilters
from rlflow.ops.learner_info import pop_policy_lag
from rlflow.ops.recovery import grow_in_plan, recreate_in_plan
from rlflow.ops.self_play import SnapshotPolicies
from rlflow.workers import WorkerMetrics, WorkerSet

__all__ = [
    "episode_stats",
    "CollectMetrics",
    "OncePerTimeInterval",
    "OncePerTimestepsElapsed",
    "agent_outcome_counts",
    "policy_return_stats",
    "report_episodes",
    "standard_metrics_reporting",
    "team_return_stats",
]

Clock = Callable[[], float]

_DEFAULT_COLLECT_TIMEOUT_S = 0.5


class OncePerTimeInterval:
    """Let an item through once at least ``seconds`` have passed since the last one did.

    Items: any (unchanged). Use with ``.filter``. The interval starts at the first item seen;
    ``seconds == 0`` lets every item through. ``clock`` (default ``time.monotonic``) is for
    tests. No side effects on the plan.

    >>> ticks = iter([0.0, 0.5, 1.2, 1.5, 2.3])
    >>> f = OncePerTimeInterval(1.0, clock=lambda: next(ticks))
    >>> [f(None) for _ in range(5)]
    [False, False, True, False, True]
    """

    def __init__(self, seconds: float, *, clock: Clock = time.monotonic) -> None:
        """Validate ``seconds`` (a number >= 0)."""
        self.seconds = check_number(seconds, "OncePerTimeInterval: seconds", low=0)
        self._clock = clock
        self._last: float | None = None

    def __call__(self, item: Any) -> bool:
        if self.seconds == 0:
            return True
        now = self._clock()
        if self._last is None:
            self._last = now
        if now - self._last >= self.seconds:
            self._last = now
            return True
        return False


class OncePerTimestepsElapsed:
    """Let an item through once the env-step counter grew by ``steps`` since the last one did.

    Items: any (unchanged). Use with ``.filter``. Reads counter ``num_env_steps_sampled`` (or
    ``num_env_steps_trained`` with ``by_steps_trained``) from ``flow.current_metrics()``; the
    first interval counts from 0. ``steps == 0`` lets every item through.
    """

    def __init__(self, steps: int, *, by_steps_trained: bool = False) -> None:
        """Validate ``steps`` (an int >= 0)."""
        self.steps = check_int(steps, "OncePerTimestepsElapsed: steps", low=0)
        self.counter = (
            keys.NUM_ENV_STEPS_TRAINED if by_steps_trained else keys.NUM_ENV_STEPS_SAMPLED
        )
        self._last = 0

    def __call__(self, item: Any) -> bool:
        current = flow.current_metrics().counters[self.counter]
        if current - self._last >= self.steps:
            self._last = current
            return True
        return False


class _IterationDone:
    """``filter``: true once an iteration sampled ``min_steps`` and lasted ``min_time_s``.

    One filter for both rules, reset together: chaining the two filters of the original made the
    step rule restart its count whenever the time rule said no, so iterations grew longer.
    """

    def __init__(self, min_steps: int, min_time_s: float, clock: Clock = time.monotonic):
        self.min_steps = min_steps
        self.min_time_s = min_time_s
        self._clock = clock
        self._start_time: float | None = None

    def __call__(self, item: Any) -> bool:
        now = self._clock()
        if self._start_time is None:
            self._start_time = now
        counters = flow.current_metrics().counters
        steps = counters[keys.NUM_ENV_STEPS_SAMPLED]
        start_steps = counters[keys.ITERATION_START_STEPS]
        if steps - start_steps < self.min_steps or now - self._start_time < self.min_time_s:
            return False
        counters[keys.ITERATION_START_STEPS] = steps
        self._start_time = now
        return True


class _LearnerTimestep:
    """``for_each``: give the learner (the local worker) the global ``timestep`` (env steps
    sampled) on every train item, so its policies' schedules (``lr_schedule``) follow the run
    as the workers' exploration does. Items pass through unchanged."""

    def __init__(self, workers: WorkerSet) -> None:
        self.workers = workers

    def __call__(self, item: Any) -> Any:
        counters = flow.current_metrics().counters
        self.workers.local_worker().set_global_vars(
            {"timestep": counters[keys.NUM_ENV_STEPS_SAMPLED]}
        )
        return item


def report_episodes(episodes: list[EpisodeStat]) -> None:
    """Hand episodes a plan's stage played itself (not a sampler: ES's and ARS's unperturbed
    evaluation episodes) to the next :class:`CollectMetrics` call, which counts them as the
    iteration's finished episodes. Side effect: ``ctx.info[keys.PLAN_EPISODES]``."""
    info = flow.current_metrics().info
    info[keys.PLAN_EPISODES] = [*info.get(keys.PLAN_EPISODES, []), *episodes]


class CollectMetrics:
    """Build the result dict of one iteration from the workers' finished episodes.

    Items: anything ``-> dict`` (the input is ignored). Use with ``.for_each`` at the end of a
    plan (see :func:`standard_metrics_reporting`). Asks every remote worker for its finished
    episodes (and takes those a plan's stage reported, :func:`report_episodes`) and waits at
    most ``timeout_s``; answers that are late are kept and read on the next call (never more
    than one request per worker in flight). Episode statistics are over
    the last ``smoothing_episodes`` episodes; before any episode finished they are ``None``.
    Remote workers that finished starting since the last call (an elastic run's on a node
    that joined, replacements of dead ones) are installed first (`grow_in_plan`). Only healthy
    workers are asked; one found dead is recreated (its unreported episodes are
    lost) or, with recreation off, raises ``WorkerError`` naming it (see ``rlflow.ops.recovery``).
    Side effects: counters ``num_episodes``, ``num_env_restarts``, ``num_nonfinite_episodes``,
    ``num_learner_restarts`` (and ``num_worker_restarts``).

    Result keys: ``episode_return_mean/min/max`` (summed over agents in multi-agent envs),
    ``episode_len_mean``, per-policy ``policy_reward_mean/min/max`` in multi-agent runs (see
    :func:`policy_return_stats`; and their agents' wins, draws and losses,
    :func:`agent_outcome_counts`; with ``teams``, each team's return,
    :func:`team_return_stats`), ``episodes_this_iter``, ``episodes_total``,
    ``num_env_steps_sampled``, ``num_env_steps_trained``, ``num_agent_steps_sampled``,
    ``num_agent_steps_trained``, ``num_env_steps_sampled_this_iter``,
    ``num_env_steps_trained_this_iter``, ``num_healthy_workers`` (remote workers not known to be
    dead), ``num_target_workers`` (``num_workers``), ``num_worker_restarts``,
    ``num_replay_shard_restarts``, ``num_env_restarts`` (sub-envs rebuilt, see
    ``restart_failed_sub_environments``), ``num_nonfinite_episodes`` (dropped for a NaN or
    infinite reward or observation, ``on_nonfinite="skip"``), ``num_nonfinite_updates`` (learner
    updates skipped for a non-finite loss or gradient, see ``max_nonfinite_updates``),
    ``policy_lag_mean`` / ``policy_lag_max`` (learner updates between the weights that sampled a
    batch and those that trained on it, over the iteration's updates; None when none reported
    it), ``info`` (``learner`` stats and the other info values), ``counters``, ``timers``
    (``<name>_time_ms``, ``<name>_throughput``).
    """

    def __init__(
        self,
        workers: WorkerSet,
        *,
        smoothing_episodes: int = 100,
        timeout_s: float = _DEFAULT_COLLECT_TIMEOUT_S,
        teams: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """Validate ``smoothing_episodes`` (int >= 1) and ``timeout_s`` (>= 0); ``teams``
        (``{team: agent ids}``) adds each team's return (:func:`team_return_stats`)."""
        self.workers = workers
        self.teams = dict(teams or {})
        self.timeout_s = check_number(timeout_s, "CollectMetrics: timeout_s", low=0)
        self.smoothing_episodes = check_int(
            smoothing_episodes, "CollectMetrics: smoothing_episodes", low=1
        )
        self._pending: dict[int, tuple[Any, Any]] = {}  # worker index -> (handle, request)
        self._learner_restarts_seen = 0  # the learner group's count at the last result

    def _new_episodes(self) -> list[EpisodeStat]:
        """Finished episodes of every worker; adds their env restarts to the counters."""
        grow_in_plan(self.workers)  # workers that started since the last iteration join now
        reports = [self.workers.local_worker().pop_metrics()]
        planned = flow.current_metrics().info.pop(keys.PLAN_EPISODES, [])
        if planned:
            reports.append(WorkerMetrics(list(planned), 0, 0))
        for handle in self.workers.healthy_workers():
            i = self.workers.worker_index(handle)
            if i not in self._pending:
                self._pending[i] = (handle, handle.pop_metrics.remote())
        if self._pending:
            refs = [ref for _, ref in self._pending.values()]
            ready, _ = flow.wait(refs, num_returns=len(refs), timeout=self.timeout_s)
            for i, (handle, ref) in list(self._pending.items()):
                if ref in ready:
                    del self._pending[i]
                    reports.extend(self._read(i, handle, ref))
        counters = flow.current_metrics().counters
        counters[keys.NUM_ENV_RESTARTS] += sum(r.env_restarts for r in reports)
        counters[keys.NUM_NONFINITE_EPISODES] += sum(r.nonfinite_episodes for r in reports)
        return [episode for r in reports for episode in r.episodes]

    def _read(self, index: int, handle: Any, ref: Any) -> list[WorkerMetrics]:
        """Worker ``index``'s report, or none if it died (it is recreated, or the error named)."""
        try:
            return [flow.get(ref)]
        except ActorDiedError as err:
            recreate_in_plan(self.workers, index, dead=handle, error=err)
        except WorkerError as err:
            raise self.workers.worker_failure(err) from err
        return []

    def __call__(self, _item: Any) -> dict[str, Any]:
        ctx = flow.current_metrics()
        new = self._new_episodes()
        # The smoothing window and the last report's step counts live in the context, so a
        # restored checkpoint continues with them.
        window = [*ctx.info.get(keys.RECENT_EPISODES, []), *new][-self.smoothing_episodes :]
        ctx.info[keys.RECENT_EPISODES] = window
        counters = ctx.counters
        counters[keys.NUM_EPISODES] += len(new)
        sampled = counters[keys.NUM_ENV_STEPS_SAMPLED]
        trained = counters[keys.NUM_ENV_STEPS_TRAINED]
        public_info = {k: v for k, v in ctx.info.items() if not k.startswith("_")}
        result: dict[str, Any] = {
            **self._episode_stats(window),
            **team_return_stats(window, self.teams),
            "episodes_this_iter": len(new),
            "episodes_total": counters[keys.NUM_EPISODES],
            "num_env_steps_sampled": sampled,
            "num_env_steps_trained": trained,
            "num_agent_steps_sampled": counters[keys.NUM_AGENT_STEPS_SAMPLED],
            "num_agent_steps_trained": counters[keys.NUM_AGENT_STEPS_TRAINED],
            "num_env_steps_sampled_this_iter": sampled - counters[keys.LAST_REPORT_SAMPLED],
            "num_env_steps_trained_this_iter": trained - counters[keys.LAST_REPORT_TRAINED],
            keys.NUM_HEALTHY_WORKERS: self.workers.num_healthy_workers(),
            keys.NUM_TARGET_WORKERS: self.workers.num_target_workers(),
            keys.NUM_WORKER_RESTARTS: counters[keys.NUM_WORKER_RESTARTS],
            keys.NUM_LEARNER_RESTARTS: self._learner_restarts(counters),
            keys.NUM_ENV_RESTARTS: counters[keys.NUM_ENV_RESTARTS],
            keys.NUM_LATE_SAMPLES: counters[keys.NUM_LATE_SAMPLES],
            keys.NUM_NONFINITE_EPISODES: counters[keys.NUM_NONFINITE_EPISODES],
            keys.NUM_NONFINITE_UPDATES: self.workers.local_worker().num_nonfinite_updates(),
            keys.NUM_REPLAY_SHARD_RESTARTS: counters[keys.NUM_REPLAY_SHARD_RESTARTS],
            **pop_policy_lag(),
            "info": {keys.LEARNER_INFO: {}, **public_info},
            "counters": dict(counters),
            "timers": self._timers(ctx),
        }
        counters[keys.LAST_REPORT_SAMPLED] = sampled
        counters[keys.LAST_REPORT_TRAINED] = trained
        return result

    def _learner_restarts(self, counters: MutableMapping[str, int]) -> int:
        """The run's learner restarts: the group's new ones since the last result added to the
        counter (the group counts this process's only; the counter is in checkpoints)."""
        group = self.workers.learner_group()
        if group is not None:
            counters[keys.NUM_LEARNER_RESTARTS] += group.num_restarts - self._learner_restarts_seen
            self._learner_restarts_seen = group.num_restarts
        return int(counters[keys.NUM_LEARNER_RESTARTS])

    @staticmethod
    def _episode_stats(window: list[EpisodeStat]) -> dict[str, float | None]:
        if not window:
            return {
                "episode_return_mean": None,
                "episode_return_min": None,
                "episode_return_max": None,
                "episode_len_mean": None,
            }
        returns = [e.return_ for e in window]
        lengths = [e.length for e in window]
        return {
            "episode_return_mean": math.fsum(returns) / len(returns),
            "episode_return_min": min(returns),
            "episode_return_max": max(returns),
            "episode_len_mean": sum(lengths) / len(lengths),
            **policy_return_stats(window),
            **agent_outcome_counts(window),
        }

    @staticmethod
    def _timers(ctx: flow.MetricsContext) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, timer in ctx.timers.items():
            out[f"{name}_time_ms"] = timer.mean_s * 1000.0
            if timer.units:
                out[f"{name}_throughput"] = timer.mean_throughput
        return out


def policy_return_stats(episodes: list[EpisodeStat]) -> dict[str, Any]:
    """Per-policy return statistics of multi-agent episodes (empty for single-agent ones).

    For each policy, over every (episode, agent) pair where the agent acted with that policy:
    the agent's return. Keys: ``policy_reward_mean``, ``policy_reward_min`` and
    ``policy_reward_max`` (dicts ``{policy id: value}``) and the same values flattened as
    ``"policy_reward_mean/<policy id>"`` etc., the names Tune gives nested results.

    >>> from rlflow.envs import AgentReturn
    >>> ep = EpisodeStat(3.0, 2, (AgentReturn("a0", "p", 1.0), AgentReturn("a1", "p", 2.0)))
    >>> policy_return_stats([ep])["policy_reward_mean/p"]
    1.5
    """
    per_policy: dict[str, list[float]] = {}
    for episode in episodes:
        for agent in episode.agent_returns:
            per_policy.setdefault(agent.policy_id, []).append(agent.return_)
    if not per_policy:
        return {}
    out: dict[str, Any] = {}
    for stat, fn in (
        ("mean", lambda xs: math.fsum(xs) / len(xs)),
        ("min", min),
        ("max", max),
    ):
        values = {pid: float(fn(xs)) for pid, xs in sorted(per_policy.items())}
        out[f"policy_reward_{stat}"] = values
        out.update({f"policy_reward_{stat}/{pid}": v for pid, v in values.items()})
    return out


def agent_outcome_counts(episodes: list[EpisodeStat]) -> dict[str, Any]:
    """Per agent of multi-agent episodes (empty for single-agent ones), how many of its
    episodes it won, drew and lost: the sign of its return (a game's +1 / 0 / -1). Keys:
    ``agent_wins``, ``agent_draws``, ``agent_losses`` (dicts ``{agent id: count}``) and the
    same flattened as ``"agent_wins/<agent id>"`` etc. An agent with several lives in one
    episode counts each.

    >>> from rlflow.envs import AgentReturn
    >>> games = [EpisodeStat(0.0, 5, (AgentReturn("x", "p", r), AgentReturn("o", "p", -r)))
    ...          for r in (1.0, 1.0, 0.0)]
    >>> counts = agent_outcome_counts(games)
    >>> counts["agent_wins"], counts["agent_draws/o"], counts["agent_losses/o"]
    ({'o': 0, 'x': 2}, 1, 2)
    """
    outcomes: dict[str, list[int]] = {}
    for episode in episodes:
        for agent in episode.agent_returns:
            counts = outcomes.setdefault(agent.agent_id, [0, 0, 0])
            counts[0 if agent.return_ > 0 else 1 if agent.return_ == 0 else 2] += 1
    out: dict[str, Any] = {}
    for k, name in enumerate(("agent_wins", "agent_draws", "agent_losses")):
        values = {agent: counts[k] for agent, counts in sorted(outcomes.items())}
        if values:
            out[name] = values
            out.update({f"{name}/{agent}": n for agent, n in values.items()})
    return out


def team_return_stats(
    episodes: list[EpisodeStat], teams: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    """Each team's return over multi-agent episodes: per episode the sum of its agents'
    returns (the team return of a game whose agents' rewards are summed), then the mean, min
    and max over the episodes where any of its agents played. ``teams``: ``{team: agent
    ids}`` (an agent group). Keys: ``team_return_mean``, ``team_return_min``,
    ``team_return_max`` (dicts ``{team: value}``) and the same flattened as
    ``"team_return_mean/<team>"``; a result that carries ``team_return_mean`` leads its
    progress line with it (`rlflow.cli.output.progress_line`).

    >>> from rlflow.envs import AgentReturn
    >>> ep = EpisodeStat(0.0, 9, (AgentReturn("r0", "p", 1.0), AgentReturn("r1", "p", 1.0),
    ...                           AgentReturn("b0", "q", -1.0), AgentReturn("b1", "q", -1.0)))
    >>> team_return_stats([ep], {"red": ["r0", "r1"], "blue": ["b0", "b1"]})["team_return_mean"]
    {'red': 2.0, 'blue': -2.0}
    """
    per_team: dict[str, list[float]] = {}
    for episode in episodes:
        for team, members in teams.items():
            returns = [a.return_ for a in episode.agent_returns if a.agent_id in members]
            if returns:
                per_team.setdefault(team, []).append(math.fsum(returns))
    out: dict[str, Any] = {}
    if not per_team:
        return out
    for stat, fn in (("mean", lambda xs: math.fsum(xs) / len(xs)), ("min", min), ("max", max)):
        values = {team: float(fn(xs)) for team, xs in per_team.items()}
        out[f"team_return_{stat}"] = values
        out.update({f"team_return_{stat}/{team}": v for team, v in values.items()})
    return out


def episode_stats(episodes: list[EpisodeStat]) -> dict[str, Any]:
    """`rlflow.Trainer.evaluate`'s result for its finished episodes (`EpisodeStat`s, at least
    one): ``episode_return_mean/min/max``, ``episode_len_mean``, ``episodes`` and, for
    multi-agent ones, ``policy_reward_mean/min/max``."""
    returns = [e.return_ for e in episodes]
    return {
        **policy_return_stats(episodes),
        **agent_outcome_counts(episodes),
        "episode_return_mean": float(np.mean(returns)),
        "episode_return_min": float(np.min(returns)),
        "episode_return_max": float(np.max(returns)),
        "episode_len_mean": float(np.mean([e.length for e in episodes])),
        "episodes": len(episodes),
    }


def standard_metrics_reporting(
    train_op: flow.LocalIterator[Any], workers: WorkerSet, config: AlgorithmConfig
) -> flow.LocalIterator[dict[str, Any]]:
    """End a plan: one result dict per iteration of ``train_op``.

    Items: anything ``-> dict`` (see :class:`CollectMetrics`). An iteration pulls ``train_op``
    until at least ``config.min_steps_per_iteration`` env steps were sampled and
    ``config.min_time_s_per_iteration`` seconds passed since the last result (both 0: one
    result per train item), then collects metrics over the last
    ``config.metrics_num_episodes_for_smoothing`` episodes. The learner's policies are told
    the global ``timestep`` after every train item (their ``lr_schedule`` follows it). With an
    ``observation_filter`` other than ``"NoFilter"`` the workers' filters are synced once per
    iteration, before the metrics (:class:`~rlflow.ops.filters.SyncObservationFilters`). With
    ``config.self_play`` the last stage is `rlflow.ops.self_play.SnapshotPolicies` (snapshots
    and win rates). With ``config.groups`` each group's return leads the results as
    ``team_return_mean/<group>`` (:func:`team_return_stats`).
    """
    done = _IterationDone(config.min_steps_per_iteration, config.min_time_s_per_iteration)
    # A group of agents (``groups``) is one agent of the env: its return is the team's.
    teams = {group: [group] for group in config.groups}
    collect = CollectMetrics(
        workers, smoothing_episodes=config.metrics_num_episodes_for_smoothing, teams=teams
    )
    iterations = train_op.for_each(_LearnerTimestep(workers)).filter(done)
    if config.observation_filter != "NoFilter":
        sync = SyncObservationFilters(workers, timeout_s=config.sample_timeout_s)
        iterations = iterations.for_each(sync)
    results = iterations.for_each(collect)
    if config.self_play is not None:
        results = results.for_each(SnapshotPolicies(workers, config))
    return results
