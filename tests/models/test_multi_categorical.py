"""MultiCategorical (MultiDiscrete actions): its math against torch.distributions, exactly."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical as TorchCategorical
from torch.distributions import kl_divergence

from rlflow.errors import ConfigError
from rlflow.models import ActorCritic, MultiCategorical, dist_class_for
from rlflow.models.distributions import Categorical

pytestmark = pytest.mark.timeout(60)

NVEC = (2, 3, 4)


def _torch_dists(inputs: torch.Tensor) -> list[TorchCategorical]:
    return [TorchCategorical(logits=part) for part in torch.split(inputs, NVEC, dim=-1)]


def _inputs(seed: int) -> torch.Tensor:
    return torch.randn(5, sum(NVEC), generator=torch.Generator().manual_seed(seed)) * 2.0


def test_dist_class_for_multi_discrete_is_one_class_per_nvec() -> None:
    cls = dist_class_for(gym.spaces.MultiDiscrete(list(NVEC)))
    assert issubclass(cls, MultiCategorical) and cls.nvec == NVEC
    assert dist_class_for(gym.spaces.MultiDiscrete(list(NVEC))) is cls
    assert dist_class_for(gym.spaces.MultiDiscrete([2, 2])) is not cls
    assert cls.required_input_dim(gym.spaces.MultiDiscrete(list(NVEC))) == 9


def test_logp_entropy_and_kl_equal_torch_sums_over_components() -> None:
    cls = MultiCategorical.for_nvec(NVEC)
    p_inputs, q_inputs = _inputs(0), _inputs(1)
    actions = torch.tensor([[0, 0, 0], [1, 2, 3], [1, 0, 2], [0, 1, 1], [1, 2, 0]])
    p, q = cls(p_inputs), cls(q_inputs)
    tp, tq = _torch_dists(p_inputs), _torch_dists(q_inputs)
    want_logp = sum(d.log_prob(actions[:, i]) for i, d in enumerate(tp))
    want_entropy = sum(d.entropy() for d in tp)
    want_kl = sum(kl_divergence(a, b) for a, b in zip(tp, tq, strict=True))
    torch.testing.assert_close(p.logp(actions), want_logp)
    torch.testing.assert_close(p.entropy(), want_entropy)
    torch.testing.assert_close(p.kl(q), want_kl)
    torch.testing.assert_close(p.kl(p), torch.zeros(5), atol=1e-6, rtol=0)
    assert p.logp(actions).shape == (5,)


def test_one_component_equals_categorical() -> None:
    inputs = _inputs(2)[:, :4]
    multi, single = MultiCategorical.for_nvec((4,))(inputs), Categorical(inputs)
    actions = torch.tensor([0, 1, 2, 3, 3])
    torch.testing.assert_close(multi.logp(actions[:, None]), single.logp(actions))
    torch.testing.assert_close(multi.entropy(), single.entropy())
    assert multi.deterministic().squeeze(-1).tolist() == single.deterministic().tolist()


def test_deterministic_is_the_argmax_of_each_component() -> None:
    inputs = torch.tensor([[0.0, 1.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 9.0]])
    assert MultiCategorical.for_nvec(NVEC)(inputs).deterministic().tolist() == [[1, 0, 3]]


def test_samples_follow_each_component_and_the_generator() -> None:
    cls = MultiCategorical.for_nvec(NVEC)
    inputs = _inputs(3)[:1].expand(20_000, -1)
    draws = cls(inputs, generator=torch.Generator().manual_seed(0)).sample()
    again = cls(inputs, generator=torch.Generator().manual_seed(0)).sample()
    assert draws.shape == (20_000, 3) and draws.dtype == torch.int64
    assert torch.equal(draws, again)
    for i, dist in enumerate(_torch_dists(inputs[:1])):
        freq = np.bincount(draws[:, i].numpy(), minlength=NVEC[i]) / 20_000
        np.testing.assert_allclose(freq, dist.probs[0].numpy(), atol=0.015)


def test_gradient_flows_through_logp() -> None:
    inputs = _inputs(4).requires_grad_(True)
    MultiCategorical.for_nvec(NVEC)(inputs).logp(
        torch.zeros(5, 3, dtype=torch.long)
    ).sum().backward()
    assert inputs.grad is not None and bool(inputs.grad.abs().sum() > 0)


def test_kl_needs_the_same_nvec() -> None:
    p = MultiCategorical.for_nvec((2, 2))(torch.zeros(1, 4))
    with pytest.raises(TypeError, match="nvec"):
        p.kl(MultiCategorical.for_nvec((4,))(torch.zeros(1, 4)))
    with pytest.raises(TypeError, match="for_nvec"):
        MultiCategorical(torch.zeros(1, 4))


@pytest.mark.parametrize(
    ("space", "needle"),
    [
        (gym.spaces.MultiDiscrete([[2, 3], [2, 3]]), "1-D nvec"),
        (gym.spaces.MultiDiscrete([2, 3], start=[1, 0]), "starting at 0"),
    ],
)
def test_unsupported_multi_discrete_names_it(space: gym.Space[Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        dist_class_for(space)
    assert repr(space) in str(info.value) and needle in str(info.value)


def test_actor_critic_outputs_sum_nvec_logits() -> None:
    model = ActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.MultiDiscrete(list(NVEC)))
    dist_inputs, value = model(torch.zeros(2, 4))
    assert dist_inputs.shape == (2, 9) and value.shape == (2,)
