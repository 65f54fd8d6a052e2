"""Action masks (issue 26): a Dict observation with an ``action_mask`` key is flattened with the
mask last (`ActionMaskBox`); every policy's network then acts only on legal actions (masked
logits or Q-values), without seeing the mask unless ``model.use_action_mask_as_input``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlflow import Trainer
from rlflow.envs.flatten import ActionMaskBox, ObservationFlattener
from rlflow.errors import ConfigError
from rlflow.models.distributions import Categorical, MultiCategorical
from rlflow.models.masking import MASKED_LOGIT, ActionMaskedModel


class LegalMoves(gym.Env[dict[str, Any], int]):
    """Each step a random half of 6 actions is legal (the mask says which); reward 1 for the
    highest legal action, 0 for another legal one. An illegal action is counted (and ends the
    episode with reward -1), so a test can assert none was taken."""

    illegal_moves = 0

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(0.0, 1.0, (6,), np.float32),
                "action_mask": spaces.MultiBinary(6),
            }
        )
        self.action_space = spaces.Discrete(6)
        self._mask = np.ones(6, np.int8)
        self._t = 0

    def _obs(self) -> dict[str, Any]:
        self._mask = np.zeros(6, np.int8)
        self._mask[self.np_random.choice(6, 3, replace=False)] = 1
        return {"observation": self._mask.astype(np.float32), "action_mask": self._mask.copy()}

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action: int) -> Any:
        self._t += 1
        if not self._mask[action]:
            type(self).illegal_moves += 1
            return self._obs(), -1.0, True, False, {}
        best = int(np.flatnonzero(self._mask).max())
        return self._obs(), float(action == best), False, self._t >= 20, {}


def test_the_mask_goes_last_and_the_space_says_how_long_it_is() -> None:
    flattener = ObservationFlattener(LegalMoves().observation_space)
    assert flattener.space == ActionMaskBox(
        np.zeros(12, np.float32), np.ones(12, np.float32), action_mask_size=6
    )
    flat = flattener({"observation": np.full(6, 0.5, np.float32), "action_mask": [1, 0] * 3})
    assert flat.tolist() == [0.5] * 6 + [1.0, 0.0] * 3


def test_masked_logits_give_illegal_actions_exactly_zero_probability() -> None:
    logits = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    legal = torch.tensor([[1, 0, 1, 0, 1, 0]] * 2 + [[0, 0, 0, 0, 0, 1]] * 2, dtype=torch.bool)
    masked = Categorical(logits.masked_fill(~legal, MASKED_LOGIT))
    probs = masked.log_probs.exp()
    assert torch.all(probs[~legal] == 0.0)
    # Entropy and KL are those of the distribution over the legal actions alone.
    for row in range(4):
        alone = Categorical(logits[row][legal[row]][None])
        torch.testing.assert_close(masked.entropy()[row : row + 1], alone.entropy())
    other = Categorical(torch.zeros(4, 6).masked_fill(~legal, MASKED_LOGIT))
    kl = masked.kl(other)
    assert torch.isfinite(kl).all() and torch.isfinite(masked.entropy()).all()
    for row in range(4):
        alone = Categorical(logits[row][legal[row]][None])
        uniform = Categorical(torch.zeros(1, int(legal[row].sum())))
        torch.testing.assert_close(kl[row : row + 1], alone.kl(uniform))
    draws = Categorical(
        logits.masked_fill(~legal, MASKED_LOGIT), generator=torch.Generator().manual_seed(1)
    )
    picks = torch.stack([draws.sample() for _ in range(200)])
    assert legal.gather(1, picks.T).all()


def test_multi_discrete_masks_each_component() -> None:
    model = ActionMaskedModel(torch.nn.Linear(3, 5), 5)
    obs = torch.tensor([[0.1, 0.2, 0.3, 1, 0, 0, 1, 1]])  # legal: 0 of [2]; 1, 2 of [3]
    out = model(obs)
    assert out[0, [1, 2]].eq(MASKED_LOGIT).all() and out[0, [0, 3, 4]].gt(MASKED_LOGIT).all()
    dist = MultiCategorical.for_nvec((2, 3))(
        out.expand(100, 5), generator=torch.Generator().manual_seed(0)
    )
    picks = dist.sample()
    assert picks[:, 0].eq(0).all() and picks[:, 1].ne(0).all()
    assert torch.isfinite(dist.entropy()).all()


@pytest.mark.parametrize("algo", ["ppo", "impala", "dqn"])
def test_policies_never_take_an_illegal_action(local_backend: None, algo: str) -> None:
    LegalMoves.illegal_moves = 0
    extra: dict[str, Any] = {"num_workers": 1} if algo == "impala" else {"num_workers": 0}
    if algo == "dqn":
        extra.update(epsilon_timesteps=0, initial_epsilon=1.0, final_epsilon=1.0)  # all random
    with Trainer(
        algo,
        env=LegalMoves,
        seed=0,
        min_steps_per_iteration=1000,
        min_time_s_per_iteration=0.0,
        **extra,
    ) as trainer:
        steps = 0
        while steps < 3000:
            steps = trainer.train()["num_env_steps_sampled"]
        policy = trainer.workers.local_worker().get_policy()
        model = policy.model
        assert isinstance(model, ActionMaskedModel) and not model.feed_mask
        first = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
        assert first.in_features == 6  # the network never sees the mask
        obs = np.zeros(12, np.float32)
        obs[6 + 4] = 1.0  # only action 4 is legal
        assert all(trainer.compute_single_action(obs, explore=True) == 4 for _ in range(20))
    assert LegalMoves.illegal_moves == 0


def test_ppo_learns_to_pick_among_legal_actions(local_backend: None) -> None:
    with Trainer(
        "ppo",
        env=LegalMoves,
        num_workers=0,
        seed=0,
        train_batch_size=1000,
        sgd_minibatch_size=250,
        min_time_s_per_iteration=0.0,
    ) as trainer:
        returns = [trainer.train()["episode_return_mean"] for _ in range(15)]
    # Random legal play scores 20/3 per episode; the best legal action every step, 20.
    assert max(returns) > 15.0, returns


def test_the_mask_is_fed_to_the_network_only_when_asked(local_backend: None) -> None:
    model = {"use_action_mask_as_input": True}
    with Trainer("ppo", env=LegalMoves, num_workers=0, model=model) as trainer:
        net = trainer.workers.local_worker().get_policy().model
        first = next(m for m in net.modules() if isinstance(m, torch.nn.Linear))
        assert net.feed_mask and first.in_features == 12
    with pytest.raises(ConfigError, match="use_action_mask_as_input=1 must be true or false"):
        Trainer("ppo", env=LegalMoves, num_workers=0, model={"use_action_mask_as_input": 1})


def test_a_mask_that_does_not_fit_the_actions_is_refused(local_backend: None) -> None:
    class WrongSize(LegalMoves):
        def __init__(self) -> None:
            super().__init__()
            self.action_space = spaces.Discrete(5)

    with pytest.raises(ConfigError, match="action mask has 6 values, but the action space"):
        Trainer("ppo", env=WrongSize, num_workers=0).train()


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_an_exported_masked_policy_acts_as_the_trainer(tmp_path: Any, algo: str) -> None:
    import rlflow

    fields: dict[str, Any] = {"env": LegalMoves, "num_workers": 0, "seed": 1}
    with Trainer(algo, backend="local", min_time_s_per_iteration=0.0, **fields) as trainer:
        trainer.train()
        loaded = rlflow.load_policy(trainer.export_policy(tmp_path / algo))
        assert type(loaded.actor).__name__ == "MaskedActor"
        rng = np.random.default_rng(0)
        obs = rng.random((300, 12)).astype(np.float32)
        obs[:, 6:] = rng.random((300, 6)) < 0.4
        obs[np.arange(300), 6 + rng.integers(0, 6, 300)] = 1.0  # one legal move at least
        greedy = [trainer.compute_single_action(o) for o in obs]
        assert loaded.compute_actions(obs).tolist() == greedy
        explored = loaded.compute_actions(obs, explore=True)
        assert np.all(obs[np.arange(300), 6 + explored] == 1.0)  # legal, exploring too


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_tictactoe_players_never_make_an_illegal_move(local_backend: None, algo: str) -> None:
    # Both seats of PettingZoo's tic-tac-toe (turn-based, masks in every observation) played by
    # one policy: after some training, 10k counted moves are all legal (each row's observation
    # ends with the mask it acted under).
    pytest.importorskip("pettingzoo")
    from rlflow.config import PolicySpec

    with Trainer(
        algo,
        env="pettingzoo.classic.tictactoe_v3",
        num_workers=0,
        seed=0,
        policies={"p": PolicySpec()},
        policy_mapping_fn=lambda agent: "p",
        min_steps_per_iteration=2000,
        min_time_s_per_iteration=0.0,
    ) as trainer:
        result = trainer.train()
        worker = trainer.workers.local_worker()
        moves = illegal = 0
        while moves < 10_000:
            batch = worker.sample().policy_batches["p"]
            mask = batch["obs"][:, 18:]
            illegal += int(np.sum(mask[np.arange(batch.count), batch["actions"]] != 1.0))
            moves += batch.count
    assert illegal == 0 and result["agent_wins/player_1"] + result["agent_losses/player_1"] > 0
