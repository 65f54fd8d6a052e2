"""MultiAgentSampler through RolloutWorker: a scripted env where every value is known."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from gymnasium import spaces

from rlflow.algorithms import PGConfig, PPOConfig
from rlflow.algorithms.pg.policy import PGPolicy
from rlflow.algorithms.ppo.policy import PPOPolicy
from rlflow.config import PolicySpec
from rlflow.data import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    AGENT_INDEX,
    BOOTSTRAP,
    EPS_ID,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VALUE_TARGETS,
    VF_PREDS,
    MultiAgentBatch,
    SampleBatch,
)
from rlflow.envs import AgentReturn, EpisodeStat
from rlflow.envs.ma_envs import MultiAgentCartPole
from rlflow.envs.multi_agent import ALL_AGENTS, MultiAgentEnv, MultiAgentStep
from rlflow.errors import ConfigError
from rlflow.workers import RolloutWorker
from rlflow.workers.sampler import agent_policy_map, is_multi_agent_env

pytestmark = pytest.mark.timeout(120)

Array = npt.NDArray[Any]

AGENTS = ["a", "b", "c"]

# One episode of ScriptedEnv, step by step: (agents in obs, rewards, terminated agents,
# truncated agents, agents acting next). Rewards are powers of two so sums are exact.
Names = tuple[str, ...]
SCRIPT: list[tuple[Names, dict[str, float], Names, Names, Names]] = [
    # step 1: a and b act; c joins.
    (("a", "b", "c"), {"a": 1, "b": 2, "c": 0}, (), (), ("a", "b", "c")),
    # step 2: all act; b terminates (leaves); c is rewarded but sits out step 3.
    (("a", "b"), {"a": 1, "b": 2, "c": 4}, ("b",), (), ("a",)),
    # step 3: a acts alone; c gets a reward without acting, then comes back.
    (("a", "c"), {"a": 1, "c": 8}, (), (), ("a", "c")),
    # step 4: a and c act; b re-joins.
    (("a", "b", "c"), {"a": 1, "b": 0, "c": 0}, (), (), ("a", "b", "c")),
    # step 5: all act; time is up for everyone.
    (("a", "b", "c"), {"a": 1, "b": 2, "c": 4}, (), ("a", "b", "c"), ()),
]
# b acts once, sits out step 2 and leaves in it (terminated) with a penalty.
IDLE_LEAVE_SCRIPT: list[tuple[Names, dict[str, float], Names, Names, Names]] = [
    (("a",), {"a": 1, "b": 2}, (), (), ("a",)),
    (("a", "b"), {"a": 1, "b": -4}, ("b",), (), ("a",)),
    (("a",), {"a": 1}, (), ("a",), ()),
]
# Agent returns of one episode: b's first life, then (at the end) a, c and b's second life.
A_RETURN, B_RETURNS, C_RETURN = 5.0, (4.0, 2.0), 16.0


class ScriptedEnv(MultiAgentEnv):
    """Three agents following ``script``; agent i's observation at step t is ``[10i + t]``."""

    def __init__(self, script: list[Any] = SCRIPT) -> None:
        self.script = script
        self.possible_agents = list(AGENTS)
        self.agents = []
        box = spaces.Box(-1e3, 1e3, (1,), np.float32)
        self.observation_spaces = dict.fromkeys(AGENTS, box)
        self.action_spaces = {a: spaces.Discrete(2) for a in AGENTS}
        self.t = 0
        self.actions_seen: list[list[str]] = []

    def _ob(self, agent: str) -> Array:
        return np.array([10 * AGENTS.index(agent) + self.t], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.t = 0
        self.agents = ["a", "b"]
        return {a: self._ob(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, action_dict: Mapping[str, Any]) -> MultiAgentStep:
        self._check_action_keys(action_dict)
        self.actions_seen.append(sorted(action_dict))
        in_obs, rewards, terms, truncs, acting = self.script[self.t]
        self.t += 1
        last = self.t == len(self.script)
        self.agents = list(acting)
        return MultiAgentStep(
            {a: self._ob(a) for a in in_obs},
            {a: float(r) for a, r in rewards.items()},
            {**{a: a in terms for a in in_obs}, ALL_AGENTS: False},
            {**{a: a in truncs for a in in_obs}, ALL_AGENTS: last},
            {a: {} for a in in_obs},
        )


class ValueIsObsPolicy(PGPolicy):
    """Always action 0; V(obs) = obs[0], so bootstrap values are known exactly."""

    def compute_actions(
        self, obs: npt.ArrayLike, *, explore: bool = True, memory: Any = None
    ) -> tuple[Array, dict[str, Array]]:
        values = np.asarray(obs, dtype=np.float32)[:, 0]
        n = len(values)
        extra = {
            LOGP: np.zeros(n, np.float32),
            VF_PREDS: values,
            ACTION_DIST_INPUTS: np.zeros((n, 2), np.float32),
        }
        return np.zeros(n, dtype=np.int64), extra

    def value(self, obs: npt.ArrayLike, *, memory: Any = None) -> Array:
        return np.asarray(obs, dtype=np.float32)[:, 0]


class SequencePolicy(ValueIsObsPolicy):
    """Asks for sequence batches, as V-trace policies do; postprocessing leaves them be."""

    requires_bootstrap_rows = True

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        return batch


def by_agent(agent: str) -> str:
    """c shares a's policy; b has its own."""
    return "p1" if agent == "b" else "p0"


def scripted_worker(
    length: int,
    mapping: Callable[[str], str] = by_agent,
    policy_cls: type[PGPolicy] = ValueIsObsPolicy,
    **kw: Any,
) -> RolloutWorker:
    config = PGConfig(
        env=ScriptedEnv,
        num_workers=0,
        rollout_fragment_length=length,
        gamma=0.5,
        use_critic=True,
        use_gae=False,
        model={"hidden": (4,)},
        policies={"p0": PolicySpec(), "p1": PolicySpec()},
        policy_mapping_fn=mapping,
        **kw,
    )
    return RolloutWorker(config, policy_cls, worker_index=0)


def rows_of(batch: MultiAgentBatch, agent: str) -> SampleBatch:
    pb = batch.policy_batches[by_agent(agent)]
    mask = pb[AGENT_INDEX] == AGENTS.index(agent)
    return SampleBatch({k: v[mask] for k, v in pb.items()})


def discounted(rewards: list[float], last_value: float, gamma: float = 0.5) -> list[float]:
    out, g = [], last_value
    for r in reversed(rewards):
        g = r + gamma * g
        out.append(g)
    return out[::-1]


@pytest.fixture(autouse=True)
def _local(local_backend: None) -> None:
    """Every test here runs on the local backend."""


def test_counts_rows_per_policy_and_index_columns() -> None:
    worker = scripted_worker(5)
    assert worker.multi_agent
    batch = worker.sample()
    assert isinstance(batch, MultiAgentBatch)
    # 5 env steps; a acts 5 times, b 3 (2 + 1 after re-joining), c 3 (it sits out step 3).
    assert batch.env_steps() == 5 and batch.count == 5
    assert batch.agent_steps() == 11
    assert {pid: b.count for pid, b in batch.policy_batches.items()} == {"p0": 8, "p1": 3}
    p0, p1 = batch.policy_batches["p0"], batch.policy_batches["p1"]
    assert sorted(p0[AGENT_INDEX].tolist()) == [0] * 5 + [2] * 3
    assert p1[AGENT_INDEX].tolist() == [1, 1, 1]
    # One episode: every row (b's two lives included) has its id.
    assert set(p0[EPS_ID].tolist()) == set(p1[EPS_ID].tolist()) == {1}
    expected = {OBS, ACTIONS, REWARDS, TERMINATEDS, TRUNCATEDS, LOGP, VF_PREDS, NEXT_OBS}
    assert expected | {ACTION_DIST_INPUTS, EPS_ID, AGENT_INDEX, VALUE_TARGETS} <= set(p0)


def test_rows_of_an_agent_are_contiguous_in_time_order_with_next_obs() -> None:
    batch = scripted_worker(5).sample()
    for pb in batch.policy_batches.values():
        index = pb[AGENT_INDEX].tolist()
        runs = [i for k, i in enumerate(index) if k == 0 or index[k - 1] != i]
        assert len(runs) == len(set(runs)), index  # one run per agent
    a, b, c = (rows_of(batch, x) for x in AGENTS)
    assert a[OBS][:, 0].tolist() == [0, 1, 2, 3, 4]
    assert a[NEXT_OBS][:, 0].tolist() == [1, 2, 3, 4, 5]
    # b: steps 1-2, leaves (final obs 12), re-joins at 14 and acts once more.
    assert b[OBS][:, 0].tolist() == [10, 11, 14]
    assert b[NEXT_OBS][:, 0].tolist() == [11, 12, 15]
    assert b[TERMINATEDS].tolist() == [False, True, False]
    assert b[TRUNCATEDS].tolist() == [False, False, True]
    # c joined at step 1 (obs 21), acted at steps 2, 4, 5.
    assert c[OBS][:, 0].tolist() == [21, 23, 24]
    assert c[NEXT_OBS][:, 0].tolist()[1:] == [24, 25]
    assert a[TRUNCATEDS].tolist() == [False] * 4 + [True] and not a[TERMINATEDS].any()


def test_sequence_policies_get_each_agent_life_closed_by_a_bootstrap_row() -> None:
    batch = scripted_worker(5, policy_cls=SequencePolicy).sample()
    assert batch.env_steps() == 5 and batch.agent_steps() == 11  # bootstrap rows are no steps
    a, b, c = (rows_of(batch, x) for x in AGENTS)
    assert NEXT_OBS not in a
    # Each life's rows, then the observation after its last step (b's final 12 and 15).
    assert a[OBS][:, 0].tolist() == [0, 1, 2, 3, 4, 5]
    assert a[BOOTSTRAP].tolist() == [False] * 5 + [True]
    assert b[OBS][:, 0].tolist() == [10, 11, 12, 14, 15]
    assert b[BOOTSTRAP].tolist() == [False, False, True, False, True]
    assert b[TERMINATEDS].tolist() == [False, True, False, False, False]
    assert c[OBS][:, 0].tolist() == [21, 23, 24, 25]
    assert c[BOOTSTRAP].tolist() == [False, False, False, True]


def test_rewards_late_reward_goes_to_the_last_row() -> None:
    batch = scripted_worker(5).sample()
    a, b, c = (rows_of(batch, x) for x in AGENTS)
    assert a[REWARDS].tolist() == [1, 1, 1, 1, 1]
    assert b[REWARDS].tolist() == [2, 2, 2]
    # c's step-3 reward (8) came while it was not acting: added to its step-2 row.
    assert c[REWARDS].tolist() == [4 + 8, 0, 4]


def test_bootstrap_zero_after_termination_value_after_truncation() -> None:
    batch = scripted_worker(5).sample()
    a, b, c = (rows_of(batch, x) for x in AGENTS)
    # a truncated at step 5: V(final obs [5]) = 5.
    assert a[VALUE_TARGETS].tolist() == discounted([1] * 5, 5.0)
    # b's first life terminated: 0; its second was truncated: V([15]) = 15.
    assert b[VALUE_TARGETS].tolist() == discounted([2, 2], 0.0) + discounted([2], 15.0)
    assert c[VALUE_TARGETS].tolist() == discounted([12, 0, 4], 25.0)


def test_fragment_end_bootstraps_from_the_next_observation() -> None:
    worker = scripted_worker(3)
    first = worker.sample()
    assert first.env_steps() == 3 and first.agent_steps() == 3 + 2 + 1
    a = rows_of(first, "a")
    assert a[OBS][:, 0].tolist() == [0, 1, 2]
    assert not (a[TERMINATEDS].any() or a[TRUNCATEDS].any())
    assert a[VALUE_TARGETS].tolist() == discounted([1, 1, 1], 3.0)  # V([3])
    # The second fragment finishes the episode (steps 4, 5) and starts the next one (step 1).
    second = worker.sample()
    a = rows_of(second, "a")
    assert a[OBS][:, 0].tolist() == [3, 4, 0]
    assert a[EPS_ID].tolist() == [1, 1, 2]
    assert a[VALUE_TARGETS].tolist() == discounted([1, 1], 5.0) + discounted([1], 1.0)


def test_late_reward_after_a_fragment_end_is_not_lost() -> None:
    # c's step-2 row ends fragment 1; its late reward (8) comes in step 3, in fragment 2.
    worker = scripted_worker(2)
    first, second = worker.sample(), worker.sample()
    total = sum(
        float(rows_of(batch, "c")[REWARDS].sum())
        for batch in (first, second, worker.sample())  # steps 5, 1 (new episode)
    )
    assert total == C_RETURN


def test_agent_leaving_in_a_step_it_sat_out_ends_its_trajectory() -> None:
    worker = scripted_worker(3, env_config={"script": IDLE_LEAVE_SCRIPT})
    batch = worker.sample()
    b = rows_of(batch, "b")
    assert b[OBS][:, 0].tolist() == [10] and b[NEXT_OBS][:, 0].tolist() == [12]
    assert b[REWARDS].tolist() == [2 - 4]
    assert b[TERMINATEDS].tolist() == [True] and not b[TRUNCATEDS].any()
    assert b[VALUE_TARGETS].tolist() == [-2.0]  # bootstrap 0: b terminated
    (episode,) = worker.pop_episode_stats()
    assert episode.agent_returns == (AgentReturn("b", "p1", -2.0), AgentReturn("a", "p0", 3.0))


def test_episode_stats_count_each_agent_life() -> None:
    worker = scripted_worker(5)
    worker.sample()
    (episode,) = worker.pop_episode_stats()
    assert isinstance(episode, EpisodeStat)
    assert episode.length == 5
    assert sorted(episode.agent_returns) == sorted(
        [
            AgentReturn("a", "p0", A_RETURN),
            AgentReturn("b", "p1", B_RETURNS[0]),
            AgentReturn("b", "p1", B_RETURNS[1]),
            AgentReturn("c", "p0", C_RETURN),
        ]
    )
    assert episode.return_ == sum(r.return_ for r in episode.agent_returns) == 27.0
    assert worker.pop_episode_stats() == []


def test_env_sees_one_action_per_active_agent() -> None:
    worker = scripted_worker(5)
    worker.sample()
    (env,) = worker.foreach_env(lambda e: e)
    assert env.actions_seen == [["a", "b"], ["a", "b", "c"], ["a"], ["a", "c"], ["a", "b", "c"]]


def test_mapping_is_asked_once_per_agent_and_episode() -> None:
    calls: list[str] = []

    def mapping(agent: str) -> str:
        calls.append(agent)
        # A second answer would differ: the sampler must keep the first for the episode.
        return "p1" if agent == "b" or calls.count(agent) > 1 else "p0"

    worker = scripted_worker(5, mapping)
    calls.clear()  # the worker asked once per possible agent for the spaces
    batch = worker.sample()
    # b re-joined at step 4 and kept p1; c kept p0 after sitting out step 3.
    assert calls == ["a", "b", "c"]
    assert batch.policy_batches["p1"][AGENT_INDEX].tolist() == [1, 1, 1]
    assert sorted(set(batch.policy_batches["p0"][AGENT_INDEX].tolist())) == [0, 2]


def test_unknown_policy_from_the_mapping_names_it() -> None:
    with pytest.raises(ConfigError, match=r"policy_mapping_fn\('c'\) returned 'nope'.*p0"):
        scripted_worker(5, lambda agent: "nope" if agent == "c" else "p0")
    with pytest.raises(ConfigError, match="returned 'x'"):
        agent_policy_map(["a"], lambda agent: "x", ["p0"])
    assert agent_policy_map(["a", "b"], None, ["only"]) == {"a": "only", "b": "only"}


def test_is_multi_agent_env() -> None:
    assert is_multi_agent_env(ScriptedEnv())
    assert not is_multi_agent_env(gym.make("CartPole-v1"))


def rps_config(**kw: Any) -> PPOConfig:
    pettingzoo = pytest.importorskip("pettingzoo")

    def make_rps() -> Any:
        return pettingzoo.make("parallel", "classic/rps-v2", max_cycles=3)

    return PPOConfig(
        env=make_rps,
        num_workers=0,
        rollout_fragment_length=7,
        model={"hidden": (8,)},
        policies={"p0": {}, "p1": {}},
        policy_mapping_fn=lambda agent: "p0" if agent == "player_0" else "p1",
        **kw,
    )


def test_pettingzoo_env_through_a_rollout_worker() -> None:
    worker = RolloutWorker(rps_config(), PPOPolicy, worker_index=0)
    assert worker.multi_agent
    batch = worker.sample()
    assert isinstance(batch, MultiAgentBatch)
    assert batch.env_steps() == 7 and batch.agent_steps() == 14
    p0, p1 = batch.policy_batches["p0"], batch.policy_batches["p1"]
    assert p0[EPS_ID].tolist() == p1[EPS_ID].tolist() == [1, 1, 1, 2, 2, 2, 3]
    assert p0[TRUNCATEDS].tolist() == [False, False, True] * 2 + [False]
    # Rock 0, paper 1, scissors 2: a move beats the one below it (mod 3).
    outcome = {0: 0.0, 1: 1.0, 2: -1.0}
    mine, theirs = p0[ACTIONS], p1[ACTIONS]
    assert p0[REWARDS].tolist() == [outcome[(x - y) % 3] for x, y in zip(mine, theirs)]
    assert (p1[REWARDS] == -p0[REWARDS]).all()
    # Each player observes the other's last move (3: none yet, at reset).
    assert p0[OBS].tolist() == [3, *theirs[:2], 3, *theirs[3:5], 3]
    assert p0[NEXT_OBS].tolist() == theirs.tolist()
    episodes = worker.pop_episode_stats()
    assert [e.length for e in episodes] == [3, 3]
    for episode, start in zip(episodes, (0, 3)):
        returns = {r.agent_id: r for r in episode.agent_returns}
        mine_sum = float(p0[REWARDS][start : start + 3].sum())
        assert returns["player_0"] == AgentReturn("player_0", "p0", mine_sum)
        assert returns["player_1"] == AgentReturn("player_1", "p1", -mine_sum)
        assert episode.return_ == 0.0


def cartpole_config(**kw: Any) -> PPOConfig:
    base: dict[str, Any] = {
        "env": "multi_cartpole",
        "env_config": {"num_agents": 2},
        "num_workers": 0,
        "num_envs_per_worker": 2,
        "rollout_fragment_length": 30,
        "model": {"hidden": (8,)},
        "policies": {"p0": {}, "p1": {}},
        "policy_mapping_fn": lambda agent: "p0" if agent == "agent_0" else "p1",
    }
    base.update(kw)
    return PPOConfig(**base)


def assert_same_batches(x: MultiAgentBatch, y: MultiAgentBatch) -> None:
    assert x.env_steps() == y.env_steps()
    assert sorted(x.policy_batches) == sorted(y.policy_batches)
    for pid, pb in x.policy_batches.items():
        assert sorted(pb) == sorted(y.policy_batches[pid])
        for column, values in pb.items():
            np.testing.assert_array_equal(values, y.policy_batches[pid][column], err_msg=column)


def test_state_round_trip_continues_identically() -> None:
    worker = RolloutWorker(cartpole_config(), PPOPolicy, worker_index=0)
    worker.sample()
    state = worker.get_state()
    expected = [worker.sample(), worker.sample()]
    expected_episodes = worker.pop_episode_stats()
    assert expected_episodes  # the two fragments finish episodes, so trackers are restored too
    other = RolloutWorker(cartpole_config(), PPOPolicy, worker_index=0)
    other.sample()  # its own envs and episodes are replaced by the state
    other.pop_episode_stats()
    other.set_state(state)
    assert_same_batches(other.sample(), expected[0])
    assert_same_batches(other.sample(), expected[1])
    assert other.pop_episode_stats() == expected_episodes
    worker.set_state(state)  # and the worker itself rewinds
    assert_same_batches(worker.sample(), expected[0])


def test_cartpole_respawn_agent_is_absent_one_step_then_back_fresh() -> None:
    env = MultiAgentCartPole(2, respawn=True, horizon=100)
    twin = gym.make("CartPole-v1")  # replays agent_0's pole
    env.reset(seed=3)
    twin.reset(seed=3)
    t = 0
    while True:  # push agent_0 left until its pole falls; agent_1 wiggles
        t += 1
        step = env.step({"agent_0": 0, "agent_1": t % 2})
        twin_ob, _, twin_term, _, _ = twin.step(0)
        np.testing.assert_array_equal(step.obs["agent_0"], twin_ob)
        if step.terminateds["agent_0"]:
            break
    assert twin_term and not step.terminateds[ALL_AGENTS]
    assert env.agents == ["agent_1"]
    # The next step has no action for agent_0; it comes back with a fresh pole.
    step = env.step({"agent_1": 0})
    assert sorted(step.obs) == ["agent_0", "agent_1"]
    np.testing.assert_array_equal(step.obs["agent_0"], twin.reset()[0])
    assert step.rewards["agent_0"] == 0.0
    assert not step.terminateds["agent_0"] and not step.truncateds["agent_0"]
    assert sorted(env.agents) == ["agent_0", "agent_1"]
    step = env.step({"agent_0": 1, "agent_1": 1})
    assert step.rewards["agent_0"] == 1.0


def test_cartpole_horizon_truncates_everyone_in_that_step() -> None:
    env = MultiAgentCartPole(2, respawn=True, horizon=5)
    env.reset(seed=0)
    for t in range(1, 5):
        step = env.step({"agent_0": t % 2, "agent_1": t % 2})
        assert not step.truncateds[ALL_AGENTS] and not step.terminateds[ALL_AGENTS]
    step = env.step({"agent_0": 0, "agent_1": 1})
    assert step.truncateds == {"agent_0": True, "agent_1": True, ALL_AGENTS: True}
    assert step.terminateds[ALL_AGENTS] is False and env.agents == []


def test_respawn_through_the_sampler_one_agent_episode_per_pole() -> None:
    config = cartpole_config(
        env_config={"num_agents": 2, "respawn": True, "horizon": 25},
        num_envs_per_worker=1,
        rollout_fragment_length=50,
    )
    worker = RolloutWorker(config, PPOPolicy, worker_index=0)
    batch = worker.sample()
    episodes = worker.pop_episode_stats()
    assert [e.length for e in episodes] == [25, 25]
    for pid, pb in batch.policy_batches.items():
        # Every step has a row but those an agent sits out after its pole fell (none after a
        # fall in an episode's last step); a respawned pole starts fresh (|state| <= 0.05).
        falls = np.flatnonzero(pb[TERMINATEDS])
        assert 50 - len(falls) <= pb.count <= 50 - len(falls) + 2, pid
        after = [k + 1 for k in falls if k + 1 < pb.count and pb[EPS_ID][k + 1] == pb[EPS_ID][k]]
        assert after and (np.abs(pb[OBS][after]) <= 0.05).all()
        lives = [r for e in episodes for r in e.agent_returns if r.policy_id == pid]
        ends = int((pb[TERMINATEDS] | pb[TRUNCATEDS]).sum())
        assert len(lives) == ends  # one agent episode per pole life
        assert sum(r.return_ for r in lives) == float(pb[REWARDS].sum())
    for episode in episodes:
        assert episode.return_ == sum(r.return_ for r in episode.agent_returns)


def test_evaluation_plays_the_same_steps_as_training() -> None:
    worker = scripted_worker(5)
    worker.sample()
    (trained,) = worker.pop_episode_stats()
    evaluated = worker.evaluate(2, seed=0)
    assert evaluated == [trained, trained]  # same lives, returns (late rewards too), lengths
    (env,) = worker.foreach_env(lambda e: e)
    assert len(env.actions_seen) == 5  # the evaluation had an env of its own
    assert worker.pop_episode_stats() == []


def test_turn_based_rows_end_at_the_agents_next_turn_with_what_accrued() -> None:
    # Tic-tac-toe, one policy for both players, fragments of 12 turns: each player's row runs
    # from its move to its next turn (NEXT_OBS is the board it then sees, the other player's
    # move included); the game's +1 / -1 land on the last row of each player; the mask keeps
    # every move legal; results count each player's wins, draws and losses.
    pytest.importorskip("pettingzoo")
    from rlflow.ops.metrics import agent_outcome_counts

    config = PGConfig(
        env="pettingzoo.classic.tictactoe_v3",
        num_workers=0,
        rollout_fragment_length=12,
        policies={"p": PolicySpec()},
        policy_mapping_fn=lambda agent: "p",
        seed=0,
    )
    worker = RolloutWorker(config, PGPolicy, worker_index=0)
    batch = SampleBatch.concat_samples([worker.sample().policy_batches["p"] for _ in range(6)])
    episodes = worker.pop_episode_stats()
    assert len(episodes) >= 5
    for episode in episodes:  # zero-sum: one wins, the other loses, or both draw
        assert sorted(a.return_ for a in episode.agent_returns) in ([-1.0, 1.0], [0.0, 0.0])
    obs, next_obs = batch[OBS], batch[NEXT_OBS]
    board, mask = obs[:, :18], obs[:, 18:]  # the flat board (3x3x2), then the legal moves
    assert np.all(mask[np.arange(len(obs)), batch[ACTIONS]] == 1)
    for eps in np.unique(batch[EPS_ID]):
        for player in (0, 1):
            rows = np.flatnonzero((batch[EPS_ID] == eps) & (batch[AGENT_INDEX] == player))
            if len(rows) < 2:
                continue
            # Between two of its turns both players moved once: two more marks on the board.
            for r, r_next in itertools.pairwise(rows):
                np.testing.assert_array_equal(next_obs[r], obs[r_next])
                assert board[r_next].sum() == board[r].sum() + 2
            assert batch[REWARDS][rows[:-1]].tolist() == [0.0] * (len(rows) - 1)
    done = batch[TERMINATEDS]
    assert set(batch[REWARDS][done].tolist()) <= {-1.0, 0.0, 1.0} and done.sum() >= 8
    counts = agent_outcome_counts(episodes)
    for agent in ("player_1", "player_2"):
        total = sum(counts[f"agent_{k}/{agent}"] for k in ("wins", "draws", "losses"))
        assert total == len(episodes)
    assert counts["agent_wins/player_1"] == counts["agent_losses/player_2"]
