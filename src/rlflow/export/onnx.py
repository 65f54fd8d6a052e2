"""`export_onnx`: an exported policy as one ONNX file, to act outside Python and torch.

The graph is the greedy policy of `rlflow.load_policy`, whole: the run's observation filter
(``MeanStdFilter``, frozen, computed in float64 as training does) folded in before the network,
and Box actions clipped to their bounds after it, so ``onnxruntime`` gives the actions
``LoadedPolicy.compute_actions`` gives on the same raw observations. Inputs and outputs (the
batch axis ``batch`` is dynamic):

- ``obs``: raw observations ``[batch, *obs_shape]``, in the observation space's dtype (float64
  as float32; uint8 frames stay uint8). Structured observations (Dict, Tuple, MultiDiscrete,
  MultiBinary: a PettingZoo game's ``{"observation", "action_mask"}``) go in as the flat
  float32 vectors the network takes (their parts side by side, an action mask last:
  `rlflow.envs.flatten`), which `rlflow.export.observations.flat_observations` makes from the
  env's own observations (it reads the export's ``policy.json``, or this model's
  ``rlflow_policy`` metadata);
- ``actions``: the greedy actions ``[batch, ...]`` (int64 for Discrete, float32 for Box);
- ``action_inputs`` (when the actor has them, `ExportableActor.action_inputs`): what the action
  is chosen from, ``[batch, D]``: logits (illegal actions' masked), a Gaussian's mean and
  log-std, Q-values, or a deterministic actor's outputs before squashing;
- a policy with memory (`rlflow.models.recurrent`) also takes ``state_in_<k>`` (its state:
  ``LoadedPolicy.get_initial_state()`` at an episode's start, batched) and, when its model
  reads them, ``prev_actions`` and ``prev_rewards``; it returns ``state_out_<k>``, the state to
  pass with the next observations.

The model's metadata (``metadata_props``) holds the export's ``policy.json`` under
``rlflow_policy`` (spaces, env and preprocessing), and the input and output names under
``rlflow_inputs`` and ``rlflow_outputs``. Needs ``pip install "rl-flow[onnx]"`` (onnx, and
onnxruntime to run it).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlflow.errors import ConfigError
from rlflow.export.loaded import LoadedPolicy, load_policy

__all__ = ["ONNX_FILE", "OnnxPolicyGraph", "export_onnx"]

ONNX_FILE = "policy.onnx"
"""The file name ``rlflow export --format onnx`` writes beside ``policy.json``."""


class OnnxPolicyGraph(nn.Module):
    """The module `export_onnx` traces: filter, network, greedy choice, clip."""

    def __init__(self, policy: LoadedPolicy) -> None:
        super().__init__()
        self.actor = policy.actor
        self.recurrent = policy.recurrent
        self.generator = torch.Generator()  # never drawn from: greedy actions only
        filt = policy.obs_filter
        self.filter = None if filt is None else (filt.mean, filt.std, filt.clip, filt.epsilon)
        box = policy.action_space if isinstance(policy.action_space, spaces.Box) else None
        self.bounds = None if box is None else (torch.as_tensor(box.low), torch.as_tensor(box.high))
        self.prev_action = bool(getattr(self.actor, "use_prev_action", False))
        self.prev_reward = bool(getattr(self.actor, "use_prev_reward", False))

    def _filtered(self, obs: torch.Tensor) -> torch.Tensor:
        if self.filter is None:
            return obs
        mean, std, clip, epsilon = self.filter
        out = (obs.double() - torch.as_tensor(mean)) / torch.as_tensor(std + epsilon)
        return out.clamp(-clip, clip).float()

    def _clipped(self, actions: torch.Tensor) -> torch.Tensor:
        if self.bounds is None:
            return actions
        low, high = self.bounds
        return torch.minimum(torch.maximum(actions, low), high).to(low.dtype)

    def forward(self, obs: torch.Tensor, *memory: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(actions, [action_inputs], *state_out)`` for ``obs`` (and the memory inputs)."""
        x = self._filtered(obs)
        if not self.recurrent:
            actions = self._clipped(self.actor.act(x, explore=False, generator=self.generator))
            inputs = self.actor.action_inputs(x)
            return (actions,) if inputs is None else (actions, inputs)
        count = len(memory) - self.prev_action - self.prev_reward
        state, rest = list(memory[:count]), list(memory[count:])
        prev_a = rest.pop(0)[:, None] if self.prev_action else None
        prev_r = rest.pop(0)[:, None] if self.prev_reward else None
        dist_inputs, _, new_state = self.actor.network_step(  # type: ignore[operator]
            x[:, None], state, prev_a, prev_r
        )
        head = dist_inputs[:, 0]
        actions = self.actor.choose(head, explore=False, generator=self.generator)  # type: ignore[operator]
        return (self._clipped(actions), head, *new_state)


