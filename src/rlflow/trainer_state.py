"""What a `rlflow.Trainer` checkpoint holds besides the trainer's own counters: the workers'
states, the driver's RNG states, the replay buffers (``checkpoint_replay_buffers``), and the
rules for restoring them (`restore_arguments`).

`rlflow.trainer` uses these; the files themselves are `rlflow.checkpoint`'s.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlflow import flow
from rlflow.envs.validation import env_name
from rlflow.errors import ConfigError, WorkerError
from rlflow.replay import replay_buffer_states, restore_replay_buffers

__all__ = [
    "restore_arguments",
    "run_state",
    "set_run_state",
]

logger = logging.getLogger(__name__)


def run_state(workers: Any, *, replay: bool) -> dict[str, Any]:
    """The workers' states (learner and remotes), the driver's RNG states and, with ``replay``,
    every replay buffer the plan registered (`rlflow.replay.register_replay_buffer`). With
    learner actors (``num_learners``) the learner's state is learner 0's."""
    import torch

    group = workers.learner_group()
    if group is not None:  # learner actors train: the local worker takes learner 0's state
        group.sync_to(workers.local_worker())
    state: dict[str, Any] = {
        "local_worker": workers.local_worker().get_state(),
        "remote_workers": _remote_states(workers),
        "rng": {
            "python": random.getstate(),
            "numpy": np.random.get_state(),
            "torch": torch.get_rng_state(),
        },
    }
    if replay:
        state["replay_buffers"] = replay_buffer_states(workers)
    return state


WORKER_STATE_TIMEOUT_S = 60.0
"""How long a checkpoint waits for the remote workers' states (a worker answers after the call
it is running, e.g. a sample); one that has not answered by then is saved as None."""


def _remote_states(workers: Any, timeout_s: float = WORKER_STATE_TIMEOUT_S) -> list[Any]:
    """Each remote worker's state, in index order; None for one known to be dead, found dead,
    or silent for ``timeout_s`` (on restore it gets the learner's weights): a checkpoint is
    still written when workers went down with the driver's stop (a signal to its whole
    process group kills Ray's processes too)."""
    healthy = workers.healthy_workers()
    refs = {id(w): w.get_state.remote() for w in healthy}
    ready, _ = flow.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
    answered = set(ready)
    states: list[Any] = []
    for index, worker in enumerate(workers.remote_workers(), start=1):
        ref = refs.get(id(worker))
        state, reason = None, f"silent for {timeout_s:g} s"
        if ref is not None and ref in answered:
            try:
                state = flow.get(ref)
            except WorkerError as err:
                reason = f"dead: {err}"
        if ref is not None and state is None:
            logger.warning(
                "checkpoint: rollout worker %d gave no state (%s); a restore gives it the "
                "learner's weights",
                index,
                reason,
            )
        states.append(state)
    return states


def set_run_state(workers: Any, state: Mapping[str, Any]) -> None:
    """Load `run_state` output into ``workers`` and the driver's RNGs.

    Remote workers without a saved state (more than were saved, or dead at save time) get the
    learner's weights and observation filters; saved replay buffers are restored whatever this run's
    ``checkpoint_replay_buffers`` (it decides what is saved). A worker not healthy now (dead, or
    an elastic run's worker still waiting for a node) gets the learner's state when it starts.
    """
    import torch

    workers.local_worker().set_state(state["local_worker"])
    group = workers.learner_group()
    if group is not None:  # every learner actor continues from the saved learner state
        group.sync_from(workers.local_worker())
    remotes, saved = workers.healthy_workers(), list(state["remote_workers"])
    healthy = {id(w) for w in remotes}
    pairs = [
        (w, saved[i])
        for i, w in enumerate(workers.remote_workers())
        if id(w) in healthy and i < len(saved) and saved[i] is not None
    ]
    flow.get([w.set_state.remote(s) for w, s in pairs])
    if len(pairs) != len(remotes):
        logger.warning(
            "checkpoint has %d remote worker states, this run %d workers; workers without a "
            "saved state get the learner's weights",
            len(pairs),
            len(remotes),
        )
        workers.sync_weights()
        saved_ids = {id(w) for w, _ in pairs}
        workers.sync_filters(to=[w for w in remotes if id(w) not in saved_ids])
    restore_replay_buffers(workers, state.get("replay_buffers", {}))
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])
    torch.set_rng_state(state["rng"]["torch"])


def restore_arguments(
    state: Mapping[str, Any], overrides: Mapping[str, Any], *, config: Any = None
) -> dict[str, Any]:
    """Constructor arguments of a restored trainer: the saved config (and custom plan), with
    ``overrides`` (constructor arguments and config fields) on top; with ``config`` (a whole
    resolved config that replaces the saved one, e.g. the command line's), only the plan and
    ``overrides``.

    An ``env`` that is a Gymnasium id (the override's, or ``config``'s) must be the saved env
    (the policies' spaces come from it): `ConfigError` otherwise. A creator may replace a saved
    creator.
    """
    kwargs: dict[str, Any] = {} if config is not None else dict(state["config"])
    if state.get("plan") is not None:
        kwargs["plan"] = state["plan"]
    saved = state["config"].get("env")
    env = overrides.get("env") if config is None else config.env
    if isinstance(env, str) and env != saved:
        raise ConfigError(
            f"restore: env={env!r} differs from the checkpoint's env "
            f"{env_name(saved) if saved is not None else None!r}; a restored run keeps its env "
            "(its policies were built for it): drop the env override or start a new run"
        )
    kwargs.update(overrides)
    return kwargs
