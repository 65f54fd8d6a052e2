"""Exported policies: rebuilt without Ray, the same greedy actions as the trainer, safe files."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

import rlflow
from rlflow import Trainer
from rlflow.errors import ConfigError
from rlflow.export import actor_export, load_policy, space_from_json, space_to_json
from rlflow.export.files import WEIGHTS_FILE
from rlflow.models.actors import ActorExport, ExportableActor
from rlflow.ops.learner_thread import stop_learner_threads

pytestmark = pytest.mark.timeout(300)

# Iterations by steps alone, not by the replay and async algorithms' 1 s floor.
SMALL = {"backend": "local", "seed": 0, "model": {"hidden": (16,)}, "min_time_s_per_iteration": 0.0}
RUNS: dict[str, dict[str, Any]] = {
    "ppo": {"num_workers": 0, "train_batch_size": 128, "sgd_minibatch_size": 64},
    "dqn": {"num_workers": 0, "learning_starts": 32, "train_batch_size": 32, "dueling": True},
    "impala": {"num_workers": 1, "rollout_fragment_length": 10, "train_batch_size": 20},
    "ppo_box": {"env": "Pendulum-v1", "num_workers": 0, "train_batch_size": 128},
}


def _observations(trainer: Trainer, n: int = 100) -> np.ndarray:
    space = trainer.workers.local_worker().get_policy().observation_space
    rng = np.random.default_rng(1)
    low = np.maximum(space.low, -3.0)
    high = np.minimum(space.high, 3.0)
    return rng.uniform(low, high, size=(n, *space.shape)).astype(space.dtype)


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each run trained 2 iterations and exported, with its observations and greedy actions."""
    root = tmp_path_factory.mktemp("exports")
    out: dict[str, Any] = {}
    for name, fields in RUNS.items():
        algo = name.split("_")[0]
        with Trainer(algo, **({"env": "CartPole-v1"} | SMALL | fields)) as trainer:
            trainer.train()
            trainer.train()
            stop_learner_threads(trainer.workers.local_worker())  # IMPALA's: weights hold still
            obs = _observations(trainer)
            actions = trainer.compute_actions(obs)
            single = trainer.compute_single_action(obs[0])
            path = trainer.export_policy(root / name)
        out[name] = {"path": path, "obs": obs, "actions": actions, "single": single}
    return out


LOADER = """
import json, sys
import numpy as np
import rlflow
jobs = json.loads(sys.stdin.read())
out = {}
for name, job in jobs.items():
    policy = rlflow.load_policy(job["path"])
    obs = np.asarray(job["obs"], dtype=job["dtype"])
    out[name] = policy.compute_actions(obs).tolist()
assert "ray" not in sys.modules, "loading a policy imported ray"
print(json.dumps(out))
"""


def test_loaded_without_ray_acts_as_the_trainer(exports: dict[str, Any]) -> None:
    jobs = {
        name: {"path": e["path"], "obs": e["obs"].tolist(), "dtype": str(e["obs"].dtype)}
        for name, e in exports.items()
    }
    done = subprocess.run(
        [sys.executable, "-c", LOADER],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(Path(rlflow.__file__).parents[1])},
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    for name, e in exports.items():
        assert len(e["actions"]) == 100
        np.testing.assert_array_equal(np.asarray(got[name]), e["actions"], err_msg=name)
    # the trained policies are not constant: the comparison covers both actions
    assert len(set(exports["ppo"]["actions"].tolist())) == 2


def test_in_process_load_matches_and_single_action(exports: dict[str, Any]) -> None:
    for name, e in exports.items():
        policy = load_policy(e["path"])
        np.testing.assert_array_equal(policy.compute_actions(e["obs"]), e["actions"])
        single = policy.compute_single_action(e["obs"][0])
        np.testing.assert_array_equal(single, e["single"])
        if name != "ppo_box":
            assert isinstance(single, int) and single == e["actions"][0]
    box = load_policy(exports["ppo_box"]["path"])
    actions = box.compute_actions(exports["ppo_box"]["obs"], explore=True)
    assert actions.min() >= -2.0 and actions.max() <= 2.0  # clipped to Pendulum's bounds


