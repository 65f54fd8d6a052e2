"""Multi-agent envs named by their module (issue 46, "Environments"): any importable module with
PettingZoo's ``parallel_env()`` / ``env()`` (mpe2, a package of the user's own) works by its
dotted name, as ``pettingzoo.*`` modules do; Gymnasium ids keep working; a dotted name that is
neither is an error naming both."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import rlflow
from rlflow.cli.parser import build_parser
from rlflow.cli.resolve import resolve_run
from rlflow.config import PolicySpec
from rlflow.envs import make_env_creator
from rlflow.envs.creator import is_env_module_name
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(120)

TINY = {
    "backend": "local",
    "num_workers": 0,
    "seed": 0,
    "rollout_fragment_length": 25,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 1,
    "model": {"hidden": [16]},
}
"""One small independent-PPO iteration sampled by the learner's worker."""


@pytest.mark.parametrize(
    ("env", "agents", "per_agent"),
    [
        ("mpe2.simple_spread_v3", ["agent_0", "agent_1", "agent_2"], False),
        ("mpe2.simple_speaker_listener_v4", ["speaker_0", "listener_0"], True),
        ("mpe2.simple_reference_v3", ["agent_0", "agent_1"], False),
    ],
)
def test_mpe2_envs_train_an_iteration_of_independent_ppo_by_module_name(
    env: str, agents: list[str], per_agent: bool
) -> None:
    pytest.importorskip("mpe2")
    assert make_env_creator(env)().possible_agents == agents
    # The speaker and the listener see and do different things: one policy each.
    policies = {"policies": {a: PolicySpec() for a in agents}} if per_agent else {}
    mapping = {"policy_mapping_fn": _own_policy} if per_agent else {}
    with rlflow.Trainer(
        "ppo", env=env, env_config={"max_cycles": 25}, **TINY, **policies, **mapping
    ) as trainer:
        result = trainer.train()
    assert result["iteration"] == 1 and result["num_env_steps_sampled"] >= 100
    assert result["episode_len_mean"] == 25  # max_cycles reached the env
    assert result["num_agent_steps_sampled"] == len(agents) * result["num_env_steps_sampled"]
    if per_agent:
        assert sorted(result["policy_reward_mean"]) == sorted(agents)


def _own_policy(agent_id: str) -> str:
    return agent_id


def test_agents_with_different_spaces_on_one_policy_are_refused_before_training() -> None:
    pytest.importorskip("mpe2")
    with pytest.raises(ConfigError, match=r"'speaker_0' and 'listener_0'.*observation spaces"):
        rlflow.Trainer("ppo", env="mpe2.simple_speaker_listener_v4", **TINY)


GAME = '''
"""A two-player coordination game: both players score 1 when their actions agree."""
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class CoinGame(ParallelEnv):
    metadata = {"name": "coin_v0"}

    def __init__(self, rounds=3):
        self.rounds = rounds
        self.possible_agents = ["left", "right"]

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        reward = float(actions["left"] == actions["right"])
        done = self.t >= self.rounds
        obs = {a: np.full(1, self.t / self.rounds, np.float32) for a in self.agents}
        flags = {a: False for a in self.agents}
        out = (obs, {a: reward for a in self.agents}, flags, {a: done for a in self.agents},
               {a: {} for a in self.agents})
        if done:
            self.agents = []
        return out


def parallel_env(**kwargs):
    return CoinGame(**kwargs)
'''


def test_a_users_own_module_trains_by_its_dotted_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pettingzoo")
    package = tmp_path / "my_duel_games"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "coin_v0.py").write_text(textwrap.dedent(GAME))
    monkeypatch.syspath_prepend(str(tmp_path))
    env = make_env_creator("my_duel_games.coin_v0", rounds=4)()
    assert env.possible_agents == ["left", "right"]
    with rlflow.Trainer("ppo", env="my_duel_games.coin_v0", env_config={"rounds": 4}, **TINY) as t:
        result = t.train()
    assert result["episode_len_mean"] == 4 and result["num_env_steps_sampled"] >= 100
    # Each step both players score the same, so the sum is twice either's return.
    each = result["policy_reward_mean"]["default_policy"]
    assert result["episode_return_mean"] == pytest.approx(2 * each)


def test_the_cli_resolves_an_mpe2_module() -> None:
    pytest.importorskip("mpe2")
    argv = ["train", "ppo", "--no-tuned", "--env", "mpe2.simple_spread_v3"]
    run = resolve_run(build_parser().parse_args(argv))
    assert run.config.env == "mpe2.simple_spread_v3"


def test_gymnasium_ids_and_rlflows_names_are_not_taken_for_modules() -> None:
    assert make_env_creator("CartPole-v1")().spec.id == "CartPole-v1"
    assert make_env_creator("gymnasium.envs.classic_control:CartPole-v1")().spec.id == (
        "CartPole-v1"
    )
    assert make_env_creator("multi_cartpole", num_agents=3)().possible_agents == [
        "agent_0",
        "agent_1",
        "agent_2",
    ]
    names = ["mpe2.simple_spread_v3", "os", "CartPole-v1", "a:B-v0", "ALE/Pong-v5", "nope_xyz"]
    assert [is_env_module_name(n) for n in names] == [True, True, False, False, False, False]


def test_a_dotted_name_that_is_neither_names_both_possibilities() -> None:
    with pytest.raises(ConfigError, match=r"not a registered Gymnasium id.*could not be imported"):
        make_env_creator("no_such_package.some_env_v0")
    with pytest.raises(ConfigError, match=r"neither parallel_env nor env.*Gymnasium id"):
        make_env_creator("gymnasium.spaces")
    with pytest.raises(ConfigError, match="unknown Gymnasium env id 'CartPol-v1'"):
        make_env_creator("CartPol-v1")
