"""`rlflow.serve` on a network: clients that open a connection per request at any concurrency,
the auth token, TLS, the body size limit, and a fuzz of the JSON protocol."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import math
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlflow.envs import VectorEnv
from rlflow.errors import ConfigError, RLFlowError
from rlflow.serve import ENV_ID, PolicyClient, PolicyServer, ServeError
from rlflow.serve.server import TOKEN_ENV, is_loopback

pytestmark = pytest.mark.timeout(120)

OBS = spaces.Box(-10.0, 10.0, (3,), np.float32)
ACT = spaces.Discrete(4)


def _urlopen(url: str, body: dict[str, Any] | None = None, **headers: str) -> Any:
    """One request on a connection of its own (urllib closes it after the answer)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


# ---------------------------------------------------------------------------------- concurrency
def _play_per_request(url: str, c: int, e: int, steps: int) -> list[Any]:
    """Client ``c``'s episode ``e`` of ``steps`` steps and reward 1 each, every request on a
    new connection; the steps whose action was not the one the sampler gives client ``c``."""
    ep = _urlopen(f"{url}/start_episode", {})["episode_id"]
    wrong = []
    for t in range(steps):
        action = _urlopen(f"{url}/get_action", {"episode_id": ep, "observation": [c % 8, e, t]})
        if action["action"] != (c % 8 + t) % 4:
            wrong.append((c, e, t, action))
        _urlopen(f"{url}/log_returns", {"episode_id": ep, "reward": 1.0})
    _urlopen(f"{url}/end_episode", {"episode_id": ep, "observation": [0, 0, 0]})
    return wrong


def test_64_clients_with_a_connection_per_request_all_finish() -> None:
    """64 urllib clients (a new connection for every request), 2 episodes of 8 steps each,
    stepped in lockstep by one 64-env `VectorEnv` as a sampler steps them: every action reaches
    the client that asked for it, every episode ends with its rewards, none is dropped. With
    socketserver's listen backlog of 5 the handshakes of such clients were dropped and the
    lockstep stalled (16 clients: a few steps/s, episodes dropped)."""
    clients, episodes, steps = 64, 2, 8
    with PolicyServer(OBS, ACT, port=0, episode_timeout_s=30) as server:
        venv = VectorEnv(lambda: gym.make(ENV_ID, server=server.address), clients, seed=None)
        stats: list[Any] = []
        sampler_errors: list[Exception] = []

        def sample() -> None:  # the action: (first + third entry) % 4, the client's own
            try:
                obs = venv.reset()
                while True:
                    obs = venv.step((obs[:, 0] + obs[:, 2]).astype(np.int64) % 4).next_obs
                    stats.extend(venv.pop_episode_stats())
            except RLFlowError as err:
                if "PolicyServer was stopped" not in str(err):
                    sampler_errors.append(err)

        errors: list[str] = []
        wrong: list[Any] = []

        def client(c: int) -> None:
            try:
                for e in range(episodes):
                    wrong.extend(_play_per_request(server.url, c, e, steps))
            except Exception as err:
                errors.append(f"client {c}: {err!r}")

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=90)
        took = time.monotonic() - started
        info = server.info()
    sampler.join(timeout=10)
    stats.extend(venv.pop_episode_stats())  # those of the step the server's stop cut short
    venv.close()
    assert sampler_errors == [] and errors == [] and wrong == []
    assert (info["episodes_ended"], info["episodes_dropped"]) == (clients * episodes, 0)
    # Every episode the sampler saw end had its 8 steps and rewards (the last ones' ends wait
    # in their slots' queues: the sampler's step blocks on a reset that no client answers).
    assert {(s.return_, s.length) for s in stats} == {(8.0, 8)} and len(stats) >= clients
    assert took < 80, took


# ------------------------------------------------------------------------------------ auth
def test_a_server_others_can_reach_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(ConfigError, match=r"host '0\.0\.0\.0' is not a loopback address"):
        PolicyServer(OBS, ACT, host="0.0.0.0", port=0)
    with pytest.raises(ConfigError, match="auth_token: must be a non-empty string"):
        PolicyServer(OBS, ACT, auth_token=" ")
    assert PolicyServer(OBS, ACT, host="0.0.0.0", auth_token="s3cret").auth_token_bytes == b"s3cret"
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    assert PolicyServer(OBS, ACT, host="0.0.0.0").auth_token_bytes == b"from-env"
    assert [is_loopback(h) for h in ("127.0.0.1", "127.3.0.1", "::1", "localhost")] == [True] * 4
    assert [is_loopback(h) for h in ("0.0.0.0", "", "::", "10.0.0.1")] == [False] * 4


