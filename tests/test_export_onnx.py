"""ONNX export (`rlflow.export.onnx`): onnxruntime acts as `rlflow.load_policy` does, on 1,000
random observations: the same greedy actions and the same action inputs (logits, Q-values,
Gaussian parameters) within 1e-5, for every algorithm's policy, a CNN on uint8 frames, a custom
model, action masks, memory (state in and out) and a folded observation filter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from rlflow import Trainer, load_policy
from rlflow.cli import main as cli_main
from rlflow.config import AlgorithmConfig
from rlflow.envs.flatten import ActionMaskBox
from rlflow.export import LoadedPolicy, export_policy
from rlflow.export.onnx import ONNX_FILE, export_onnx

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

pytestmark = pytest.mark.timeout(300)

ROWS = 1000


class TwoLayerModel(nn.Module):
    """A custom model (``model.custom_model``): obs -> (logits, value)."""

    def __init__(self, obs_space: Any, action_space: Any, num_outputs: int, config: Any) -> None:
        super().__init__()
        self.body = nn.Linear(int(np.prod(obs_space.shape)), 16)
        self.logits = nn.Linear(16, num_outputs)
        self.values = nn.Linear(16, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.relu(self.body(obs.float()))
        return self.logits(x), self.values(x).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.forward(obs)[1]


def observations(loaded: LoadedPolicy, seed: int = 0) -> np.ndarray:
    space = loaded.observation_space
    space.seed(seed)
    obs = np.stack([space.sample() for _ in range(ROWS)])
    return obs.astype(np.float32) if obs.dtype == np.float64 else obs


def check_onnx_acts_as_loaded(path: Path, obs: np.ndarray | None = None) -> dict[str, Any]:
    """Export ``path`` to ONNX and compare onnxruntime with `load_policy` on 1,000 rows."""
    loaded = load_policy(path)
    onnx_path = export_onnx(loaded, path / ONNX_FILE)
    session = ort.InferenceSession(str(onnx_path))
    obs = observations(loaded) if obs is None else obs
    feed: dict[str, Any] = {"obs": obs}
    names = [i.name for i in session.get_inputs()]
    memory: dict[str, Any] = {}
    if loaded.recurrent:
        rng = np.random.default_rng(1)
        state = [
            rng.standard_normal((ROWS, *np.shape(s))).astype(np.float32)
            for s in loaded.get_initial_state()
        ]
        feed.update({f"state_in_{k}": s for k, s in enumerate(state)})
        memory["state"] = state
        if "prev_actions" in names:
            feed["prev_actions"] = memory["prev_actions"] = rng.integers(0, 2, ROWS)
        if "prev_rewards" in names:
            feed["prev_rewards"] = memory["prev_rewards"] = rng.random(ROWS).astype(np.float32)
    outputs = dict(
        zip([o.name for o in session.get_outputs()], session.run(None, feed), strict=True)
    )
    expected = loaded.compute_actions(obs, **memory)
    if loaded.recurrent:
        expected, state_out = expected
        for k, s in enumerate(state_out):
            np.testing.assert_allclose(outputs[f"state_out_{k}"], s, atol=1e-5)
    if isinstance(loaded.action_space, spaces.Box):
        np.testing.assert_allclose(outputs["actions"], expected, atol=1e-5)
        assert outputs["actions"].dtype == loaded.action_space.dtype
    else:
        np.testing.assert_array_equal(outputs["actions"], expected)
    if not loaded.recurrent:
        x = obs if loaded.obs_filter is None else loaded.obs_filter(obs)
        with torch.inference_mode():
            inputs = loaded.actor.action_inputs(torch.from_numpy(x))
        assert inputs is not None
        np.testing.assert_allclose(outputs["action_inputs"], inputs.numpy(), atol=1e-5)
    meta = {p.key: p.value for p in onnx.load(str(onnx_path)).metadata_props}
    assert '"algorithm"' in meta["rlflow_policy"] and '"obs"' in meta["rlflow_inputs"]
    return outputs


def _algorithms() -> list[Any]:
    from rlflow.algorithms import ALGORITHMS

    team = (
        "qmix",
        "vdn",
        "mappo",
        "maddpg",
        "matd3",
    )  # a team's export is one directory per member: below
    # dreamerv3 draws its latents even when greedy (in ONNX, from the runtime's RNG): no
    # equality to check; tests/algorithms/dreamerv3 checks its export in Python.
    skipped = ("ppo_dqn", "dreamerv3")
    return [pytest.param(n, id=n) for n in ALGORITHMS if n not in skipped and n not in team]


@pytest.mark.parametrize("name", ["qmix", "vdn", "mappo", "maddpg", "matd3"])
def test_every_team_members_policy_runs_in_onnxruntime(name: str, tmp_path: Path) -> None:
    from rlflow.algorithms import get_algorithm
    from rlflow.envs.groups import GroupAgents
    from rlflow.envs.ma_envs import TwoStepGame

    spec = get_algorithm(name)
    team = GroupAgents(TwoStepGame(), {"team": ["agent_0", "agent_1"]})
    model: dict[str, Any] = {"hidden": [8], "lstm_cell_size": 8}
    if name in ("mappo", "maddpg", "matd3"):
        model = {"hidden": [8], "activation": "relu"}
    policy = spec.policy_cls(
        team.observation_spaces["team"], team.action_spaces["team"], spec.config_cls(model=model)
    )
    path = export_policy(
        policy, tmp_path / name, algorithm=name, policy_id="p", config=AlgorithmConfig()
    )
    for agent in ("agent_0", "agent_1"):
        check_onnx_acts_as_loaded(Path(path) / agent)


@pytest.mark.parametrize("name", _algorithms())
def test_every_algorithms_policy_runs_in_onnxruntime(name: str, tmp_path: Path) -> None:
    from rlflow.algorithms import get_algorithm

    spec = get_algorithm(name)
    # Box for the policies that take only Box actions (and MAML's point navigation).
    continuous = name == "maml" or spaces.Discrete not in spec.policy_cls.action_space_types
    obs_space: spaces.Box = spaces.Box(-1.0, 1.0, (3,), np.float32)
    if name == "alpha_zero":  # a board with its action mask last (a game's observations)
        obs_space = ActionMaskBox(
            np.zeros(5, np.float32), np.ones(5, np.float32), action_mask_size=3
        )
    act_space = spaces.Box(-0.5, 2.0, (2,), np.float32) if continuous else spaces.Discrete(3)
    model: dict[str, Any] = {"hidden": [8, 8], "activation": "relu"}
    policy = spec.policy_cls(obs_space, act_space, spec.config_cls(model=model), seed=1)
    path = export_policy(
        policy, tmp_path / name, algorithm=name, policy_id="p", config=AlgorithmConfig()
    )
    check_onnx_acts_as_loaded(Path(path))


def test_a_cnn_on_uint8_frames(tmp_path: Path) -> None:
    from rlflow.algorithms.ppo import PPOConfig, PPOPolicy

    obs_space = spaces.Box(0, 255, (84, 84, 4), np.uint8)  # Atari's DeepMind frames
    policy = PPOPolicy(obs_space, spaces.Discrete(6), PPOConfig(), seed=0)
    path = export_policy(
        policy, tmp_path / "cnn", algorithm="ppo", policy_id="p", config=PPOConfig()
    )
    outputs = check_onnx_acts_as_loaded(Path(path))
    assert outputs["action_inputs"].shape == (ROWS, 6)
    session = ort.InferenceSession(str(Path(path) / ONNX_FILE))
    assert session.get_inputs()[0].type == "tensor(uint8)"


def test_a_custom_model_a_filter_and_the_cli(tmp_path: Path, capsys: Any) -> None:
    config = {
        "env": "CartPole-v1",
        "num_workers": 0,
        "train_batch_size": 200,
        "sgd_minibatch_size": 50,
        "model": {"custom_model": TwoLayerModel},
        "observation_filter": "MeanStdFilter",
    }
    with Trainer("ppo", config=config, backend="local") as trainer:
        trainer.train()  # the filter has statistics to fold in
        checkpoint = trainer.save(tmp_path / "run")
    out = tmp_path / "export"
    assert cli_main(["export", str(checkpoint), "-o", str(out), "--format", "onnx"]) == 0
    assert "policy.onnx" in capsys.readouterr().out
    loaded = load_policy(out)
    assert loaded.obs_filter is not None
    assert type(loaded.actor).__name__ == "CustomModelActor"
    # Raw observations far from the filter's mean: the folded filter (and its clip) matter.
    obs = np.random.default_rng(3).uniform(-5, 5, (ROWS, 4)).astype(np.float32)
    check_onnx_acts_as_loaded(out, obs)


def test_action_masks_and_memory(tmp_path: Path) -> None:
    pytest.importorskip("pettingzoo")
    game = {"env": "pettingzoo.classic.tictactoe_v3", "num_workers": 0}
    with Trainer("ppo", config=game, backend="local") as trainer:
        path = Path(trainer.export_policy(tmp_path / "masked"))
    outputs = check_onnx_acts_as_loaded(path)
    assert outputs["action_inputs"].min() < -1e8  # illegal moves' logits masked
    memory = {
        "use_lstm": True,
        "lstm_cell_size": 16,
        "lstm_use_prev_action": True,
        "lstm_use_prev_reward": True,
    }
    config = {"env": "CartPole-v1", "num_workers": 0, "model": memory}
    with Trainer("ppo", config=config, backend="local") as trainer:
        path = Path(trainer.export_policy(tmp_path / "lstm"))
    outputs = check_onnx_acts_as_loaded(path)
    assert {"state_out_0", "state_out_1", "action_inputs"} <= set(outputs)