def test_exploring_actions_follow_the_seed(exports: dict[str, Any]) -> None:
    for name in ("ppo", "dqn", "ppo_box"):
        obs = exports[name]["obs"]
        a = load_policy(exports[name]["path"], seed=3).compute_actions(obs, explore=True)
        b = load_policy(exports[name]["path"], seed=3).compute_actions(obs, explore=True)
        np.testing.assert_array_equal(a, b)
    ppo = load_policy(exports["ppo_box"]["path"], seed=3)
    first = ppo.compute_actions(exports["ppo_box"]["obs"], explore=True)
    ppo.seed(4)
    assert not np.array_equal(first, ppo.compute_actions(exports["ppo_box"]["obs"], explore=True))


def test_spec_records_spaces_model_and_env(exports: dict[str, Any]) -> None:
    spec = json.loads((Path(exports["dqn"]["path"]) / "policy.json").read_text())
    assert spec["algorithm"] == "dqn"
    assert spec["policy_class"] == "rlflow.algorithms.dqn.policy.DQNPolicy"
    assert spec["actor_class"] == "rlflow.algorithms.dqn.actor.QActor"
    assert spec["actor_options"]["hidden"] == [16] and spec["actor_options"]["dueling"] is True
    assert spec["action_space"] == {"type": "Discrete", "n": 2, "start": 0}
    assert spec["env"]["id"] == "CartPole-v1"
    ppo = json.loads((Path(exports["ppo"]["path"]) / "policy.json").read_text())
    assert ppo["actor_options"] == {"hidden": [16], "activation": "tanh", "shared": False}


class _Payload:
    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (Path(os.environ["RLFLOW_TEST_MARKER"]),))


def test_a_pickled_payload_is_refused(
    exports: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    monkeypatch.setenv("RLFLOW_TEST_MARKER", str(marker))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "policy.json").write_bytes((Path(exports["ppo"]["path"]) / "policy.json").read_bytes())
    torch.save({"w": _Payload()}, bad / WEIGHTS_FILE)
    with pytest.raises(ConfigError, match="refused"):
        load_policy(bad)
    with open(bad / WEIGHTS_FILE, "wb") as f:
        pickle.dump(_Payload(), f, protocol=2)  # a plain pickle, not torch's format
    with pytest.raises(ConfigError, match="refused"):
        load_policy(bad)
    assert not marker.exists()


def test_bad_paths_are_config_errors(exports: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such directory"):
        load_policy(tmp_path / "missing")
    with pytest.raises(ConfigError, match=r"no policy\.json"):
        load_policy(tmp_path)
    (tmp_path / "policy.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not readable JSON"):
        load_policy(tmp_path)
    (tmp_path / "policy.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ConfigError, match="not an rlflow-policy"):
        load_policy(tmp_path)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    # A copy of an export to replace: the module's own ppo export stays as the other tests read it.
    exported = shutil.copytree(exports["ppo"]["path"], tmp_path / "exported")
    with Trainer("pg", env="CartPole-v1", **SMALL) as trainer:
        with pytest.raises(ConfigError, match="is not an exported policy"):
            trainer.export_policy(taken)
        with pytest.raises(ConfigError, match="no policy 'nope'"):
            trainer.compute_actions(exports["ppo"]["obs"], policy_id="nope")
        with pytest.raises(ConfigError, match="not a batch"):
            trainer.compute_actions(exports["ppo"]["obs"][0])
        again = trainer.export_policy(exported)  # an export is replaced
    assert json.loads((Path(again) / "policy.json").read_text())["algorithm"] == "pg"


def test_spaces_round_trip_through_json() -> None:
    for space in (
        spaces.Box(-np.inf, np.inf, (3,), np.float32),
        spaces.Box(0, 255, (84, 84, 4), np.uint8),
        spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, 2.0]), (2,), np.float64),
        spaces.Discrete(5, start=2),
        spaces.MultiDiscrete([3, 4]),
        spaces.MultiDiscrete([3, 4], start=[1, -2]),
        spaces.Dict({"b": spaces.Discrete(2), "a": spaces.Tuple((spaces.MultiBinary(3),))}),
    ):
        text = json.dumps(space_to_json(space), allow_nan=False)  # strict JSON
        assert space_from_json(json.loads(text)) == space
    ordered = spaces.Dict(OrderedDict([("z", spaces.Discrete(2)), ("a", spaces.Discrete(3))]))
    assert list(space_from_json(space_to_json(ordered)).spaces) == ["z", "a"]  # kept, not sorted
    with pytest.raises(ConfigError, match="cannot export"):
        space_to_json(spaces.Text(4))
    with pytest.raises(ConfigError, match="bad space"):
        space_from_json({"type": "Box", "low": 0})