@pytest.fixture
def guarded(monkeypatch: pytest.MonkeyPatch) -> Iterator[PolicyServer]:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with PolicyServer(OBS, ACT, port=0, auth_token="s3cret") as server:
        yield server


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/info", {}),
        ("GET", "/policy", {}),
        ("POST", "/start_episode", {}),
        ("POST", "/get_action", {"Authorization": "Bearer wrong"}),
        ("POST", "/end_episode", {"Authorization": "Basic czNjcmV0"}),
        ("GET", "/info", {"Authorization": "Bearer s3cret2"}),
        ("PUT", "/info", {}),
    ],
)
def test_every_request_without_the_token_gets_401(
    guarded: PolicyServer, method: str, path: str, headers: dict[str, str]
) -> None:
    conn = http.client.HTTPConnection(*guarded.address.rsplit(":", 1), timeout=10)
    body = b'{"episode_id": "x", "observation": [0, 0, 0]}' if method != "GET" else None
    conn.request(method, path, body=body, headers=headers)
    answer = conn.getresponse()
    error = json.loads(answer.read())["error"]
    assert answer.status == 401 and "Authorization: Bearer TOKEN" in error, error
    assert answer.getheader("WWW-Authenticate") == 'Bearer realm="rlflow"'
    # The connection reads on: the next request on it is answered.
    conn.request("GET", "/info", headers={"Authorization": "Bearer s3cret"})
    assert conn.getresponse().status == 200
    conn.close()
    assert guarded.info()["episodes_started"] == 0


