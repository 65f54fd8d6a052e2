"""The ``self_play`` config group: checks, the snapshot pools it adds, the per-episode mapping."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlflow.algorithms import PPOConfig
from rlflow.algorithms.ppo_dqn.config import DQN_POLICY, PPO_POLICY, PPODQNConfig
from rlflow.cli.resolve import parse_sets
from rlflow.config import DEFAULT_POLICY_ID, PolicySpec
from rlflow.config.files import build_config, load_config_file
from rlflow.config.self_play import EpisodeInfo, SelfPlay, SelfPlayMapping, snapshot_id
from rlflow.errors import ConfigError

pytestmark = pytest.mark.timeout(60)

SEATS = ("player_1", "player_2")


def test_self_play_adds_a_frozen_pool_per_learner_and_trains_only_the_learner() -> None:
    config = PPOConfig(self_play={"snapshot_every": 3, "pool_size": 2})
    pool = [snapshot_id(DEFAULT_POLICY_ID, k) for k in range(2)]
    assert config.policy_ids() == [DEFAULT_POLICY_ID, *pool]
    assert config.policies_to_train == [DEFAULT_POLICY_ID]
    specs = config.policy_specs()
    assert [specs[p].snapshot_of for p in pool] == [DEFAULT_POLICY_ID] * 2
    assert specs[DEFAULT_POLICY_ID].snapshot_of is None
    assert config.self_play_learners() == (DEFAULT_POLICY_ID,)
    # Off: nothing added, the mapping is the user's.
    off = PPOConfig()
    assert off.policy_ids() == [DEFAULT_POLICY_ID] and off.policies_to_train is None
    assert off.agent_mapping() is None and off.self_play is None


def test_snapshot_specs_copy_the_learners_class_and_config() -> None:
    config = PPODQNConfig(env="multi_cartpole", self_play={"snapshot_every": 1, "pool_size": 1})
    specs = config.policy_specs()
    for learner in (PPO_POLICY, DQN_POLICY):
        copy = specs[snapshot_id(learner, 0)]
        assert copy.policy_class is specs[learner].policy_class
        assert copy.config is specs[learner].config and copy.snapshot_of == learner
    assert config.policies_to_train == [PPO_POLICY, DQN_POLICY]


@pytest.mark.parametrize(
    ("self_play", "message"),
    [
        ({"pool_size": 3}, "PPOConfig.self_play={'pool_size': 3} needs snapshot_every"),
        ({"snapshot_every": 0}, "PPOConfig.self_play.snapshot_every=0 must be an integer >= 1"),
        ({"snapshot_every": 2, "pool_size": 0}, "PPOConfig.self_play.pool_size=0"),
        ({"snapshot_every": 2, "opponent_sampling": "best"}, "opponent_sampling"),
        (
            {"snapshot_every": 2, "snapshots": 4},
            "PPOConfig.self_play has no field 'snapshots'; did you mean 'snapshot_every'?",
        ),
        ({"snapshot_every": 2, "policies": ["nobody"]}, "names policies ['nobody']"),
        ({"snapshot_every": 2, "evaluation_games": 0}, "evaluation_games"),
        ([("snapshot_every", 2)], "must be a dict"),
    ],
)
def test_bad_self_play_settings_name_the_key(self_play: Any, message: str) -> None:
    with pytest.raises(ConfigError, match="self_play") as err:
        PPOConfig(self_play=self_play)
    assert message in str(err.value)


def test_snapshots_may_not_be_trained() -> None:
    with pytest.raises(ConfigError, match="snapshots never train"):
        PPOConfig(
            self_play={"snapshot_every": 2, "pool_size": 1},
            policies_to_train=[DEFAULT_POLICY_ID, snapshot_id(DEFAULT_POLICY_ID, 0)],
        )


def test_cli_sets_one_self_play_key() -> None:
    values = parse_sets(PPOConfig, ["self_play.snapshot_every=10", "self_play.pool_size=3"])
    assert values == {"self_play": {"snapshot_every": 10, "pool_size": 3}}
    assert PPOConfig(**values).self_play == SelfPlay(snapshot_every=10, pool_size=3)


def test_dict_yaml_set_and_typed_forms_give_equal_configs(tmp_path: Path) -> None:
    typed = PPOConfig(
        self_play=SelfPlay(snapshot_every=10, pool_size=3, policies=("default_policy",))
    )
    as_dict = PPOConfig(
        self_play={"snapshot_every": 10, "pool_size": 3, "policies": ["default_policy"]}
    )
    path = tmp_path / "c.yaml"
    path.write_text(
        "self_play:\n  snapshot_every: 10\n  pool_size: 3\n  policies: [default_policy]\n"
    )
    from_yaml = build_config(PPOConfig, load_config_file(path).fields)
    sets = ["self_play.snapshot_every=10", "self_play.pool_size=3"]
    sets.append("self_play.policies=[default_policy]")
    from_sets = build_config(PPOConfig, parse_sets(PPOConfig, sets))
    assert typed == as_dict == from_yaml == from_sets
    assert typed.self_play == SelfPlay(snapshot_every=10, pool_size=3, policies=("default_policy",))
    # Off: None, or {} as configs wrote it before self_play was typed.
    assert PPOConfig().self_play is None and PPOConfig(self_play={}).self_play is None


def test_to_dict_writes_a_plain_self_play_that_from_dict_reads_back() -> None:
    config = PPOConfig(self_play={"snapshot_every": 4, "policies": ["default_policy"]})
    values = config.to_dict()
    assert values["self_play"] == {
        "snapshot_every": 4,
        "pool_size": 5,
        "opponent_sampling": "uniform",
        "policies": ["default_policy"],
        "evaluation_interval": None,
        "evaluation_games": 100,
    }
    assert yaml.safe_load(yaml.safe_dump(values["self_play"])) == values["self_play"]
    assert PPOConfig.from_dict(values) == config
    assert PPOConfig().to_dict()["self_play"] is None
    assert PPOConfig.from_dict(PPOConfig().to_dict()) == PPOConfig()
    # A config written before: self_play a partial dict, or {} when off.
    old = {**PPOConfig().to_dict(), "self_play": {"snapshot_every": 4}}
    assert PPOConfig.from_dict(old).self_play == SelfPlay(snapshot_every=4)


def _mapping(**settings: Any) -> SelfPlayMapping:
    return SelfPlayMapping(("me",), SelfPlay(snapshot_every=1, **settings), seed=7)


def test_each_episode_has_one_learner_seat_and_snapshots_in_the_others() -> None:
    mapping = _mapping(pool_size=4)
    learner_seats: collections.Counter[str] = collections.Counter()
    slots: collections.Counter[str] = collections.Counter()
    for eps_id in range(2000):
        episode = EpisodeInfo(eps_id, SEATS)
        pids = {seat: mapping(seat, episode) for seat in SEATS}
        assert pids == {seat: mapping(seat, episode) for seat in SEATS}  # asked again: same
        (learner_seat,) = [s for s, p in pids.items() if p == "me"]
        learner_seats[learner_seat] += 1
        slots.update(p for p in pids.values() if p != "me")
    assert all(900 < n < 1100 for n in learner_seats.values())
    assert sorted(slots) == [snapshot_id("me", k) for k in range(4)]
    assert all(400 < n < 600 for n in slots.values())


def test_latest_sampling_always_plays_the_newest_snapshot() -> None:
    mapping = _mapping(pool_size=4, opponent_sampling="latest")
    seen = {mapping(s, EpisodeInfo(e, SEATS)) for e in range(200) for s in SEATS}
    assert seen == {"me", snapshot_id("me", 0)}


def test_outside_an_episode_the_users_mapping_answers() -> None:
    mapping = SelfPlayMapping(("a", "b"), SelfPlay(snapshot_every=1), 0, str.upper)
    assert mapping("x") == "X"
    assert SelfPlayMapping(("a", "b"), SelfPlay(snapshot_every=1))("x") == "a"
    with pytest.raises(ConfigError, match="not one of the env's possible_agents"):
        mapping("x", EpisodeInfo(1, SEATS))


def test_a_two_argument_mapping_fn_gets_the_episode() -> None:
    from rlflow.workers.sampler import agent_policy_map

    def by_episode(agent: str, episode: EpisodeInfo | None) -> str:
        return "even" if episode is None or episode.episode_id % 2 == 0 else "odd"

    ids = ["even", "odd"]
    assert agent_policy_map(["a"], by_episode, ids, EpisodeInfo(3, ("a",))) == {"a": "odd"}
    assert agent_policy_map(["a"], by_episode, ids) == {"a": "even"}
    assert agent_policy_map(["a"], lambda agent: "odd", ids, EpisodeInfo(2, ("a",))) == {"a": "odd"}


def test_policies_spec_with_self_play_keeps_the_users_policies() -> None:
    config = PPOConfig(
        policies={"hero": PolicySpec(), "fixed": PolicySpec()},
        policy_mapping_fn=lambda agent: "hero",
        policies_to_train=["hero"],
        self_play={"snapshot_every": 2, "pool_size": 1},
    )
    assert config.policy_ids() == ["hero", "fixed", snapshot_id("hero", 0)]
    assert config.self_play_learners() == ("hero",)
