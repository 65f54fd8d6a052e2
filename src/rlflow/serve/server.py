"""`PolicyServer`: an HTTP server an external simulator talks to, its episodes the training data
of a run in the same process.

The protocol (version `PROTOCOL_VERSION`; JSON bodies, UTF-8, ``Content-Length`` required):

- ``POST /start_episode`` ``{"episode_id": str (optional)}`` -> ``{"episode_id": str}``
- ``POST /get_action`` ``{"episode_id": str, "observation": OBS}`` -> ``{"action": ACTION}``
- ``POST /log_action`` ``{"episode_id": str, "observation": OBS, "action": ACTION}`` -> ``{}``
  (local inference: the client took ACTION itself; answered at once)
- ``POST /log_returns`` ``{"episode_id": str, "reward": number}`` -> ``{}``
- ``POST /end_episode`` ``{"episode_id": str, "observation": OBS, "truncated": bool
  (optional, false)}`` -> ``{}``
- ``GET /info`` -> ``{"protocol": 1, "observation_space": SPACE, "action_space": SPACE,
  "episodes_running": n, "episodes_started": n, "episodes_ended": n, "episodes_dropped": n,
  "actions_served": n}`` (spaces as `rlflow.export.spaces` writes them)
- ``GET /policy`` -> ``{"files": {name: base64}}``: the run's policy exported now, the
  directory `rlflow.load_policy` reads (404 unless the server was given one with
  `PolicyServer.serve_policy`, as ``rlflow serve`` does)

- OBS is the observation as nested JSON lists (a number for a ``Discrete`` space), of the
  server's observation space's shape; ACTION likewise of its action space (a ``Discrete`` action
  is an integer, a ``Box`` action a nested list of numbers).
- ``get_action`` answers once the run's policy acted on the observation: while the run trains
  between samples it waits. ``log_action`` (an action the client chose with a copy of the
  policy it fetched from ``GET /policy``) does not wait: the run records that action, with its
  log-likelihood under the run's current policy, in place of its own.
- The rewards of an action are logged (``log_returns``, any number of times) before the next
  ``get_action``, ``log_action`` or ``end_episode``, which reports them.
- ``end_episode`` ends an episode: ``truncated`` false means it reached a terminal state (no
  value after it), true that it was cut (a time limit: the learner bootstraps from
  ``observation``).
- Errors: a JSON ``{"error": message}`` with 400 (bad JSON, a missing or ill-typed key, an
  observation that does not fit the space or holds NaN or an infinity), 401 (no or a wrong
  token), 404 (unknown path, or an episode never started, ended or dropped), 405 (wrong
  method), 409 (an episode id already running, or a request for an episode whose
  ``get_action`` is still waiting), 411 (no ``Content-Length``), 413 (a body over
  ``max_body_bytes``, 1 MiB by default), 503 (the server is stopping, or no action within
  ``action_timeout_s``). A 5xx other than 503 is a bug of the server.
- Auth: a server given a token (``auth_token``, ``rlflow serve --auth-token`` or the
  environment variable ``RLFLOW_SERVE_TOKEN``; required unless it listens on a loopback
  address) answers only requests with ``Authorization: Bearer TOKEN`` (compared in constant
  time), ``GET /policy`` and ``GET /info`` included. With ``tls_cert`` (and ``tls_key``) it
  speaks HTTPS only.
- Connections: HTTP/1.1 with or without keep-alive. A client that keeps its connection open
  (as `rlflow.serve.PolicyClient` does) owns the episodes it sends requests for: closing that
  connection, or dying, ends them (truncated where they were). A client that opens a
  connection per request (``Connection: close``, HTTP/1.0, curl, urllib) owns none: its
  episodes end by ``end_episode`` or, without a request for ``episode_timeout_s``, as dropped.
  The server and the run go on.
"""

from __future__ import annotations

