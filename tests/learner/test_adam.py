"""`rlflow.learner.adam.Adam` takes exactly torch.optim.Adam's steps and shares its state layout."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

from rlflow.errors import ConfigError
from rlflow.learner.adam import Adam


def _net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3), torch.nn.Tanh()
    )


def _groups(net: torch.nn.Module) -> list[dict[str, object]]:
    first, second = list(net.parameters())[:2], list(net.parameters())[2:]
    return [{"params": first, "lr": 3e-3}, {"params": second, "lr": 1e-3, "betas": (0.5, 0.9)}]


def _train(net: torch.nn.Module, opt: object, steps: int, *, skip_every: int = 0) -> None:
    """``steps`` updates on a fixed regression; the lr of every group decays; with
    ``skip_every`` the last layer has no gradient on every such step (as TD3's delayed actor)."""
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 4, generator=gen), torch.randn(64, 3, generator=gen)
    last = list(net.parameters())[2:]
    for i in range(steps):
        for group in opt.param_groups:  # type: ignore[attr-defined]
            group["lr"] = group["lr"] * 0.99
        opt.zero_grad()  # type: ignore[attr-defined]
        ((net(x) - y) ** 2).mean().backward()
        if skip_every and i % skip_every == 0:
            for p in last:
                p.grad = None
        opt.step()  # type: ignore[attr-defined]


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize("skip_every", [0, 3])
def test_steps_are_bit_identical_to_torch_adam(skip_every: int) -> None:
    ours, theirs = _net(), _net()
    _train(ours, Adam(_groups(ours)), 60, skip_every=skip_every)
    _train(theirs, torch.optim.Adam(_groups(theirs)), 60, skip_every=skip_every)
    assert _same(ours, theirs)
    assert not _same(ours, _net())  # it did learn something


def test_default_hyperparameters_match_torch() -> None:
    ours, theirs = _net(), _net()
    _train(ours, Adam(ours.parameters(), lr=1e-3), 20)
    _train(theirs, torch.optim.Adam(theirs.parameters(), lr=1e-3), 20)
    assert _same(ours, theirs)


def test_state_dict_loads_into_torch_and_back() -> None:
    """Either optimizer continues from the other's state exactly as it would have itself."""
    ref, a, b = _net(), _net(), _net()
    ref_opt = torch.optim.Adam(_groups(ref))
    _train(ref, ref_opt, 30, skip_every=5)
    ours = Adam(_groups(a))
    _train(a, ours, 15, skip_every=5)
    torch_opt = torch.optim.Adam(_groups(b))
    b.load_state_dict(a.state_dict())
    torch_opt.load_state_dict(ours.state_dict())
    back = Adam(_groups(a))
    back.load_state_dict(torch_opt.state_dict())
    _train(b, torch_opt, 15, skip_every=5)
    _train(a, back, 15, skip_every=5)
    assert _same(a, ref) and _same(b, ref)
    assert back.state_dict()["param_groups"][1]["betas"] == (0.5, 0.9)


def test_zero_grad() -> None:
    w = torch.nn.Parameter(torch.ones(3))
    opt = Adam([w])
    w.sum().backward()  # type: ignore[no-untyped-call]
    opt.zero_grad(set_to_none=False)
    assert w.grad is not None and torch.equal(w.grad, torch.zeros(3))
    opt.zero_grad()
    assert w.grad is None
    opt.step()  # no gradient: nothing moves, no state is built
    assert torch.equal(w, torch.ones(3)) and opt.state == {}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": -1.0}, "lr=-1.0 must be >= 0"),
        ({"betas": (0.9, 1.0)}, "betas=(0.9, 1.0) must be two numbers in [0, 1)"),
        ({"eps": -1e-8}, "eps=-1e-08 must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Adam([torch.nn.Parameter(torch.ones(1))], **kwargs)  # type: ignore[arg-type]


def test_mismatched_state_is_refused() -> None:
    opt = Adam(_net().parameters())
    with pytest.raises(ConfigError, match="param groups do not match"):
        opt.load_state_dict(Adam([torch.nn.Parameter(torch.ones(1))]).state_dict())


def test_a_step_does_not_import_dynamo() -> None:
    """The point of the class: a learner's first update leaves torch._dynamo unimported."""
    code = (
        "import sys, torch\n"
        "from rlflow.learner.adam import Adam\n"
        "w = torch.nn.Parameter(torch.ones(2)); opt = Adam([w])\n"
        "(w * w).sum().backward(); opt.step(); opt.state_dict()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
