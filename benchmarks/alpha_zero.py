"""AlphaZero: the search's simulations per second with and without the shared evaluator, and
the tic-tac-toe and connect-four figures of issue 47 (with their curves).

Parts (``--part``, default throughput then tictactoe):

- ``throughput``: AlphaZero's plan on Ray with ``--workers`` rollout workers (default 2), each
  playing ``--games`` games at once with ``--simulations`` per move, first with
  ``evaluator="local"`` (every worker evaluates its leaves with its own copy of the network),
  then ``"shared"`` (one `InferenceServer` actor batches every worker's leaves). Reported per
  iteration after the first: simulations per second (all workers' simulations over the slowest
  worker's search time), leaves evaluated, and the wall time of the iteration.
- ``tictactoe``: the tuned config (`alpha_zero/tuned/pettingzoo.classic.tictactoe_v3.yaml`) on
  the local backend for ``--iterations``; every ``--eval-every`` iterations it plays, with search
  (``--eval-simulations``), ``--eval-games`` games from each seat against a perfect minimax player
  (one of the optimal moves at random) and against a uniformly random legal player. The target:
  no loss to minimax from either seat and >= 0.95 wins against random from either seat.
  The curve goes to ``benchmarks/results/alpha_zero_tictactoe.jsonl``.
- ``connect_four``: the tuned connect-four config (``num_workers`` 0 unless ``--set``) on the
  local backend for ``--minutes`` of training (the seconds inside ``train()``), the network
  saved every ``--save-every`` iterations under ``--checkpoints`` with its iteration, self-play
  games and training seconds.
- ``connect_four_eval``: every saved network of ``--checkpoints`` whose iteration is a multiple
  of ``--eval-every`` and not yet in ``--out`` (rerun it while training goes on), with search of
  each ``--eval-simulations``, from each seat: against the depth-``--depth`` (default 4)
  alpha-beta player of `rlflow.testing.connect_four` one game from each of the ``7 **
  --opening-plies`` openings (default 2: the 49 pairs of first moves), and ``--eval-games``
  games against a uniformly random legal player; wins, draws and losses as JSON lines (the
  curve; ``benchmarks/results/alpha_zero_connect_four.jsonl``). The target: >= 0.95 wins
  against random and >= 0.6 wins or draws against depth-4 alpha-beta, from either seat.

    python benchmarks/alpha_zero.py [--part throughput|tictactoe] [--workers 2] [--games 16]
        [--simulations 25] [--iterations 120] [--eval-every 20] [--eval-games 100]
        [--eval-simulations 100,400] [--set num_simulations=50] [--out results.jsonl]
    python benchmarks/alpha_zero.py --part connect_four --minutes 55 --save-every 20
        --checkpoints /tmp/az_c4 --set num_simulations=25 --set games_per_worker=16
    python benchmarks/alpha_zero.py --part connect_four_eval --checkpoints /tmp/az_c4
        --eval-every 40 --eval-simulations 25 --eval-games 20 --depth 4
        --out benchmarks/results/alpha_zero_connect_four.jsonl
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from rlflow import flow
from rlflow.algorithms import tuned_config
from rlflow.algorithms.alpha_zero.game import TurnGame
from rlflow.algorithms.alpha_zero.model import network_evaluator
from rlflow.algorithms.alpha_zero.search import Node, run_search, select_action
from rlflow.envs.creator import config_env_creator
from rlflow.trainer import Trainer

TICTACTOE = "pettingzoo.classic.tictactoe_v3"
CONNECT_FOUR = "pettingzoo.classic.connect_four_v3"
RESULTS = Path(__file__).parent / "results" / "alpha_zero_tictactoe.jsonl"


# ------------------------------------------------------------------------------ throughput
def throughput(workers: int, games: int, simulations: int, iterations: int) -> None:
    """Simulations per second with each evaluator, on Ray."""
    flow.init(backend="ray", num_cpus=max(2, workers + 1))
    try:
        for evaluator in ("local", "shared"):
            trainer = Trainer(
                "alpha_zero",
                num_workers=workers,
                seed=0,
                games_per_worker=games,
                num_simulations=simulations,
                evaluator=evaluator,
            )
            try:
                trainer.train()  # the workers start, the first games
                for _ in range(iterations):
                    start = time.perf_counter()
                    info = trainer.train()["info"]["alpha_zero"]
                    wall = time.perf_counter() - start
                    print(
                        f"{evaluator:6s} workers={workers} games={games} sims={simulations}: "
                        f"{info['simulations_per_s']:8.0f} simulations/s, "
                        f"{info['evaluations']} leaves, {info['positions']} positions, "
                        f"iteration {wall:.1f} s",
                        flush=True,
                    )
            finally:
                trainer.stop()
    finally:
        flow.shutdown()


# ------------------------------------------------------------------------------ tic-tac-toe
LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def board_of(obs: np.ndarray) -> tuple[int, ...]:
    """+1 the mover's marks, -1 the opponent's, by action (flat obs: square a at 2a, 2a+1)."""
    planes = obs[:18].reshape(9, 2)
    return tuple(int(planes[a, 0]) - int(planes[a, 1]) for a in range(9))


@functools.cache
def negamax(board: tuple[int, ...]) -> int:
    """The mover's value with perfect play (1, 0, -1)."""
    if any(sum(board[i] for i in line) == -3 for line in LINES):
        return -1
    empty = [a for a in range(9) if board[a] == 0]
    if not empty:
        return 0
    return max(-negamax(_after(board, a)) for a in empty)