def test_a_client_with_the_token_steps_an_episode(
    guarded: PolicyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = gym.make(ENV_ID, server=guarded.address)
    thread = threading.Thread(target=lambda: (env.reset(), env.step(3)), daemon=True)
    thread.start()
    with PolicyClient(guarded.address) as anonymous, pytest.raises(ServeError, match=r"^401: "):
        anonymous.start_episode()
    with PolicyClient(guarded.address, auth_token="s3cret") as client:
        episode = client.start_episode()
        assert client.get_action(episode, [1.0, 2.0, 3.0]) == 3
    monkeypatch.setenv(TOKEN_ENV, "s3cret")
    with PolicyClient(guarded.address) as from_env:
        assert from_env.info()["actions_served"] == 1
    # urllib: the header by hand, as the protocol doc shows.
    info = _urlopen(f"{guarded.url}/info", Authorization="Bearer s3cret")
    assert info["episodes_started"] == 1
    env.close()
    thread.join(timeout=5)


# ------------------------------------------------------------------------------------- TLS
def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, signed by its own key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rlflow test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_tls_serves_https_and_refuses_plain_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    cert, key = _self_signed(tmp_path)
    with pytest.raises(ConfigError, match=r"tls_cert '.*missing.pem': cannot load"):
        PolicyServer(OBS, ACT, tls_cert=tmp_path / "missing.pem")
    with pytest.raises(ConfigError, match=r"tls_key .* without tls_cert"):
        PolicyServer(OBS, ACT, tls_key=key)
    with PolicyServer(OBS, ACT, port=0, auth_token="t", tls_cert=cert, tls_key=key) as server:
        assert server.url.startswith("https://127.0.0.1:")
        env = gym.make(ENV_ID, server=server.address)
        seen: list[Any] = []
        thread = threading.Thread(
            target=lambda: (seen.append(env.reset()[0].tolist()), env.step(2)), daemon=True
        )
        thread.start()
        with PolicyClient(server.url, auth_token="t", ca_file=cert) as client:
            episode = client.start_episode()
            assert client.get_action(episode, [1.0, 2.0, 3.0]) == 2
            assert client.info()["actions_served"] == 1
        assert seen == [[1.0, 2.0, 3.0]]
        # A client that does not trust the certificate, and one that speaks plain HTTP.
        with PolicyClient(server.url, auth_token="t") as untrusting, pytest.raises(ssl.SSLError):
            untrusting.info()
        with (
            PolicyClient(server.address, auth_token="t") as plain,
            pytest.raises((OSError, http.client.HTTPException)),
        ):
            plain.info()
        # The server goes on.
        context = ssl.create_default_context(cafile=str(cert))
        with PolicyClient(server.url, auth_token="t", ssl_context=context) as again:
            assert again.info()["episodes_started"] == 1
        env.close()
        thread.join(timeout=10)


# ------------------------------------------------------------------------------- body size
def test_a_body_over_the_limit_gets_413_and_the_server_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(ConfigError, match="max_body_bytes=0"):
        PolicyServer(OBS, ACT, max_body_bytes=0)
    with PolicyServer(OBS, ACT, port=0, max_body_bytes=1000) as server:
        big = json.dumps({"episode_id": "x" * 3_000_000}).encode()
        conn = http.client.HTTPConnection(*server.address.rsplit(":", 1), timeout=10)
        conn.request("POST", "/start_episode", body=big)
        answer = conn.getresponse()
        error = json.loads(answer.read())["error"]
        assert answer.status == 413, error
        assert f"a body of {len(big)} bytes: this server takes at most 1000" in error
        assert answer.getheader("Connection") == "close"
        conn.close()
        with PolicyClient(server.address) as client:
            with pytest.raises(ServeError, match=r"^413: start_episode: a body of"):
                client.start_episode("y" * 1000)
            assert client.start_episode("y" * 900) == "y" * 900


# ------------------------------------------------------------------------------------ fuzz
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
_KEYS = st.sampled_from(["episode_id", "observation", "action", "reward", "truncated"])
_PROTOCOLISH = st.dictionaries(
    _KEYS,
    _JSON
    | st.lists(st.floats(allow_nan=True) | st.integers(), min_size=3, max_size=3)
    | st.sampled_from(["ep-1", "ep-2", "fuzz", 0, 3, -1, 4, 2**63, "NaN"]),
    max_size=5,
)
_BODIES = (
    st.binary(max_size=200)
    | _JSON.map(lambda v: json.dumps(v).encode())
    | _PROTOCOLISH.map(lambda v: json.dumps(v).encode())
    | st.sampled_from([b"[" * 100_000, b"1" * 5000, b'{"reward": 1e999}', b"\xff\xfe{}"])
)
_PATHS = st.sampled_from(
    [
        ("POST", "/start_episode"),
        ("POST", "/get_action"),
        ("POST", "/log_action"),
        ("POST", "/log_returns"),
        ("POST", "/end_episode"),
        ("POST", "/info"),
        ("GET", "/info"),
        ("GET", "/policy"),
        ("POST", "/nothing"),
        ("PATCH", "/get_action"),
    ]
)


def test_fuzzed_bodies_get_4xx_and_the_run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any body to any endpoint: an answer within 10 s, 200 or a 4xx with an error message,
    never a 5xx or a hang; two env slots step every episode a fuzzed body made steppable;
    afterwards a well-formed client plays a whole episode."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with PolicyServer(OBS, ACT, port=0, episode_timeout_s=0.5, action_timeout_s=8) as server:
        failures: list[BaseException] = []

        def slot() -> None:
            env = gym.make(ENV_ID, server=server.address)
            try:
                env.reset()
                while True:
                    if any(env.step(1)[2:4]):
                        env.reset()
            except RLFlowError:
                pass  # the server stopped
            except BaseException as err:
                failures.append(err)

        slots = [threading.Thread(target=slot, daemon=True) for _ in range(2)]
        for thread in slots:
            thread.start()
        host, port = server.address.rsplit(":", 1)
        seen: dict[int, int] = {}

        @settings(
            max_examples=300,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(_PATHS, _BODIES)
        def fuzz(endpoint: tuple[str, str], body: bytes) -> None:
            method, path = endpoint
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            try:
                conn.request(method, path, body=body)
                answer = conn.getresponse()
                raw = answer.read()
            finally:
                conn.close()
            seen[answer.status] = seen.get(answer.status, 0) + 1
            assert answer.status == 200 or 400 <= answer.status < 500, (answer.status, raw)
            if answer.status != 200:
                error = json.loads(raw)["error"]
                assert isinstance(error, str) and error, raw

        fuzz()
        assert failures == []
        assert all(thread.is_alive() for thread in slots)
        assert {400, 404, 405}.issubset(seen), seen
        # A well-formed client still plays a whole episode (given time between requests).
        server.hub.episode_timeout_s = 30.0
        with PolicyClient(server.address, timeout_s=20) as client:
            episode = client.start_episode()
            for t in range(3):
                assert client.get_action(episode, [float(t), 0.0, 0.0]) == 1
                client.log_returns(episode, 1.0)
            client.end_episode(episode, [0.0, 0.0, 0.0])
        info = server.info()
        assert math.isfinite(info["actions_served"]) and info["episodes_ended"] >= 1


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/get_action", b'{"episode_id": "x", "observation": [NaN, 0, 0]}', "holds NaN or an"),
        ("/get_action", b'{"episode_id": "x", "observation": [1e300, 0, 0]}', "holds NaN or an"),
        (
            "/log_action",
            b'{"episode_id": "x", "observation": [0, 0, 0], "action": 1e999}',
            "action inf is not",
        ),
        ("/log_returns", b'{"episode_id": "x", "reward": 1' + b"0" * 400 + b"}", "not finite"),
        ("/start_episode", b"1" * 5000, "the body is not JSON"),
        ("/start_episode", b"[" * 100_000, "the body is not JSON"),
    ],
)
def test_values_no_run_could_use_get_400(
    monkeypatch: pytest.MonkeyPatch, path: str, body: bytes, message: str
) -> None:
    """A non-finite observation would stop a run sampling with ``on_nonfinite="raise"``; huge
    numbers and deep nesting raised past the handler (500) before."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with PolicyServer(OBS, ACT, port=0) as server:
        conn = http.client.HTTPConnection(*server.address.rsplit(":", 1), timeout=10)
        conn.request("POST", path, body=body)
        answer = conn.getresponse()
        error = json.loads(answer.read())["error"]
        conn.close()
    assert answer.status == 400 and message in error, (answer.status, error)
