"""`rlflow.serve`: the protocol end to end (a `PolicyClient` on one side, the `ExternalEnv` a
sampler steps on the other), its errors, and clients that go away."""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlflow.algorithms import IMPALAConfig, PPOConfig
from rlflow.envs import VectorEnv
from rlflow.errors import ConfigError
from rlflow.export.spaces import space_to_json
from rlflow.serve import ENV_ID, ExternalEnv, PolicyClient, PolicyServer, ServeError

pytestmark = pytest.mark.timeout(60)

OBS = spaces.Box(-10.0, 10.0, (3,), np.float32)
ACT = spaces.Discrete(4)


@pytest.fixture
def server() -> Iterator[PolicyServer]:
    with PolicyServer(OBS, ACT, port=0, episode_timeout_s=30) as running:
        yield running


class EnvThread:
    """An `ExternalEnv` of ``server`` stepped on a thread, as a sampler steps it: ``reset()``,
    then one ``step`` per action in ``actions``; what each call returned is in ``results``."""

    def __init__(self, server: PolicyServer, actions: list[Any]) -> None:
        self.env = gym.make(ENV_ID, server=server.address)
        self.actions = actions
        self.results: queue.Queue[Any] = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.results.put(("reset", self.env.reset()))
            for action in self.actions:
                out = self.env.step(action)
                self.results.put(("step", out))
                if out[2] or out[3]:
                    self.results.put(("reset", self.env.reset()))
        except Exception as err:
            self.results.put(("error", err))

    def next(self) -> Any:
        return self.results.get(timeout=10)


def _obs(*values: float) -> list[float]:
    return [float(v) for v in values]


def test_one_episode_reaches_the_env_exactly(server: PolicyServer) -> None:
    env = EnvThread(server, [3, 1, 2])
    with PolicyClient(server.address) as client:
        episode = client.start_episode()
        assert client.get_action(episode, np.array([1, 2, 3], np.float32)) == 3
        kind, (obs, info) = env.next()
        assert kind == "reset" and obs.tolist() == [1, 2, 3] and info["episode_id"] == episode
        client.log_returns(episode, 0.5)
        client.log_returns(episode, 1.5)
        assert client.get_action(episode, _obs(4, 5, 6)) == 1
        kind, (obs, reward, terminated, truncated, _) = env.next()
        assert (obs.tolist(), reward, terminated, truncated) == ([4, 5, 6], 2.0, False, False)
        assert obs.dtype == np.float32
        client.log_returns(episode, -1.0)
        client.end_episode(episode, _obs(7, 8, 9))
        kind, (obs, reward, terminated, truncated, _) = env.next()
        assert (obs.tolist(), reward, terminated, truncated) == ([7, 8, 9], -1.0, True, False)
        info = client.info()
    assert info["episodes_started"] == 1 and info["episodes_ended"] == 1
    assert info["actions_served"] == 2 and info["episodes_running"] == 0
    assert info["protocol"] == 1 and info["action_space"] == {
        "type": "Discrete",
        "n": 4,
        "start": 0,
    }


def test_truncated_end_and_a_chosen_episode_id(server: PolicyServer) -> None:
    env = EnvThread(server, [0, 0])
    with PolicyClient(server.address) as client:
        assert client.start_episode("sim-7") == "sim-7"
        with pytest.raises(ServeError, match="409: start_episode: episode 'sim-7' is already"):
            client.start_episode("sim-7")
        client.get_action("sim-7", _obs(0, 0, 0))
        env.next()
        client.log_returns("sim-7", 1.0)
        client.end_episode("sim-7", _obs(1, 1, 1), truncated=True)
        _, (obs, reward, terminated, truncated, _) = env.next()
        assert (obs.tolist(), reward, terminated, truncated) == ([1, 1, 1], 1.0, False, True)
        with pytest.raises(ServeError, match="404: get_action: no running episode 'sim-7'"):
            client.get_action("sim-7", _obs(0, 0, 0))


def test_episodes_wait_for_a_free_slot_in_order(server: PolicyServer) -> None:
    """Two clients, one slot: the second client's episode is stepped once the first ends."""
    env = EnvThread(server, [1, 2, 3])
    first, second = PolicyClient(server.address), PolicyClient(server.address)
    a, b = first.start_episode(), second.start_episode()
    assert first.get_action(a, _obs(1, 1, 1)) == 1
    env.next()
    answer: queue.Queue[Any] = queue.Queue()
    threading.Thread(target=lambda: answer.put(second.get_action(b, _obs(2, 2, 2)))).start()
    time.sleep(0.3)
    assert answer.empty()  # the only slot steps the first episode
    first.end_episode(a, _obs(0, 0, 0))
    assert env.next()[1][2] is True  # terminated
    assert env.next()[1][0].tolist() == [2, 2, 2]  # the slot's reset: the second episode
    assert answer.get(timeout=5) == 2
    first.close()
    second.close()


