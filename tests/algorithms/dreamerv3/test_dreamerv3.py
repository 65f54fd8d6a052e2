"""DreamerV3 (issue 47, part 2): its math on hand-computed values, the replay's streams, the
policy's state, imagination that never touches the real env, and bad input refused before any
actor starts."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlflow
from rlflow.algorithms.dreamerv3 import DreamerV3Config
from rlflow.algorithms.dreamerv3.functions import (
    kl_balance,
    lambda_returns,
    symexp,
    symlog,
    twohot,
    twohot_bins,
    twohot_loss,
    twohot_mean,
    unimix_logits,
)
from rlflow.algorithms.dreamerv3.model import LatentState
from rlflow.algorithms.dreamerv3.policy import DreamerV3Policy
from rlflow.algorithms.dreamerv3.replay import IS_FIRST, IS_TERMINAL, EpisodeReplay
from rlflow.data.sample_batch import (
    ACTIONS,
    EPS_ID,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.replay import replay_buffers
from rlflow.testing.envs import CountingEnv
from rlflow.trainer import Trainer

pytestmark = pytest.mark.timeout(300)

SMALL = {"batch_size": 2, "batch_length": 8, "imagination_horizon": 3}
"""A train step small enough for unit tests (the XS model, few sequences)."""


# -- math ----------------------------------------------------------------------------------------


def test_symlog_and_symexp_are_inverse_and_match_hand_values() -> None:
    x = torch.tensor([-1e6, -100.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 100.0, 1e6], dtype=torch.float64)
    assert torch.allclose(symexp(symlog(x)), x, rtol=1e-12, atol=0.0)
    assert torch.allclose(symlog(symexp(x[2:-2])), x[2:-2], rtol=1e-12)
    e = torch.tensor([math.e - 1, -(math.e**2 - 1)], dtype=torch.float64)
    assert symlog(e).tolist() == pytest.approx([1.0, -2.0], abs=1e-12)
    assert symlog(torch.tensor(0.0)).item() == 0.0


def test_twohot_is_exact_on_bins_and_interpolates_between() -> None:
    bins = twohot_bins()
    assert len(bins) == 255 and bins[0] == -20.0 and bins[-1] == 20.0
    assert abs(float(bins[127])) < 1e-6
    on_bins = twohot(bins[[0, 5, 127, 254]], bins)
    for row, k in zip(on_bins, [0, 5, 127, 254], strict=True):
        assert row[k] == 1.0 and row.sum() == 1.0
    # A quarter of the way from bin 130 to bin 131: 0.75 and 0.25.
    x = bins[130] + 0.25 * (bins[131] - bins[130])
    row = twohot(x[None], bins)[0]
    assert row[130].item() == pytest.approx(0.75, abs=1e-5)
    assert row[131].item() == pytest.approx(0.25, abs=1e-5)
    assert (row > 0).sum() == 2
    # Round trip: the expectation over bins gives back the value, and a head predicting the
    # two-hot decodes to symexp of it.
    values = torch.tensor([-123.4, -1.5, 0.0, 0.3, 7.0, 4000.0])
    encoded = twohot(symlog(values), bins)
    assert torch.allclose((encoded * bins).sum(-1), symlog(values), atol=1e-5)
    decoded = twohot_mean(torch.log(encoded), bins)
    assert torch.allclose(decoded, values, rtol=1e-4)
    # Outside the bins: all weight on the end bin.
    assert twohot(torch.tensor([50.0]), bins)[0, -1] == 1.0
    # The loss is the cross-entropy to that encoding: least at the encoding itself.
    logits = torch.log(encoded[2:3] * 0.98 + 0.02 / 255)
    assert twohot_loss(logits, values[2:3], bins) < twohot_loss(
        torch.zeros(1, 255), values[2:3], bins
    )


def test_unimix_puts_one_percent_uniform_in_every_class() -> None:
    logits = torch.tensor([[100.0, 0.0, 0.0, 0.0]])
    probs = torch.softmax(unimix_logits(logits, 0.01), -1)
    assert probs[0].tolist() == pytest.approx([0.99 + 0.0025, 0.0025, 0.0025, 0.0025], abs=1e-6)


def test_kl_balance_free_bits_and_which_side_each_term_trains() -> None:
    # One latent of two classes: post (0.9, 0.1), prior (0.5, 0.5).
    post = torch.log(torch.tensor([[[0.9, 0.1]]])).requires_grad_(True)
    prior = torch.log(torch.tensor([[[0.5, 0.5]]])).requires_grad_(True)
    kl = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)  # 0.3681 nats
    terms = kl_balance(post, prior, free_nats=0.1)
    assert terms.dyn.item() == pytest.approx(kl, abs=1e-6)
    assert terms.rep.item() == pytest.approx(kl, abs=1e-6)
    # The dynamics term trains the prior only, the representation term the posterior only.
    (g_post, g_prior) = torch.autograd.grad(terms.dyn.sum(), [post, prior], allow_unused=True)
    assert g_post is None and g_prior is not None and g_prior.abs().sum() > 0
    (g_post, g_prior) = torch.autograd.grad(terms.rep.sum(), [post, prior], allow_unused=True)
    assert g_prior is None and g_post is not None and g_post.abs().sum() > 0
    # Below the free bits (1 nat): constant 1, no gradient at all.
    clipped = kl_balance(post, prior, free_nats=1.0)
    assert clipped.dyn.item() == 1.0 and clipped.rep.item() == 1.0
    assert clipped.kl.item() == pytest.approx(kl, abs=1e-6)
    loss = 0.5 * clipped.dyn + 0.1 * clipped.rep
    grads = torch.autograd.grad(loss.sum(), [post, prior], allow_unused=True)
    assert all(g is None or g.abs().sum() == 0 for g in grads)
    # KLs add over latents: three copies are three times the nats (above the free bits now).
    three = kl_balance(post.expand(1, 3, 2), prior.expand(1, 3, 2), free_nats=1.0)
    assert three.dyn.item() == pytest.approx(3 * kl, abs=1e-5)
    assert 0.5 * three.dyn.item() + 0.1 * three.rep.item() == pytest.approx(0.6 * 3 * kl, abs=1e-5)


def test_lambda_returns_against_hand_computed_values() -> None:
    rewards = torch.tensor([0.0, 1.0, 2.0, 3.0])
    values = torch.tensor([10.0, 20.0, 30.0, 40.0])
    discounts = torch.tensor([1.0, 0.5, 0.5, 0.5])
    # lam = 0: one-step targets r_{t+1} + d_{t+1} v_{t+1}.
    one = lambda_returns(rewards, values, discounts, 0.0)
    assert one.tolist() == pytest.approx([1 + 0.5 * 20, 2 + 0.5 * 30, 3 + 0.5 * 40])
    # lam = 1: discounted rewards bootstrapped from the last value.
    full = lambda_returns(rewards, values, discounts, 1.0)
    r2 = 3 + 0.5 * 40
    r1 = 2 + 0.5 * r2
    r0 = 1 + 0.5 * r1
    assert full.tolist() == pytest.approx([r0, r1, r2])
    # lam = 0.5 by the recursion.
    half = lambda_returns(rewards, values, discounts, 0.5)
    h2 = 3 + 0.5 * 40
    h1 = 2 + 0.5 * (0.5 * 30 + 0.5 * h2)
    h0 = 1 + 0.5 * (0.5 * 20 + 0.5 * h1)
    assert half.tolist() == pytest.approx([h0, h1, h2])


# -- replay --------------------------------------------------------------------------------------


def _rows(eps: list[int], obs: list[float], next_obs: list[float], terminated: list[bool]):
    n = len(eps)
    return SampleBatch(
        {
            OBS: np.asarray(obs, np.float32)[:, None],
            NEXT_OBS: np.asarray(next_obs, np.float32)[:, None],
            ACTIONS: np.arange(n) % 2,
            REWARDS: np.arange(1, n + 1, dtype=np.float32),
            TERMINATEDS: np.asarray(terminated),
            EPS_ID: np.asarray(eps, np.int64),
        }
    )


def test_replay_turns_rows_into_streams_of_observations_across_fragments() -> None:
    replay = EpisodeReplay(100, lambda a: np.eye(2, dtype=np.float32)[a], 2, seed=0)
    # Episode 7: o0 -> o1 -> o2 (terminal), split over two fragments; episode 8 between.
    replay.add(_rows([7, 8], [0.0, 100.0], [1.0, 101.0], [False, False]))
    replay.add(_rows([7], [1.0], [2.0], [True]))
    assert len(replay) == 5  # 3 entries of episode 7, 2 of episode 8
    ep7 = replay.episodes[7]
    assert ep7.obs[: ep7.size, 0].tolist() == [0.0, 1.0, 2.0]
    # The action before each observation (none before the first), the reward on arriving.
    assert ep7.actions[: ep7.size].tolist() == [[0, 0], [1, 0], [1, 0]]
    assert ep7.rewards[: ep7.size].tolist() == [0.0, 1.0, 1.0]
    assert ep7.terminal[: ep7.size].tolist() == [False, False, True]
    # Windows longer than an episode go on into another, flagged as its first step.
    batch = replay.sample(16, 6)
    assert batch[OBS].shape == (16, 6, 1) and batch[ACTIONS].shape == (16, 6, 2)
    obs, first = batch[OBS][..., 0], batch[IS_FIRST]
    assert np.all(first == np.isin(obs, [0.0, 100.0]))
    assert np.all(batch[IS_TERMINAL] == (obs == 2.0))


def test_replay_drops_the_oldest_episodes_beyond_capacity() -> None:
    replay = EpisodeReplay(6, lambda a: np.eye(2, dtype=np.float32)[a], 2, seed=0)
    for k in range(4):
        replay.add(_rows([k, k], [0.0, 1.0], [1.0, 2.0], [False, True]))
    assert list(replay.episodes) == [2, 3] and len(replay) == 6


def test_a_checkpoint_holds_the_replay_and_a_restore_draws_the_same_windows(
    local_backend: None, tmp_path: Any
) -> None:
    settings: dict[str, Any] = {
        "env": lambda _cfg=None: CountingEnv(episode_len=7),
        "backend": "local",
        "num_workers": 0,
        "rollout_fragment_length": 5,
        "min_steps_per_iteration": 20,
        "learning_starts": 1_000,  # no train steps: the replay alone
        "checkpoint_replay_buffers": True,
        "seed": 0,
        **SMALL,
    }
    first = Trainer("dreamerv3", **settings)
    try:
        first.train()
        replay = replay_buffers(first.workers)["replay_buffer"]
        assert isinstance(replay, EpisodeReplay) and len(replay) == 20 + 3  # 3 episodes begun
        checkpoint = first.save(tmp_path / "ckpt")
        expected = replay.sample(3, 8)
    finally:
        first.stop()
    second = Trainer.restore(checkpoint)
    try:
        restored = replay_buffers(second.workers)["replay_buffer"]
        assert isinstance(restored, EpisodeReplay)
        assert len(restored) == len(replay)
        assert [s.size for s in restored.episodes.values()] == [
            s.size for s in replay.episodes.values()
        ]
        again = restored.sample(3, 8)
        for column in expected:
            np.testing.assert_array_equal(again[column], expected[column])
        # New episodes start streams of their own (the restored ones keep negative keys).
        second.train()
        assert len(restored) > len(replay) and min(restored.episodes) < 0
    finally:
        second.stop()


# -- the policy ----------------------------------------------------------------------------------


def _policy(env: gym.Env[Any, Any], **fields: Any) -> DreamerV3Policy:
    config = DreamerV3Config(**{**SMALL, **fields})
    return DreamerV3Policy(env.observation_space, env.action_space, config, seed=0)


def _filled_replay(policy: DreamerV3Policy, env: gym.Env[Any, Any], steps: int) -> EpisodeReplay:
    codec = policy.model.codec
    replay = EpisodeReplay(10_000, codec.encode, codec.dim, seed=0)
    obs, _ = env.reset(seed=0)
    rows: dict[str, list[Any]] = {k: [] for k in (OBS, NEXT_OBS, ACTIONS, REWARDS, TERMINATEDS)}
    eps, ep = [], 0
    for _ in range(steps):
        action = env.action_space.sample()
        nxt, reward, term, trunc, _ = env.step(action)
        for k, v in zip(rows, (obs, nxt, action, reward, term), strict=True):
            rows[k].append(v)
        eps.append(ep)
        obs = nxt
        if term or trunc:
            obs, _ = env.reset()
            ep += 1
    replay.add(
        SampleBatch({**{k: np.asarray(v) for k, v in rows.items()}, EPS_ID: np.asarray(eps)})
    )
    return replay


def test_the_policy_carries_the_rssm_state_between_steps() -> None:
    env = gym.make("CartPole-v1")
    policy = _policy(env)
    memory = policy.memory(3)
    h, z, started = memory.state
    assert h.shape == (3, 256) and z.shape == (3, 1024) and not started.any()
    obs = np.zeros((3, 4), np.float32)
    actions, extra = policy.compute_actions(obs, memory=memory.inputs())
    assert actions.shape == (3,)
    h1, z1, s1 = extra["state_out_0"], extra["state_out_1"], extra["state_out_2"]
    assert s1.tolist() == [[1.0]] * 3
    # z is one-hot per latent: 32 ones among 1024.
    assert z1.sum(-1).tolist() == [32.0] * 3 and set(np.unique(z1)) <= {0.0, 1.0}
    # The next step from that state differs from a step from the initial state.
    from rlflow.models.memory import RecurrentInputs

    _, again = policy.compute_actions(obs, memory=RecurrentInputs([h1, z1, s1], actions, None))
    assert not np.allclose(again["state_out_0"], h1)


def test_a_train_step_lowers_nothing_it_should_not_and_updates_the_slow_critic() -> None:
    env = gym.make("CartPole-v1")
    policy = _policy(env)
    replay = _filled_replay(policy, env, 200)
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    stats = policy.learn(replay.sample(2, 8))
    assert np.isfinite(stats["world_model_loss"]) and np.isfinite(stats["actor_loss"])
    after = policy.model.state_dict()
    for part in ("encoder", "rssm", "decoder", "reward_head", "actor", "critic", "slow_critic"):
        changed = [k for k in before if k.startswith(part) and not torch.equal(before[k], after[k])]
        assert changed, part
    assert policy.update.num_grad_updates == 1


@pytest.mark.parametrize("continuous", [False, True])
def test_reading_the_latents_through_their_ones_changes_no_loss_or_gradient(
    continuous: bool,
) -> None:
    # The one-hot reads (embedding_bag over each latent's one) are the dense products'
    # sums: the same actor-critic loss and gradients as with the concatenated features.
    env = CountingEnv(episode_len=10, continuous=continuous)
    policy = _policy(env)
    for p in policy.model.parameters():  # no zero-initialised heads: every term counts
        torch.nn.init.normal_(p, std=0.05) if p.requires_grad else None
    replay = _filled_replay(policy, env, 60)
    t = policy.update.batch_to_tensors(replay.sample(2, 8))
    latents, _, _ = policy.observe(t)
    assert latents.positions is not None
    results = []
    for positions in (latents.positions, None):
        start = LatentState(latents.h.detach(), latents.z.detach(), positions)
        torch.manual_seed(3)
        policy.model.zero_grad()
        policy.model.return_range_seen.fill_(0.0)
        loss, _ = policy.actor_critic_loss(t, start)
        loss.backward()
        grads = [p.grad.clone() for p in policy.model.actor.parameters()]
        grads += [p.grad.clone() for p in policy.model.critic.parameters()]
        results.append((loss.detach(), grads))
    (sparse, sparse_grads), (dense, dense_grads) = results
    assert torch.allclose(sparse, dense, rtol=1e-4, atol=1e-5)
    for a, b in zip(sparse_grads, dense_grads, strict=True):
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("continuous", [False, True])
def test_the_actor_loss_reaches_the_actor_and_never_the_world_model(continuous: bool) -> None:
    env = CountingEnv(episode_len=10, continuous=continuous)
    policy = _policy(env)
    replay = _filled_replay(policy, env, 60)
    t = policy.update.batch_to_tensors(replay.sample(2, 8))
    latents, _, _ = policy.observe(t)
    latents = type(latents)(latents.h.detach(), latents.z.detach())
    loss, _ = policy.actor_critic_loss(t, latents)
    loss.backward()
    model = policy.model
    assert all(p.grad is None for p in model.world_model_parameters())
    assert sum(float(p.grad.abs().sum()) for p in model.actor.parameters()) > 0
    assert all(p.grad is None for p in model.slow_critic.parameters())


def test_imagined_rollouts_never_step_the_real_env(local_backend: None) -> None:
    steps = {"n": 0}

    class Counted(CountingEnv):
        def step(self, action: Any) -> Any:
            steps["n"] += 1
            return super().step(action)

    trainer = Trainer(
        "dreamerv3",
        env=lambda _cfg=None: Counted(episode_len=20),
        backend="local",
        num_workers=0,
        learning_starts=32,
        rollout_fragment_length=16,
        min_steps_per_iteration=64,
        train_ratio=8.0,
        **SMALL,
    )
    built = steps["n"]  # the learner's worker may probe its env when it is built
    try:
        result = trainer.train()
        trained = result["counters"]["num_train_steps"]
        assert trained >= 2  # imagined 2 * 8 * 3 steps per train step
        assert steps["n"] - built == result["num_env_steps_sampled"] == 64
        # More learner updates on the replay: the env's count does not move.
        policy = trainer.workers.local_worker().get_policy()
        replay = _filled_replay(policy, CountingEnv(episode_len=20), 40)
        before = steps["n"]
        for _ in range(2):
            policy.learn(replay.sample(2, 8))
        assert steps["n"] == before
    finally:
        trainer.stop()


def test_image_observations_train_through_the_cnn() -> None:
    class Pixels(gym.Env[Any, Any]):
        """A bright square on the left or right of a 16x16 image; reward for going its way."""

        observation_space = gym.spaces.Box(0, 255, (16, 16, 1), np.uint8)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            super().reset(seed=seed)
            self.side = int(self.np_random.integers(2))
            return self._obs(), {}

        def _obs(self) -> Any:
            img = np.zeros((16, 16, 1), np.uint8)
            img[4:12, self.side * 8 : self.side * 8 + 8] = 255
            return img

        def step(self, action: Any) -> Any:
            reward = float(int(action) == self.side)
            self.side = int(self.np_random.integers(2))
            return self._obs(), reward, False, False, {}

    env = gym.wrappers.TimeLimit(Pixels(), 10)
    policy = _policy(env)
    assert policy.model.kind == "image"
    replay = _filled_replay(policy, env, 40)
    batch = replay.sample(2, 8)
    assert batch[OBS].dtype == np.uint8 and batch[OBS].shape == (2, 8, 16, 16, 1)
    t = policy.update.batch_to_tensors(batch)
    latents, _, _ = policy.observe(t)
    assert policy.model.decoder(latents.features()).shape == (2, 8, 16, 16, 1)
    first = policy.learn(batch)["reconstruction_loss"]
    for _ in range(5):
        last = policy.learn(batch)["reconstruction_loss"]
    assert last < first


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"model_size": "XXL"}, "DreamerV3Config.model_size='XXL' must be one of"),
        ({"model_size": "xs"}, "DreamerV3Config.model_size='xs' must be one of"),
        ({"train_ratio": 0}, "DreamerV3Config.train_ratio"),
        ({"train_ratio": -4.0}, "DreamerV3Config.train_ratio"),
        ({"train_ratio": 1e9}, "DreamerV3Config.train_ratio=1000000000.0 must be <= 65536"),
        ({"batch_length": 1}, "DreamerV3Config.batch_length"),
        ({"imagination_horizon": 0}, "DreamerV3Config.imagination_horizon"),
        ({"replay_capacity": 10}, "DreamerV3Config.replay_capacity=10 must be >= batch_length"),
        ({"unimix": 1.0}, "DreamerV3Config.unimix"),
        ({"observation_filter": "MeanStdFilter"}, "DreamerV3Config.observation_filter"),
        ({"model": {"use_lstm": True}}, "DreamerV3Config.model"),
        ({"model": {"hidden": (7,)}}, "sized by model_size"),
    ],
)
def test_bad_settings_name_the_key(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        DreamerV3Config(**fields)


def test_model_sizes_are_the_papers() -> None:
    from rlflow.algorithms.dreamerv3.config import MODEL_SIZES

    assert {
        k: (s.gru_units, s.dense_units, s.num_layers, s.cnn_depth) for k, s in MODEL_SIZES.items()
    } == {
        "XS": (256, 256, 1, 24),
        "S": (512, 512, 2, 32),
        "M": (1024, 640, 3, 48),
        "L": (2048, 768, 4, 64),
        "XL": (4096, 1024, 5, 96),
    }
    assert DreamerV3Config().model_size == "XS"


@pytest.mark.parametrize(
    ("space", "what"),
    [
        (gym.spaces.Discrete(16), "observation space"),  # the policy's space check
        (gym.spaces.Box(0, 1, (4, 4), np.float32), "cannot encode"),
        (gym.spaces.Box(0, 255, (9, 9, 3), np.uint8), "cannot encode"),
    ],
)
def test_observations_it_cannot_encode_are_refused_before_any_actor_starts(
    local_backend: None, space: gym.Space[Any], what: str
) -> None:
    class Odd(gym.Env[Any, Any]):
        observation_space = space
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            return self.observation_space.sample(), {}

        def step(self, action: Any) -> Any:
            return self.observation_space.sample(), 0.0, True, False, {}

    with pytest.raises(ConfigError, match=what):
        Trainer("dreamerv3", env=lambda _cfg=None: Odd(), backend="local", num_workers=2)


def test_an_image_policy_exports_and_acts_as_the_learner(tmp_path: Any) -> None:
    from rlflow.config import AlgorithmConfig
    from rlflow.export import export_policy
    from rlflow.models.memory import RecurrentInputs

    obs_space = gym.spaces.Box(0, 255, (16, 16, 1), np.uint8)
    policy = DreamerV3Policy(obs_space, gym.spaces.Discrete(3), DreamerV3Config(**SMALL), seed=0)
    path = export_policy(
        policy, tmp_path / "pixels", algorithm="dreamerv3", policy_id="p", config=AlgorithmConfig()
    )
    loaded = rlflow.load_policy(path, seed=4)
    policy.generator.manual_seed(4)
    obs = np.random.default_rng(0).integers(0, 256, (3, 16, 16, 1), dtype=np.uint8)
    state, prev, memory = None, None, RecurrentInputs(None, None, None)
    for _ in range(3):
        actions, state = loaded.compute_actions(obs, state=state, prev_actions=prev)
        expected, extra = policy.compute_actions(obs, explore=False, memory=memory)
        np.testing.assert_array_equal(actions, expected)
        learner_state = [extra[f"state_out_{k}"] for k in range(3)]
        for a, b in zip(state, learner_state, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5)
        memory, prev = RecurrentInputs(learner_state, expected, None), actions
        obs = np.roll(obs, 3, axis=2)


@pytest.mark.parametrize(("env_id", "explore"), [("CartPole-v1", False), ("Pendulum-v1", True)])
def test_the_exported_policy_acts_as_the_learners_on_a_seeded_episode(
    local_backend: None, tmp_path: Any, env_id: str, explore: bool
) -> None:
    trainer = Trainer(
        "dreamerv3",
        env=env_id,
        backend="local",
        num_workers=0,
        learning_starts=32,
        rollout_fragment_length=16,
        min_steps_per_iteration=64,
        train_ratio=8.0,
        seed=0,
        **SMALL,
    )
    try:
        assert trainer.train()["counters"]["num_train_steps"] >= 2
        path = trainer.export_policy(tmp_path / "dv3")
        loaded = rlflow.load_policy(path, seed=11)
        assert loaded.recurrent and type(loaded.actor).__name__ == "DreamerV3Actor"
        # Acting needs no decoder, reward or continue head, or slow critic.
        assert not any(
            k.startswith(("decoder", "reward_head", "continue_head", "slow_critic"))
            for k in loaded.actor.state_dict()
        )
        policy = trainer.workers.local_worker().get_policy()
        policy.generator.manual_seed(11)
        env = gym.make(env_id)
        for episode in range(2):  # the state reset at the second episode's start
            obs, _ = env.reset(seed=episode)
            mine, theirs = trainer.get_initial_state(), loaded.get_initial_state()
            assert all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))
            prev: Any = None
            for _ in range(30):
                action, mine = trainer.compute_single_action(
                    obs, state=mine, prev_action=prev, explore=explore
                )
                same, theirs = loaded.compute_single_action(
                    obs, state=theirs, prev_action=prev, explore=explore
                )
                np.testing.assert_array_equal(np.asarray(action), np.asarray(same))
                for a, b in zip(mine, theirs, strict=True):
                    np.testing.assert_allclose(a, b, atol=1e-5)
                obs, _, term, trunc, _ = env.step(action)
                prev = action
                if term or trunc:
                    break
    finally:
        trainer.stop()