def _after(board: tuple[int, ...], action: int) -> tuple[int, ...]:
    return tuple(-(1 if a == action else v) for a, v in enumerate(board))


Player = Callable[[list[TurnGame]], list[int]]


def minimax_player(rng: np.random.Generator) -> Player:
    """One of the optimal moves, at random."""

    def play(games: list[TurnGame]) -> list[int]:
        out = []
        for g in games:
            board = board_of(g.position.obs)  # type: ignore[arg-type]
            empty = [a for a in range(9) if board[a] == 0]
            values = {a: -negamax(_after(board, a)) for a in empty}
            best = max(values.values())
            out.append(int(rng.choice([a for a in empty if values[a] == best])))
        return out

    return play


def random_player(rng: np.random.Generator) -> Player:
    """A uniformly random legal move."""
    return lambda games: [int(rng.choice(np.flatnonzero(g.legal()))) for g in games]


def search_player(net: Any, num_simulations: int, c_puct: float, actions: int) -> Player:
    """AlphaZero with search (all games' trees at once), the most visited move."""
    evaluate, rng = network_evaluator(net), np.random.default_rng(0)

    def play(games: list[TurnGame]) -> list[int]:
        roots = [Node(g, actions) for g in games]
        run_search(roots, evaluate, num_simulations=num_simulations, c_puct=c_puct)
        return [select_action(r, explore=False, rng=rng) for r in roots]

    return play


def play_match(
    make_env: Callable[[], Any], me: Player, other: Player, *, games: int, seat: int
) -> dict[str, int]:
    """``games`` games at once, ``me`` in seat ``seat`` (0 moves first): wins, draws, losses."""
    tables = [TurnGame.start(make_env(), seed=k) for k in range(games)]
    mine: dict[int, str] = {}
    active, move = list(range(games)), 0
    while active:
        turn = move % 2 == seat
        actions = (me if turn else other)([tables[k] for k in active])
        for k, a in zip(active, actions, strict=True):
            if turn:
                mine.setdefault(k, str(tables[k].position.player))
            tables[k].step(a)
        move += 1
        active = [k for k in active if not tables[k].position.over]
    out = {"win": 0, "draw": 0, "loss": 0}
    for k, table in enumerate(tables):
        r = table.position.rewards[mine[k]]
        out["win" if r > 0 else "loss" if r < 0 else "draw"] += 1
    return out


def tictactoe(
    iterations: int,
    eval_every: int,
    eval_games: int,
    eval_sims: list[int],
    overrides: dict[str, Any],
    results: Path,
) -> None:
    """Train with the tuned config (and ``overrides``); the curve against minimax and random
    from both seats, with search of each of ``eval_sims`` simulations."""
    flow.init(backend="local")
    config = tuned_config("alpha_zero", TICTACTOE).replace(**overrides)
    make = config_env_creator(
        SimpleNamespace(env=TICTACTOE, env_config={}, env_wrappers=(), groups=None)
    )
    trainer = Trainer("alpha_zero", backend="local", config=config, seed=0)
    rng = np.random.default_rng(0)
    start, train_s = time.perf_counter(), 0.0
    results.parent.mkdir(parents=True, exist_ok=True)
    try:
        with results.open("w") as out:
            for it in range(1, iterations + 1):
                t = time.perf_counter()
                result = trainer.train()
                train_s += time.perf_counter() - t
                if it % eval_every:
                    continue
                net = trainer.workers.local_worker().get_policy().model
                for sims in eval_sims:
                    me = search_player(net, sims, config.c_puct, 9)
                    row: dict[str, Any] = {
                        "iteration": it,
                        "games": result["episodes_total"],
                        "train_s": round(train_s, 1),
                        "eval_simulations": sims,
                        "overrides": overrides,
                    }
                    for seat in (0, 1):
                        row[f"seat{seat}_vs_minimax"] = play_match(
                            make, me, minimax_player(rng), games=eval_games, seat=seat
                        )
                        row[f"seat{seat}_vs_random"] = play_match(
                            make, me, random_player(rng), games=eval_games, seat=seat
                        )
                    row["wall_s"] = round(time.perf_counter() - start, 1)
                    print(json.dumps(row), flush=True)
                    out.write(json.dumps(row) + "\n")
    finally:
        trainer.stop()
        flow.shutdown()


