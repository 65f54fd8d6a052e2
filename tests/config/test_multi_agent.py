"""Multi-agent fields of AlgorithmConfig and PolicySpec: validation, imports, policy maps."""

from __future__ import annotations

import os.path
import re
from typing import Any

import pytest
from gymnasium import spaces

from rlflow.algorithms import A2CConfig, PGConfig, PPOConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.config import DEFAULT_POLICY_ID, AlgorithmConfig, PolicySpec
from rlflow.config.model import import_object
from rlflow.errors import ConfigError
from rlflow.workers import RolloutWorker

pytestmark = pytest.mark.timeout(60)

TWO = {"p0": PolicySpec(), "p1": PolicySpec()}


def by_index(agent: str) -> str:
    return "p0" if agent == "agent_0" else "p1"


def test_single_policy_defaults() -> None:
    config = AlgorithmConfig()
    assert config.policy_ids() == [DEFAULT_POLICY_ID]
    assert config.policy_specs() == {DEFAULT_POLICY_ID: PolicySpec()}
    one = AlgorithmConfig(policies={"solo": PolicySpec()})  # no mapping needed for one
    assert one.policy_ids() == ["solo"] and one.policy_mapping_fn is None


def test_several_policies_need_a_mapping_fn() -> None:
    with pytest.raises(
        ConfigError,
        match=r"AlgorithmConfig.policy_mapping_fn=None must be given with more than one "
        r"policy \(\['p0', 'p1'\]\)",
    ):
        AlgorithmConfig(policies=TWO)
    config = AlgorithmConfig(policies=TWO, policy_mapping_fn=by_index)
    assert config.policy_ids() == ["p0", "p1"]
    with pytest.raises(ConfigError, match="policy_mapping_fn=3 must be a function"):
        AlgorithmConfig(policies=TWO, policy_mapping_fn=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("to_train", "rule"),
    [(["p0", "p2"], "must be a list of policy ids from"), ("p0", "must be a list")],
)
def test_policies_to_train_must_name_known_policies(to_train: Any, rule: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"PPOConfig.policies_to_train={re.escape(repr(to_train))} {rule}"
    ):
        PPOConfig(policies=TWO, policy_mapping_fn=by_index, policies_to_train=to_train)
    with pytest.raises(ConfigError, match=r"policies_to_train=\['p0'\].*\['default_policy'\]"):
        PPOConfig(policies_to_train=["p0"])
    assert PPOConfig(policies_to_train=[DEFAULT_POLICY_ID]).policies_to_train == [DEFAULT_POLICY_ID]


def test_policies_from_dicts_and_their_errors() -> None:
    config = PPOConfig.from_dict(
        {
            "policies": {"p0": {}, "p1": {"policy_class": "rlflow.algorithms.pg:PGPolicy"}},
            "policy_mapping_fn": by_index,
        }
    )
    assert config.policies == {"p0": PolicySpec(), "p1": PolicySpec(policy_class=PGPolicy)}
    with pytest.raises(ConfigError, match=r"entry 'p0' has unknown keys \['polcy_class'\]"):
        PPOConfig(policies={"p0": {"polcy_class": PGPolicy}})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="entry 'p0' must be a PolicySpec or a dict"):
        PPOConfig(policies={"p0": PGPolicy})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="has key ''; policy ids are non-empty strings"):
        PPOConfig(policies={"": PolicySpec()})
    with pytest.raises(ConfigError, match=r"PPOConfig.policies=.* must be a dict"):
        PPOConfig(policies=["p0"])  # type: ignore[arg-type]


def test_policy_spec_validation_and_class_strings() -> None:
    assert PolicySpec(policy_class="rlflow.algorithms.ppo:PPOPolicy").policy_class is PPOPolicy  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"PolicySpec\.policy_class=42 must be a TorchPolicy"):
        PolicySpec(policy_class=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"PolicySpec\.config='fast' must be an AlgorithmConfig"):
        PolicySpec(config="fast")
    bad_path = r"PolicySpec\.policy_class='rlflow\.algorithms\.pg:Nope'"
    with pytest.raises(ConfigError, match=bad_path):
        PolicySpec(policy_class="rlflow.algorithms.pg:Nope")  # type: ignore[arg-type]


def test_policy_config_overrides_or_replaces_the_run_config() -> None:
    run = PPOConfig(lr=1e-3, gamma=0.9)
    assert PolicySpec().policy_config(run, PPOConfig) == run
    merged = PolicySpec(config={"lr": 0.1}).policy_config(run, PPOConfig)
    assert merged == run.replace(lr=0.1) and type(merged) is PPOConfig
    own = PGConfig(gamma=0.5)
    assert PolicySpec(config=own).policy_config(run, PGConfig) == own


def test_policy_config_of_another_class_keeps_the_shared_fields() -> None:
    # A PG policy in a PPO run: a PGConfig from the fields both have, then the overrides.
    run = PPOConfig(lr=1e-3, gamma=0.9, entropy_coeff=0.2, clip_param=0.1)
    pg = PolicySpec(config={"vf_loss_coeff": 0.25}).policy_config(run, PGConfig)
    assert type(pg) is PGConfig
    assert (pg.lr, pg.gamma, pg.entropy_coeff, pg.vf_loss_coeff) == (1e-3, 0.9, 0.2, 0.25)
    assert (pg.use_critic, pg.lambda_) == (run.use_critic, run.lambda_)
    # A subclass of the policy's config class is used as it is (A2C's config for PGPolicy).
    assert PolicySpec().config_class(A2CConfig(), PGConfig) is A2CConfig


