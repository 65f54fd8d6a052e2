"""AlphaZero: PUCT selection and backup against hand-computed trees, batching with virtual loss,
masks, no state across games, the games it refuses, the shared evaluator, export and search
after loading (local backend)."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from rlflow import load_policy
from rlflow.algorithms import get_algorithm
from rlflow.algorithms.alpha_zero import AlphaZeroConfig, AlphaZeroPolicy
from rlflow.algorithms.alpha_zero.game import TurnGame, check_game, copy_game
from rlflow.algorithms.alpha_zero.search import Node, puct_scores, run_search
from rlflow.algorithms.alpha_zero.self_play import InferenceServer, play_games
from rlflow.envs.creator import config_env_creator
from rlflow.envs.flatten import ActionMaskBox
from rlflow.envs.multi_agent import MultiAgentEnv, MultiAgentStep
from rlflow.errors import ConfigError
from rlflow.trainer import Trainer
from rlflow.workers import RolloutWorker

pytestmark = pytest.mark.timeout(120)

TICTACTOE = "pettingzoo.classic.tictactoe_v3"


class Countdown(MultiAgentEnv):
    """Two players take 1 or 2 from a pile; who takes the last one wins. Observation: the pile
    / 3, then the mask of (take 1, take 2). Plain attributes: copied structurally."""

    def __init__(self, pile: int = 3, *, masked: bool = True, lock: bool = False) -> None:
        import gymnasium as gym

        self.possible_agents = ["A", "B"]
        self.agents: list[str] = []
        box = ActionMaskBox(np.zeros(3, np.float32), np.ones(3, np.float32), action_mask_size=2)
        plain = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        self.observation_spaces = {a: box if masked else plain for a in self.possible_agents}
        self.action_spaces = {a: gym.spaces.Discrete(2) for a in self.possible_agents}
        self.start, self.pile, self.mover = pile, pile, 0
        self.lock = threading.Lock() if lock else None

    def _obs(self) -> np.ndarray:
        return np.array([self.pile / 3, 1.0, float(self.pile >= 2)], np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self.pile, self.mover = self.start, 0
        self.agents = ["A"]
        return {"A": self._obs()}, {"A": {}}

    def step(self, actions: dict[str, int]) -> MultiAgentStep:
        me, other = self.possible_agents[self.mover], self.possible_agents[1 - self.mover]
        self.pile -= actions[me] + 1
        if self.pile <= 0:
            self.agents = []
            done = {me: True, other: True, "__all__": True}
            return MultiAgentStep(
                {me: self._obs(), other: self._obs()},
                {me: 1.0, other: -1.0},
                done,
                {me: False, other: False, "__all__": False},
                {me: {}, other: {}},
            )
        self.mover = 1 - self.mover
        self.agents = [other]
        return MultiAgentStep(
            {other: self._obs()},
            {me: 0.0, other: 0.0},
            {other: False, "__all__": False},
            {other: False, "__all__": False},
            {other: {}},
        )


def table_evaluator(values: dict[int, float]) -> Any:
    """Uniform priors over both actions; the value by pile; counts its calls."""

    def evaluate(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        evaluate.batches.append(len(obs))  # type: ignore[attr-defined]
        piles = np.rint(obs[:, 0] * 3).astype(int)
        return np.full((len(obs), 2), 0.5), np.array([values[p] for p in piles])

    evaluate.batches = []  # type: ignore[attr-defined]
    return evaluate


def countdown_root() -> Node:
    return Node(TurnGame.start(Countdown(3)), 2)


# -------------------------------------------------------------------------- PUCT and backup
def test_puct_scores_are_q_plus_u_and_illegal_actions_are_minus_infinity() -> None:
    node = Node(TurnGame.start(Countdown(3)), 2)
    node.legal = np.array([True, True, False])
    node.prior = np.array([0.5, 0.3, 0.2])
    node.visits = np.array([2.0, 1.0, 0.0])
    node.value_sum = np.array([1.0, -0.5, 0.0])
    scores = puct_scores(node, 1.5)
    # Q + 1.5 * P * sqrt(3) / (1 + N)
    assert scores[0] == pytest.approx(0.5 + 1.5 * 0.5 * math.sqrt(3) / 3)  # 0.9330127
    assert scores[1] == pytest.approx(-0.5 + 1.5 * 0.3 * math.sqrt(3) / 2)  # -0.1102886
    assert scores[2] == -math.inf
    node.legal = np.array([False, True, True])
    assert int(np.argmax(puct_scores(node, 1.5))) == 2  # 0 + 1.5 * 0.2 * sqrt(3) = 0.5196


def test_three_simulations_give_the_hand_computed_tree() -> None:
    # Pile 3, A to move; values for the mover: pile 2 -> 0.5, pile 1 -> -0.25; c_puct 1.
    # (1) tie at U = 0.5 -> take 1 (pile 2, B: +0.5) -> A's W[0] = -0.5.
    # (2) take 1: -0.5 + 0.5 * 1 / 2 = -0.25; take 2: 0 + 0.5 = 0.5 -> pile 1 (B: -0.25) -> +0.25.
    # (3) take 1: -0.5 + 0.5 * sqrt(2) / 2 = -0.146; take 2: 0.25 + 0.354 = 0.604 -> pile 1,
    #     B may only take 1 (its prior renormalized to 1): B wins, +1 for B, -1 for A.
    root = countdown_root()
    evaluate = table_evaluator({3: 0.0, 2: 0.5, 1: -0.25})
    batches = run_search([root], evaluate, num_simulations=3, c_puct=1.0, virtual_loss=1.0)
    np.testing.assert_allclose(root.visits, [1, 2])
    np.testing.assert_allclose(root.value_sum, [-0.5, 0.25 - 1.0])
    pile1, pile2 = root.children[1], root.children[0]
    np.testing.assert_allclose(pile1.prior, [1.0, 0.0])
    np.testing.assert_allclose(pile1.visits, [1, 0])
    np.testing.assert_allclose(pile1.value_sum, [1.0, 0.0])
    np.testing.assert_allclose(pile2.visits, [0, 0])
    assert pile1.children[0].terminal and pile1.children[0].game.position.rewards["B"] == 1.0
    assert evaluate.batches == [1, 1, 1] and batches == 3  # the root, then one leaf each


def test_virtual_loss_sends_a_batchs_second_simulation_down_another_path() -> None:
    root = countdown_root()
    evaluate = table_evaluator({3: 0.0, 2: 0.5, 1: -0.25})
    run_search(
        [root], evaluate, num_simulations=2, c_puct=1.0, virtual_loss=1.0, leaves_per_search=2
    )
    # Both leaves in one batch (after the root's); the same statistics as one at a time.
    assert evaluate.batches == [1, 2]
    np.testing.assert_allclose(root.visits, [1, 1])
    np.testing.assert_allclose(root.value_sum, [-0.5, 0.25])


def test_leaves_of_several_trees_are_evaluated_in_one_batch() -> None:
    roots = [countdown_root() for _ in range(5)]
    evaluate = table_evaluator({3: 0.0, 2: 0.5, 1: -0.25})
    run_search(roots, evaluate, num_simulations=2, c_puct=1.0)
    assert evaluate.batches == [5, 5, 5]
    for root in roots:
        np.testing.assert_allclose(root.visits, [1, 1])


def test_a_collision_is_taken_back() -> None:
    # Pile 2 with a huge c_puct: the second selection of the batch would reach the same
    # waiting leaf only if virtual loss did not count; with one action legal it must collide.
    root = Node(TurnGame.start(Countdown(1)), 2)  # pile 1: only "take 1", a terminal move
    evaluate = table_evaluator({1: 0.0})
    run_search([root], evaluate, num_simulations=4, c_puct=1.0, leaves_per_search=4)
    np.testing.assert_allclose(root.visits, [4, 0])
    np.testing.assert_allclose(root.value_sum, [4.0, 0.0])  # A takes the last one: +1 each
    game = TurnGame.start(Countdown(3))
    game.step(0)  # pile 2, B
    node = Node(game, 2)
    evaluate = table_evaluator({2: 0.0, 1: 0.3})
    run_search([node], evaluate, num_simulations=3, c_puct=100.0, leaves_per_search=3)
    # (1) take 1 -> pile 1, waiting; (2) take 2 -> terminal (B wins, +1); (3) take 1 again ->
    # the waiting leaf: a collision, taken back; the next round finishes the third simulation.
    assert node.visits.sum() == 3 and np.all(node.visits >= 1)


# ------------------------------------------------------------------------ masks and state
def tictactoe() -> Any:
    config = SimpleNamespace(env=TICTACTOE, env_config={}, env_wrappers=(), groups=None)
    return config_env_creator(config)()


def test_illegal_actions_are_never_visited_even_with_all_prior_on_them() -> None:
    game = TurnGame.start(tictactoe(), seed=0)
    for action in (4, 0, 8):
        game.step(action)

    def evaluate(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        priors = 1.0 - obs[:, -9:]  # all the mass on the illegal squares
        return priors / priors.sum(1, keepdims=True), np.zeros(len(obs))

    root = Node(game, 9)
    run_search([root], evaluate, num_simulations=60, c_puct=1.5, leaves_per_search=4)
    stack = [root]
    while stack:
        node = stack.pop()
        if node.legal is not None:
            assert np.all(node.visits[~node.legal] == 0)
            assert set(node.children) <= set(np.flatnonzero(node.legal))
        stack.extend(node.children.values())
    assert root.visits.sum() == 60


def local_worker(**fields: Any) -> RolloutWorker:
    settings = {"num_workers": 0, "seed": 3, "num_simulations": 8, "games_per_worker": 3}
    config = AlphaZeroConfig(**{**settings, **fields})
    return RolloutWorker(config, AlphaZeroPolicy, worker_index=0)


def test_games_are_the_same_whatever_was_played_before(local_backend: None) -> None:
    worker = local_worker()
    first = play_games(worker, None, 11)
    play_games(worker, None, 12)  # other games on the same envs in between
    again = play_games(worker, None, 11)
    np.testing.assert_array_equal(first.obs, again.obs)
    np.testing.assert_array_equal(first.mcts_policy, again.mcts_policy)
    np.testing.assert_array_equal(first.value_target, again.value_target)
    # Visit counts only on legal squares; every value target an outcome for the mover.
    assert np.all(first.mcts_policy[first.obs[:, -9:] < 0.5] == 0)
    np.testing.assert_allclose(first.mcts_policy.sum(1), 1.0, rtol=1e-6)
    assert set(np.unique(first.value_target)) <= {-1.0, 0.0, 1.0}
    assert first.simulations == 8 * len(first.obs)


def test_value_targets_alternate_with_the_mover(local_backend: None) -> None:
    worker = local_worker(games_per_worker=1, temperature_moves=0)
    games = play_games(worker, None, 5)
    (episode,) = games.episodes
    z = games.value_target
    assert len(z) == episode.length
    if z[0] != 0:  # a decided game: the movers' outcomes alternate in sign
        assert np.all(z[1:] == -z[:-1])


# --------------------------------------------------------------------------- refused envs
def test_copy_game_copies_the_position_not_the_constructor() -> None:
    env = tictactoe()
    game = TurnGame.start(env, seed=0)
    game.step(4)
    copy = copy_game(env)
    assert copy is not env and copy.env.env is not env.env.env
    moved = TurnGame(copy, game.position, 9)
    moved.step(0)
    assert game.legal()[0] and not game.legal()[4]  # the original did not move


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (lambda: Countdown(3, masked=False), "action mask"),
        (lambda: Countdown(3, lock=True), "cannot be copied"),
    ],
)
def test_games_the_search_cannot_play_are_refused_before_any_actor_starts(
    local_backend: None, env: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        check_game(env(), "test")
    with pytest.raises(ConfigError, match=message):
        Trainer("alpha_zero", env=env, backend="local", num_workers=0)


def test_a_single_agent_env_is_refused(local_backend: None) -> None:
    with pytest.raises(ConfigError, match=r"alpha_zero.*CartPole-v1.*action mask"):
        Trainer("alpha_zero", env="CartPole-v1", backend="local", num_workers=0)


def test_simultaneous_moves_are_refused() -> None:
    config = SimpleNamespace(
        env="pettingzoo.classic.rps_v2", env_config={}, env_wrappers=(), groups=None
    )
    with pytest.raises(ConfigError, match=r"no action mask|not turn-based"):
        check_game(config_env_creator(config)(), "rps")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"evaluator": "gpu"}, r"AlphaZeroConfig.evaluator='gpu' must be one of"),
        ({"num_simulations": 0}, r"AlphaZeroConfig.num_simulations"),
        ({"dirichlet_epsilon": 1.5}, r"AlphaZeroConfig.dirichlet_epsilon"),
        ({"observation_filter": "MeanStdFilter"}, r"observation_filter.*NoFilter"),
        ({"evaluator": "shared", "num_workers": 0}, r"'shared' needs num_workers >= 1"),
    ],
)
def test_bad_settings_name_the_key(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AlphaZeroConfig(**fields)


# ------------------------------------------------------------- the plan, shared evaluator
def test_the_shared_evaluator_plays_the_same_games_as_the_local_one(local_backend: None) -> None:
    results = {}
    for evaluator in ("local", "shared"):
        trainer = Trainer(
            "alpha_zero",
            backend="local",
            num_workers=2,
            seed=1,
            num_simulations=6,
            games_per_worker=2,
            evaluator=evaluator,
            num_sgd_iter=2,
            sgd_minibatch_size=16,
        )
        try:
            plan = trainer._plan.describe().to_mermaid()
            assert "StoreGames" in plan and "TrainOnReplay" in plan
            first, second = trainer.train(), trainer.train()
            results[evaluator] = (first["info"]["alpha_zero"], second["info"]["learner"])
            assert second["num_env_steps_trained"] == 2 * 2 * 16
        finally:
            trainer.stop()
    local, shared = results["local"], results["shared"]
    assert shared[0]["evaluator"] == "shared"
    for key in ("games", "positions", "simulations", "evaluations"):
        assert local[0][key] == shared[0][key]
    assert local[1]["default_policy"]["total_loss"] == pytest.approx(
        shared[1]["default_policy"]["total_loss"]
    )


def test_an_export_acts_with_and_without_search(local_backend: None, tmp_path: Path) -> None:
    trainer = Trainer(
        "alpha_zero",
        backend="local",
        num_workers=0,
        seed=2,
        num_simulations=4,
        games_per_worker=1,
        evaluation_games=4,
    )
    try:
        vs_random = trainer.train()["info"]["alpha_zero"]["vs_random"]
        rates = [vs_random["win_rate"], vs_random["draw_rate"], vs_random["loss_rate"]]
        assert sum(rates) == pytest.approx(1.0) and all(r in (0, 0.25, 0.5, 0.75, 1) for r in rates)
        assert set(vs_random["seats"]) == {"player_1", "player_2"}  # two games from each seat
        path = trainer.export_policy(tmp_path / "az")
        policy = trainer.workers.local_worker().get_policy()
    finally:
        trainer.stop()
    loaded = load_policy(path)
    env = tictactoe()
    obs, _ = env.reset(seed=0)
    (player,) = obs
    env.step({player: 4})
    (player,) = env.agents
    import torch

    seen = env.env.env.observe(player)  # the mover's view, flattened as rlflow does
    flat = env.flatteners[player](seen)
    greedy = loaded.compute_single_action(flat)
    with torch.inference_mode():
        logits, _ = policy.model(torch.from_numpy(flat[None]))
    assert greedy == int(logits.argmax()) and greedy != 4
    searched = loaded.compute_single_action(flat, num_simulations=30, env=env)
    assert searched != 4 and 0 <= searched < 9
    assert env.agents == [player]  # the env was copied, not stepped
    with pytest.raises(ConfigError, match="needs env="):
        loaded.compute_single_action(flat, num_simulations=5)
    assert get_algorithm("alpha_zero").policy_cls is AlphaZeroPolicy


def test_the_inference_server_batches_the_calls_that_wait_and_answers_each_its_rows() -> None:
    server = InferenceServer(5, 2, (4,), "relu")
    own = server.evaluate_batch
    started, release = threading.Event(), threading.Event()

    def slow(obs: np.ndarray) -> Any:
        if not started.is_set():
            started.set()
            assert release.wait(10)
        return own(obs)

    server.evaluate_batch = slow
    rng = np.random.default_rng(0)
    inputs = [rng.random((k, 5), dtype=np.float32) for k in (1, 2, 3)]
    inputs = [np.concatenate([x[:, :3], np.ones((len(x), 2), np.float32)], 1) for x in inputs]
    answers: dict[int, Any] = {}

    def call(k: int) -> None:
        answers[k] = server.evaluate(inputs[k])

    threads = [threading.Thread(target=call, args=(0,))]
    threads[0].start()
    assert started.wait(10)  # the first call computes; the next two wait for it
    threads += [threading.Thread(target=call, args=(k,)) for k in (1, 2)]
    for t in threads[1:]:
        t.start()
    deadline = time.monotonic() + 10
    while len(server._queue) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    release.set()
    for t in threads:
        t.join(10)
    assert server.stats() == {"batches": 2, "requests": 3}  # the two that waited: one batch
    for k, x in enumerate(inputs):
        priors, values = own(x)
        np.testing.assert_allclose(answers[k][0], priors, rtol=1e-6)
        np.testing.assert_allclose(answers[k][1], values, rtol=1e-6)

    def broken(obs: np.ndarray) -> Any:
        raise RuntimeError("network failed")

    server.evaluate_batch = broken
    with pytest.raises(RuntimeError, match="network failed"):
        server.evaluate(inputs[0])
