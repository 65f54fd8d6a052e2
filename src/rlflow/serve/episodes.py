"""The exchange between a `rlflow.serve.PolicyServer`'s request handlers and the envs a sampler
steps: client episodes as a queue of observations one way and of actions the other.

A client's episode goes through these states:

1. started (``start_episode``): known to the hub, not yet steppable;
2. ready: its first observation arrived (the first ``get_action``); it waits in the hub's queue
   until an `rlflow.serve.env.ExternalEnv` takes it on its ``reset()``;
3. stepping: each ``step(action)`` of that env hands the action to the waiting ``get_action``
   and waits for the episode's next event: the next ``get_action`` (an observation and the
   rewards logged since), its ``end_episode``, or its drop;
4. ended: by ``end_episode``, or dropped (its client's connection closed, or no request came for
   ``episode_timeout_s``): the env's step returns it as truncated at its last observation.

Everything here is thread-safe: handlers run on the HTTP server's threads, envs on the
sampler's.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from rlflow.errors import RLFlowError

__all__ = ["Episode", "EpisodeError", "EpisodeEvent", "EpisodeHub"]

_POLL_S = 0.25
"""How often a wait checks whether the hub closed (so a closed server never leaves a thread
blocked)."""


class EpisodeError(RLFlowError):
    """A request that does not fit an episode's state: the server answers it with ``status``
    (404: no such episode, 409: not now) and the message."""

    def __init__(self, status: int, message: str) -> None:
        """``status``: the HTTP status the request gets."""
        super().__init__(message)
        self.status = status


class EpisodeEvent(NamedTuple):
    """What a client reported of an episode since its last action."""

    observation: Any
    """The observation to act on (at an end: the last one)."""
    reward: float
    """The rewards logged since the previous event, summed."""
    terminated: bool = False
    """``end_episode`` without ``truncated``: the episode reached a terminal state."""
    truncated: bool = False
    """``end_episode(truncated=True)``, or the episode was dropped."""
    dropped: bool = False
    """The client went away: the episode ends truncated where it was."""
    action: Any = None
    """``log_action``: the action the client took for ``observation`` itself (local
    inference); None when it waits for the env's (``get_action``)."""


class Episode:
    """One client episode: its events (to the env) and its actions (to the client)."""

    def __init__(self, episode_id: str, connection: int | None) -> None:
        """``connection``: the id of the connection that owns it (closing that connection
        drops it), None when its client closes connections between requests."""
        self.episode_id = episode_id
        self.connection = connection
        self.events: queue.Queue[EpisodeEvent] = queue.Queue()
        self.actions: queue.Queue[Any] = queue.Queue()
        self.reward = 0.0
        self.ready = False
        """True once its first observation arrived."""
        self.ended = False
        self.dropped = False
        """Ended because its client went away (not by ``end_episode``)."""
        self.awaiting_action = False
        """A ``get_action`` waits for this episode's action."""
        self.last_seen = time.monotonic()