class _ConstantActor(ExportableActor):
    """A custom exportable actor: always ``action``, exploring or not."""

    def __init__(self, observation_space: Any, action_space: Any, *, action: int) -> None:
        super().__init__()
        self.action = torch.nn.Parameter(torch.tensor(float(action)))

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        return self.action.round().long().expand(obs.shape[0])


class _HookPolicy:
    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(3)

    def export_model(self) -> ActorExport:
        return ActorExport(_ConstantActor, {"action": 0}, {"action": np.array(2.0)})


def test_a_policy_class_exports_its_own_actor(tmp_path: Path) -> None:
    from rlflow.config import AlgorithmConfig
    from rlflow.export import export_policy

    path = export_policy(
        _HookPolicy(), tmp_path / "p", algorithm="mine", policy_id="p0", config=AlgorithmConfig()
    )
    policy = load_policy(path)
    assert policy.compute_actions(np.zeros((4, 2), np.float32)).tolist() == [2, 2, 2, 2]

    class NoActor:
        model = torch.nn.Linear(2, 2)

    with pytest.raises(ConfigError, match="export_model"):
        actor_export(NoActor())


def test_cli_exports_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], exports: dict[str, Any]
) -> None:
    from rlflow.cli import main

    with Trainer("ppo", env="CartPole-v1", **SMALL, **RUNS["ppo"]) as trainer:
        trainer.train()
        trainer.save(tmp_path / "checkpoint_000001")
        obs = exports["ppo"]["obs"]
        expected = trainer.compute_actions(obs)
    assert main(["export", str(tmp_path / "checkpoint_000001"), "-o", str(tmp_path / "x")]) == 0
    assert "exported default_policy of ppo" in capsys.readouterr().out
    np.testing.assert_array_equal(load_policy(tmp_path / "x").compute_actions(obs), expected)
    assert main(["export", str(tmp_path / "missing"), "-o", str(tmp_path / "y")]) == 2
    assert "rlflow: error:" in capsys.readouterr().err


def _policy_cases() -> list[Any]:
    from rlflow.algorithms import ALGORITHMS

    # ppo_dqn's policies are PPO's and DQN's; team policies export per member (below, and
    # maddpg's and matd3's in tests/algorithms/maddpg/test_maddpg.py); dreamerv3 draws its
    # latents even when greedy and takes no model options: tests/algorithms/dreamerv3 checks its
    # export against the learner's actions on seeded episodes.
    skipped = ("ppo_dqn", "dreamerv3")
    names = [n for n in ALGORITHMS if n not in skipped and n not in TEAM_ALGORITHMS]
    return [pytest.param(n, id=n) for n in names]


TEAM_ALGORITHMS = ("qmix", "vdn", "mappo", "maddpg", "matd3")
"""Algorithms of a team (``groups``): their export is one directory per member."""


def masked_team_space() -> Any:
    """A team of two: observations of 2 and 1 values (padded to 2), action masks of 3, a
    state of 4; 3 and 2 actions."""
    from rlflow.envs.groups import TeamBox

    low = np.array([-1, -1, 0, 0, 0, -1, 0, 0, 0, 0, -5, -5, -5, -5], np.float32)
    high = np.array([1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 5, 5, 5, 5], np.float32)
    return TeamBox(
        low,
        high,
        agent_ids=["a", "b"],
        agent_obs_size=2,
        agent_mask_size=3,
        state_size=4,
        agent_action_sizes=[3, 2],
    )


@pytest.mark.parametrize("name", ["qmix", "vdn"])
def test_every_team_algorithms_members_export_and_act_from_their_own_observations(
    name: str, tmp_path: Path
) -> None:
    from rlflow.algorithms import get_algorithm
    from rlflow.config import AlgorithmConfig
    from rlflow.export import export_policy

    spec = get_algorithm(name)
    team = masked_team_space()
    model = {"hidden": [8], "lstm_cell_size": 8}
    shared = name == "qmix"  # vdn: a network per member
    config = spec.config_cls(model=model, share_parameters=shared)
    policy = spec.policy_cls(team, spaces.MultiDiscrete([3, 2]), config)
    path = Path(
        export_policy(
            policy, tmp_path / name, algorithm=name, policy_id="p", config=AlgorithmConfig()
        )
    )
    assert sorted(p.name for p in path.iterdir()) == ["a", "b", "team.json"]
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (50, team.shape[0])).astype(np.float32)
    obs[:, 2:5] = rng.integers(0, 2, (50, 3))
    obs[:, 2] = 1.0  # a legal action at least
    obs[:, 6] = 0.0  # b's padding
    obs[:, 7:10] = 1.0
    expected, _ = policy.compute_actions(obs, explore=False)
    parts = team.split(obs)
    for i, (agent, size) in enumerate([("a", 2), ("b", 1)]):
        loaded = load_policy(path / agent)
        assert loaded.observation_space.shape == (size + 3,)
        own = np.concatenate([parts.agents[:, i, :size], parts.masks[:, i]], axis=1)
        actions, _ = loaded.compute_actions(own)
        np.testing.assert_array_equal(actions, expected[:, i])
        explored, _ = loaded.compute_actions(own, explore=True)
        legal = own[:, size:][np.arange(50), explored]
        assert (legal > 0.5).all()  # a masked action never explored


