"""Load on `rlflow serve`: many concurrent clients on loopback, kept-alive or one connection per
request.

A `PolicyServer` with CartPole's spaces feeds a PG rollout worker that samples
``--clients`` episodes in lockstep (``num_envs_per_worker`` = clients, fragments of
``--fragment``; sampling only, no training, so the figures are the serving path's). The clients
run in ``--procs`` separate processes, one thread per client, each stepping its own CartPole
through the server (``get_action``, ``log_returns`` per step; ``start_episode``,
``end_episode`` per episode):

- **kept-alive**: `rlflow.serve.PolicyClient`, one HTTP/1.1 connection per client;
- **per-request**: ``urllib.request.urlopen``, a new connection for every request (as curl and
  many engines' HTTP clients do).

Reported per mode: env steps/s served (``get_action`` answers over the measured window, after
``--warmup`` s), p50/p99 latency of ``get_action`` and of all requests (a ``get_action`` waits
for the lockstep step of all clients), the server's RSS at the window's start and end and its
least-squares slope over samples every 5 s, and the errors (client exceptions, 4xx/5xx
answers, episodes the server dropped).

    python benchmarks/serve_load.py [--clients 256] [--seconds 60] [--modes keepalive,per-request]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _rss_mib() -> float:
    """This process's resident set size in MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ------------------------------------------------------------------------------ client process
class _Client:
    """One simulated client: CartPole stepped through the server until ``stop``; what it did
    within the window ``[start, end]`` (times of `time.time`, the driver's clock)."""

    def __init__(self, args: argparse.Namespace, index: int) -> None:
        import gymnasium as gym

        from rlflow.serve.client import PolicyClient

        self.address, self.mode = args.address, args.mode
        self.start = args.start_at
        self.end = self.start + args.seconds
        self.stop = self.end + 5.0  # stepping on past the window: the server stops at end + 1
        self.env = gym.make("CartPole-v1")
        self.obs, _ = self.env.reset(seed=index)
        self.client = PolicyClient(args.address, timeout_s=120)
        self.steps = self.errors = 0
        self.kinds: dict[str, int] = {}
        self.get_action: list[float] = []
        self.every: list[float] = []

    def _call(self, command: str, body: dict[str, Any]) -> Any:
        if self.mode == "keepalive":
            return self.client._request("POST", command, body)
        import urllib.request

        request = urllib.request.Request(
            f"http://{self.address}/{command}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())

    def _timed(self, command: str, body: dict[str, Any]) -> Any:
        began = time.time()
        answer = self._call(command, body)
        now = time.time()
        if self.start <= began and now <= self.end:
            self.every.append(now - began)
            if command == "get_action":
                self.get_action.append(now - began)
                self.steps += 1
        return answer

    def _episode(self) -> None:
        episode = self._timed("start_episode", {})["episode_id"]
        while time.time() < self.stop:
            body = {"episode_id": episode, "observation": self.obs.tolist()}
            action = self._timed("get_action", body)["action"]
            self.obs, reward, terminated, truncated, _ = self.env.step(action)
            self._timed("log_returns", {"episode_id": episode, "reward": float(reward)})
            if terminated or truncated:
                body = {
                    "episode_id": episode,
                    "observation": self.obs.tolist(),
                    "truncated": bool(truncated and not terminated),
                }
                self._timed("end_episode", body)
                self.obs, _ = self.env.reset()
                return

    def run(self) -> None:
        """Episodes until ``stop``; an error within the window is counted, one after it (the
        server stopped) ends the client."""
        import urllib.error

        from rlflow.serve.client import ServeError

        while time.time() < self.stop:
            try:
                self._episode()
            except (OSError, ServeError, urllib.error.URLError, ValueError) as err:
                if time.time() >= self.end:
                    break
                self.errors += 1
                kind = type(err).__name__ + (
                    f" {err.status}" if isinstance(err, ServeError) else ""
                )
                self.kinds[kind] = self.kinds.get(kind, 0) + 1
                self.obs, _ = self.env.reset()
                time.sleep(0.1)
        self.client.close()


def _client_process(args: argparse.Namespace) -> None:
    """``--clients`` client threads until past ``--start-at`` + ``--seconds``; prints one JSON
    line: their counts and latencies within that window."""
    clients = [_Client(args, args.first + i) for i in range(args.clients)]
    threads = [threading.Thread(target=c.run, daemon=True) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, clients[0].stop - time.time()) + 180)
    totals: dict[str, Any] = {"steps": 0, "errors": 0, "get_action": [], "all": [], "kinds": {}}
    for c in clients:
        totals["steps"] += c.steps
        totals["errors"] += c.errors
        totals["get_action"] += c.get_action
        totals["all"] += c.every
        for kind, n in c.kinds.items():
            totals["kinds"][kind] = totals["kinds"].get(kind, 0) + n
    print(json.dumps(totals))


