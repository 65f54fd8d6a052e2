"""Golden values and equivalences of the return and advantage estimators."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlflow.data import ADVANTAGES, EPS_ID, REWARDS, VALUE_TARGETS, VF_PREDS, SampleBatch
from rlflow.errors import ConfigError
from rlflow.returns import compute_advantages, discounted_returns, gae, n_step_targets

pytestmark = pytest.mark.timeout(60)

# One fragment used by several tests: 3 steps, cut off, V(s_3) = 2.0.
REWARDS_3 = np.array([1.0, 0.0, 2.0])
VALUES_3 = np.array([0.5, 1.0, 1.5])
BOOTSTRAP = 2.0
# delta_t = r_t + 0.9 * V_{t+1} - V_t:
#   delta_0 = 1 + 0.9 * 1.0 - 0.5 = 1.4
#   delta_1 = 0 + 0.9 * 1.5 - 1.0 = 0.35
#   delta_2 = 2 + 0.9 * 2.0 - 1.5 = 2.3
DELTAS_3 = [1.4, 0.35, 2.3]
# gamma * lam = 0.9 * 0.8 = 0.72:
#   A_2 = 2.3
#   A_1 = 0.35 + 0.72 * 2.3   = 0.35 + 1.656   = 2.006
#   A_0 = 1.4  + 0.72 * 2.006 = 1.4  + 1.44432 = 2.84432
GAE_3 = [2.84432, 2.006, 2.3]
# value targets = A + V = [2.84432 + 0.5, 2.006 + 1.0, 2.3 + 1.5]
TARGETS_3 = [3.34432, 3.006, 3.8]


def test_discounted_returns_golden() -> None:
    # G_2 = 3; G_1 = 2 + 0.9 * 3 = 4.7; G_0 = 1 + 0.9 * 4.7 = 5.23
    assert discounted_returns([1.0, 2.0, 3.0], 0.9) == pytest.approx([5.23, 4.7, 3.0])


def test_discounted_returns_with_bootstrap() -> None:
    # G_2 = 3 + 0.9 * 10 = 12; G_1 = 2 + 0.9 * 12 = 12.8; G_0 = 1 + 0.9 * 12.8 = 12.52
    out = discounted_returns([1.0, 2.0, 3.0], 0.9, bootstrap_value=10.0)
    assert out == pytest.approx([12.52, 12.8, 12.0])


def test_discounted_returns_edge_cases() -> None:
    # gamma = 0: each return is its own reward; gamma = 1: suffix sums.
    assert discounted_returns([1.0, 2.0, 3.0], 0.0, bootstrap_value=5.0).tolist() == [1.0, 2.0, 3.0]
    assert discounted_returns([1.0, 2.0, 3.0], 1.0).tolist() == [6.0, 5.0, 3.0]
    assert discounted_returns(np.zeros(0), 0.9).shape == (0,)
    assert discounted_returns(np.ones(2, np.float32), 0.5).dtype == np.float32
    assert discounted_returns([1, 2], 0.5).dtype == np.float64


def test_gae_golden() -> None:
    out = gae(REWARDS_3, VALUES_3, bootstrap_value=BOOTSTRAP, gamma=0.9, lam=0.8)
    assert out.advantages == pytest.approx(GAE_3)
    assert out.value_targets == pytest.approx(TARGETS_3)
    advantages, targets = out  # unpacks as a pair
    assert advantages is out.advantages and targets is out.value_targets


def test_gae_terminated_fragment() -> None:
    # 2 steps, terminated (bootstrap 0), gamma = lam = 1, V = [0.5, 0.5]:
    # delta_1 = 1 + 0 - 0.5 = 0.5; delta_0 = 1 + 0.5 - 0.5 = 1.0; A_1 = 0.5; A_0 = 1.0 + 0.5 = 1.5
    out = gae([1.0, 1.0], [0.5, 0.5], bootstrap_value=0.0, gamma=1.0, lam=1.0)
    assert out.advantages.tolist() == [1.5, 0.5]
    assert out.value_targets.tolist() == [2.0, 1.0]


finite = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False)
unit = st.floats(min_value=0.0, max_value=1.0)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=20), finite, unit)
def test_gae_lambda_one_is_returns_minus_values(
    steps: list[tuple[float, float]], bootstrap: float, gamma: float
) -> None:
    rewards, values = np.array(steps).T
    out = gae(rewards, values, bootstrap_value=bootstrap, gamma=gamma, lam=1.0)
    returns = discounted_returns(rewards, gamma, bootstrap_value=bootstrap)
    np.testing.assert_allclose(out.advantages, returns - values, atol=1e-9)
    np.testing.assert_allclose(out.value_targets, returns, atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=20), finite, unit)
def test_gae_lambda_zero_is_td_errors(
    steps: list[tuple[float, float]], bootstrap: float, gamma: float
) -> None:
    rewards, values = np.array(steps).T
    out = gae(rewards, values, bootstrap_value=bootstrap, gamma=gamma, lam=0.0)
    next_values = np.append(values[1:], bootstrap)
    np.testing.assert_allclose(out.advantages, rewards + gamma * next_values - values, atol=1e-9)


def test_gae_lambda_zero_golden() -> None:
    out = gae(REWARDS_3, VALUES_3, bootstrap_value=BOOTSTRAP, gamma=0.9, lam=0.0)
    assert out.advantages == pytest.approx(DELTAS_3)


def test_validation_errors() -> None:
    with pytest.raises(ConfigError, match=r"gamma=1.5 must be a number in \[0, 1\]"):
        discounted_returns([1.0], 1.5)
    with pytest.raises(ConfigError, match=r"lam=-0.1 must be a number in \[0, 1\]"):
        gae([1.0], [1.0], bootstrap_value=0.0, gamma=0.9, lam=-0.1)
    with pytest.raises(ConfigError, match=r"rewards must be 1-D .* shape \(2, 2\)"):
        discounted_returns(np.ones((2, 2)), 0.9)
    with pytest.raises(ConfigError, match=r"rewards has shape \(2,\) but values has shape \(3,\)"):
        gae([1.0, 1.0], [1.0, 1.0, 1.0], bootstrap_value=0.0, gamma=0.9, lam=0.9)


def fragment() -> SampleBatch:
    return SampleBatch(
        {
            REWARDS: REWARDS_3.astype(np.float32),
            VF_PREDS: VALUES_3.astype(np.float32),
            EPS_ID: [4, 4, 4],
        }
    )


def test_compute_advantages_gae() -> None:
    batch = fragment()
    out = compute_advantages(batch, last_value=BOOTSTRAP, gamma=0.9, lam=0.8)
    assert out[ADVANTAGES].dtype == np.float32
    assert out[ADVANTAGES] == pytest.approx(GAE_3, rel=1e-6)
    assert out[VALUE_TARGETS] == pytest.approx(TARGETS_3, rel=1e-6)
    assert ADVANTAGES not in batch  # the input is not modified


def test_compute_advantages_critic_without_gae() -> None:
    # G_2 = 2 + 0.9 * 2.0 = 3.8; G_1 = 0 + 0.9 * 3.8 = 3.42; G_0 = 1 + 0.9 * 3.42 = 4.078
    # advantages = G - V = [4.078 - 0.5, 3.42 - 1.0, 3.8 - 1.5] = [3.578, 2.42, 2.3]
    out = compute_advantages(fragment(), last_value=BOOTSTRAP, gamma=0.9, lam=0.8, use_gae=False)
    assert out[ADVANTAGES] == pytest.approx([3.578, 2.42, 2.3], rel=1e-6)
    assert out[VALUE_TARGETS] == pytest.approx([4.078, 3.42, 3.8], rel=1e-6)


def test_compute_advantages_without_critic() -> None:
    # REINFORCE, terminated: G_2 = 2; G_1 = 0 + 0.5 * 2 = 1; G_0 = 1 + 0.5 * 1 = 1.5
    batch = SampleBatch({REWARDS: REWARDS_3})
    out = compute_advantages(
        batch, last_value=0.0, gamma=0.5, lam=1.0, use_gae=False, use_critic=False
    )
    assert out[ADVANTAGES].tolist() == [1.5, 1.0, 2.0]
    assert out[VALUE_TARGETS].tolist() == [0.0, 0.0, 0.0]


def test_compute_advantages_errors() -> None:
    with pytest.raises(ConfigError, match="use_gae=True needs use_critic=True"):
        compute_advantages(fragment(), last_value=0.0, gamma=0.9, lam=0.9, use_critic=False)
    with pytest.raises(ConfigError, match=r"lacks columns \['vf_preds'\]"):
        compute_advantages(SampleBatch({REWARDS: [1.0]}), last_value=0.0, gamma=0.9, lam=0.9)
    two = SampleBatch({REWARDS: [1.0, 1.0], VF_PREDS: [0.0, 0.0], EPS_ID: [1, 2]})
    with pytest.raises(ConfigError, match=r"spans episodes \[1, 2\]"):
        compute_advantages(two, last_value=0.0, gamma=0.9, lam=0.9)


def test_compute_advantages_empty_batch() -> None:
    out = compute_advantages(SampleBatch(), last_value=0.0, gamma=0.9, lam=0.9)
    assert out.count == 0 and out[ADVANTAGES].shape == (0,)


def test_n_step_golden() -> None:
    # gamma = 0.5, n = 3, step 2 is terminal:
    #   t=0: window 0..2 -> 1 + 0.5*2 + 0.25*3 = 2.75, discount 0.5^3 = 0.125, terminal
    #   t=1: window 1..2 -> 2 + 0.5*3 = 3.5, discount 0.25, terminal
    #   t=2: window 2..2 -> 3, discount 0.5, terminal
    #   t=3: window 3..4 (fragment end) -> 4 + 0.5*5 = 6.5, discount 0.25, not terminal
    #   t=4: window 4..4 -> 5, discount 0.5, not terminal
    out = n_step_targets([1.0, 2.0, 3.0, 4.0, 5.0], [False, False, True, False, False], 0.5, 3)
    assert out.returns.tolist() == [2.75, 3.5, 3.0, 6.5, 5.0]
    assert out.next_index.tolist() == [2, 2, 2, 4, 4]
    assert out.discounts.tolist() == [0.125, 0.25, 0.5, 0.25, 0.5]
    assert out.terminateds.tolist() == [True, True, True, False, False]


def test_n_step_equivalences() -> None:
    rewards = np.array([0.3, -1.0, 2.0, 0.5])
    no_term = np.zeros(4, dtype=bool)
    one = n_step_targets(rewards, no_term, 0.9, 1)
    assert one.returns.tolist() == rewards.tolist()
    assert one.next_index.tolist() == [0, 1, 2, 3]
    assert one.discounts == pytest.approx([0.9] * 4)
    # n >= T and no terminal: the n-step return is the full discounted return.
    full = n_step_targets(rewards, no_term, 0.9, 10)
    np.testing.assert_allclose(full.returns, discounted_returns(rewards, 0.9))
    assert full.next_index.tolist() == [3, 3, 3, 3]


def test_n_step_validation() -> None:
    with pytest.raises(ConfigError, match="n=0 must be an integer >= 1"):
        n_step_targets([1.0], [False], 0.9, 0)
    with pytest.raises(ConfigError, match=r"terminateds has shape \(2,\)"):
        n_step_targets([1.0], [False, True], 0.9, 1)
    assert n_step_targets([], [], 0.9, 3).returns.shape == (0,)
