"""Tests for rlflow.models: distributions against torch.distributions, networks, build_model."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import distributions as td

from rlflow.errors import ConfigError
from rlflow.models import (
    MLP,
    ActorCritic,
    Categorical,
    DiagGaussian,
    NatureCNN,
    build_model,
    dist_class_for,
)

pytestmark = pytest.mark.timeout(120)


def _logits(seed: int, rows: int = 5, n: int = 4) -> torch.Tensor:
    return torch.randn(rows, n, generator=torch.Generator().manual_seed(seed))


# -- Categorical --------------------------------------------------------------------------------


def test_categorical_matches_torch() -> None:
    logits, other_logits = _logits(0), _logits(1)
    ours, ref = Categorical(logits), td.Categorical(logits=logits)
    actions = torch.tensor([0, 1, 2, 3, 1])
    torch.testing.assert_close(ours.logp(actions), ref.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    kl = ours.kl(Categorical(other_logits))
    torch.testing.assert_close(kl, td.kl_divergence(ref, td.Categorical(logits=other_logits)))
    assert torch.equal(ours.deterministic(), torch.argmax(logits, dim=-1))


def test_categorical_hand_values() -> None:
    dist = Categorical(torch.log(torch.tensor([[0.25, 0.75]])))
    assert dist.logp(torch.tensor([1])).item() == pytest.approx(math.log(0.75))
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert dist.entropy().item() == pytest.approx(h)
    other = Categorical(torch.log(torch.tensor([[0.5, 0.5]])))
    kl = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    assert dist.kl(other).item() == pytest.approx(kl)
    assert dist.kl(dist).item() == pytest.approx(0.0, abs=1e-7)


def test_categorical_sampling_frequencies_and_seeding() -> None:
    probs = torch.tensor([0.2, 0.5, 0.3])
    inputs = torch.log(probs).expand(20_000, 3)
    draws = Categorical(inputs, generator=torch.Generator().manual_seed(3)).sample()
    assert draws.dtype == torch.int64 and draws.shape == (20_000,)
    freqs = torch.bincount(draws, minlength=3).double() / draws.numel()
    torch.testing.assert_close(freqs, probs.double(), atol=0.015, rtol=0.0)
    again = Categorical(inputs, generator=torch.Generator().manual_seed(3)).sample()
    assert torch.equal(draws, again)


@pytest.mark.parametrize(("rows", "n"), [(1, 2), (8, 2), (64, 6), (300, 18)])
def test_categorical_sample_draws_what_torch_multinomial_draws(rows: int, n: int) -> None:
    # The sampler's actions and the generator's state after them are torch.multinomial's:
    # seeded runs act as they did when Categorical.sample called it.
    ours, theirs = torch.Generator().manual_seed(rows), torch.Generator().manual_seed(rows)
    for seed in range(20):
        logits = 4 * _logits(seed, rows, n)
        if seed % 2:  # masked actions: probability 0, never drawn
            logits[:, 0] = -1e9
        draws = Categorical(logits, generator=ours).sample()
        probs = torch.softmax(logits, dim=-1)
        expected = torch.multinomial(probs, 1, generator=theirs).squeeze(-1)
        assert torch.equal(draws, expected)
    assert torch.equal(ours.get_state(), theirs.get_state())


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_categorical_sample_refuses_non_finite_logits(bad: float) -> None:
    logits = _logits(0)
    logits[2, 1] = bad
    with pytest.raises(RuntimeError, match="probability tensor contains"):
        Categorical(logits).sample()


# -- DiagGaussian -------------------------------------------------------------------------------


def _gauss_inputs(seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    mean, log_std = torch.randn(6, 3, generator=gen), 0.3 * torch.randn(6, 3, generator=gen)
    return torch.cat([mean, log_std], dim=-1)


def _torch_gauss(inputs: torch.Tensor) -> td.Distribution:
    mean, log_std = inputs.chunk(2, dim=-1)
    return td.Independent(td.Normal(mean, log_std.exp()), 1)


def test_diag_gaussian_matches_torch() -> None:
    a, b = _gauss_inputs(0), _gauss_inputs(1)
    ours, ref = DiagGaussian(a), _torch_gauss(a)
    actions = torch.randn(6, 3, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(ours.logp(actions), ref.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    torch.testing.assert_close(ours.kl(DiagGaussian(b)), td.kl_divergence(ref, _torch_gauss(b)))
    torch.testing.assert_close(ours.deterministic(), a[:, :3])


def test_diag_gaussian_hand_values_and_sampling() -> None:
    # One dimension, mean 1, std e: logp(1) = -1 - log(2 pi)/2, entropy = 1 + log(2 pi e)/2.
    dist = DiagGaussian(torch.tensor([[1.0, 1.0]]))
    assert dist.logp(torch.tensor([[1.0]])).item() == pytest.approx(
        -1 - 0.5 * math.log(2 * math.pi)
    )
    assert dist.entropy().item() == pytest.approx(1 + 0.5 * math.log(2 * math.pi * math.e))
    inputs = torch.tensor([[2.0, -1.0, math.log(0.5), 0.0]]).expand(50_000, 4)
    draws = DiagGaussian(inputs, generator=torch.Generator().manual_seed(0)).sample()
    torch.testing.assert_close(draws.mean(0), torch.tensor([2.0, -1.0]), atol=0.02, rtol=0)
    torch.testing.assert_close(draws.std(0), torch.tensor([0.5, 1.0]), atol=0.02, rtol=0)


def test_kl_rejects_other_class() -> None:
    with pytest.raises(TypeError, match="Categorical"):
        DiagGaussian(_gauss_inputs(0)).kl(Categorical(_logits(0)))


# -- dist_class_for -----------------------------------------------------------------------------


def test_dist_class_for_supported_spaces() -> None:
    assert dist_class_for(gym.spaces.Discrete(3)) is Categorical
    assert dist_class_for(gym.spaces.Box(-1, 1, (2,))) is DiagGaussian
    assert Categorical.required_input_dim(gym.spaces.Discrete(3)) == 3
    assert DiagGaussian.required_input_dim(gym.spaces.Box(-1, 1, (2,))) == 4


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.MultiDiscrete([[2, 3], [2, 3]]),
        gym.spaces.MultiBinary(3),
        gym.spaces.Box(-1, 1, (2, 2)),
        gym.spaces.Dict({"a": gym.spaces.Discrete(2)}),
        gym.spaces.Discrete(3, start=1),
    ],
)
def test_dist_class_for_unsupported_space_names_it(space: gym.Space[Any]) -> None:
    with pytest.raises(ConfigError) as info:
        dist_class_for(space)
    assert repr(space) in str(info.value)


# -- networks -----------------------------------------------------------------------------------


def test_mlp_layout_and_orthogonal_init() -> None:
    mlp = MLP(4, (64, 32), out_features=2, out_gain=0.01)
    linears = [m for m in mlp.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(4, 64), (64, 32), (32, 2)]
    assert sum(isinstance(m, torch.nn.Tanh) for m in mlp.modules()) == 2
    # Orthogonal with gain g: the smaller Gram matrix is g^2 * I.
    w0, w2 = linears[0].weight.detach(), linears[2].weight.detach()
    torch.testing.assert_close(w0.T @ w0, 2.0 * torch.eye(4), atol=1e-4, rtol=0)
    torch.testing.assert_close(w2 @ w2.T, 1e-4 * torch.eye(2), atol=1e-7, rtol=0)
    assert all(torch.count_nonzero(m.bias) == 0 for m in linears)
    assert mlp(torch.zeros(7, 4)).shape == (7, 2)


def test_mlp_rejects_bad_activation_and_width() -> None:
    with pytest.raises(ConfigError, match="activation='swish'"):
        MLP(4, (8,), activation="swish")
    with pytest.raises(ConfigError, match="hidden"):
        MLP(4, (8, 0))


def test_actor_critic_discrete_heads_and_gains() -> None:
    model = build_model(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(3))
    logits, value = model(torch.randn(5, 4))
    assert logits.shape == (5, 3) and value.shape == (5,)
    torch.testing.assert_close(model.value(torch.ones(2, 4)), model(torch.ones(2, 4))[1])
    assert isinstance(model.pi, MLP) and isinstance(model.vf, MLP)
    pi_head = model.pi.net[-1].weight.detach()
    vf_head = model.vf.net[-1].weight.detach()
    torch.testing.assert_close(pi_head @ pi_head.T, 1e-4 * torch.eye(3), atol=1e-7, rtol=0)
    torch.testing.assert_close(vf_head @ vf_head.T, torch.eye(1), atol=1e-5, rtol=0)


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_actor_critic_shared_has_fewer_params() -> None:
    obs, act = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    separate, shared = build_model(obs, act), build_model(obs, act, shared=True)
    hidden = 4 * 64 + 64 + 64 * 64 + 64
    assert _count(separate) == 2 * hidden + (64 * 2 + 2) + (64 + 1)
    assert _count(shared) == hidden + (64 * 2 + 2) + (64 + 1)


def test_actor_critic_gaussian_appends_state_independent_log_std() -> None:
    model = build_model(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (2,)), hidden=(16,))
    assert model.log_std is not None
    with torch.no_grad():
        model.log_std.copy_(torch.tensor([0.5, -0.5]))
    inputs, _ = model(torch.randn(4, 3))
    assert inputs.shape == (4, 4)
    torch.testing.assert_close(inputs[:, 2:], torch.tensor([[0.5, -0.5]]).expand(4, 2))


def test_discrete_observations_are_one_hot() -> None:
    model = build_model(gym.spaces.Discrete(5), gym.spaces.Discrete(2), hidden=(8,))
    by_index, _ = model(torch.tensor([3, 0]))
    by_one_hot = model.pi(torch.eye(5)[[3, 0]])
    torch.testing.assert_close(by_index, by_one_hot)


@pytest.mark.parametrize("shape", [(84, 84, 4), (4, 84, 84)])
def test_image_space_builds_nature_cnn_on_uint8(shape: tuple[int, int, int]) -> None:
    space = gym.spaces.Box(0, 255, shape, dtype=np.uint8)
    model = build_model(space, gym.spaces.Discrete(6))
    assert isinstance(model.trunk, NatureCNN)
    assert model.trunk.channels_last == (shape[-1] == 4)
    obs = torch.from_numpy(space.sample()[None].repeat(2, axis=0))
    assert obs.dtype == torch.uint8
    logits, value = model(obs)
    assert logits.shape == (2, 6) and value.shape == (2,)
    # The model divides by 255 itself: the same pixels given as floats give the same output.
    torch.testing.assert_close(model(obs.float())[0], logits)


def test_nature_cnn_layout_is_respected() -> None:
    cnn = NatureCNN((84, 84, 4))
    hwc = torch.randint(0, 256, (2, 84, 84, 4), dtype=torch.uint8)
    chw_cnn = NatureCNN((4, 84, 84))
    chw_cnn.load_state_dict(cnn.state_dict())
    torch.testing.assert_close(cnn(hwc), chw_cnn(hwc.permute(0, 3, 1, 2)))
    assert cnn(hwc).shape == (2, 512)


def test_small_image_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"\(10, 10, 3\)"):
        build_model(gym.spaces.Box(0, 255, (10, 10, 3), np.uint8), gym.spaces.Discrete(2))


def test_unsupported_spaces_in_build_model() -> None:
    with pytest.raises(ConfigError, match="MultiBinary"):
        build_model(gym.spaces.Box(-1, 1, (2,)), gym.spaces.MultiBinary(3))
    tuple_space = gym.spaces.Tuple((gym.spaces.Discrete(2),))
    with pytest.raises(ConfigError, match="Tuple"):
        ActorCritic(tuple_space, gym.spaces.Discrete(2))
