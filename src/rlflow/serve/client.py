"""`PolicyClient`: what an external simulator runs to be trained by ``rlflow serve``.

Pure Python and the standard library (no numpy, no torch, no rlflow import): this one file can
be copied next to a simulator. It speaks the protocol of `rlflow.serve.server` over one kept-alive
HTTP/1.1 connection, so the server knows when the client goes away (its episodes end then).

>>> client = PolicyClient("127.0.0.1:9900")             # doctest: +SKIP
>>> episode = client.start_episode()                    # doctest: +SKIP
>>> action = client.get_action(episode, obs)            # doctest: +SKIP
>>> client.log_returns(episode, reward)                 # doctest: +SKIP
>>> client.end_episode(episode, obs)                    # doctest: +SKIP

Observations may be numbers, nested lists, or anything with ``tolist()`` (numpy arrays).
"""

from __future__ import annotations

import http.client
import json
from typing import Any

__all__ = ["PolicyClient", "ServeError"]


class ServeError(Exception):
    """The server refused a request: ``status`` is its HTTP status, the message its reason."""

    def __init__(self, status: int, message: str) -> None:
        """``status``: 400 bad request, 404 unknown episode, 409 conflict, 503 stopping, ..."""
        super().__init__(f"{status}: {message}")
        self.status = status


def _jsonable(value: Any) -> Any:
    """``value`` with numpy arrays and scalars (anything with ``tolist``) as JSON values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


class PolicyClient:
    """A client of a `rlflow.serve.PolicyServer` at ``address`` (``"HOST:PORT"``, or
    ``http://HOST:PORT``).

    ``timeout_s``: how long one request may take (a ``get_action`` waits while the run trains
    between samples: keep it above an iteration's training time). Not thread-safe: use one
    client per thread.
    """

    def __init__(self, address: str = "127.0.0.1:9900", *, timeout_s: float = 600.0) -> None:
        """Connect lazily (on the first request)."""
        host, _, port = address.removeprefix("http://").rstrip("/").rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"PolicyClient: address {address!r}: expected HOST:PORT")
        self.host, self.port, self.timeout_s = host, int(port), timeout_s
        self._conn: http.client.HTTPConnection | None = None

    def _request(self, method: str, command: str, body: dict[str, Any] | None = None) -> Any:
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        data = None if body is None else json.dumps(body).encode()
        headers = {} if data is None else {"Content-Type": "application/json"}
        try:
            self._conn.request(method, f"/{command}", body=data, headers=headers)
            response = self._conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException):
            self.close()  # the next request opens a new connection
            raise
        answer = json.loads(raw) if raw else {}
        if response.status >= 400:
            raise ServeError(response.status, answer.get("error", raw.decode(errors="replace")))
        return answer

    def info(self) -> dict[str, Any]:
        """The server's protocol version, observation and action spaces, episode counts."""
        return self._request("GET", "info")  # type: ignore[no-any-return]

    def start_episode(self, episode_id: str | None = None) -> str:
        """Start an episode; its id (``episode_id``, or one the server picks)."""
        body = {} if episode_id is None else {"episode_id": episode_id}
        return self._request("POST", "start_episode", body)["episode_id"]  # type: ignore[no-any-return]

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The policy's action for ``observation`` (an int for a ``Discrete`` space, a list for
        a ``Box``); waits while the run trains."""
        body = {"episode_id": episode_id, "observation": _jsonable(observation)}
        return self._request("POST", "get_action", body)["action"]

    def log_returns(self, episode_id: str, reward: float) -> None:
        """Report ``reward`` for the last action (may be called several times)."""
        self._request("POST", "log_returns", {"episode_id": episode_id, "reward": float(reward)})

    def end_episode(self, episode_id: str, observation: Any, *, truncated: bool = False) -> None:
        """End the episode at ``observation``: a terminal state, or ``truncated`` (cut short,
        e.g. by a time limit)."""
        body = {
            "episode_id": episode_id,
            "observation": _jsonable(observation),
            "truncated": bool(truncated),
        }
        self._request("POST", "end_episode", body)

    def close(self) -> None:
        """Close the connection (the server ends this client's running episodes)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> PolicyClient:
        """The client."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close it."""
        self.close()
