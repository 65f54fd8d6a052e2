"""``rlflow serve``: an off-policy algorithm (DQN) trains from its replay on an external client's
CartPole episodes; bad flags are one line and exit status 2."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import gymnasium as gym
import pytest
import yaml

from rlflow import load_policy
from rlflow.cli import main
from rlflow.serve import ENV_ID, PolicyClient, PolicyServer

pytestmark = pytest.mark.timeout(120)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _play(address: str, served: list[int], stop: threading.Event) -> None:
    """CartPole through the server until it stops; ``served[0]``: actions received."""
    client = PolicyClient(address, timeout_s=60)
    env = gym.make("CartPole-v1")
    for _ in range(200):  # the server may still be starting
        try:
            client.info()
            break
        except OSError:
            stop.wait(0.1)
    obs, _ = env.reset(seed=0)
    try:
        while not stop.is_set():
            episode = client.start_episode()
            while True:
                action = client.get_action(episode, obs)
                served[0] += 1
                obs, reward, terminated, truncated, _ = env.step(action)
                client.log_returns(episode, reward)
                if terminated or truncated:
                    client.end_episode(episode, obs, truncated=truncated and not terminated)
                    obs, _ = env.reset()
                    break
    except Exception:  # the server stopped under the client: the run ended
        return
    finally:
        client.close()


def test_serve_trains_dqn_from_replay_on_a_clients_episodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spaces_file = tmp_path / "spaces.json"
    spaces_file.write_text(
        json.dumps(
            {
                "observation_space": {
                    "type": "Box", "low": "-inf", "high": "inf", "shape": [4], "dtype": "float32"
                },
                "action_space": {"type": "Discrete", "n": 2},
            }
        )
    )  # fmt: skip
    port, served, stop = _free_port(), [0], threading.Event()
    client = threading.Thread(target=_play, args=(f"127.0.0.1:{port}", served, stop))
    client.start()
    out = tmp_path / "run"
    try:
        code = main(
            ["serve", "dqn", "--spaces", str(spaces_file), "--port", str(port), "--no-tuned",
             "--set", "learning_starts=200", "--set", "min_steps_per_iteration=300",
             "--stop-timesteps", "900", "--out", str(out), "--seed", "0"]
        )  # fmt: skip
    finally:
        stop.set()
        client.join(timeout=30)
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"serving dqn on http://127.0.0.1:{port} (spaces of {spaces_file})" in printed
    rows = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    last = rows[-1]
    assert last["num_env_steps_sampled"] >= 900
    assert last["num_env_steps_trained"] > 0  # replayed after learning_starts
    assert served[0] >= last["num_env_steps_sampled"]  # every env step was a client's action
    assert last["episodes_total"] > 0 and 8 <= last["episode_return_mean"] <= 500
    config = yaml.safe_load((out / "config.yaml").read_text())["config"]
    assert (config["env"], config["env_config"]["server"], config["num_workers"]) == (
        ENV_ID,
        f"127.0.0.1:{port}",
        0,
    )
    # With the server gone, the run exports (its env keeps the spaces); evaluating it has no
    # episodes to play and says why.
    assert main(["export", str(out), "-o", str(tmp_path / "exported")]) == 0
    policy = load_policy(tmp_path / "exported")
    assert policy.compute_single_action([0.0, 0.0, 0.0, 0.0]) in (0, 1)
    capsys.readouterr()
    assert main(["evaluate", str(out), "--episodes", "1"]) == 2
    assert "no PolicyServer runs at that address" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--concurrent-episodes", "0"], "--concurrent-episodes 0: must be >= 1"),
        (["--spaces", "missing.json"], "--spaces 'missing.json': cannot read it as JSON"),
        (["--set", "evaluation_interval=2"], "evaluation_interval 2: the clients' episodes"),
        (["--env", "pettingzoo.classic.rps_v2"], "is multi-agent; serving takes one"),
        (["--port", "70000"], "PolicyServer: port 70000"),
        (["--host", "0.0.0.0"], "host '0.0.0.0' is not a loopback address and no auth token"),
        (["--auth-token", ""], "auth_token: must be a non-empty string"),
        (["--max-body-bytes", "0"], "max_body_bytes=0 must be"),
        (["--tls-key", "key.pem"], "tls_key 'key.pem' without tls_cert"),
        (["--tls-cert", "missing.pem"], "tls_cert 'missing.pem': cannot load a PEM"),
    ],
)
def test_bad_serve_flags_are_one_line_and_exit_2(
    flags: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RLFLOW_SERVE_TOKEN", raising=False)
    code = main(["serve", "pg", "--no-tuned", "--port", "0", *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize("content", ["3", "[1, 2]", '{"observation_space": {}}'])
def test_a_spaces_file_that_is_not_both_spaces_is_one_line_and_exit_2(
    content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spaces.json"
    path.write_text(content)
    code = main(["serve", "pg", "--no-tuned", "--port", "0", "--spaces", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "expected an object with observation_space and action_space" in err, err


def test_a_port_in_use_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with PolicyServer(gym.spaces.Discrete(2), gym.spaces.Discrete(2), port=0) as other:
        port = other.address.rsplit(":", 1)[1]
        code = main(["serve", "pg", "--no-tuned", "--port", port])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in err, err