import base64
import hmac
import http
import http.server
import ipaddress
import itertools
import json
import logging
import math
import os
import select
import socket
import ssl
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlflow.checks import check_int, check_number
from rlflow.errors import ConfigError
from rlflow.export.spaces import space_to_json
from rlflow.serve.env import ENV_ID, register_server, unregister_server
from rlflow.serve.episodes import EpisodeError, EpisodeHub

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "PROTOCOL_VERSION",
    "TOKEN_ENV",
    "PolicyServer",
    "is_loopback",
]

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
"""The version of the request protocol (``GET /info`` reports it)."""

DEFAULT_PORT = 9900
"""The port `PolicyServer` and ``rlflow serve`` listen on unless told otherwise."""

DEFAULT_MAX_BODY_BYTES = 2**20
"""The largest request body a `PolicyServer` accepts unless told otherwise (1 MiB: an Atari
frame stack, 84x84x4 bytes, is about 115 KiB as JSON; a larger body gets 413)."""

TOKEN_ENV = "RLFLOW_SERVE_TOKEN"
"""The environment variable `PolicyServer` and `rlflow.serve.PolicyClient` read their auth
token from when none is given (safer than ``--auth-token`` on a command line others can
list)."""

_DRAIN_BYTES = 64 * 2**20
"""A body refused with 413 up to this size is read and discarded before the connection closes,
so its client reads the answer instead of a reset; a larger one is not read. (A request
refused with 401 has its body read only up to ``max_body_bytes``.)"""