def test_mappo_members_export_and_act_from_their_own_observations(tmp_path: Path) -> None:
    from rlflow.algorithms.mappo import MAPPOConfig, MAPPOPolicy
    from rlflow.config import AlgorithmConfig
    from rlflow.envs.groups import TeamBox
    from rlflow.export import export_policy

    ones = np.ones(12, np.float32)  # two members of 3 values, a state of 6
    team = TeamBox(
        -ones,
        ones,
        agent_ids=["a", "b"],
        agent_obs_size=3,
        agent_mask_size=0,
        state_size=6,
        agent_action_sizes=[3, 3],
    )
    config = MAPPOConfig(model={"hidden": [8], "activation": "relu"})
    policy = MAPPOPolicy(team, spaces.MultiDiscrete([3, 3]), config, seed=1)
    path = Path(
        export_policy(
            policy, tmp_path / "mappo", algorithm="mappo", policy_id="p", config=AlgorithmConfig()
        )
    )
    assert sorted(p.name for p in path.iterdir()) == ["a", "b", "team.json"]
    obs = np.random.default_rng(0).uniform(-1, 1, (50, 12)).astype(np.float32)
    expected, _ = policy.compute_actions(obs, explore=False)
    parts = team.split(obs)
    for i, agent in enumerate(["a", "b"]):
        loaded = load_policy(path / agent)
        assert loaded.observation_space.shape == (3,)  # its own observation: no state
        np.testing.assert_array_equal(loaded.compute_actions(parts.agents[:, i]), expected[:, i])


@pytest.mark.parametrize("name", _policy_cases())
def test_every_algorithms_policy_exports(name: str, tmp_path: Path) -> None:
    from rlflow.algorithms import get_algorithm
    from rlflow.config import AlgorithmConfig
    from rlflow.export import export_policy

    spec = get_algorithm(name)
    continuous = name in ("maml", "sac", "td3", "cql", "apex_td3", "apex_ddpg")
    obs_space: spaces.Box = spaces.Box(-1.0, 1.0, (3,), np.float32)
    act_space = spaces.Box(-0.5, 2.0, (2,), np.float32) if continuous else spaces.Discrete(3)
    if name == "alpha_zero":  # a board with its action mask last (a game's observations)
        from rlflow.envs.flatten import ActionMaskBox

        obs_space = ActionMaskBox(
            np.zeros(5, np.float32), np.ones(5, np.float32), action_mask_size=3
        )
    model: dict[str, Any] = {"hidden": [8, 8], "activation": "relu"}
    if name in ("pg", "ppo", "impala"):
        model["shared"] = True  # one trunk for both heads
    policy = spec.policy_cls(obs_space, act_space, spec.config_cls(model=model), seed=1)
    config = AlgorithmConfig()
    path = export_policy(policy, tmp_path / name, algorithm=name, policy_id="p", config=config)
    assert actor_export(policy).options["activation"] == "relu"
    obs = np.random.default_rng(0).uniform(-1, 1, (50, obs_space.shape[0])).astype(np.float32)
    if name == "alpha_zero":  # masks of 0/1 with a legal move each
        obs[:, -3:] = np.random.default_rng(1).integers(0, 2, (50, 3))
        obs[:, -1] = 1.0
    expected, _ = policy.compute_actions(obs, explore=False)
    if continuous:
        expected = np.clip(expected, -0.5, 2.0)  # as the env gets them

    def act(seed: int | None = None, **kwargs: Any) -> Any:
        loaded = load_policy(path, seed=seed)
        actions = loaded.compute_actions(obs, **kwargs)
        return actions[0] if loaded.recurrent else actions  # R2D2: (actions, state) from start

    np.testing.assert_array_equal(act(), expected)
    explored = act(5, explore=True)
    np.testing.assert_array_equal(explored, act(5, explore=True))
    if continuous:
        assert explored.min() >= -0.5 and explored.max() <= 2.0
        assert not np.array_equal(explored, expected)