# ------------------------------------------------------------------------------ server process
def _slope(points: list[tuple[float, float]]) -> float:
    """The least-squares slope of ``(x, y)`` points (0 for fewer than 2)."""
    if len(points) < 2:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One mode: the server and its sampling worker here, the clients in ``--procs``
    processes; the figures of the measured window."""
    import gymnasium as gym

    from rlflow import Trainer
    from rlflow.algorithms import PGConfig
    from rlflow.serve import PolicyServer

    env = gym.make("CartPole-v1")
    with PolicyServer(env.observation_space, env.action_space, port=0) as server:
        config = server.configure(
            PGConfig(
                env="CartPole-v1",
                num_workers=0,
                num_envs_per_worker=args.clients,
                rollout_fragment_length=args.fragment,
                seed=0,
            )
        )
        with Trainer("pg", config=config, backend="local") as trainer:
            worker = trainer.workers.local_worker()
            start_at = time.time() + args.warmup  # the clients' startup is in the warm-up
            shares = [args.clients // args.procs + (i < args.clients % args.procs)
                      for i in range(args.procs)]  # fmt: skip
            commands = [
                [sys.executable, __file__, "--client-process", "--mode", mode, "--address",
                 server.address, "--clients", str(n), "--first", str(sum(shares[:i])),
                 "--seconds", str(args.seconds), "--start-at", str(start_at)]
                for i, n in enumerate(shares)
                if n
            ]  # fmt: skip
            procs = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True) for c in commands]
            sampling = threading.Event()
            sampling.set()
            sampler_error: list[BaseException] = []

            def sample() -> None:
                try:
                    while sampling.is_set():
                        worker.sample()
                        worker.pop_metrics()  # as a training run's metrics reporting does
                except BaseException as err:  # reported unless the server was stopped
                    if sampling.is_set():
                        sampler_error.append(err)

            thread = threading.Thread(target=sample, daemon=True)
            thread.start()
            time.sleep(max(0.0, start_at - time.time()))
            rss_start, dropped_start = _rss_mib(), server.hub.counts["dropped"]
            rss = [(0.0, rss_start)]
            while time.time() < start_at + args.seconds:
                time.sleep(max(0.0, min(5.0, start_at + args.seconds - time.time())))
                rss.append((time.time() - start_at, _rss_mib()))
            rss_end, dropped = rss[-1][1], server.hub.counts["dropped"] - dropped_start
            time.sleep(1.0)  # the clients go on past the window, until the server stops
            # The clients stop at the window's end; the requests they have in flight wait for
            # a lockstep step that will not come: stopping the server answers them (503).
            sampling.clear()
            server.stop()
            outputs = [proc.communicate(timeout=300)[0] for proc in procs]
    thread.join(timeout=30)
    totals: dict[str, Any] = {"steps": 0, "errors": 0, "get_action": [], "all": [], "kinds": {}}
    for out in outputs:
        part = json.loads(out.strip().splitlines()[-1])
        totals["steps"] += part["steps"]
        totals["errors"] += part["errors"]
        totals["get_action"] += part["get_action"]
        totals["all"] += part["all"]
        for kind, n in part["kinds"].items():
            totals["kinds"][kind] = totals["kinds"].get(kind, 0) + n
    return {
        "mode": mode,
        "steps_per_s": totals["steps"] / args.seconds,
        "get_action_p50_ms": 1000 * _percentile(totals["get_action"], 0.5),
        "get_action_p99_ms": 1000 * _percentile(totals["get_action"], 0.99),
        "request_p50_ms": 1000 * _percentile(totals["all"], 0.5),
        "request_p99_ms": 1000 * _percentile(totals["all"], 0.99),
        "requests": len(totals["all"]),
        "rss_start_mib": rss_start,
        "rss_end_mib": rss_end,
        "rss_slope_mib_per_min": 60 * _slope(rss),
        "client_errors": totals["errors"],
        "error_kinds": totals["kinds"],
        "episodes_dropped": dropped,
        "sampler_error": repr(sampler_error[0]) if sampler_error else None,
    }


def main() -> None:
    """Measure each mode; print a table (and, with ``--json``, the figures)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before it")
    parser.add_argument("--modes", default="keepalive,per-request")
    parser.add_argument("--procs", type=int, default=2, help="client processes")
    parser.add_argument("--fragment", type=int, default=8)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    # The client processes' own flags.
    parser.add_argument("--client-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_process:
        _client_process(args)
        return
    from rlflow import flow

    flow.init("local")
    rows = [measure(mode, args) for mode in args.modes.split(",")]
    flow.shutdown()
    print(f"CartPole-v1 spaces, PG's policy, {args.clients} clients in {args.procs} processes "
          f"on loopback, {args.seconds:g} s measured after {args.warmup:g} s")  # fmt: skip
    print(f"{'mode':<12} {'steps/s':>8} {'get_action p50/p99 ms':>22} "
          f"{'any request p50/p99 ms':>23} {'RSS start/end MiB':>18} {'MiB/min':>8} {'errors':>7} "
          f"{'dropped':>8}")  # fmt: skip
    for row in rows:
        print(f"{row['mode']:<12} {row['steps_per_s']:>8,.0f} "
              f"{row['get_action_p50_ms']:>10.1f} / {row['get_action_p99_ms']:<9.1f} "
              f"{row['request_p50_ms']:>10.1f} / {row['request_p99_ms']:<10.1f} "
              f"{row['rss_start_mib']:>8.0f} / {row['rss_end_mib']:<7.0f} "
              f"{row['rss_slope_mib_per_min']:>8.2f} "
              f"{row['client_errors']:>7} {row['episodes_dropped']:>8}")  # fmt: skip
        if row["error_kinds"] or row["sampler_error"]:
            print(f"  {row['mode']}: errors {row['error_kinds']}, sampler {row['sampler_error']}")
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
