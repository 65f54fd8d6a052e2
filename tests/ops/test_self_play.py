"""Self-play's plan stage (`SnapshotPolicies`), the random legal player and game outcomes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from rlflow import Trainer
from rlflow.cli import main as cli_main
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.config.self_play import snapshot_id
from rlflow.envs.flatten import ActionMaskBox
from rlflow.errors import ConfigError
from rlflow.ops.self_play import RandomLegalPolicy, SnapshotPolicies

pytestmark = pytest.mark.timeout(300)

TICTACTOE = "pettingzoo.classic.tictactoe_v3"
POOL = [snapshot_id(DEFAULT_POLICY_ID, k) for k in range(3)]
SMALL = {"train_batch_size": 512, "sgd_minibatch_size": 128, "num_sgd_iter": 2}
"""A few SGD steps per iteration: these tests check the pools, not learning."""


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_random_legal_player_takes_every_legal_action_and_no_other() -> None:
    space = ActionMaskBox(np.zeros(6), np.ones(6), action_mask_size=4)
    player = RandomLegalPolicy(space, spaces.Discrete(4), seed=1)
    obs = np.zeros((4000, 6), np.float32)
    obs[:, 2:] = [1, 0, 1, 1]
    actions, extra = player.compute_actions(obs)
    counts = np.bincount(actions, minlength=4)
    assert counts[1] == 0 and all(1200 < n < 1470 for n in counts[[0, 2, 3]])
    assert np.allclose(extra["logp"], -np.log(3))
    unmasked = RandomLegalPolicy(spaces.Box(0, 1, (2,)), spaces.Discrete(3), seed=1)
    assert set(unmasked.compute_actions(np.zeros((300, 2)))[0].tolist()) == {0, 1, 2}
    with pytest.raises(ConfigError, match="needs Discrete actions"):
        RandomLegalPolicy(space, spaces.Box(0, 1, (2,)), seed=0)


@pytest.fixture
def self_play_trainer(local_backend: None) -> Any:
    pytest.importorskip("pettingzoo")
    with Trainer(
        "ppo",
        env=TICTACTOE,
        num_workers=0,
        seed=3,
        rollout_fragment_length=64,
        num_envs_per_worker=4,
        self_play={"snapshot_every": 2, "pool_size": 3, "evaluation_games": 20},
        **SMALL,
    ) as trainer:
        yield trainer


def test_snapshots_shift_the_pool_and_never_train(self_play_trainer: Trainer) -> None:
    trainer = self_play_trainer
    worker = trainer.workers.local_worker()
    initial = worker.get_weights([DEFAULT_POLICY_ID])[DEFAULT_POLICY_ID]
    assert all(_same(worker.get_weights([p])[p], initial) for p in POOL)  # filled at the start
    history = []
    for _ in range(6):
        result = trainer.train()
        history.append(worker.get_weights([DEFAULT_POLICY_ID])[DEFAULT_POLICY_ID])
        assert list(result["info"]["learner"]) == [DEFAULT_POLICY_ID]  # only the learner trains
    # Snapshots after iterations 2, 4, 6: slot 0 the newest, slot 2 the oldest.
    pool = [worker.get_weights([p])[p] for p in POOL]
    assert [_same(w, h) for w, h in zip(pool, [history[5], history[3], history[1]])] == [True] * 3
    assert not _same(history[5], history[3])
    assert all(worker.get_policy(p).update.num_grad_updates == 0 for p in POOL)
    assert result["self_play"][DEFAULT_POLICY_ID]["snapshots"] == 3


def test_a_restored_run_keeps_its_pools_and_schedule(
    self_play_trainer: Trainer, tmp_path: Any
) -> None:
    trainer = self_play_trainer
    for _ in range(3):
        trainer.train()
    path = trainer.save(tmp_path / "ckpt")
    saved = trainer.workers.local_worker().get_weights(POOL)
    with Trainer.restore(path, backend="local") as restored:
        assert _all_same(restored.workers.local_worker().get_weights(POOL), saved)
        result = restored.train()  # iteration 4: the second snapshot, as in the saved run
    assert result["self_play"][DEFAULT_POLICY_ID]["snapshots"] == 2
    assert "vs_random" in result["self_play"][DEFAULT_POLICY_ID]


def _all_same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


def test_every_training_game_seats_the_learner_once(self_play_trainer: Trainer) -> None:
    worker = self_play_trainer.workers.local_worker()
    worker.sample()
    episodes = worker.pop_episode_stats()
    assert len(episodes) > 20
    seats = [
        a.agent_id for e in episodes for a in e.agent_returns if a.policy_id == "default_policy"
    ]
    opponents = {a.policy_id for e in episodes for a in e.agent_returns} - {DEFAULT_POLICY_ID}
    assert len(seats) == len(episodes) and set(seats) == {"player_1", "player_2"}
    assert opponents <= set(POOL) and len(opponents) >= 2


def test_win_rates_come_at_each_snapshot_by_seat(self_play_trainer: Trainer) -> None:
    first, second = self_play_trainer.train(), self_play_trainer.train()
    unmeasured = first["self_play"][DEFAULT_POLICY_ID]
    assert "vs_random" not in unmeasured and unmeasured["snapshots"] == 0
    assert not {"win_rate", "measured_at"} & set(unmeasured)
    assert "win_rate" not in first  # the headline waits for the first measurement
    stats = second["self_play"][DEFAULT_POLICY_ID]
    assert stats["snapshots"] == 1
    assert stats["measured_at"] == 2 and second["win_rate"] == stats["vs_random"]["win_rate"]
    for matchup in ("vs_random", "vs_previous", "vs_pool"):
        rates = stats[matchup]
        assert rates["win_rate"] + rates["draw_rate"] + rates["loss_rate"] == pytest.approx(1)
        seats = rates["seats"]
        assert sorted(seats) == ["player_1", "player_2"]
        if matchup != "vs_pool":
            assert rates["games"] == 20
            assert [s["games"] for s in seats.values()] == [10, 10]  # the seat takes turns
    # The training games against the pool: the learner's, in the smoothing window.
    assert stats["vs_pool"]["games"] == min(100, second["episodes_total"])


def test_stage_needs_self_play_and_shows_in_the_plan(
    local_backend: None, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pettingzoo")
    with Trainer("ppo", env=TICTACTOE, num_workers=0) as trainer:
        with pytest.raises(ConfigError, match="self_play is None"):
            SnapshotPolicies(trainer.workers, trainer.config)
        assert "SnapshotPolicies" not in trainer.plan_graph().to_mermaid()
        # Measuring needs Discrete actions (the random legal player's): refused at plan build.
        learner = trainer.workers.local_worker().get_policy(DEFAULT_POLICY_ID)
        learner.action_space = spaces.Box(-1, 1, (9,))
        measured = trainer.config.replace(self_play={"snapshot_every": 2})
        with pytest.raises(ConfigError, match="needs Discrete actions"):
            SnapshotPolicies(trainer.workers, measured)
    code = cli_main(["plan", "ppo", "--env", TICTACTOE, "--set", "self_play.snapshot_every=10"])
    assert code == 0 and "for_each(SnapshotPolicies)" in capsys.readouterr().out


@pytest.mark.ray
def test_remote_workers_play_against_the_learners_snapshots(ray_backend: None) -> None:
    pytest.importorskip("pettingzoo")
    with Trainer(
        "ppo",
        env=TICTACTOE,
        num_workers=2,
        seed=0,
        rollout_fragment_length=32,
        self_play={"snapshot_every": 1, "pool_size": 2, "evaluation_interval": 0},
        **SMALL,
    ) as trainer:
        for _ in range(3):
            result = trainer.train()
        local = trainer.workers.local_worker().get_weights()
        remote = trainer.workers.foreach_worker(lambda w: w.get_weights())[1:]
    stats = result["self_play"][DEFAULT_POLICY_ID]
    assert stats["snapshots"] == 3 and stats["vs_pool"]["games"] > 0
    assert not {"vs_random", "win_rate", "measured_at"} & set(stats)  # measuring is off
    assert result["episodes_total"] > 0
    for weights in remote:
        for pid in [DEFAULT_POLICY_ID, *POOL[:2]]:
            assert _same(weights[pid], local[pid])
    assert not _same(local[POOL[0]], local[POOL[1]])