def test_misspelt_override_key_names_the_closest_field() -> None:
    spec = PolicySpec(config={"lrr": 0.1})
    with pytest.raises(ConfigError, match=r"PPOConfig has no field 'lrr'; did you mean 'lr'\?"):
        spec.policy_config(PPOConfig(), PPOConfig)
    # Rejected when the config is made, before any worker exists: for the algorithm's policy
    # (checked against the run's config class) and for a named policy class.
    with pytest.raises(ConfigError, match=r"entry 'p0'.*no field 'entropy_coef'.*'entropy_coeff'"):
        PPOConfig(policies={"p0": PolicySpec(config={"entropy_coef": 0.1})})
    with pytest.raises(ConfigError, match=r"entry 'p1'.*PGConfig has no field 'clip_param'"):
        PPOConfig(
            policies={
                "p0": PolicySpec(),
                "p1": {"policy_class": PGPolicy, "config": {"clip_param": 0.1}},
            },
            policy_mapping_fn=by_index,
        )


def test_bad_override_raises_before_any_worker_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # Valid for the run's PPOConfig (so the config accepts it) but not for the policy class the
    # worker set builds (PGPolicy reads a PGConfig): caught on the driver, on the local worker,
    # before any remote worker is started.
    from rlflow import flow
    from rlflow.workers import WorkerSet

    started: list[Any] = []
    monkeypatch.setattr(flow, "remote", lambda *a, **k: started.append(a))
    config = PPOConfig(
        env="multi_cartpole",
        env_config={"num_agents": 2},
        num_workers=2,
        policies={"p0": PolicySpec(config={"clip_param": 0.1}), "p1": PolicySpec()},
        policy_mapping_fn=by_index,
    )
    with pytest.raises(ConfigError, match=r"policy 'p0': PGConfig has no field 'clip_param'"):
        WorkerSet(config, PGPolicy)
    assert started == []  # no remote worker was started


def test_mapping_fn_strings_are_imported() -> None:
    config = AlgorithmConfig(policies=TWO, policy_mapping_fn="os:path.basename")  # type: ignore[arg-type]
    assert config.policy_mapping_fn is os.path.basename
    assert import_object("rlflow.algorithms.pg:PGPolicy", "x") is PGPolicy


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_colon", r"must be written 'package.module:name'"),
        (":fn", "must be written"),
        ("os:", "must be written"),
        ("rlflow.nope:fn", r"cannot import 'rlflow.nope'"),
        ("os:path.nope", r"'os' has no attribute 'path.nope'"),
    ],
)
def test_bad_import_paths_name_the_field(path: str, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"AlgorithmConfig\.policy_mapping_fn=.*{message}"):
        AlgorithmConfig(policies=TWO, policy_mapping_fn=path)  # type: ignore[arg-type]


def worker(**kw: Any) -> RolloutWorker:
    base: dict[str, Any] = {
        "env": "multi_cartpole",
        "env_config": {"num_agents": 2},
        "num_workers": 0,
        "model": {"hidden": (4,)},
    }
    base.update(kw)
    return RolloutWorker(PPOConfig(**base), PPOPolicy, worker_index=0)


def test_single_agent_env_allows_only_the_default_policy() -> None:
    with pytest.raises(
        ConfigError,
        match=r"policies=\['p0', 'p1'\]: env 'CartPole-v1' is single-agent, so its one policy "
        r"must be 'default_policy'",
    ):
        worker(env="CartPole-v1", env_config={}, policies=TWO, policy_mapping_fn=by_index)
    single = worker(env="CartPole-v1", env_config={})
    assert not single.multi_agent and list(single.policy_map) == [DEFAULT_POLICY_ID]


def test_policy_without_agents_needs_its_spaces() -> None:
    policies = {"p0": PolicySpec(), "spare": PolicySpec()}
    with pytest.raises(
        ConfigError,
        match=r"policy 'spare': no agent of 'multi_cartpole' \(possible agents \['agent_0', "
        r"'agent_1'\]\) maps to it, so give its observation_space and action_space",
    ):
        worker(policies=policies, policy_mapping_fn=lambda agent: "p0")
    obs, act = spaces.Box(-1.0, 1.0, (3,)), spaces.Discrete(5)
    policies["spare"] = PolicySpec(observation_space=obs, action_space=act)
    built = worker(policies=policies, policy_mapping_fn=lambda agent: "p0")
    spare = built.get_policy("spare")
    assert spare.observation_space == obs and spare.action_space == act
    assert built.get_policy("p0").observation_space.shape == (4,)  # from agent_0's pole


def test_specs_pick_class_and_config_per_policy() -> None:
    built = worker(
        lr=1e-3,
        policies={
            "p0": PolicySpec(config={"lr": 0.1}),
            "p1": PolicySpec(policy_class=PGPolicy, config=PGConfig(gamma=0.5)),
        },
        policy_mapping_fn=by_index,
    )
    p0, p1 = built.get_policy("p0"), built.get_policy("p1")
    assert type(p0) is PPOPolicy and p0.update.lr == 0.1 and p0.config.gamma == PPOConfig().gamma
    assert type(p1) is PGPolicy and p1.config.gamma == 0.5 and p1.update.lr == PGConfig().lr
    assert p0.worker_index == p1.worker_index == 0
    assert type(p0.config) is PPOConfig and type(p1.config) is PGConfig
