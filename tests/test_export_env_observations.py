"""An exported policy takes the env's own observation (issue 46, build item 6): a game policy's
`rlflow.load_policy(...)` acts from PettingZoo's ``{"observation", "action_mask"}`` as
``env.observe(agent)`` gives it (one, a list, or a batched dict), still takes the flat vector,
and never chooses a masked action; the ONNX graph takes the flat vector, which
`flat_observations` makes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from rlflow import Trainer, load_policy
from rlflow.envs.flatten import flatten_observation
from rlflow.errors import ConfigError
from rlflow.export import EnvObservations, flat_observations
from rlflow.export.spaces import space_from_json, space_to_json

pytestmark = pytest.mark.timeout(300)

GAME = {
    "env": "pettingzoo.classic.tictactoe_v3",
    "num_workers": 0,
    "seed": 0,
    "train_batch_size": 256,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 1,
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("pettingzoo")
    path = tmp_path_factory.mktemp("ttt") / "policy"
    with Trainer("ppo", config=GAME, backend="local") as trainer:
        trainer.train()
        trainer.export_policy(path)
    return path


def random_positions(count: int, seed: int) -> list[tuple[Any, dict[str, Any]]]:
    """``count`` tic-tac-toe positions reached by random legal moves: (env, observation of
    the player to move) pairs, the observation exactly as ``env.observe(agent)`` gives it."""
    from pettingzoo.classic import tictactoe_v3

    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        env = tictactoe_v3.env()
        env.reset(seed=int(rng.integers(1 << 30)))
        for _ in range(int(rng.integers(0, 8))):
            agent = env.agent_selection
            if env.terminations[agent] or env.truncations[agent]:
                break
            legal = np.flatnonzero(env.observe(agent)["action_mask"])
            env.step(int(rng.choice(legal)))
        agent = env.agent_selection
        if not (env.terminations[agent] or env.truncations[agent]):
            out.append((env, env.observe(agent)))
    return out


def test_the_export_records_the_envs_own_observation_space(exported: Path) -> None:
    spec = json.loads((exported / "policy.json").read_text())
    env_space = space_from_json(spec["env_observation_space"])
    assert isinstance(env_space, spaces.Dict)
    assert list(env_space.spaces) == ["action_mask", "observation"]
    assert env_space["observation"].shape == (3, 3, 2)
    assert space_from_json(spec["observation_space"]).shape == (27,)  # 18 + the mask's 9


def test_a_loaded_game_policy_acts_from_env_observe_and_never_plays_an_illegal_move(
    exported: Path,
) -> None:
    policy = load_policy(exported, seed=0)
    positions = random_positions(300, seed=1)
    own = [obs for _, obs in positions]
    flat = np.stack([flatten_observation(policy.env_observations.space, obs) for obs in own])
    greedy = [policy.compute_single_action(obs) for obs in own]
    # The env's own observation and the flat vector (observation first, mask last) agree.
    assert greedy == [policy.compute_single_action(row) for row in flat]
    assert policy.compute_actions(own).tolist() == greedy  # a list of env observations
    assert policy.compute_actions(flat).tolist() == greedy  # the flat batch
    batched = {key: np.stack([obs[key] for obs in own]) for key in own[0]}  # a vector env's
    assert policy.compute_actions(batched).tolist() == greedy
    sampled = [policy.compute_single_action(obs, explore=True) for obs in own for _ in range(5)]
    for k, action in enumerate(greedy + sampled):
        obs = own[k if k < len(own) else (k - len(own)) // 5]
        assert obs["action_mask"][action] == 1, (k, action, obs["action_mask"])
    env, obs = positions[0]  # and the env takes the move
    env.step(policy.compute_single_action(obs))


def test_a_wrong_observation_names_the_part(exported: Path) -> None:
    policy = load_policy(exported)
    with pytest.raises(ConfigError, match="action_mask"):
        policy.compute_single_action({"observation": np.zeros((3, 3, 2), np.int8)})


def test_onnx_takes_the_flat_vector_flat_observations_makes(exported: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from rlflow.export.onnx import ONNX_FILE, export_onnx

    onnx_path = export_onnx(exported, exported / ONNX_FILE)
    session = ort.InferenceSession(str(onnx_path))
    own = [obs for _, obs in random_positions(50, seed=2)]
    flat = flat_observations(exported, own)
    assert flat.shape == (50, 27) and flat.dtype == np.float32
    (actions, *_) = session.run(None, {"obs": flat})
    assert actions.tolist() == load_policy(exported).compute_actions(own).tolist()
    meta = {p.key: p.value for p in onnx.load(str(onnx_path)).metadata_props}
    np.testing.assert_array_equal(flat_observations(json.loads(meta["rlflow_policy"]), own), flat)


def test_env_observations_of_other_structured_spaces() -> None:
    space = spaces.Tuple((spaces.Discrete(3), spaces.MultiDiscrete([2, 2])))
    observations = EnvObservations(space_from_json(space_to_json(space)))
    one = observations.one((2, np.array([1, 0])))
    assert one.tolist() == [[0, 0, 1, 0, 1, 1, 0]]
    batched = (np.array([2, 0]), np.array([[1, 0], [0, 1]]))  # a vector env's Tuple batch
    assert observations.batch(batched).tolist() == [[0, 0, 1, 0, 1, 1, 0], [1, 0, 0, 1, 0, 0, 1]]
    grid = EnvObservations(spaces.MultiDiscrete([3, 3]))
    one_hot = [[1, 0, 0, 0, 0, 1], [0, 1, 0, 0, 1, 0]]
    assert grid.batch(np.array([[0, 2], [1, 1]])).tolist() == one_hot
    assert grid.batch(np.ones((2, 6), np.float32)).shape == (2, 6)  # flat ones pass through
