"""`Adam`: the optimizer of rlflow's policies, written on torch's multi-tensor ops.

It takes the same steps as ``torch.optim.Adam`` (no weight decay, no AMSGrad): the parameters
are bit for bit the same after every step (``tests/policy/test_adam.py`` checks it against
torch's), and its `Adam.state_dict` has ``torch.optim.Adam``'s layout, so each loads the
other's state (checkpoints written before it existed load unchanged). Two reasons to have it:

- Every ``torch.optim`` optimizer imports ``torch._dynamo`` when it is built (its methods are
  wrapped by ``torch._disable_dynamo``), which takes as long as importing torch itself
  (1.5-2.6 s on a 2-core machine): a learner paid that at its first update.
- One step is a handful of ``torch._foreach_*`` calls for all parameters together, with no
  per-parameter Python: about a third of the time of ``torch.optim.Adam``'s CPU path for the
  small MLPs of classic-control tasks (``benchmarks/README.md`` has the numbers).

>>> import torch
>>> w = torch.nn.Parameter(torch.ones(2))
>>> opt = Adam([w], lr=0.1)
>>> (w * w).sum().backward()
>>> opt.step()
>>> [round(x, 4) for x in w.tolist()]
[0.9, 0.9]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from rlflow.errors import ConfigError

__all__ = ["Adam"]

_TORCH_GROUP_DEFAULTS = {
    "weight_decay": 0.0,
    "amsgrad": False,
    "maximize": False,
    "foreach": None,
    "capturable": False,
    "differentiable": False,
    "fused": None,
    "decoupled_weight_decay": False,
}
"""Keys ``torch.optim.Adam`` keeps in each param group (what this class does: none of them)."""


class _ParamState:
    """One parameter's step count and moment estimates (built on its first step)."""

    __slots__ = ("exp_avg", "exp_avg_sq", "step")

    def __init__(self, param: torch.Tensor) -> None:
        self.step = 0.0
        self.exp_avg = torch.zeros_like(param, memory_format=torch.preserve_format)
        self.exp_avg_sq = torch.zeros_like(param, memory_format=torch.preserve_format)


class Adam:
    """Adam (Kingma & Ba, 2015) over ``params``: tensors, or dicts ``{"params": [...],
    "lr": ...}`` (param groups, each with its own ``lr``, ``betas``, ``eps``).

    Change a group's ``lr`` between steps through `param_groups`, as with torch's optimizers.
    A parameter whose ``.grad`` is None is skipped by a step (its step count stays), as torch
    does.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps}
        items = list(params)
        if not items:
            raise ConfigError("Adam: got an empty parameter list")
        raw_groups: list[dict[str, Any]] = (
            items if isinstance(items[0], dict) else [{"params": items}]  # type: ignore[assignment]
        )
        self.param_groups: list[dict[str, Any]] = []
        """Each group: ``params`` (a list of tensors), ``lr``, ``betas``, ``eps``."""
        for raw in raw_groups:
            group = {**defaults, **raw, "params": list(raw["params"])}
            _check_group(group)
            self.param_groups.append(group)
        self.state: dict[torch.Tensor, _ParamState] = {}
        """Per parameter (built on its first step): step count and moment estimates."""

    def zero_grad(self, *, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient (to None; zeros with ``set_to_none=False``)."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter that has a gradient."""
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._update(group, params)

    def _update(self, group: dict[str, Any], params: list[torch.Tensor]) -> None:
        # The arithmetic and its order are torch.optim.Adam's (its multi-tensor path, which
        # gives the same bits as its per-tensor one), so results match it exactly.
        grads = [p.grad for p in params if p.grad is not None]
        states = [self.state.get(p) or self.state.setdefault(p, _ParamState(p)) for p in params]
        beta1, beta2 = group["betas"]
        lr = group["lr"]
        exp_avgs = [s.exp_avg for s in states]
        exp_avg_sqs = [s.exp_avg_sq for s in states]
        for s in states:
            s.step += 1.0
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
        step_size = [(lr / (1 - beta1**s.step)) * -1 for s in states]
        correction2_sqrt = [(1 - beta2**s.step) ** 0.5 for s in states]
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denom, correction2_sqrt)
        torch._foreach_add_(denom, group["eps"])
        torch._foreach_addcdiv_(params, exp_avgs, denom, step_size)

    def state_dict(self) -> dict[str, Any]:
        """The state in ``torch.optim.Adam``'s layout (parameters by their index in order)."""
        index: dict[torch.Tensor, int] = {}
        groups = []
        for group in self.param_groups:
            ids = [index.setdefault(p, len(index)) for p in group["params"]]
            hyper = {k: v for k, v in group.items() if k != "params"}
            groups.append({**_TORCH_GROUP_DEFAULTS, **hyper, "params": ids})
        state = {
            index[p]: {
                "step": torch.tensor(s.step, dtype=torch.float32),
                "exp_avg": s.exp_avg,
                "exp_avg_sq": s.exp_avg_sq,
            }
            for p, s in self.state.items()
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore a `state_dict` of this class or of ``torch.optim.Adam`` built over the same
        parameters, group by group; tensors are copied onto each parameter's device."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
            len(g["params"]) != len(own["params"])
            for g, own in zip(groups, self.param_groups, strict=True)
        ):
            raise ConfigError(
                "Adam.load_state_dict: the saved param groups do not match this optimizer's "
                f"({[len(g['params']) for g in groups]} vs "
                f"{[len(g['params']) for g in self.param_groups]} parameters per group)"
            )
        self.state = {}
        for saved, own in zip(groups, self.param_groups, strict=True):
            for key in ("lr", "betas", "eps"):
                own[key] = tuple(saved[key]) if key == "betas" else saved[key]
            for idx, p in zip(saved["params"], own["params"], strict=True):
                if idx in state_dict["state"]:
                    self.state[p] = _loaded_state(state_dict["state"][idx], p)


def _loaded_state(saved: Mapping[str, Any], param: torch.Tensor) -> _ParamState:
    state = _ParamState(param)
    step = saved["step"]
    state.step = float(step.item() if isinstance(step, torch.Tensor) else step)
    state.exp_avg.copy_(saved["exp_avg"])
    state.exp_avg_sq.copy_(saved["exp_avg_sq"])
    return state


def _check_group(group: dict[str, Any]) -> None:
    """ConfigError naming the bad hyperparameter of a param group."""
    lr, betas, eps = group["lr"], group["betas"], group["eps"]
    if not float(lr) >= 0.0:
        raise ConfigError(f"Adam: lr={lr!r} must be >= 0")
    if len(betas) != 2 or not all(0.0 <= float(b) < 1.0 for b in betas):
        raise ConfigError(f"Adam: betas={betas!r} must be two numbers in [0, 1)")
    if not float(eps) >= 0.0:
        raise ConfigError(f"Adam: eps={eps!r} must be >= 0")
    if not all(isinstance(p, torch.Tensor) for p in group["params"]):
        raise ConfigError("Adam: params must be tensors (or param groups of tensors)")