def _obs_dtype(space: Any) -> np.dtype[Any]:
    dtype = np.dtype(getattr(space, "dtype", None) or np.float32)
    return np.dtype(np.float32) if dtype == np.float64 else dtype


def _example(policy: LoadedPolicy, graph: OnnxPolicyGraph) -> tuple[list[str], list[Any]]:
    """Input names and example tensors (a batch of 2) for tracing."""
    space = policy.observation_space
    obs = np.stack([space.sample(), space.sample()]).astype(_obs_dtype(space))
    names, tensors = ["obs"], [torch.from_numpy(obs)]
    if policy.recurrent:
        for k, s in enumerate(policy.get_initial_state()):
            names.append(f"state_in_{k}")
            tensors.append(torch.from_numpy(np.stack([s, s])))
        if graph.prev_action:
            names.append("prev_actions")
            act = np.stack([policy.action_space.sample(), policy.action_space.sample()])
            tensors.append(torch.from_numpy(np.asarray(act)))
        if graph.prev_reward:
            names.append("prev_rewards")
            tensors.append(torch.zeros(2, dtype=torch.float32))
    return names, tensors


def export_onnx(source: LoadedPolicy | str | Path, path: str | Path, *, opset: int = 17) -> Path:
    """Write the greedy policy ``source`` (a `LoadedPolicy`, or the directory of an export
    that `rlflow.load_policy` reads) as the ONNX file ``path`` (see the module docstring);
    return its path. `ConfigError` when onnx is missing or the policy cannot be traced."""
    try:
        import onnx
    except ImportError:
        raise ConfigError('ONNX export needs onnx: pip install "rl-flow[onnx]"') from None
    policy = source if isinstance(source, LoadedPolicy) else load_policy(source)
    graph = OnnxPolicyGraph(policy).eval()
    inputs, example = _example(policy, graph)
    with torch.inference_mode():
        traced_outputs = graph(*example)
    outputs = ["actions"]
    if policy.recurrent:
        outputs.append("action_inputs")
        outputs += [f"state_out_{k}" for k in range(len(traced_outputs) - 2)]
    elif len(traced_outputs) == 2:
        outputs.append("action_inputs")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's notes on the TorchScript-based exporter
            torch.onnx.export(
                graph,
                tuple(example),
                partial,
                input_names=inputs,
                output_names=outputs,
                dynamic_axes={name: {0: "batch"} for name in inputs + outputs},
                opset_version=opset,
                dynamo=False,
            )
    except Exception as err:  # torch.s tracer raises many kinds; each is named
        raise ConfigError(
            f"export_onnx: cannot trace {type(policy.actor).__name__} to ONNX ({type(err).__name__}"
            f": {err})"
        ) from err
    model = onnx.load(partial)
    for key, value in (
        ("rlflow_policy", json.dumps(policy.spec)),
        ("rlflow_inputs", json.dumps(inputs)),
        ("rlflow_outputs", json.dumps(outputs)),
    ):
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, partial)
    partial.replace(out)
    return out
