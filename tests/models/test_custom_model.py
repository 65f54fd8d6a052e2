"""Custom models (model.custom_model): config errors, the model really used in every
actor-critic algorithm on both backends, weights synced, checkpoints and export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlflow import Trainer, load_policy
from rlflow.algorithms import PPOConfig
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(120)

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
SMALL: dict[str, Any] = {
    "env": "CartPole-v1",
    "num_workers": 1,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
}
PPO_EXTRA: dict[str, Any] = {"sgd_minibatch_size": 50, "num_sgd_iter": 4}


class TinyModel(nn.Module):
    """A two-layer actor-critic that counts its forward calls (in this process)."""

    def __init__(
        self, obs_space: Any, action_space: Any, num_outputs: int, model_config: dict[str, Any]
    ) -> None:
        super().__init__()
        width = int(model_config["custom_model_config"].get("width", 16))
        self.body = nn.Linear(int(np.prod(obs_space.shape)), width)
        self.logits = nn.Linear(width, num_outputs)
        self.values = nn.Linear(width, 1)
        self.calls = 0

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls += 1
        x = torch.tanh(self.body(obs.float()))
        return self.logits(x), self.values(x).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.values(torch.tanh(self.body(obs.float()))).squeeze(-1)


class WrongShapes(TinyModel):
    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, value = super().forward(obs)
        return logits, value[:, None]


class FailsOnCall(TinyModel):
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        raise ValueError("no value for you")


class Broken(TinyModel):
    def __init__(self, *args: Any) -> None:
        raise RuntimeError("no weights here")


CUSTOM = {"custom_model": TinyModel, "custom_model_config": {"width": 8}}
TINY_KEYS = {"body.weight", "body.bias", "logits.weight", "logits.bias"}


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        ({"custom_model": "no_such_module_xyz:M"}, "custom_model='no_such_module_xyz:M': cannot"),
        ({"custom_model": "rlflow.models:NoSuch"}, "has no attribute 'NoSuch'"),
        ({"custom_model": "rlflow.models:dist_class_for"}, "must be a torch.nn.Module subclass"),
        ({"custom_model": nn.Linear}, "Linear has no value(obs) method"),
        ({"custom_model": 3}, "custom_model=3 must be 'package.module:Class' or a class"),
        ({"custom_model_config": {"a": 1}}, "custom_model_config is given without"),
        ({"custom_model": TinyModel, "custom_model_config": [1]}, "must be a dict"),
        ({"custom_modle": TinyModel}, "no field 'custom_modle'; did you mean 'custom_model'?"),
    ],
)
def test_bad_custom_model_config_names_the_key(model: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        PPOConfig(model=model)
    assert "PPOConfig.model" in str(info.value) and needle in str(info.value)


def test_a_string_path_imports_the_class() -> None:
    config = PPOConfig(model={"custom_model": "rlflow.models:ActorCritic"})
    assert config.model.custom_model == "rlflow.models:ActorCritic"  # kept as written


@pytest.mark.parametrize(
    ("cls", "needle"),
    [
        (WrongShapes, "must return (dist_inputs [B, 2], value [B]); for B=1 it returned"),
        (Broken, "raised RuntimeError('no weights here')"),
        (FailsOnCall, "FailsOnCall raised ValueError('no value for you') on a batch of one"),
    ],
)
def test_a_model_that_does_not_fit_is_refused_when_built(cls: type, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        PPOPolicy(OBS, gym.spaces.Discrete(2), PPOConfig(model={"custom_model": cls}))
    assert "model.custom_model" in str(info.value) and needle in str(info.value)


@pytest.mark.parametrize("algo", ["dqn", "apex", "sac"])
def test_algorithms_with_their_own_networks_refuse_it(algo: str) -> None:
    env = "Pendulum-v1" if algo == "sac" else "CartPole-v1"
    with pytest.raises(ConfigError) as info:
        Trainer(algo, env=env, num_workers=1, backend="local", model={"custom_model": TinyModel})
    message = str(info.value)
    assert f"algorithm {algo!r}" in message and "model.custom_model=" in message
    assert "builds its own networks" in message


def test_the_policy_builds_the_custom_model_under_its_seed() -> None:
    space = gym.spaces.Discrete(2)
    a = PPOPolicy(OBS, space, PPOConfig(model=CUSTOM), seed=3)
    b = PPOPolicy(OBS, space, PPOConfig(model=CUSTOM), seed=3)
    assert isinstance(a.model, TinyModel) and a.model.body.out_features == 8
    assert set(a.get_weights()) == TINY_KEYS | {"values.weight", "values.bias"}
    for key, value in a.get_weights().items():
        np.testing.assert_array_equal(value, b.get_weights()[key])
    md = PPOPolicy(OBS, gym.spaces.MultiDiscrete([3, 2]), PPOConfig(model=CUSTOM), seed=0)
    actions, extra = md.compute_actions(np.zeros((5, 4), np.float32))
    assert actions.shape == (5, 2) and extra["action_dist_inputs"].shape == (5, 5)


def test_the_custom_model_gets_the_run_model_as_a_plain_dict() -> None:
    seen: list[Any] = []

    class Recording(TinyModel):
        def __init__(self, *args: Any) -> None:
            seen.append(args[-1])
            super().__init__(*args)

    model = {"custom_model": Recording, "custom_model_config": {"width": 8}, "max_seq_len": 7}
    PPOPolicy(OBS, gym.spaces.Discrete(2), PPOConfig(model=model), seed=0)
    (model_config,) = seen
    assert type(model_config) is dict  # RLlib's model_config: every field, defaults included
    assert model_config == {**PPOConfig().model.to_dict(), **model}
    assert model_config["hidden"] == [64, 64] and model_config["max_seq_len"] == 7


def _worker_view(worker: Any) -> tuple[str, int, dict[str, Any]]:
    policy = worker.policy_map["default_policy"]
    return type(policy.model).__name__, policy.model.calls, policy.get_weights()


@pytest.mark.parametrize("algo", ["pg", "a2c", "a3c", "ppo", "impala", "appo"])
def test_every_actor_critic_algorithm_trains_the_custom_model(
    local_backend: None, algo: str
) -> None:
    extra = PPO_EXTRA if algo == "ppo" else {}
    with Trainer(algo, backend="local", model=CUSTOM, **SMALL, **extra) as trainer:
        before = trainer.workers.local_worker().policy_map["default_policy"].get_weights()
        trainer.train()
        views = trainer.workers.foreach_worker(_worker_view)
    (name, _, learned), (remote_name, remote_calls, _) = views
    assert name == remote_name == "TinyModel"
    assert remote_calls > 0  # the rollout worker acted with it
    assert any(not np.array_equal(before[k], learned[k]) for k in TINY_KEYS)


def test_ppo_uses_it_on_both_backends_and_syncs_its_weights(backend: str) -> None:
    with Trainer("ppo", backend=backend, model=CUSTOM, seed=0, **SMALL, **PPO_EXTRA) as trainer:
        local = trainer.workers.local_worker().policy_map["default_policy"]
        before = local.get_weights()
        for _ in range(2):
            trainer.train()
        trainer.workers.sync_weights()
        (_, _, learned), (remote_name, remote_calls, remote) = trainer.workers.foreach_worker(
            _worker_view
        )
    assert isinstance(local.model, TinyModel) and remote_name == "TinyModel"
    assert remote_calls > 0
    assert any(not np.array_equal(before[k], learned[k]) for k in TINY_KEYS)
    for key, value in learned.items():
        np.testing.assert_array_equal(value, remote[key])


def test_checkpoint_restores_the_custom_model(local_backend: None, tmp_path: Path) -> None:
    with Trainer("ppo", backend="local", model=CUSTOM, **SMALL, **PPO_EXTRA) as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        weights = trainer.workers.local_worker().policy_map["default_policy"].get_weights()
    with Trainer.restore(path, backend="local") as restored:
        policy = restored.workers.local_worker().policy_map["default_policy"]
        assert isinstance(policy.model, TinyModel)
        for key, value in weights.items():
            np.testing.assert_array_equal(value, policy.get_weights()[key])


def test_export_and_load_policy_act_like_the_trainer(local_backend: None, tmp_path: Path) -> None:
    obs = np.random.default_rng(0).uniform(-0.2, 0.2, (16, 4)).astype(np.float32)
    with Trainer("ppo", backend="local", model=CUSTOM, **SMALL, **PPO_EXTRA) as trainer:
        trainer.train()
        path = trainer.export_policy(tmp_path / "export")
        greedy = trainer.compute_actions(obs, explore=False)
    loaded = load_policy(path)
    assert type(loaded.actor).__name__ == "CustomModelActor"
    assert isinstance(loaded.actor.model, TinyModel)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(loaded.compute_actions(obs), greedy)


def test_export_refuses_a_class_a_loader_cannot_find(local_backend: None, tmp_path: Path) -> None:
    class LocalModel(TinyModel):
        pass

    model = {"custom_model": LocalModel}
    with (
        Trainer("ppo", backend="local", model=model, **SMALL, **PPO_EXTRA) as trainer,
        pytest.raises(ConfigError) as info,
    ):
        trainer.export_policy(tmp_path / "export")
    message = str(info.value)
    assert "LocalModel" in message and "top level of an importable module" in message


def test_the_example_model_trains_with_ppo(local_backend: None) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "custom_model.py"
    spec = importlib.util.spec_from_file_location("custom_model_example", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    model = {"custom_model": example.ResidualActorCritic, "custom_model_config": {"width": 16}}
    with Trainer("ppo", backend="local", model=model, **SMALL, **PPO_EXTRA) as trainer:
        result = trainer.train()
        policy = trainer.workers.local_worker().policy_map["default_policy"]
        assert type(policy.model).__name__ == "ResidualActorCritic"
        assert policy.model.torso[0].out_features == 16
    assert result["num_env_steps_sampled"] >= SMALL["train_batch_size"]