class EpisodeHub:
    """The episodes of one server: handlers report into it, envs step out of it.

    ``episode_timeout_s``: an episode none of whose requests came for that long is dropped (a
    client that died without closing its connection, or that closes it after each request).
    """

    def __init__(self, episode_timeout_s: float) -> None:
        """An empty hub."""
        self.episode_timeout_s = episode_timeout_s
        self._lock = threading.Lock()
        self._episodes: dict[str, Episode] = {}
        self._ready: queue.Queue[Episode] = queue.Queue()
        self._ids = itertools.count(1)
        self.closed = threading.Event()
        self.counts = {"started": 0, "ended": 0, "dropped": 0, "steps": 0}
        """Episodes started, ended by their client, dropped; actions served."""

    # ------------------------------------------------------------------ client side
    def start(self, episode_id: str | None, connection: int | None) -> str:
        """A new episode (``episode_id``, or a fresh one); 409 if that id is live."""
        with self._lock:
            if episode_id is None:
                episode_id = f"ep-{next(self._ids)}"
                while episode_id in self._episodes:
                    episode_id = f"ep-{next(self._ids)}"
            elif episode_id in self._episodes:
                raise EpisodeError(409, f"episode {episode_id!r} is already running")
            self._episodes[episode_id] = Episode(episode_id, connection)
            self.counts["started"] += 1
        return episode_id

    def _live(self, episode_id: str, connection: int | None) -> Episode:
        """The running episode ``episode_id`` (404 if unknown or ended), seen now."""
        episode = self._episodes.get(episode_id)
        if episode is None or episode.ended:
            raise EpisodeError(
                404, f"no running episode {episode_id!r} (never started, ended or dropped)"
            )
        if episode.awaiting_action:
            raise EpisodeError(409, f"episode {episode_id!r}: a get_action waits for its action")
        episode.last_seen = time.monotonic()
        if connection is not None:
            episode.connection = connection
        return episode

    def observe(
        self, episode_id: str, observation: Any, connection: int | None, action: Any = None
    ) -> Episode:
        """``get_action``'s observation (the caller then waits with `wait_action`), or with
        ``action`` ``log_action``'s observation and the action the client took: the episode's
        next event (its first makes it ready)."""
        with self._lock:
            episode = self._live(episode_id, connection)
            episode.awaiting_action = action is None
            reward, episode.reward = episode.reward, 0.0
            first = not episode.ready
            episode.ready = True
        # Rewards before the first observation belong to no action.
        episode.events.put(EpisodeEvent(observation, 0.0 if first else reward, action=action))
        if first:
            self._ready.put(episode)
        return episode

    def wait_action(
        self, episode: Episode, timeout_s: float | None, client_gone: Callable[[], bool]
    ) -> Any:
        """The action an env chose for ``episode``'s last observation; `EpisodeError` 503 if
        the server closed or none came within ``timeout_s``. While it waits, the episode is
        dropped as soon as ``client_gone()`` (its client closed the connection, or died)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while True:
                try:
                    return episode.actions.get(timeout=_POLL_S)
                except queue.Empty:
                    pass
                if self.closed.is_set():
                    raise EpisodeError(503, "the server is shutting down")
                if episode.dropped:  # its env slot closed (the run stopped sampling it)
                    raise EpisodeError(404, f"episode {episode.episode_id!r} was ended by the run")
                if client_gone():
                    self.drop(episode.episode_id)
                    raise EpisodeError(499, f"the client of episode {episode.episode_id!r} left")
                if deadline is not None and time.monotonic() > deadline:
                    self.drop(episode.episode_id)
                    raise EpisodeError(
                        503, f"no action for episode {episode.episode_id!r} in {timeout_s} s"
                    )
        finally:
            with self._lock:
                episode.awaiting_action = False
                episode.last_seen = time.monotonic()

    def log_returns(self, episode_id: str, reward: float, connection: int | None) -> None:
        """Add ``reward`` to what the episode's next event reports."""
        with self._lock:
            self._live(episode_id, connection).reward += reward

    def end(
        self, episode_id: str, observation: Any, connection: int | None, *, truncated: bool
    ) -> None:
        """``end_episode``: the episode's last event (an episode never acted on is forgotten)."""
        with self._lock:
            episode = self._live(episode_id, connection)
            episode.ended = True
            del self._episodes[episode_id]
            self.counts["ended"] += 1
            reward, episode.reward = episode.reward, 0.0
        if episode.ready:
            episode.events.put(EpisodeEvent(observation, reward, not truncated, truncated))

    def drop(self, episode_id: str) -> None:
        """End ``episode_id`` as truncated where it was (its client went away)."""
        with self._lock:
            episode = self._episodes.pop(episode_id, None)
            if episode is None or episode.ended:
                return
            episode.ended = episode.dropped = True
            self.counts["dropped"] += 1
        if episode.ready:
            episode.events.put(EpisodeEvent(None, 0.0, truncated=True, dropped=True))

    def drop_connection(self, connection: int) -> None:
        """Drop every running episode the closed ``connection`` owns."""
        with self._lock:
            owned = [e.episode_id for e in self._episodes.values() if e.connection == connection]
        for episode_id in owned:
            self.drop(episode_id)

    def drop_stale(self) -> None:
        """Drop the episodes none of whose requests came for ``episode_timeout_s`` (one whose
        ``get_action`` waits for an env's action is not stale)."""
        now = time.monotonic()
        with self._lock:
            stale = [
                e.episode_id
                for e in self._episodes.values()
                if not e.awaiting_action and now - e.last_seen > self.episode_timeout_s
            ]
        for episode_id in stale:
            self.drop(episode_id)

    def running(self) -> int:
        """Episodes started and not yet ended."""
        with self._lock:
            return len(self._episodes)

    # ------------------------------------------------------------------ env side
    def next_episode(self) -> tuple[Episode, EpisodeEvent]:
        """The next ready episode and its first observation, waiting for one (a dropped one is
        skipped); `rlflow.errors.RLFlowError` once the hub is closed."""
        while True:
            self.drop_stale()
            try:
                episode = self._ready.get(timeout=_POLL_S)
            except queue.Empty:
                self._check_open()
                continue
            first = episode.events.get()
            if not episode.dropped:  # one dropped while it waited for a slot is skipped
                return episode, first

    def act(self, episode: Episode, action: Any, *, reply: bool = True) -> EpisodeEvent:
        """Give ``episode``'s waiting ``get_action`` its ``action`` (``reply``: false when the
        client took its action itself); return the episode's next event, waiting for it (a
        drop when none comes within ``episode_timeout_s``)."""
        with self._lock:
            self.counts["steps"] += 1
        if reply:
            episode.actions.put(action)
        while True:
            try:
                return episode.events.get(timeout=_POLL_S)
            except queue.Empty:
                pass
            self._check_open()
            self.drop_stale()

    def _check_open(self) -> None:
        if self.closed.is_set():
            raise RLFlowError("the PolicyServer was stopped: its external env has no episodes")

    def close(self) -> None:
        """Close the hub: waiting handlers answer 503, waiting envs raise."""
        self.closed.set()