def connect_four_train(
    minutes: float, save_every: int, checkpoints: Path, overrides: dict[str, Any]
) -> None:
    """Connect four with the tuned file on the local backend (``num_workers`` 0 unless set) for
    ``minutes`` of training; the network saved every ``save_every`` iterations to
    ``checkpoints/iter_XXXXX.pt`` with the iteration, the self-play games and the training
    seconds so far (evaluated by ``connect_four_eval``)."""
    flow.init(backend="local")
    config = tuned_config("alpha_zero", CONNECT_FOUR).replace(**{"num_workers": 0, **overrides})
    trainer = Trainer("alpha_zero", backend="local", config=config, seed=0)
    checkpoints.mkdir(parents=True, exist_ok=True)
    train_s = 0.0
    try:
        while train_s < minutes * 60:
            t = time.perf_counter()
            result = trainer.train()
            train_s += time.perf_counter() - t
            info = result["info"]["alpha_zero"]
            print(
                f"iteration {trainer.iteration}: {result['episodes_total']} games, "
                f"{train_s:.0f} s, {info['simulations_per_s']:.0f} sims/s",
                flush=True,
            )
            if trainer.iteration % save_every == 0:
                net = trainer.workers.local_worker().get_policy().model
                torch.save(
                    {
                        "iteration": trainer.iteration,
                        "games": result["episodes_total"],
                        "train_s": round(train_s, 1),
                        "overrides": overrides,
                        "hidden": list(config.model.hidden),
                        "activation": config.model.activation,
                        "c_puct": config.c_puct,
                        "state_dict": net.state_dict(),
                    },
                    checkpoints / f"iter_{trainer.iteration:05d}.pt",
                )
    finally:
        trainer.stop()
        flow.shutdown()


def play_from(
    make_env: Callable[[], Any],
    me: Player,
    other: Player,
    *,
    openings: list[tuple[int, ...]],
    seat: int,
) -> dict[str, int]:
    """One game per opening (its moves played first, for both sides), all at once, ``me`` in
    seat ``seat`` (0 moves first); ``me``'s wins, draws and losses."""
    tables = [TurnGame.start(make_env(), seed=k) for k in range(len(openings))]
    first = [str(t.position.player) for t in tables]
    for table, opening in zip(tables, openings, strict=True):
        for a in opening:
            table.step(a)
    plies = len(openings[0]) if openings else 0
    active, move = list(range(len(tables))), plies
    active = [k for k in active if not tables[k].position.over]
    while active:
        turn = move % 2 == seat
        actions = (me if turn else other)([tables[k] for k in active])
        for k, a in zip(active, actions, strict=True):
            tables[k].step(a)
        move += 1
        active = [k for k in active if not tables[k].position.over]
    out = {"win": 0, "draw": 0, "loss": 0}
    for k, table in enumerate(tables):
        rewards = table.position.rewards
        mine = first[k] if seat == 0 else next(a for a in rewards if a != first[k])
        r = rewards[mine]
        out["win" if r > 0 else "loss" if r < 0 else "draw"] += 1
    return out


def load_net(path: Path) -> tuple[Any, dict[str, Any]]:
    """A saved connect-four network (``connect_four_train``) and its record."""
    from rlflow.algorithms.alpha_zero.model import AlphaZeroNet

    record = torch.load(path, weights_only=False)
    net = AlphaZeroNet(91, 7, tuple(record["hidden"]), record["activation"])
    net.load_state_dict(record["state_dict"])
    net.eval()
    return net, record


