"""`ExternalEnv`: the Gymnasium env whose steps are a `rlflow.serve.PolicyServer`'s client
episodes, so any algorithm's sampler, postprocessing and plan train on them unchanged.

A run serves external episodes by naming this env (``env: "rlflow.serve.env:ExternalEnv-v0"``,
``env_config: {"server": "HOST:PORT"}``: `rlflow.serve.PolicyServer.configure` sets both).
Each sub-env of the sampler takes one client episode at a time: ``reset()`` waits for the next
episode that sent its first observation, ``step(action)`` answers that episode's ``get_action``
and waits for its next observation. ``num_envs_per_worker`` is how many episodes are stepped
together; each step waits for all of them, so set it to the number of clients that run at once.

The env lives in the process of its server (the driver's sampler: ``num_workers`` 0): it finds
the server by its address in this process.
"""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
from gymnasium.utils import EzPickle

from rlflow.envs.records import LOGGED_ACTION
from rlflow.errors import ConfigError
from rlflow.export.spaces import space_from_json
from rlflow.serve.episodes import Episode, EpisodeHub

__all__ = ["ENV_ID", "ExternalEnv", "register_server", "unregister_server"]

ENV_ID = "rlflow.serve.env:ExternalEnv-v0"
"""The env id a config names to serve external episodes (with ``env_config={"server": ...}``)."""

_SERVERS: dict[str, tuple[EpisodeHub, gym.Space[Any], gym.Space[Any]]] = {}
_SERVERS_LOCK = threading.Lock()


def register_server(
    address: str, hub: EpisodeHub, observation_space: gym.Space[Any], action_space: gym.Space[Any]
) -> None:
    """Make the server at ``address`` findable by the `ExternalEnv` of this process."""
    with _SERVERS_LOCK:
        _SERVERS[address] = (hub, observation_space, action_space)


def unregister_server(address: str) -> None:
    """Forget the server at ``address`` (it stopped)."""
    with _SERVERS_LOCK:
        _SERVERS.pop(address, None)


class ExternalEnv(gym.Env[Any, Any], EzPickle):
    """One slot for client episodes of the `rlflow.serve.PolicyServer` at ``server``.

    ``reset()`` blocks until a client episode is ready (Ctrl-C interrupts it); a dropped
    episode's step returns its last observation, reward 0 and ``truncated`` (info
    ``{"dropped": True}``). The spaces are the server's. It pickles as its address (a
    checkpoint keeps no client episode: an unpickled one is a fresh slot of that server).
    """

    external = True
    """Its steps come from clients: `rlflow.workers.RolloutWorker` never probes it with a step."""

    def __init__(
        self,
        server: str,
        observation_space: dict[str, Any] | None = None,
        action_space: dict[str, Any] | None = None,
    ) -> None:
        """Attach to the server at ``server`` (``"HOST:PORT"``) in this process. Where none runs
        there, the env is detached when the spaces are given (as `rlflow.export.spaces`
        writes them; `rlflow.serve.PolicyServer.configure` records them): its spaces serve a
        checkpoint's restore or an export, and stepping it is a `ConfigError`. Without them,
        `ConfigError` at once."""
        EzPickle.__init__(self, server, observation_space, action_space)
        with _SERVERS_LOCK:
            entry = _SERVERS.get(server)
            running = ", ".join(sorted(_SERVERS)) or "none"
        self.server = server
        self._missing = (
            f"ExternalEnv: env_config server {server!r}: no PolicyServer runs at that address "
            f"in this process (running here: {running}); an external env is stepped in its "
            "server's process: start the server first and sample in the driver (num_workers 0)"
        )
        self.hub: EpisodeHub | None = None
        if entry is not None:
            self.hub, self.observation_space, self.action_space = entry
        elif observation_space is not None and action_space is not None:
            self.observation_space = space_from_json(observation_space)
            self.action_space = space_from_json(action_space)
        else:
            raise ConfigError(self._missing)
        self._episode: Episode | None = None
        self._last_obs: Any = None
        self._sent = False
        self._logged: Any = None  # the client's own action for the current observation

    def _attached(self) -> EpisodeHub:
        if self.hub is None:
            raise ConfigError(self._missing)
        return self.hub

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Wait for the next client episode; its first observation (``seed`` is unused: the
        client's simulator seeds itself) and, in its info, the action the client took itself
        for it (`LOGGED_ACTION`, local inference), if it did. An episode this slot was stepping
        is dropped."""
        super().reset(seed=seed)
        self._drop_current()
        episode, first = self._attached().next_episode()
        self._episode, self._last_obs, self._logged = episode, first.observation, first.action
        return first.observation, self._info({"episode_id": episode.episode_id})

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` with the client's own action for the observation, if it took one."""
        if self._logged is not None:
            info[LOGGED_ACTION] = self._logged
        return info

    def send_action(self, action: Any) -> None:
        """Answer the episode's waiting ``get_action`` with ``action`` now, before `step` waits
        for what follows: `rlflow.envs.VectorEnv` sends every sub-env's action first, so all
        its clients step at once."""
        if self._episode is not None and self._logged is None and not self._sent:
            self._episode.actions.put(action)
            self._sent = True

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Answer the episode's ``get_action`` with ``action`` (unless `send_action` did); its
        next observation, the rewards logged since, whether it ended and, in the info, the
        action the client took itself for the next observation (`LOGGED_ACTION`), if it did."""
        if self._episode is None:
            raise gym.error.ResetNeeded("ExternalEnv.step before reset")
        reply = self._logged is None and not self._sent
        self._sent = False
        event = self._attached().act(self._episode, action, reply=reply)
        self._logged = event.action
        if event.dropped:
            return self._last_obs, 0.0, False, True, {"dropped": True}
        self._last_obs = event.observation
        info = self._info({})
        return event.observation, event.reward, event.terminated, event.truncated, info

    def _drop_current(self) -> None:
        if self._episode is not None and not self._episode.ended and self.hub is not None:
            self.hub.drop(self._episode.episode_id)
        self._episode, self._sent = None, False

    def close(self) -> None:
        """Drop the episode in progress (its client's next request gets a 404)."""
        self._drop_current()
        super().close()


gym.register(id="ExternalEnv-v0", entry_point=f"{__name__}:ExternalEnv", disable_env_checker=True)