def test_an_image_model_exports(tmp_path: Path) -> None:
    from rlflow.algorithms.ppo import PPOConfig, PPOPolicy
    from rlflow.export import export_policy

    obs_space = spaces.Box(0, 255, (36, 36, 2), np.uint8)
    policy = PPOPolicy(obs_space, spaces.Discrete(4), PPOConfig(), seed=0)
    path = export_policy(
        policy, tmp_path / "cnn", algorithm="ppo", policy_id="p", config=PPOConfig()
    )
    obs = np.random.default_rng(0).integers(0, 256, (20, 36, 36, 2), dtype=np.uint8)
    expected, _ = policy.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(load_policy(path).compute_actions(obs), expected)


def test_the_trainer_acts_between_learner_updates() -> None:
    import threading

    from rlflow.ops.learner_thread import LearnerThread, learners_paused

    with Trainer("impala", env="CartPole-v1", **SMALL, **RUNS["impala"]) as trainer:
        trainer.train()
        local = trainer.workers.local_worker()
        learners = [t for t in threading.enumerate() if isinstance(t, LearnerThread)]
        learners = [t for t in learners if t.local_worker is local and t.is_alive()]
        assert learners
        with learners_paused(local):  # the learner cannot take its lock: no update inside
            assert all(t.lock.locked() for t in learners)
        for t in learners:  # released: taken within one learning step
            assert t.lock.acquire(timeout=30)
            t.lock.release()
        assert trainer.compute_actions(np.zeros((3, 4), np.float32)).shape == (3,)


def test_multi_agent_policies_by_id(tmp_path: Path) -> None:
    from rlflow.algorithms import tuned_config
    from rlflow.algorithms.ppo_dqn import DQN_POLICY, PPO_POLICY

    config = tuned_config("ppo_dqn", "multi_cartpole").to_dict() | {"seed": 0}
    with Trainer("ppo_dqn", backend="local", config=config) as trainer:
        trainer.train()
        obs = np.random.default_rng(2).uniform(-0.2, 0.2, (30, 4)).astype(np.float32)
        for pid, actor in ((PPO_POLICY, "ActorCriticActor"), (DQN_POLICY, "QActor")):
            actions = trainer.compute_actions(obs, policy_id=pid)
            single = trainer.compute_single_action(obs[0], policy_id=pid)
            path = trainer.export_policy(tmp_path / pid, policy_id=pid)
            loaded = load_policy(path)
            assert type(loaded.actor).__name__ == actor
            assert loaded.spec["policy_id"] == pid and loaded.algorithm == "ppo_dqn"
            np.testing.assert_array_equal(loaded.compute_actions(obs), actions)
            assert single == actions[0]


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_an_export_naming_the_actors_former_module_still_loads(name: str, tmp_path: Path) -> None:
    # SAC's and TD3's TanhActor moved from rlflow.policy.tanh_actor to the twin_q family;
    # exports written before record the old path, and must load as they did.
    from rlflow.algorithms import get_algorithm
    from rlflow.config import AlgorithmConfig
    from rlflow.export import export_policy
    from rlflow.export.files import SPEC_FILE

    spec = get_algorithm(name)
    box = spaces.Box(-1.0, 1.0, (3,), np.float32)
    actions = spaces.Box(-0.5, 2.0, (2,), np.float32)
    policy = spec.policy_cls(box, actions, spec.config_cls(model={"hidden": [8]}), seed=1)
    path = export_policy(
        policy, tmp_path / name, algorithm=name, policy_id="p", config=AlgorithmConfig()
    )
    spec_file = Path(path) / SPEC_FILE
    written = json.loads(spec_file.read_text())
    assert written["actor_class"] == "rlflow.algorithms.twin_q.actor.TanhActor"
    spec_file.write_text(
        json.dumps({**written, "actor_class": "rlflow.policy.tanh_actor.TanhActor"})
    )
    obs = np.random.default_rng(0).uniform(-1, 1, (20, 3)).astype(np.float32)
    expected, _ = policy.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(
        load_policy(path).compute_actions(obs), np.clip(expected, -0.5, 2.0)
    )
    with pytest.raises(ConfigError, match="not a known ExportableActor"):
        spec_file.write_text(json.dumps({**written, "actor_class": "nowhere.TanhActor"}))
        load_policy(path)