def connect_four_eval(
    checkpoints: Path,
    eval_sims: list[int],
    depth: int,
    random_games: int,
    results: Path,
    every: int,
    plies: int = 2,
) -> None:
    """Evaluate every saved network in ``checkpoints`` whose iteration is a multiple of
    ``every`` and not yet in ``results`` (appended as JSON lines; rerun it while training
    goes on): with search of each of ``eval_sims`` simulations (no noise, the most visited
    move), from each seat, against the depth-``depth`` alpha-beta player
    (`rlflow.testing.connect_four`; equal-best moves drawn with a seeded generator) one game
    from each of the ``7 ** plies`` openings of ``plies`` moves (2: both sides' first moves,
    every pair of columns: 49 games), and
    against a uniformly random legal player ``random_games`` games."""
    from rlflow.testing.connect_four import AlphaBetaPlayer

    make = config_env_creator(
        SimpleNamespace(env=CONNECT_FOUR, env_config={}, env_wrappers=(), groups=None)
    )
    openings = [tuple(int(c) for c in np.unravel_index(k, (7,) * plies)) for k in range(7**plies)]
    done = set()
    if results.exists():
        for line in results.read_text().splitlines():
            row = json.loads(line)
            key = (row["eval_simulations"], row["alpha_beta_depth"], row["opening_plies"])
            done.add((row["iteration"], *key))
    results.parent.mkdir(parents=True, exist_ok=True)
    for path in sorted(checkpoints.glob("iter_*.pt")):
        net, record = load_net(path)
        if record["iteration"] % every:
            continue
        for sims in eval_sims:
            if (record["iteration"], sims, depth, plies) in done:
                continue
            start = time.perf_counter()
            me = search_player(net, sims, record["c_puct"], 7)
            rng = np.random.default_rng(record["iteration"])
            row: dict[str, Any] = {
                "iteration": record["iteration"],
                "games": record["games"],
                "train_s": record["train_s"],
                "overrides": record["overrides"],
                "eval_simulations": sims,
                "alpha_beta_depth": depth,
                "opening_plies": plies,
            }
            for seat in (0, 1):
                row[f"seat{seat}_vs_alpha_beta"] = play_from(
                    make, me, AlphaBetaPlayer(depth, rng), openings=openings, seat=seat
                )
                row[f"seat{seat}_vs_random"] = play_from(
                    make, me, random_player(rng), openings=[()] * random_games, seat=seat
                )
            row["eval_s"] = round(time.perf_counter() - start, 1)
            print(json.dumps(row), flush=True)
            with results.open("a") as out:
                out.write(json.dumps(row) + "\n")


def main() -> None:
    """Parse the arguments and run the parts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part",
        choices=["throughput", "tictactoe", "connect_four", "connect_four_eval"],
        default=None,
    )
    parser.add_argument("--depth", type=int, default=4, help="the alpha-beta player's plies")
    parser.add_argument("--opening-plies", type=int, default=2, help="connect four's openings")
    parser.add_argument("--minutes", type=float, default=15.0, help="connect four's training")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--games", type=int, default=16)
    parser.add_argument("--simulations", type=int, default=25)
    parser.add_argument("--throughput-iterations", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=120)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--eval-games", type=int, default=100)
    parser.add_argument("--eval-simulations", default="100", help="comma-separated")
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE (an int/float)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--save-every", type=int, default=20)
    parser.add_argument("--checkpoints", type=Path, default=Path("/tmp/az_c4"))
    args = parser.parse_args()
    if args.part in (None, "throughput"):
        throughput(args.workers, args.games, args.simulations, args.throughput_iterations)
    overrides = {k: _number(v) for k, v in (item.split("=", 1) for item in args.set)}
    if args.part == "connect_four":
        connect_four_train(args.minutes, args.save_every, args.checkpoints, overrides)
    if args.part == "connect_four_eval":
        sims = [int(x) for x in args.eval_simulations.split(",")]
        connect_four_eval(
            args.checkpoints,
            sims,
            args.depth,
            args.eval_games,
            args.out,
            args.eval_every,
            args.opening_plies,
        )
    if args.part in (None, "tictactoe"):
        overrides = {k: _number(v) for k, v in (item.split("=", 1) for item in args.set)}
        sims = [int(x) for x in args.eval_simulations.split(",")]
        tictactoe(args.iterations, args.eval_every, args.eval_games, sims, overrides, args.out)


def _number(text: str) -> int | float:
    return int(text) if text.lstrip("-").isdigit() else float(text)


if __name__ == "__main__":
    main()
