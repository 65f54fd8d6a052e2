"""`PolicyClient`: what an external simulator runs to be trained by ``rlflow serve``.

Pure Python and the standard library (no numpy, no torch, no rlflow import in the default
remote inference): this one file can be copied next to a simulator. It speaks the protocol
of `rlflow.serve.server` over one kept-alive HTTP/1.1 connection, so the server knows when the
client goes away (its episodes end then).

::

    client = PolicyClient("127.0.0.1:9900")
    episode = client.start_episode()
    action = client.get_action(episode, obs)
    client.log_returns(episode, reward)
    client.end_episode(episode, obs)

A server reachable from other machines takes a token (``rlflow serve --auth-token``): give the
client the same one (``auth_token=``, or the environment variable ``RLFLOW_SERVE_TOKEN``); a
server with TLS (``--tls-cert``) is addressed as ``https://HOST:PORT`` (``ca_file=`` names the
certificate that signed it, e.g. a self-signed one).

Observations may be numbers, nested lists, or anything with ``tolist()`` (numpy arrays).
With ``inference="local"`` the client acts with the server's exported policy itself (that mode
imports rlflow and torch, on its first action).
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import time
from typing import Any

__all__ = ["PolicyClient", "ServeError"]

TOKEN_ENV = "RLFLOW_SERVE_TOKEN"
"""The environment variable the client reads its auth token from when given none (the
server's `rlflow.serve.server.TOKEN_ENV`; repeated here so this file needs no rlflow)."""


class ServeError(Exception):
    """The server refused a request: ``status`` is its HTTP status, the message its reason."""

    def __init__(self, status: int, message: str) -> None:
        """``status``: 400 bad request, 401 no or wrong token, 404 unknown episode, 409
        conflict, 413 body too large, 503 stopping, ..."""
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
    """A client of a `rlflow.serve.PolicyServer` at ``address`` (``"HOST:PORT"``,
    ``http://HOST:PORT``, or ``https://HOST:PORT`` for a server with TLS).

    Args:
        address: the server.
        timeout_s: how long one request may take (a ``get_action`` waits while the run trains
            between samples: keep it above an iteration's training time).
        inference: ``"remote"``: `get_action` asks the server (one round trip per step).
            ``"local"``: the client acts itself with the server's policy (``GET /policy``,
            loaded by `rlflow.load_policy`: needs rlflow and torch here), sampling from it,
            and only reports what it did (``log_action``): no wait for the server per step.
        update_interval_s: with ``"local"``, fetch the server's policy again after this long.
        seed: with ``"local"``, seeds the sampling of actions.
        auth_token: sent with every request as ``Authorization: Bearer <auth_token>`` (the
            server's ``--auth-token``); None: the ``RLFLOW_SERVE_TOKEN`` environment
            variable's, if set.
        ca_file: with ``https://``, the PEM file of the certificate(s) to trust for the
            server's (its own, when self-signed); None: the system's.
        ssl_context: with ``https://``, the `ssl.SSLContext` to connect with (instead of one
            built from ``ca_file``).

    Not thread-safe: use one client per thread.
    """

    def __init__(
        self,
        address: str = "127.0.0.1:9900",
        *,
        timeout_s: float = 600.0,
        inference: str = "remote",
        update_interval_s: float = 10.0,
        seed: int | None = None,
        auth_token: str | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """Connect lazily (on the first request)."""
        tls = address.startswith("https://")
        host, _, port = (
            address.removeprefix("https://").removeprefix("http://").rstrip("/").rpartition(":")
        )
        if not host or not port.isdigit():
            raise ValueError(f"PolicyClient: address {address!r}: expected HOST:PORT")
        if (ca_file is not None or ssl_context is not None) and not tls:
            raise ValueError(
                f"PolicyClient: address {address!r}: ca_file and ssl_context need https://"
            )
        if tls and ssl_context is None:
            ssl_context = ssl.create_default_context(cafile=ca_file)
        self.ssl_context = ssl_context
        """The TLS context (None: plain HTTP)."""
        if auth_token is None:
            auth_token = os.environ.get(TOKEN_ENV) or None
        self._auth = {} if auth_token is None else {"Authorization": f"Bearer {auth_token}"}
        if inference not in ("remote", "local"):
            raise ValueError(f"PolicyClient: inference {inference!r}: 'remote' or 'local'")
        self.host, self.port, self.timeout_s = host, int(port), timeout_s
        self.inference, self.update_interval_s, self.seed = inference, update_interval_s, seed
        self._conn: http.client.HTTPConnection | None = None
        self._policy: Any = None
        self._fetched_at = float("-inf")

    def _request(self, method: str, command: str, body: dict[str, Any] | None = None) -> Any:
        if self._conn is None:
            if self.ssl_context is None:
                self._conn = http.client.HTTPConnection(
                    self.host, self.port, timeout=self.timeout_s
                )
            else:
                self._conn = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout_s, context=self.ssl_context
                )
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self._auth)
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            self._conn.request(method, f"/{command}", body=data, headers=headers)
            response = self._conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException):
            self.close()  # the next request opens a new connection
            raise
        try:
            answer = json.loads(raw) if raw else {}
        except ValueError:
            answer = {"error": raw.decode(errors="replace")[:500]}
        if response.status >= 400:
            error = answer.get("error") if isinstance(answer, dict) else None
            raise ServeError(response.status, error or raw.decode(errors="replace")[:500])
        if response.getheader("Connection", "").lower() == "close":
            self.close()  # the server closes it after this answer
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
        a ``Box``): the server's (it waits while the run trains), or with ``inference="local"``
        this client's own, reported with `log_action`."""
        if self.inference == "local":
            action = _jsonable(self.local_policy().compute_single_action(observation, explore=True))
            self.log_action(episode_id, observation, action)
            return action
        body = {"episode_id": episode_id, "observation": _jsonable(observation)}
        return self._request("POST", "get_action", body)["action"]

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Report that the client took ``action`` at ``observation`` itself (the run trains on
        it as if its policy had chosen it, with that policy's log-likelihood of it)."""
        body = {
            "episode_id": episode_id,
            "observation": _jsonable(observation),
            "action": _jsonable(action),
        }
        self._request("POST", "log_action", body)

    def local_policy(self) -> Any:
        """The server's policy as `rlflow.load_policy` loads it, fetched again every
        ``update_interval_s`` (``GET /policy``)."""
        if self._policy is None or time.monotonic() - self._fetched_at > self.update_interval_s:
            import base64
            import tempfile
            from pathlib import Path

            from rlflow.export import load_policy

            files = self._request("GET", "policy")["files"]
            with tempfile.TemporaryDirectory(prefix="rlflow-client-") as tmp:
                for name, data in files.items():
                    (Path(tmp) / Path(name).name).write_bytes(base64.b64decode(data))
                self._policy = load_policy(tmp, seed=self.seed)
            self._fetched_at = time.monotonic()
        return self._policy

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
