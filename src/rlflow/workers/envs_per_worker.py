"""``num_envs_per_worker="auto"``: the envs per rollout worker, chosen on the driver from a
short measurement of the env's step and the policy's forward, before any actor starts.

A worker steps its N envs, then runs one batched forward of the policy for the N
observations. The env's cost grows with N; a small model's forward is mostly a fixed cost per
call (torch's dispatch, small matrix products), so per row it falls as N grows. The rule
(`pick_num_envs`): the smallest N of `CANDIDATES` whose forward per row is at most
`FORWARD_SHARE` (25%) of the env's step per row, both measured at that N; where none is, the
N with the least measured env step + forward per row (a CNN's forward costs about the same per
frame at any N, so more envs do not pay there). Sampling then runs mostly at the env's speed,
with the fewest envs (smaller fragments, less memory, fresher weights) that get there. The
candidates are measured in increasing order, stopping at the first that meets the share.

Opt-in: N sets the fragment size (``rollout_fragment_length * N`` rows per sample) and the
envs' seeds, so a run with ``"auto"`` may differ from one machine (or load) to another. The
chosen value is in the run's config (`rlflow.Trainer.config`) and logged.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from rlflow.errors import ConfigError

__all__ = [
    "CANDIDATES",
    "FORWARD_SHARE",
    "RowCosts",
    "measure_row_costs",
    "pick_num_envs",
    "resolve_num_envs_per_worker",
]

log = logging.getLogger(__name__)

CANDIDATES = (8, 16, 32, 64)
"""The envs per worker that ``"auto"`` chooses from, in increasing order."""

FORWARD_SHARE = 0.25
"""The most the policy's forward may cost per row, as a share of the env's step per row."""


class RowCosts(NamedTuple):
    """Measured seconds per row (per env) of one vector step and of one batched forward."""

    env_s: float
    """The env engine's step of all N envs, divided by N."""
    forward_s: float
    """The policy's ``compute_actions`` for N observations, divided by N."""

    def meets(self, share: float = FORWARD_SHARE) -> bool:
        """Whether the forward per row costs at most ``share`` of the env step per row."""
        return self.forward_s <= share * self.env_s


def pick_num_envs(
    costs: Mapping[int, RowCosts],
    candidates: Sequence[int] = CANDIDATES,
    share: float = FORWARD_SHARE,
) -> int:
    """The rule of ``num_envs_per_worker="auto"``: the smallest of ``candidates`` whose
    forward per row is ``<= share`` of its env step per row (``costs[n]``, measured at ``n``
    envs); when none is, the one with the least env step + forward per row (the smaller on a
    tie). ``costs`` may stop at the first candidate that meets the share.

    >>> pick_num_envs({8: RowCosts(1e-5, 4e-6), 16: RowCosts(1e-5, 2e-6)}, (8, 16))
    16
    >>> pick_num_envs({8: RowCosts(1e-3, 1e-4), 16: RowCosts(1e-3, 5e-5)}, (8, 16))
    8
    """
    ordered = [n for n in sorted(candidates) if n in costs]
    if not ordered:
        raise ValueError(f"pick_num_envs: no costs measured for the candidates {candidates}")
    for n in ordered:
        if costs[n].meets(share):
            return n
    return min(ordered, key=lambda n: (costs[n].env_s + costs[n].forward_s, n))


def measure_row_costs(
    make_venv: Callable[[int], Any],
    policy: Any,
    candidates: Sequence[int] = CANDIDATES,
    *,
    seconds: float = 0.3,
    min_steps: int = 10,
) -> dict[int, RowCosts]:
    """``{n: RowCosts}`` for each of ``candidates``: ``make_venv(n)`` (a vector env with the
    interface of `rlflow.envs.vector.VectorEnv`, closed here) stepped with ``policy``'s
    actions (``compute_actions`` of its observations) for about ``seconds`` and at least
    ``min_steps`` steps after 3 to warm up; the medians of each part's time per call, divided
    by ``n`` (a median: on a shared machine other processes' bursts fall on few calls)."""
    costs: dict[int, RowCosts] = {}
    for n in candidates:
        venv = make_venv(n)
        try:
            memory = policy.memory(n).inputs()
            obs = venv.reset()
            env_times: list[float] = []
            forward_times: list[float] = []
            start = time.perf_counter()
            steps = 0
            while steps < min_steps + 3 or time.perf_counter() - start < seconds:
                t0 = time.perf_counter()
                actions, _ = policy.compute_actions(obs, explore=True, memory=memory)
                t1 = time.perf_counter()
                obs = venv.step(actions).next_obs
                t2 = time.perf_counter()
                steps += 1
                if steps > 3:
                    forward_times.append(t1 - t0)
                    env_times.append(t2 - t1)
        finally:
            venv.close()
        costs[n] = RowCosts(statistics.median(env_times) / n, statistics.median(forward_times) / n)
    return costs


def resolve_num_envs_per_worker(
    config: Any,
    policy_cls: type,
    *,
    measure: Callable[..., Mapping[int, RowCosts]] = measure_row_costs,
) -> Any:
    """``config`` with ``num_envs_per_worker="auto"`` replaced by `pick_num_envs` of a
    measurement (``measure``, `measure_row_costs`, called with one candidate at a time in
    increasing order until one meets `FORWARD_SHARE`) on this process: one local rollout worker
    of ``policy_cls`` (built to read the env's spaces and engine, then stopped) and a vector env
    of each candidate size on the config's engine. Any other config is returned as it is.
    A multi-agent env is a `ConfigError` (set a number). It takes seconds for cheap envs and
    up to about a minute for 64 Atari games on a loaded 2-core machine."""
    if config.num_envs_per_worker != "auto":
        return config
    from rlflow.envs.gym_vector import make_vector_env
    from rlflow.workers.rollout_worker import RolloutWorker

    worker = RolloutWorker(config.replace(num_envs_per_worker=1), policy_cls, worker_index=0)
    try:
        spec = worker.sampler_spec
        if spec.multi_agent:
            raise ConfigError(
                f"{type(config).__name__}.num_envs_per_worker='auto': it measures one "
                "single-agent policy; for a multi-agent env set a number (>= 1)"
            )
        policy = worker.get_policy()

        def make_venv(n: int) -> Any:
            return make_vector_env(spec.creator, n, spec.seed, vector_env=spec.vector_env)

        costs: dict[int, RowCosts] = {}
        for n in CANDIDATES:  # in increasing order, until one meets the share
            costs.update(measure(make_venv, policy, (n,)))
            if costs[n].meets():
                break
    finally:
        worker.stop()
    chosen = pick_num_envs(costs)
    log.info(
        "num_envs_per_worker='auto': %d (per row, env step / forward in us: %s)",
        chosen,
        ", ".join(
            f"{n}: {1e6 * c.env_s:.1f} / {1e6 * c.forward_s:.1f}" for n, c in sorted(costs.items())
        ),
    )
    return config.replace(num_envs_per_worker=chosen)
