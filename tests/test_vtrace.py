"""Golden values and equivalences for `rlflow.vtrace`."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlflow.errors import ConfigError
from rlflow.returns import discounted_returns
from rlflow.vtrace import vtrace, vtrace_torch

pytestmark = pytest.mark.timeout(120)

# Behaviour policy mu(a_t|x_t) = 0.5 everywhere; target pi = [1.0, 0.25, 0.5], so the ratios
# pi/mu are rho = [2.0, 0.5, 1.0].
MU_LOGP = np.log([0.5, 0.5, 0.5])
PI_LOGP = np.log([1.0, 0.25, 0.5])
REWARDS = [1.0, 2.0, 3.0]
VALUES = [0.5, 1.0, 1.5]
BOOTSTRAP = 2.0


def test_golden_values_clipped() -> None:
    # rho_bar = c_bar = pg_rho_bar = 1: clipped rho = c = [1, 0.5, 1]; gamma_t = 0.5.
    # V(x_{t+1}) = [1.0, 1.5, 2.0] (the last one is the bootstrap value).
    # delta_0 = 1.0 * (1 + 0.5 * 1.0 - 0.5) = 1.0
    # delta_1 = 0.5 * (2 + 0.5 * 1.5 - 1.0) = 0.875
    # delta_2 = 1.0 * (3 + 0.5 * 2.0 - 1.5) = 2.5
    # v_2 - V_2 = 2.5                               -> v_2 = 4.0
    # v_1 - V_1 = 0.875 + 0.5 * 0.5 * 2.5 = 1.5     -> v_1 = 2.5
    # v_0 - V_0 = 1.0 + 0.5 * 1.0 * 1.5 = 1.75      -> v_0 = 2.25
    # pg_0 = 1.0 * (1 + 0.5 * 2.5 - 0.5) = 1.75
    # pg_1 = 0.5 * (2 + 0.5 * 4.0 - 1.0) = 1.5
    # pg_2 = 1.0 * (3 + 0.5 * 2.0 - 1.5) = 2.5
    out = vtrace(MU_LOGP, PI_LOGP, REWARDS, VALUES, BOOTSTRAP, [0.5, 0.5, 0.5])
    np.testing.assert_allclose(out.vs, [2.25, 2.5, 4.0])
    np.testing.assert_allclose(out.pg_advantages, [1.75, 1.5, 2.5])
    np.testing.assert_allclose(out.rhos, [2.0, 0.5, 1.0])


def test_golden_values_unclipped_with_terminal_step() -> None:
    # No clipping: rho = c = [2, 0.5, 1]; the episode terminates at t = 1, so gamma_1 = 0.
    # delta_0 = 2.0 * (1 + 0.5 * 1.0 - 0.5) = 2.0
    # delta_1 = 0.5 * (2 + 0.0 * 1.5 - 1.0) = 0.5
    # delta_2 = 1.0 * (3 + 0.5 * 2.0 - 1.5) = 2.5
    # v_2 - V_2 = 2.5                               -> v_2 = 4.0
    # v_1 - V_1 = 0.5 + 0.0 * 0.5 * 2.5 = 0.5       -> v_1 = 1.5
    # v_0 - V_0 = 2.0 + 0.5 * 2.0 * 0.5 = 2.5       -> v_0 = 3.0
    # pg_0 = 2.0 * (1 + 0.5 * 1.5 - 0.5) = 2.5
    # pg_1 = 0.5 * (2 + 0.0 * 4.0 - 1.0) = 0.5
    # pg_2 = 1.0 * (3 + 0.5 * 2.0 - 1.5) = 2.5
    inf = math.inf
    out = vtrace(
        MU_LOGP,
        PI_LOGP,
        REWARDS,
        VALUES,
        BOOTSTRAP,
        [0.5, 0.0, 0.5],
        clip_rho_threshold=inf,
        clip_pg_rho_threshold=inf,
        clip_c_threshold=inf,
    )
    np.testing.assert_allclose(out.vs, [3.0, 1.5, 4.0])
    np.testing.assert_allclose(out.pg_advantages, [2.5, 0.5, 2.5])


def _n_step_returns(rewards: np.ndarray, discounts: np.ndarray, bootstrap: float) -> np.ndarray:
    """G_t = r_t + discount_t * G_{t+1}, G_T = bootstrap, by a plain loop."""
    out = np.zeros(len(rewards))
    acc = bootstrap
    for t in reversed(range(len(rewards))):
        acc = rewards[t] + discounts[t] * acc
        out[t] = acc
    return out


def test_on_policy_equals_n_step_returns() -> None:
    rng = np.random.default_rng(0)
    size = 7
    logp = np.log(rng.uniform(0.1, 1.0, size))
    rewards = rng.normal(size=size)
    values = rng.normal(size=size)
    discounts = np.full(size, 0.9)
    discounts[3] = 0.0  # the episode terminates at t = 3 and a new one starts at t = 4
    out = vtrace(logp, logp, rewards, values, 1.7, discounts)
    expected = _n_step_returns(rewards, discounts, 1.7)
    np.testing.assert_allclose(out.vs, expected)
    np.testing.assert_allclose(out.pg_advantages, expected - values)
    np.testing.assert_allclose(out.rhos, np.ones(size))
    # Without a terminal step it is the discounted return with a bootstrap, as in returns.py.
    out = vtrace(logp, logp, rewards, values, 1.7, np.full(size, 0.9))
    np.testing.assert_allclose(out.vs, discounted_returns(rewards, 0.9, bootstrap_value=1.7))


def test_clip_thresholds_truncate_ratios() -> None:
    rng = np.random.default_rng(1)
    size = 5
    behaviour = np.log(rng.uniform(0.1, 0.2, size))
    target = behaviour + 3.0  # every ratio is e^3 > 1
    rewards = rng.normal(size=size)
    values = rng.normal(size=size)
    discounts = np.full(size, 0.95)
    clipped = vtrace(behaviour, target, rewards, values, 0.3, discounts)
    on_policy = vtrace(behaviour, behaviour, rewards, values, 0.3, discounts)
    # All ratios clip to 1: the same targets as on-policy, but rhos report the raw ratios.
    np.testing.assert_allclose(clipped.vs, on_policy.vs)
    np.testing.assert_allclose(clipped.pg_advantages, on_policy.pg_advantages)
    np.testing.assert_allclose(clipped.rhos, np.full(size, math.exp(3.0)))
    # pg_rho_bar scales the advantages only.
    pg = vtrace(behaviour, target, rewards, values, 0.3, discounts, clip_pg_rho_threshold=2.0)
    np.testing.assert_allclose(pg.vs, on_policy.vs)
    np.testing.assert_allclose(pg.pg_advantages, 2.0 * on_policy.pg_advantages)
    # A tiny c_bar cuts the traces: v_s = V(x_s) + delta_s, the one-step target.
    cut = vtrace(behaviour, target, rewards, values, 0.3, discounts, clip_c_threshold=1e-12)
    next_values = np.append(values[1:], 0.3)
    np.testing.assert_allclose(cut.vs, rewards + discounts * next_values, atol=1e-9)


def test_batch_dimension_matches_columns() -> None:
    rng = np.random.default_rng(2)
    shape = (4, 3)
    behaviour = np.log(rng.uniform(0.1, 1.0, shape))
    target = np.log(rng.uniform(0.1, 1.0, shape))
    rewards, values = rng.normal(size=shape), rng.normal(size=shape)
    discounts = rng.choice([0.0, 0.99], size=shape)
    bootstrap = rng.normal(size=3)
    out = vtrace(behaviour, target, rewards, values, bootstrap, discounts)
    assert out.vs.shape == out.pg_advantages.shape == out.rhos.shape == shape
    for b in range(3):
        col = vtrace(
            behaviour[:, b],
            target[:, b],
            rewards[:, b],
            values[:, b],
            bootstrap[b],
            discounts[:, b],
        )
        np.testing.assert_allclose(out.vs[:, b], col.vs)
        np.testing.assert_allclose(out.pg_advantages[:, b], col.pg_advantages)


def test_float32_in_float32_out() -> None:
    f32 = np.float32
    out = vtrace(
        MU_LOGP.astype(f32),
        PI_LOGP.astype(f32),
        np.array(REWARDS, f32),
        np.array(VALUES, f32),
        f32(BOOTSTRAP),
        np.full(3, 0.5, f32),
    )
    assert out.vs.dtype == out.pg_advantages.dtype == out.rhos.dtype == np.float32
    np.testing.assert_allclose(out.vs, [2.25, 2.5, 4.0], rtol=1e-6)


def test_empty_fragment() -> None:
    out = vtrace([], [], [], [], 0.0, [])
    assert out.vs.shape == (0,)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"values": [0.0, 0.0]}, "values has shape"),
        ({"bootstrap_value": [0.0]}, "bootstrap_value has shape"),
        ({"rewards": np.zeros((3, 1, 1))}, "time-major"),
        ({"clip_c_threshold": 0.0}, "clip_c_threshold=0.0"),
        ({"clip_rho_threshold": True}, "clip_rho_threshold=True"),
    ],
)
def test_bad_inputs_raise(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {
        "behaviour_logp": MU_LOGP,
        "target_logp": PI_LOGP,
        "rewards": REWARDS,
        "values": VALUES,
        "bootstrap_value": BOOTSTRAP,
        "discounts": [0.5, 0.5, 0.5],
    }
    args.update(kwargs)
    with pytest.raises(ConfigError, match=match):
        vtrace(**args)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ vtrace_torch
@pytest.mark.parametrize(
    ("thresholds", "dtype"),
    [
        ((1.0, 1.0, 1.0), torch.float64),
        ((0.5, 2.0, 0.9), torch.float32),
        ((math.inf,) * 3, torch.float32),
    ],
)
def test_vtrace_torch_matches_the_numpy_reference(
    thresholds: tuple[float, float, float], dtype: torch.dtype
) -> None:
    rng = np.random.default_rng(7)
    t, b = 6, 4
    behaviour = rng.normal(-0.7, 0.4, (t, b))
    target = behaviour + rng.normal(0.0, 0.6, (t, b))
    rewards = rng.uniform(-1, 1, (t, b))
    values = rng.normal(0.0, 1.0, (t, b))
    bootstrap = rng.normal(0.0, 1.0, b)
    discounts = 0.95 * (rng.uniform(size=(t, b)) > 0.2)  # some terminal steps
    rho, pg_rho, c = thresholds
    kw = {"clip_rho_threshold": rho, "clip_pg_rho_threshold": pg_rho, "clip_c_threshold": c}
    want = vtrace(behaviour, target, rewards, values, bootstrap, discounts, **kw)
    args = [torch.tensor(x, dtype=dtype) for x in (behaviour, target, rewards, values)]
    boot, disc = torch.tensor(bootstrap, dtype=dtype), torch.tensor(discounts, dtype=dtype)
    vs, adv, rhos = vtrace_torch(*args, boot, disc, **kw)
    assert vs.dtype == dtype and vs.shape == (t, b) and not vs.requires_grad
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    np.testing.assert_allclose(vs.numpy(), want.vs, rtol=tol, atol=tol)
    np.testing.assert_allclose(adv.numpy(), want.pg_advantages, rtol=tol, atol=tol)
    np.testing.assert_allclose(rhos.numpy(), want.rhos, rtol=tol, atol=tol)


def test_vtrace_torch_takes_no_gradient_and_checks_thresholds() -> None:
    values = torch.zeros(3, requires_grad=True)
    zeros = torch.zeros(3)
    vs, _, _ = vtrace_torch(zeros, zeros, torch.ones(3), values, torch.tensor(0.0), zeros + 1)
    assert vs.tolist() == [3.0, 2.0, 1.0] and not vs.requires_grad
    with pytest.raises(ConfigError, match="clip_c_threshold"):
        vtrace_torch(zeros, zeros, zeros, zeros, torch.tensor(0.0), zeros, clip_c_threshold=0.0)
