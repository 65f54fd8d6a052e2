"""The replay buffers of a run, for checkpoints (``checkpoint_replay_buffers``).

A plan builds its buffers itself, so it names them here, keyed by its worker set:
``register_replay_buffer(workers, "replay_buffer", buffer)``. `rlflow.Trainer.save` then puts
each registered buffer's ``get_state()`` in the checkpoint (when the config's
``checkpoint_replay_buffers`` is on) and ``restore`` gives it back with ``set_state``. A buffer
is any object with ``get_state`` / ``set_state`` (`ReplayBuffer`, `MultiAgentReplayBuffer`,
`rlflow.algorithms.actor_learner.MixInReplay`); replay shards (actors) are wrapped in
`ReplayShards`.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rlflow import flow

__all__ = [
    "ReplayShards",
    "StatefulBuffer",
    "register_replay_buffer",
    "replay_buffer_states",
    "replay_buffers",
    "restore_replay_buffers",
]

logger = logging.getLogger(__name__)


class StatefulBuffer(Protocol):
    """What a registered buffer has: its state as plain data, and a way back."""

    def get_state(self) -> Any: ...
    def set_state(self, state: Any) -> None: ...


_REGISTRY: weakref.WeakKeyDictionary[Any, dict[str, StatefulBuffer]] = weakref.WeakKeyDictionary()


def register_replay_buffer(workers: Any, name: str, buffer: StatefulBuffer) -> None:
    """Name ``buffer`` as one of the replay buffers of the run over ``workers`` (its WorkerSet).

    Side effect: a weak registry entry, gone with ``workers``. A second buffer under the same
    name replaces the first (a plan built again). A ``workers`` stand-in that cannot be weakly
    referenced (a test double) registers nothing: only a trainer's worker set is checkpointed.
    """
    try:
        _REGISTRY.setdefault(workers, {})[name] = buffer
    except TypeError:
        logger.debug("replay buffer %r not registered: %r has no weak references", name, workers)


def replay_buffers(workers: Any) -> dict[str, StatefulBuffer]:
    """The buffers registered for ``workers``, by name (empty if none)."""
    return dict(_REGISTRY.get(workers, {}))


def replay_buffer_states(workers: Any) -> dict[str, Any]:
    """``get_state()`` of every buffer registered for ``workers``, by name."""
    return {name: buf.get_state() for name, buf in replay_buffers(workers).items()}


def restore_replay_buffers(workers: Any, states: Mapping[str, Any]) -> None:
    """``set_state`` of each registered buffer of ``workers`` from ``states`` (by name).

    A saved buffer this run has not registered (another plan) is skipped with a warning.
    """
    buffers = replay_buffers(workers)
    for name, state in states.items():
        if name in buffers:
            buffers[name].set_state(state)
        else:
            logger.warning("checkpoint holds replay buffer %r, which this plan does not have", name)


class ReplayShards:
    """Replay shards (`ReplayActor` handles) as one buffer for `register_replay_buffer`.

    ``get_state`` gathers every shard's state (a list, in shard order); ``set_state`` sends
    each shard its own. The list is read at each call, so shards replaced in it are included.
    """

    def __init__(self, shards: Sequence[Any]) -> None:
        """Keep ``shards`` (the list of actor handles, not a copy)."""
        self.shards = shards

    def get_state(self) -> list[Any]:
        """Every shard's buffer state, in shard order."""
        return list(flow.get([shard.get_state.remote() for shard in self.shards]))

    def set_state(self, state: Sequence[Any]) -> None:
        """Give shard i ``state[i]``; with another number of shards, none is restored."""
        if len(state) != len(self.shards):
            logger.warning(
                "checkpoint holds %d replay shards, this run has %d: shards start empty",
                len(state),
                len(self.shards),
            )
            return
        flow.get([s.set_state.remote(x) for s, x in zip(self.shards, state, strict=True)])