_HANDSHAKE_TIMEOUT_S = 10.0
"""How long a TLS handshake may take (on the connection's own thread)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is this machine only: ``localhost`` or an
    address every resolution of which is a loopback one (``127.0.0.0/8``, ``::1``). ``""`` and
    ``0.0.0.0`` (every interface) are not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


class _BadRequestError(Exception):
    """A request the server answers with 400 and this message."""


def _check_finite(array: np.ndarray[Any, Any], what: str) -> None:
    """`_BadRequestError` if a float ``array`` holds NaN or an infinity (a run samples with
    ``on_nonfinite="raise"`` by default: one client must not stop it)."""
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise _BadRequestError(f"{what} holds NaN or an infinity")


def _parse_value(space: gym.Space[Any], value: Any, what: str) -> Any:
    """``value`` (decoded JSON) as an element of ``space``; `_BadRequestError` naming ``what`` if
    it does not fit."""
    if isinstance(space, spaces.Discrete):
        if isinstance(value, bool) or not isinstance(value, int) or not space.contains(value):
            raise _BadRequestError(f"{what} {value!r} is not an integer in {space}")
        return np.int64(value)
    try:
        with np.errstate(all="ignore"):  # a float beyond float32's range becomes inf: refused
            array = np.asarray(value, dtype=space.dtype)
    except (TypeError, ValueError, OverflowError, RecursionError) as err:
        raise _BadRequestError(f"{what} is not an array of {space.dtype} numbers ({err})") from None
    if array.shape != space.shape:
        raise _BadRequestError(
            f"{what} has shape {array.shape}; the space {space} has {space.shape}"
        )
    _check_finite(array, what)
    if not isinstance(space, spaces.Box) and not space.contains(array):
        raise _BadRequestError(f"{what} {value!r} is not in the space {space}")
    return array


class _Handler(http.server.BaseHTTPRequestHandler):
    """One client connection: its requests, one at a time."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a small answer goes out at once, not after a delayed ACK
    server: _HTTPServer

    def setup(self) -> None:
        """Number the connection; it owns no episode yet."""
        super().setup()
        self.connection_id = next(self.server.connection_ids)
        self.keeps_alive = False

    def handle(self) -> None:
        """Serve the connection's requests; when it closes (its client closed it or died)
        while kept alive, end the episodes it owns."""
        try:
            super().handle()
        except (ConnectionError, TimeoutError):
            pass
        finally:
            if self.keeps_alive:
                self.server.hub.drop_connection(self.connection_id)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """An error the HTTP layer finds (a malformed request line, headers too long, an
        unsupported method): a JSON ``{"error": ...}`` like the protocol's, and the connection
        closes."""
        if self.command == "HEAD" or code < 200 or code in (204, 304):
            super().send_error(code, message, explain)
            return
        self.close_connection = True
        try:
            phrase = http.HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        self._error(code, f"{message or phrase}" + (f" ({explain})" if explain else ""))

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are logged at debug level, not printed."""
        logger.debug("%s %s", self.address_string(), format % args)

    def _answer(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.keeps_alive = not self.close_connection

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._answer(status, {"error": message}, headers)

    def _authorized(self) -> bool:
        """Whether the request carries the server's token (``Authorization: Bearer TOKEN``,
        compared in constant time), or the server has none; if not, answer 401 (the body
        discarded) and return False."""
        token = self.server.auth_token
        if token is None:
            return True
        scheme, _, given = (self.headers.get("Authorization") or "").strip().partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode("utf-8", "surrogateescape"), token
        ):
            return True
        self._discard_body()
        reason = "no Authorization header" if not scheme else "a wrong token"
        self._error(
            401,
            f"{self.command} {self.path}: {reason}; this server takes "
            "'Authorization: Bearer TOKEN' with its --auth-token (RLFLOW_SERVE_TOKEN)",
            {"WWW-Authenticate": 'Bearer realm="rlflow"'},
        )
        return False

    def do_GET(self) -> None:
        """``GET /info``, ``GET /policy``."""
        if not self._authorized():
            return
        getters = {"/info": self.server.policy_server.info, "/policy": self._policy}
        getter = getters.get(self.path)
        if getter is None:
            self._discard_body()
            command = self.path.strip("/")
            if command in self.server.commands:
                self._error(405, f"{self.path} takes POST with a JSON body")
            else:
                self._error(
                    404,
                    f"no such path {self.path}; GET /info, /policy or POST one of "
                    + ", ".join(f"/{c}" for c in self.server.commands),
                )
            return
        self._discard_body()
        try:
            self._answer(200, getter())
        except EpisodeError as err:
            self._error(err.status, f"policy: {err}")
        except Exception as err:
            logger.exception("GET %s failed", self.path)
            self._error(500, f"{self.path.strip('/')}: {type(err).__name__}: {err}")

    def _policy(self) -> dict[str, Any]:
        return self.server.policy_server.exported_policy()

    def do_POST(self) -> None:
        """One protocol command (see the module docstring)."""
        if not self._authorized():
            return
        command = self.path.strip("/")
        handler = self.server.commands.get(command)
        try:
            body = self._body()
            if handler is None:
                allowed = ", ".join(f"/{c}" for c in self.server.commands)
                raise EpisodeError(404, f"no such command {self.path}; POST one of {allowed}")
            self._answer(200, handler(self, body))
        except _BadRequestError as err:
            self._error(400, f"{command}: {err}")
        except EpisodeError as err:
            self._error(err.status, f"{command}: {err}")
        except Exception as err:
            logger.exception("POST %s failed", self.path)
            self._error(500, f"{command}: {type(err).__name__}: {err}")

    def do_PUT(self) -> None:
        """Not part of the protocol: 405."""
        if not self._authorized():
            return
        self._discard_body()
        self._error(405, f"{self.command} {self.path}: the protocol takes GET /info, /policy "
                    "and POST commands")  # fmt: skip

    do_DELETE = do_PATCH = do_OPTIONS = do_PUT  # noqa: N815

    def _declared_length(self) -> int | None:
        """The ``Content-Length`` as a number (None: absent or not a number)."""
        length = (self.headers.get("Content-Length") or "").strip()
        return int(length) if length.isdigit() and len(length) < 20 else None

    def _discard_body(self, limit: int | None = None) -> None:
        """Read and drop the request's body (so the connection reads the next request, or its
        client its answer); one over ``limit`` (default: the server's ``max_body_bytes``),
        chunked or of no stated length is not read and the connection closes after the
        answer."""
        if limit is None:
            limit = self.server.policy_server.max_body_bytes
        length = self._declared_length()
        if length is None:
            if self.headers.get("Content-Length") or self.headers.get("Transfer-Encoding"):
                self.close_connection = True
            return
        if length > limit:
            self.close_connection = True
            return
        while length > 0:
            chunk = self.rfile.read(min(length, 2**16))
            if not chunk:
                self.close_connection = True
                return
            length -= len(chunk)

    def _body(self) -> dict[str, Any]:
        length = self._declared_length()
        if length is None:
            self.close_connection = True
            raise EpisodeError(411, "a POST needs a Content-Length header (a number of bytes)")
        limit = self.server.policy_server.max_body_bytes
        if length > limit:
            self._discard_body(_DRAIN_BYTES)  # an authorized client: let it read the 413
            self.close_connection = True
            raise EpisodeError(
                413,
                f"a body of {length} bytes: this server takes at most {limit} (--max-body-bytes)",
            )
        raw = self.rfile.read(length)
        if len(raw) < length:
            self.close_connection = True
            raise _BadRequestError(f"the body ended after {len(raw)} of {length} bytes")
        try:
            body = json.loads(raw or b"{}")
        except (UnicodeDecodeError, ValueError, RecursionError) as err:
            raise _BadRequestError(f"the body is not JSON ({err})") from None
        if not isinstance(body, dict):
            raise _BadRequestError(f"the body must be a JSON object, got {type(body).__name__}")
        return body

    def client_gone(self) -> bool:
        """Whether the client closed this connection (or its process died) while a request
        waits: the socket reads as ended."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    @property
    def owner(self) -> int | None:
        """The connection that owns the episodes it names (None: it closes after this one)."""
        return None if self.close_connection else self.connection_id


def _key(body: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    if key not in body:
        if default is ...:
            raise _BadRequestError(f"missing key {key!r}")
        return default
    value = body[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _BadRequestError(f"key {key!r} must be a {names}, got {json.dumps(value)[:80]}")
    return value


def _start_episode(handler: _Handler, body: dict[str, Any]) -> dict[str, Any]:
    episode_id = _key(body, "episode_id", str, None)
    return {"episode_id": handler.server.hub.start(episode_id, handler.owner)}


def _observed(handler: _Handler, body: dict[str, Any]) -> tuple[str, Any]:
    """A request's ``episode_id`` and its ``observation`` parsed into the observation space."""
    episode_id = _key(body, "episode_id", str)
    space = handler.server.policy_server.observation_space
    return episode_id, _parse_value(space, _key(body, "observation", object), "observation")


def _get_action(handler: _Handler, body: dict[str, Any]) -> dict[str, Any]:
    episode_id, observation = _observed(handler, body)
    hub = handler.server.hub
    episode = hub.observe(episode_id, observation, handler.owner)
    timeout_s = handler.server.policy_server.action_timeout_s
    action = hub.wait_action(episode, timeout_s, handler.client_gone)
    return {"action": np.asarray(action).tolist()}


def _log_action(handler: _Handler, body: dict[str, Any]) -> dict[str, Any]:
    episode_id, observation = _observed(handler, body)
    space = handler.server.policy_server.action_space
    action = _parse_value(space, _key(body, "action", object), "action")
    handler.server.hub.observe(episode_id, observation, handler.owner, action=action)
    return {}


def _log_returns(handler: _Handler, body: dict[str, Any]) -> dict[str, Any]:
    episode_id = _key(body, "episode_id", str)
    number = _key(body, "reward", (int, float))
    try:
        reward = float(number)
    except OverflowError:
        reward = math.inf
    if not math.isfinite(reward):
        raise _BadRequestError(f"reward {str(number)[:40]} is not finite")
    handler.server.hub.log_returns(episode_id, reward, handler.owner)
    return {}


def _end_episode(handler: _Handler, body: dict[str, Any]) -> dict[str, Any]:
    episode_id, observation = _observed(handler, body)
    truncated = _key(body, "truncated", bool, False)
    handler.server.hub.end(episode_id, observation, handler.owner, truncated=truncated)
    return {}


_COMMANDS = {
    "start_episode": _start_episode,
    "get_action": _get_action,
    "log_action": _log_action,
    "log_returns": _log_returns,
    "end_episode": _end_episode,
}


class _HTTPServer(http.server.ThreadingHTTPServer):
    """The HTTP server of a `PolicyServer`: a thread per connection (its TLS handshake on that
    thread, not the accepting one)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024
    """The listen backlog (the kernel caps it at ``net.core.somaxconn``). socketserver's 5
    overflowed when clients that open a connection per request (curl, urllib) came at once:
    the kernel dropped their handshakes, the clients waited seconds to retry or got resets,
    and a run stepping their episodes in lockstep stalled (16 such clients: 5 steps/s)."""

    def __init__(self, address: tuple[str, int], policy_server: PolicyServer) -> None:
        self.policy_server = policy_server
        self.hub = policy_server.hub
        self.commands = _COMMANDS
        self.connection_ids = itertools.count(1)
        self.auth_token = policy_server.auth_token_bytes
        self.ssl_context = policy_server.ssl_context
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Serve one connection (with TLS: after its handshake; one that fails, a plain HTTP
        client for instance, is closed and logged at debug level)."""
        if self.ssl_context is None:
            super().finish_request(request, client_address)
            return
        try:
            request.settimeout(_HANDSHAKE_TIMEOUT_S)
            tls = self.ssl_context.wrap_socket(request, server_side=True)
            tls.settimeout(None)
        except (OSError, ValueError) as err:
            logger.debug("TLS handshake with %s failed: %s", client_address, err)
            return
        try:
            _Handler(tls, client_address, self)
        finally:
            self.shutdown_request(tls)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection's error ends that connection only: logged (at debug level when it is
        the connection's own, a client that reset it), not printed."""
        if isinstance(sys.exc_info()[1], OSError):
            logger.debug("connection from %s ended: %s", client_address, sys.exc_info()[1])
        else:
            logger.exception("connection from %s failed", client_address)


def _ssl_context(
    cert: str | os.PathLike[str] | None, key: str | os.PathLike[str] | None
) -> ssl.SSLContext | None:
    """The server's TLS context from PEM files (None without ``cert``); `ConfigError` naming
    the file that cannot be loaded."""
    if cert is None:
        if key is not None:
            raise ConfigError(f"PolicyServer: tls_key {str(key)!r} without tls_cert: give both")
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as err:
        files = f"tls_cert {str(cert)!r}" + ("" if key is None else f", tls_key {str(key)!r}")
        raise ConfigError(
            f"PolicyServer: {files}: cannot load a PEM certificate and its key ({err})"
        ) from None
    return context


class PolicyServer:
    """Serve a run's policy to external simulators over HTTP (protocol: the module docstring).

    Args:
        observation_space: what the clients observe (``Box``, ``Discrete``, ``MultiDiscrete``
            or ``MultiBinary``).
        action_space: what they act with (the same kinds).
        host: the interface to listen on (``"0.0.0.0"``: every interface).
        port: the port (0: a free one; `address` tells which).
        episode_timeout_s: an episode without a request for this long is ended, truncated.
        action_timeout_s: a ``get_action`` waiting longer than this for its action gets 503
            and its episode ends (None: it waits, as long as the run trains between samples).
        auth_token: every request must carry ``Authorization: Bearer <auth_token>`` (401
            otherwise, ``GET /policy`` included); None: the `TOKEN_ENV` environment variable's,
            if set. Required unless ``host`` is a loopback address (`is_loopback`): a server
            others can reach lets them feed its run and download its policy.
        tls_cert: a PEM certificate chain file: serve HTTPS (the standard library's `ssl`);
            None: plain HTTP.
        tls_key: the PEM private key of ``tls_cert`` (None: it is in ``tls_cert``'s file).
        max_body_bytes: a request body larger than this gets 413 (default
            `DEFAULT_MAX_BODY_BYTES`, 1 MiB).

    The run that trains on the clients' episodes is configured with `configure` and samples in
    this process: its `rlflow.serve.env.ExternalEnv` steps are the clients' requests.

    >>> from gymnasium import spaces
    >>> with PolicyServer(spaces.Box(-1, 1, (4,)), spaces.Discrete(2), port=0) as server:
    ...     server.info()["action_space"]
    {'type': 'Discrete', 'n': 2, 'start': 0}
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        episode_timeout_s: float = 60.0,
        action_timeout_s: float | None = None,
        auth_token: str | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        """Check the arguments (`ConfigError` naming the one at fault); `start` listens."""
        for name, space in (
            ("observation_space", observation_space),
            ("action_space", action_space),
        ):
            if isinstance(space, spaces.Dict | spaces.Tuple):  # exports take them; serve not
                raise ConfigError(
                    f"PolicyServer: {name} {space!r}: served spaces are Box, Discrete, "
                    "MultiDiscrete and MultiBinary (send a Dict's or Tuple's parts as one vector)"
                )
            try:
                space_to_json(space)
            except ConfigError as err:
                raise ConfigError(f"PolicyServer: {name}: {err}") from None
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ConfigError(f"PolicyServer: port {port!r}: must be an integer in 0..65535")
        self.observation_space = observation_space
        self.action_space = action_space
        self.host = host
        self.port = port
        self.episode_timeout_s = check_number(
            episode_timeout_s, "PolicyServer: episode_timeout_s", low=0, low_open=True
        )
        self.action_timeout_s = (
            None
            if action_timeout_s is None
            else check_number(
                action_timeout_s, "PolicyServer: action_timeout_s", low=0, low_open=True
            )
        )
        self.max_body_bytes = check_int(max_body_bytes, "PolicyServer: max_body_bytes", low=1)
        if auth_token is None:
            auth_token = os.environ.get(TOKEN_ENV) or None
        if auth_token is not None and (not isinstance(auth_token, str) or not auth_token.strip()):
            raise ConfigError("PolicyServer: auth_token: must be a non-empty string")
        if auth_token is None and not is_loopback(host):
            raise ConfigError(
                f"PolicyServer: host {host!r} is not a loopback address and no auth token is "
                f"set: anyone who reaches the port could feed the run and download its policy. "
                f"Set one with --auth-token TOKEN or the environment variable {TOKEN_ENV} "
                "(clients send 'Authorization: Bearer TOKEN'), or listen on 127.0.0.1"
            )
        self.auth_token_bytes = None if auth_token is None else auth_token.strip().encode()
        """The token every request carries (None: no auth)."""
        self.ssl_context = _ssl_context(tls_cert, tls_key)
        """The TLS context of HTTPS (None: plain HTTP)."""
        if self.auth_token_bytes is not None and self.ssl_context is None and not is_loopback(host):
            logger.warning(
                "PolicyServer on %s: the auth token travels in clear text without TLS "
                "(--tls-cert, --tls-key); anyone on the path can read it",
                host,
            )
        self.hub = EpisodeHub(self.episode_timeout_s)
        self._http: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._export: Callable[[str], Any] | None = None
        self._export_lock = threading.Lock()

    @property
    def address(self) -> str:
        """``"HOST:PORT"`` it listens on (the port bound, once started)."""
        port = self.port if self._http is None else self._http.server_address[1]
        return f"{self.host}:{port}"

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (``https://`` with TLS)."""
        scheme = "http" if self.ssl_context is None else "https"
        return f"{scheme}://{self.address}"

    def start(self) -> PolicyServer:
        """Listen, on a thread; `ConfigError` naming the address if it cannot be bound."""
        if self._http is not None:
            return self
        try:
            self._http = _HTTPServer((self.host, self.port), self)
        except OSError as err:
            raise ConfigError(
                f"PolicyServer: cannot listen on {self.host}:{self.port} ({err}); pick another "
                "port (0: any free one) or stop what uses it"
            ) from None
        register_server(self.address, self.hub, self.observation_space, self.action_space)
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"rlflow-serve-{self.address}",
            daemon=True,
        )
        self._thread.start()
        return self

    def check_config(self, config: Any) -> None:
        """`ConfigError` if ``config`` cannot train on served episodes: it evaluates (an
        external env has no evaluation episodes of its own) or reads recorded input."""
        if config.evaluation_interval:
            raise ConfigError(
                f"PolicyServer.configure: evaluation_interval {config.evaluation_interval}: the "
                "clients' episodes are the only env steps of a served run; set it to 0"
            )
        if config.reads_recorded():
            raise ConfigError(
                "PolicyServer.configure: input / input_mix: a served run trains on its clients' "
                "episodes; unset them"
            )

    def configure(self, config: Any) -> Any:
        """``config`` (an `rlflow.config.AlgorithmConfig`) with its env this server's
        `rlflow.serve.env.ExternalEnv` and sampling in this process (``num_workers`` 0);
        `ConfigError` as `check_config` says, or if the server is not started."""
        if self._http is None:
            raise ConfigError("PolicyServer.configure: start() the server first")
        self.check_config(config)
        try:
            return config.replace(env=ENV_ID, env_config=self.env_config(), num_workers=0)
        except ConfigError as err:
            if "num_workers" not in str(err):
                raise
            raise ConfigError(
                f"PolicyServer.configure: {type(config).__name__} samples on remote rollout "
                "workers only (num_workers >= 1), and a served run samples in the server's "
                "process (num_workers 0); the asynchronous plans (IMPALA, APPO, Ape-X) cannot "
                "be served: serve PPO, A2C, A3C, PG, DQN, R2D2, SAC or TD3"
            ) from None

    def serve_policy(self, export: Callable[[str], Any]) -> None:
        """Answer ``GET /policy`` (what a `rlflow.serve.PolicyClient` with ``inference="local"``
        acts with) by calling ``export(dir)`` (`rlflow.Trainer.export_policy`) and sending
        the files it wrote: ``{"files": {name: base64}}``, a directory `rlflow.load_policy`
        reads. The export reads the weights as they are at that moment."""
        self._export = export

    def exported_policy(self) -> dict[str, Any]:
        """``GET /policy``'s answer: the policy exported now (`serve_policy`); `EpisodeError`
        404 when none is served."""
        if self._export is None:
            raise EpisodeError(
                404, "this server does not serve its policy (PolicyServer.serve_policy)"
            )
        with self._export_lock, tempfile.TemporaryDirectory(prefix="rlflow-serve-") as tmp:
            target = Path(tmp) / "policy"
            self._export(str(target))
            files = {
                path.name: base64.b64encode(path.read_bytes()).decode()
                for path in sorted(target.iterdir())
                if path.is_file()
            }
        return {"files": files}

    def env_config(self) -> dict[str, Any]:
        """The ``env_config`` of this server's `rlflow.serve.env.ExternalEnv`: its address and
        spaces (so a checkpoint or export of the run rebuilds the env's spaces without it)."""
        return {
            "server": self.address,
            "observation_space": space_to_json(self.observation_space),
            "action_space": space_to_json(self.action_space),
        }

    def info(self) -> dict[str, Any]:
        """``GET /info``: the protocol version, the spaces, the episode counts."""
        return {
            "protocol": PROTOCOL_VERSION,
            "observation_space": space_to_json(self.observation_space),
            "action_space": space_to_json(self.action_space),
            "episodes_running": self.hub.running(),
            **{
                f"episodes_{k}" if k != "steps" else "actions_served": v
                for k, v in self.hub.counts.items()
            },
        }

    def stop(self) -> None:
        """Stop listening; waiting requests get 503, a waiting env raises."""
        if self._http is None:
            return
        self.hub.close()
        self._http.shutdown()
        self._http.server_close()
        unregister_server(self.address)
        self._http = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> PolicyServer:
        """Start it."""
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        """Stop it."""
        self.stop()
