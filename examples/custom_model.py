"""A custom model: your own torch network in PPO (or PG, A2C, A3C, IMPALA, APPO).

The config's ``model`` (given as a dict) names the class (or ``"package.module:Class"``) and
its options::

    Trainer("ppo", model={"custom_model": ResidualActorCritic,
                          "custom_model_config": {"width": 64}})

The class is a ``torch.nn.Module`` built as ``cls(obs_space, action_space, num_outputs,
model_config)`` (``model_config``: the run's ``model`` as a plain dict) with ``forward(obs) ->
(dist_inputs [B, num_outputs], value [B])`` and ``value(obs) -> [B]`` (`rlflow.models.custom`
documents the interface). Its ``state_dict`` is what rollout workers receive and checkpoints
hold. Run::

    python examples/custom_model.py [--backend local] [--iterations 8]
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlflow import Trainer
from rlflow.algorithms import tuned_config


class ResidualActorCritic(nn.Module):
    """A shared torso with one residual block, a policy head and a value head.

    ``model_config["custom_model_config"]`` may set ``width`` (default 64). ``calls`` counts
    the batches :meth:`forward` saw in this process (not a weight: it is not synced).
    """

    def __init__(
        self,
        obs_space: gym.Space[Any],
        action_space: gym.Space[Any],
        num_outputs: int,
        model_config: dict[str, Any],
    ) -> None:
        """Build the layers for flat observations of ``obs_space``."""
        super().__init__()
        width = int(model_config["custom_model_config"].get("width", 64))
        in_features = int(np.prod(obs_space.shape))
        self.torso = nn.Sequential(nn.Linear(in_features, width), nn.Tanh())
        self.block = nn.Sequential(nn.Linear(width, width), nn.Tanh())
        self.pi = nn.Linear(width, num_outputs)
        self.vf = nn.Linear(width, 1)
        nn.init.orthogonal_(self.pi.weight, 0.01)  # near-uniform first actions
        self.calls = 0

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        x: torch.Tensor = self.torso(obs.float().reshape(obs.shape[0], -1))
        return x + self.block(x)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits [B, num_outputs], value [B])``."""
        self.calls += 1
        x = self._features(obs)
        return self.pi(x), self.vf(x).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``value [B]``."""
        out: torch.Tensor = self.vf(self._features(obs)).squeeze(-1)
        return out


def main() -> None:
    """Train PPO with the custom model on CartPole-v1 and print each iteration's return."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="ray", choices=["ray", "local"])
    parser.add_argument("--iterations", type=int, default=8)
    args = parser.parse_args()
    model = {"custom_model": ResidualActorCritic, "custom_model_config": {"width": 64}}
    config = tuned_config("ppo", "CartPole-v1", model=model)  # PPO's tuned CartPole settings
    with Trainer("ppo", backend=args.backend, **config.to_dict()) as trainer:
        for _ in range(args.iterations):
            result = trainer.train()
            print(
                f"iter {result['iteration']:3d}  env steps {result['num_env_steps_sampled']:6d}  "
                f"return {result['episode_return_mean']:.1f}"
            )


if __name__ == "__main__":
    main()
