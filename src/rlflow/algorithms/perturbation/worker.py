"""Worker side of ES and ARS: play the perturbations a request names, answer returns only.

No torch and no RL operators are imported here: a rollout worker runs
:func:`evaluate_perturbations` (shipped as ``handle.apply.remote(evaluate_perturbations,
...)``) with numpy alone (`rlflow.algorithms.perturbation.flat.batched_forward`), reading the
noise table installed in its process (`rlflow.data.noise`).
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from rlflow.algorithms.perturbation.flat import batched_forward
from rlflow.data.noise import antithetic_params, installed_noise
from rlflow.errors import ConfigError
from rlflow.workers.rollout_worker import RolloutWorker

__all__ = [
    "PerturbationRequest",
    "PerturbationResult",
    "evaluate_perturbations",
    "play_episodes",
]

Array = npt.NDArray[Any]


class PerturbationRequest(NamedTuple):
    """What a worker is sent per call besides ``theta``'s reference: integers only."""

    noise_indices: npt.NDArray[np.int64]
    """Start indices into the noise table, one per antithetic pair."""
    eval_episodes: int
    """Episodes to play with theta itself (not perturbed; the filter is not updated)."""
    seed: int
    """Env ``j`` of the request is reset with ``seed + j``."""


class PerturbationResult(NamedTuple):
    """What a worker answers: returns and lengths per index, no noise."""

    noise_indices: npt.NDArray[np.int64]
    """The request's indices, in order."""
    returns: npt.NDArray[np.float64]
    """``[k, 2]``: the return with ``theta + sigma * eps`` and with ``theta - sigma * eps``."""
    lengths: npt.NDArray[np.int64]
    """``[k, 2]``: the two episodes' lengths."""
    eval_returns: npt.NDArray[np.float64]
    """Returns of the unperturbed episodes."""
    eval_lengths: npt.NDArray[np.int64]
    """Their lengths."""


_ENVS: weakref.WeakKeyDictionary[RolloutWorker, list[Any]] = weakref.WeakKeyDictionary()
"""Each worker's envs for evaluations, built on first use and reused (grown on demand)."""


def _envs(worker: RolloutWorker, count: int) -> list[Any]:
    envs = _ENVS.setdefault(worker, [])
    while len(envs) < count:
        envs.append(worker.sampler_spec.creator())
    return envs[:count]


def evaluate_perturbations(
    worker: RolloutWorker,
    noise_key: str,
    theta: npt.NDArray[np.float32],
    request: PerturbationRequest,
    noise_stdev: float,
) -> PerturbationResult:
    """Worker side: play an episode with ``theta + noise_stdev * eps_i`` and one with ``theta -
    noise_stdev * eps_i`` for every index ``i`` of ``request``, and ``request.eval_episodes``
    with ``theta``; return their returns and lengths.

    Use as ``handle.apply.remote(evaluate_perturbations, key, theta_ref, request, sigma)``
    (``theta_ref`` arrives resolved). ``eps_i`` is read from the table installed under
    ``noise_key`` in this process (`rlflow.data.noise.install_noise`). All episodes run at once
    on this worker's evaluation envs (env ``j`` reset with ``request.seed + j``), each to its
    end. Side effects: the perturbed episodes' observations update the worker's observation
    filter (its delta, merged by the learner once per iteration); the unperturbed ones do not.
    """
    table = installed_noise(noise_key)
    policy: Any = worker.get_policy()
    if not hasattr(policy, "flat_model"):
        raise ConfigError(f"evaluate_perturbations needs a FlatPolicy, got {type(policy).__name__}")
    k = len(request.noise_indices)
    params = antithetic_params(theta, table, request.noise_indices, noise_stdev)
    if request.eval_episodes:
        unperturbed = np.broadcast_to(
            np.asarray(theta, np.float32), (request.eval_episodes, theta.size)
        )
        params = np.concatenate([params, unperturbed])
    updates = np.arange(len(params)) < 2 * k
    returns, lengths = play_episodes(worker, policy, params, updates, request.seed)
    return PerturbationResult(
        np.asarray(request.noise_indices, dtype=np.int64),
        returns[: 2 * k].reshape(k, 2),
        lengths[: 2 * k].reshape(k, 2),
        returns[2 * k :],
        lengths[2 * k :],
    )


def play_episodes(
    worker: RolloutWorker, policy: Any, params: Array, updates: Array, seed: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """One episode per row of ``params`` (``[P, D]``) on the worker's envs, all at once;
    ``(returns [P], lengths [P])``. ``policy`` is the worker's `FlatPolicy` (its model's layer
    shapes and activation, its ``act``). Observations are normalized by a frozen copy of the
    worker's observation filter taken now; the observations of rows with ``updates`` true are
    added to the filter at the end."""
    count = len(params)
    envs = _envs(worker, count)
    obs_filter = worker.filters.get(policy.policy_id)
    shapes, activation = policy.flat_model.shapes, policy.flat_model.activation
    obs = np.stack([np.asarray(env.reset(seed=seed + j)[0]) for j, env in enumerate(envs)])
    obs = obs.astype(np.float32)
    returns = np.zeros(count, dtype=np.float64)
    lengths = np.zeros(count, dtype=np.int64)
    active = np.ones(count, dtype=bool)
    discrete = not policy.action_space.shape
    # Every episode of the request is normalized alike, by the statistics the request started
    # with (so a pair's two episodes see the same filter, as in Mania et al.'s code); the
    # observations of the perturbed episodes are added to the worker's filter at the end.
    frozen = None if obs_filter is None else obs_filter.frozen_copy()
    seen: list[Array] = []
    while active.any():
        idx = np.flatnonzero(active)
        x = obs[idx]
        if frozen is not None:
            seen.append(x[updates[idx]])
            x = frozen(x)
        actions = policy.act(batched_forward(params[idx], x, shapes, activation))
        for j, action in zip(idx.tolist(), actions, strict=True):
            next_obs, reward, terminated, truncated, _ = envs[j].step(
                int(action) if discrete else action
            )
            returns[j] += float(reward)
            lengths[j] += 1
            obs[j] = next_obs
            if terminated or truncated:
                active[j] = False
    if obs_filter is not None and seen:
        learned = np.concatenate(seen)
        if len(learned):
            obs_filter(learned, update=True)
    return returns, lengths
