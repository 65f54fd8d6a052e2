"""An external simulator trained by ``rlflow serve``: CartPole stepped here, actions from there.

Start the server, then this client (in another shell, or on another machine with ``--address``)::

    rlflow serve ppo --env CartPole-v1 --concurrent-episodes 4 --stop-reward 450
    python examples/serve_cartpole_client.py --envs 4

The server builds CartPole only for its spaces; every env step of the run is one of this
client's ``get_action`` requests. ``--envs N`` runs N episodes at once, one thread (and one
`rlflow.serve.PolicyClient` connection) each: give the server ``--concurrent-episodes N``.
Killing the client ends its running episodes on the server, which goes on training when a
client comes back. Only `rlflow.serve.client` (standard library) and Gymnasium are used here;
``--inference local`` acts with the server's policy in this process (rlflow and torch).
"""

from __future__ import annotations

import argparse
import http.client
import threading
import time

import gymnasium as gym

from rlflow.serve.client import PolicyClient, ServeError


def wait_for_server(client: PolicyClient, timeout_s: float = 60.0) -> None:
    """Wait until the server answers (it may still be starting)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.info()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def play(client: PolicyClient, env: gym.Env, obs: object) -> object:
    """One episode through the server; the first observation of the next one."""
    episode = client.start_episode()
    while True:
        action = client.get_action(episode, obs)
        obs, reward, terminated, truncated, _ = env.step(action)
        client.log_returns(episode, float(reward))
        if terminated or truncated:
            client.end_episode(episode, obs, truncated=truncated and not terminated)
            return env.reset()[0]


def run_episodes(
    address: str, seed: int, episodes: int | None, counter: Counter, inference: str
) -> None:
    """Play CartPole episodes through the server until ``episodes`` were played by all
    threads (None: forever) or the server stops."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    with PolicyClient(address, inference=inference, seed=seed) as client:
        wait_for_server(client)
        while episodes is None or counter.value < episodes:
            try:
                obs = play(client, env, obs)
            except (OSError, http.client.HTTPException) as err:  # the server went away
                print(f"client {seed}: the server closed the connection ({err!r})", flush=True)
                return
            except ServeError as err:
                if err.status == 503:  # the server is stopping
                    return
                print(f"client {seed}: {err}; starting a new episode", flush=True)
                obs, _ = env.reset()
                continue
            counter.add()


class Counter:
    """Episodes played by all threads."""

    def __init__(self) -> None:
        """Zero."""
        self.value = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        """One more."""
        with self._lock:
            self.value += 1


def main() -> None:
    """Parse the flags; run ``--envs`` clients on threads; print episodes played."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--address", default="127.0.0.1:9900", help="the server's HOST:PORT")
    parser.add_argument("--envs", type=int, default=1, help="episodes at once (threads)")
    parser.add_argument("--seed", type=int, default=0, help="CartPole seed of the first env")
    parser.add_argument("--episodes", type=int, help="stop after this many (default: never)")
    parser.add_argument(
        "--inference",
        choices=["remote", "local"],
        default="remote",
        help="remote: ask the server for each action; local: act with the server's policy "
        "here (fetched every 10 s; needs rlflow and torch) and report the actions",
    )
    args = parser.parse_args()
    counter = Counter()
    threads = [
        threading.Thread(
            target=run_episodes,
            args=(args.address, args.seed + k, args.episodes, counter, args.inference),
            daemon=True,
        )
        for k in range(args.envs)
    ]
    for thread in threads:
        thread.start()
    start = time.monotonic()
    while any(t.is_alive() for t in threads):
        for thread in threads:
            thread.join(timeout=10)
        print(f"{counter.value} episodes in {time.monotonic() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