@pytest.mark.parametrize("how", ["close", "timeout"])
def test_a_client_that_goes_away_ends_its_episode_not_the_server(how: str) -> None:
    with PolicyServer(OBS, ACT, port=0, episode_timeout_s=1.0) as server:
        env = EnvThread(server, [1, 2, 3])
        client = PolicyClient(server.address)
        episode = client.start_episode()
        client.get_action(episode, _obs(1, 2, 3))
        env.next()
        started = time.monotonic()
        if how == "close":
            client.close()  # as a killed client's socket closes
        _, (obs, reward, terminated, truncated, info) = env.next()
        waited = time.monotonic() - started
        assert (obs.tolist(), reward, terminated, truncated) == ([1, 2, 3], 0.0, False, True)
        assert info == {"dropped": True}
        assert waited < (0.9 if how == "close" else 5.0)
        assert server.info()["episodes_dropped"] == 1
        if how == "timeout":
            with pytest.raises(ServeError, match="404"):
                client.get_action(episode, _obs(0, 0, 0))
        # The server and its env go on with the next client.
        with PolicyClient(server.address) as again:
            assert again.get_action(again.start_episode(), _obs(5, 5, 5)) == 2
            assert env.next()[1][0].tolist() == [5, 5, 5]


def test_a_client_killed_while_waiting_for_its_action_is_dropped_at_once(
    server: PolicyServer,
) -> None:
    """No env steps yet: the episode waits for a slot, its client dies; the slot skips it."""
    episode = "waiting"
    host, port = server.address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    body = json.dumps({"episode_id": episode, "observation": [1, 2, 3]}).encode()
    head = f"POST /get_action HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    start = b'{"episode_id": "waiting"}'
    sock.sendall(
        f"POST /start_episode HTTP/1.1\r\nHost: x\r\nContent-Length: {len(start)}\r\n\r\n".encode()
        + start
    )
    assert b"200 OK" in sock.recv(4096)
    sock.sendall(head.encode() + body)
    time.sleep(0.3)
    assert server.info()["episodes_running"] == 1
    sock.close()
    deadline = time.monotonic() + 2
    while server.info()["episodes_dropped"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.info()["episodes_dropped"] == 1
    env = EnvThread(server, [1])
    with PolicyClient(server.address) as client:
        assert client.get_action(client.start_episode(), _obs(4, 4, 4)) == 1
    assert env.next()[1][0].tolist() == [4, 4, 4]  # the slot's first episode is the live one


def _raw(server: PolicyServer, request: bytes) -> tuple[int, dict[str, Any]]:
    host, port = server.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(request)
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def _post(server: PolicyServer, path: str, body: bytes, method: str = "POST") -> tuple[int, str]:
    conn = http.client.HTTPConnection(*server.address.rsplit(":", 1), timeout=5)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    answer = json.loads(response.read())
    conn.close()
    return response.status, answer.get("error", "")


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/start_episode", b"{not json", 400, "start_episode: the body is not JSON"),
        ("/start_episode", b"[1, 2]", 400, "must be a JSON object, got list"),
        ("/start_episode", b'{"episode_id": 3}', 400, "key 'episode_id' must be a str, got 3"),
        ("/get_action", b'{"observation": [1, 2, 3]}', 400, "missing key 'episode_id'"),
        ("/get_action", b'{"episode_id": "x"}', 400, "missing key 'observation'"),
        (
            "/get_action",
            b'{"episode_id": "x", "observation": [1, 2]}',
            400,
            "observation has shape (2,); the space Box(-10.0, 10.0, (3,), float32) has (3,)",
        ),
        (
            "/get_action",
            b'{"episode_id": "x", "observation": ["a", "b", "c"]}',
            400,
            "observation is not an array of float32 numbers",
        ),
        ("/get_action", b'{"episode_id": "x", "observation": [1, 2, 3]}', 404, "'x'"),
        ("/log_returns", b'{"episode_id": "x", "reward": "1"}', 400, "key 'reward' must be"),
        ("/log_returns", b'{"episode_id": "x", "reward": true}', 400, "key 'reward' must be"),
        ("/log_returns", b'{"episode_id": "x", "reward": NaN}', 400, "reward nan is not finite"),
        (
            "/end_episode",
            b'{"episode_id": "x", "observation": [0, 0, 0], "truncated": 1}',
            400,
            "key 'truncated' must be a bool",
        ),
        ("/reset", b"{}", 404, "no such command /reset; POST one of /start_episode"),
    ],
)
def test_bad_requests_get_4xx_naming_the_problem(
    server: PolicyServer, path: str, body: bytes, status: int, message: str
) -> None:
    got, error = _post(server, path, body)
    assert got == status and message in error, (got, error)


def test_methods_and_missing_length(server: PolicyServer) -> None:
    assert _post(server, "/get_action", b"", method="GET") == (
        405,
        "/get_action takes POST with a JSON body",
    )
    assert _post(server, "/info", b"{}", method="PUT")[0] == 405
    assert _post(server, "/nothing", b"", method="GET")[0] == 404
    status, body = _raw(server, b"POST /start_episode HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 411 and "Content-Length" in body["error"]
    # The server still serves.
    with PolicyClient(server.address) as client:
        assert client.start_episode().startswith("ep-")


def test_discrete_observations_are_checked_against_the_space() -> None:
    with PolicyServer(spaces.Discrete(5), ACT, port=0) as server, PolicyClient(server.address) as c:
        episode = c.start_episode()
        with pytest.raises(ServeError, match=r"400: get_action: observation 7 is not an integer"):
            c.get_action(episode, 7)
        env = EnvThread(server, [2])
        assert c.get_action(episode, 4) == 2
        assert env.next()[1][0] == 4


def test_box_actions_come_back_as_lists() -> None:
    act = spaces.Box(-1.0, 1.0, (2,), np.float32)
    with PolicyServer(OBS, act, port=0) as server, PolicyClient(server.address) as client:
        EnvThread(server, [np.array([0.25, -0.5], np.float32)])
        assert client.get_action(client.start_episode(), _obs(0, 0, 0)) == [0.25, -0.5]


def test_bad_setup_is_a_config_error_naming_it(server: PolicyServer) -> None:
    with pytest.raises(ConfigError, match=r"ExternalEnv: env_config server '127\.0\.0\.1:1'"):
        ExternalEnv("127.0.0.1:1")
    with pytest.raises(ConfigError, match="PolicyServer: observation_space"):
        PolicyServer(spaces.Dict({"a": OBS}), ACT)
    with pytest.raises(ConfigError, match="PolicyServer: port -1"):
        PolicyServer(OBS, ACT, port=-1)
    with pytest.raises(ConfigError, match="episode_timeout_s=0"):
        PolicyServer(OBS, ACT, episode_timeout_s=0)
    port = int(server.address.rsplit(":", 1)[1])
    with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
        PolicyServer(OBS, ACT, port=port).start()
    with pytest.raises(ConfigError, match="evaluation_interval 2"):
        server.configure(PPOConfig(evaluation_interval=2))
    with pytest.raises(ConfigError, match="start\\(\\) the server first"):
        PolicyServer(OBS, ACT, port=0).configure(PPOConfig())
    with pytest.raises(ConfigError, match="IMPALAConfig samples on remote rollout workers only"):
        server.configure(IMPALAConfig())
    config = server.configure(PPOConfig(num_workers=3))
    assert (config.env, config.env_config, config.num_workers) == (
        ENV_ID,
        {
            "server": server.address,
            "observation_space": space_to_json(OBS),
            "action_space": space_to_json(ACT),
        },
        0,
    )


def test_an_env_of_a_server_not_running_here_keeps_its_spaces_and_refuses_to_step() -> None:
    """What a checkpoint's restore or an export builds after the server is gone."""
    env = ExternalEnv("127.0.0.1:1", space_to_json(OBS), space_to_json(ACT))
    assert (env.observation_space, env.action_space) == (OBS, ACT)
    with pytest.raises(ConfigError, match="no PolicyServer runs at that address"):
        env.reset()
    env.close()


def test_a_stopped_server_answers_waiting_clients_and_envs() -> None:
    server = PolicyServer(OBS, ACT, port=0).start()
    env = EnvThread(server, [])
    time.sleep(0.3)
    server.stop()
    kind, err = env.next()
    assert kind == "error" and "PolicyServer was stopped" in str(err)


def test_a_vector_env_sends_every_clients_action_before_it_waits_on_any(
    server: PolicyServer,
) -> None:
    """Client A answers only after client B got its action: stepping sub-env 0 to the end
    before sending sub-env 1's action would never finish."""
    venv = VectorEnv(lambda: gym.make(ENV_ID, server=server.address), 2, seed=None)
    clients = [PolicyClient(server.address), PolicyClient(server.address)]
    episodes = [c.start_episode() for c in clients]
    b_has_action = threading.Event()
    actions: dict[str, Any] = {}

    def client_a() -> None:
        actions["a"] = clients[0].get_action(episodes[0], _obs(1, 1, 1))
        assert b_has_action.wait(timeout=10)
        with contextlib.suppress(ServeError, OSError, http.client.HTTPException):  # at the end
            clients[0].get_action(episodes[0], _obs(3, 3, 3))

    def client_b() -> None:
        time.sleep(0.2)  # B's episode is ready second: sub-env 1
        actions["b"] = clients[1].get_action(episodes[1], _obs(2, 2, 2))
        b_has_action.set()
        with contextlib.suppress(ServeError, OSError, http.client.HTTPException):
            clients[1].get_action(episodes[1], _obs(4, 4, 4))

    threads = [threading.Thread(target=f, daemon=True) for f in (client_a, client_b)]
    for thread in threads:
        thread.start()
    assert venv.reset().tolist() == [[1, 1, 1], [2, 2, 2]]
    step = venv.step(np.array([3, 2]))
    assert step.next_obs.tolist() == [[3, 3, 3], [4, 4, 4]]
    assert actions == {"a": 3, "b": 2}
    venv.close()  # the clients' last requests end with the server (503)
