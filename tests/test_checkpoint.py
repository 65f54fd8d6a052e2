"""Checkpoints you can trust: atomic writes, defensive reads, callables saved by value, replay
buffers in the checkpoint (``checkpoint_replay_buffers``)."""

from __future__ import annotations

import json
import pickle
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlflow import flow
from rlflow.checkpoint import (
    CHECKPOINT_META,
    CHECKPOINT_STATE,
    latest_checkpoint,
    load_checkpoint,
    write_checkpoint,
)
from rlflow.config.model import ModelConfig
from rlflow.errors import ConfigError
from rlflow.replay import replay_buffers
from rlflow.trainer import Trainer

pytestmark = pytest.mark.timeout(120)

TINY = {"rollout_fragment_length": 16, "train_batch_size": 32, "num_workers": 0, "seed": 1}


@pytest.fixture(autouse=True)
def _no_backend() -> Iterator[None]:
    flow.shutdown()
    yield
    flow.shutdown()


@pytest.fixture(scope="module")
def good_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1-iteration pg checkpoint (copied per test where it is damaged)."""
    path = tmp_path_factory.mktemp("good") / "checkpoint_000001"
    with Trainer("pg", env="CartPole-v1", backend="local", **TINY) as trainer:
        trainer.train()
        trainer.save(path)
    return path


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


# --------------------------------------------------------------------------- damaged checkpoints
def _truncate(path: Path) -> None:
    state = path / CHECKPOINT_STATE
    state.write_bytes(state.read_bytes()[:100])


def _random_bytes(path: Path) -> None:
    state = path / CHECKPOINT_STATE
    state.write_bytes(np.random.default_rng(0).bytes(state.stat().st_size))


def _old_meta_bad_pickle(path: Path) -> None:
    """A checkpoint without size/digest metadata (as written before them) holding junk."""
    meta = json.loads((path / CHECKPOINT_META).read_text())
    del meta["state_bytes"], meta["state_sha256"]
    (path / CHECKPOINT_META).write_text(json.dumps(meta))
    (path / CHECKPOINT_STATE).write_bytes(b"xjunk that is no pickle")


def _set_meta(**changes: Any) -> Any:
    def damage(path: Path) -> None:
        meta = json.loads((path / CHECKPOINT_META).read_text())
        (path / CHECKPOINT_META).write_text(json.dumps(meta | changes))

    return damage


def _empty(path: Path) -> None:
    for child in path.iterdir():
        child.unlink()


DAMAGE = {
    "truncated": (_truncate, CHECKPOINT_STATE, "truncated"),
    "random_bytes": (_random_bytes, CHECKPOINT_STATE, "SHA-256 does not match"),
    "missing_state": (
        lambda p: (p / CHECKPOINT_STATE).unlink(),
        "",
        "trainer_state.pkl is missing",
    ),
    "missing_meta": (lambda p: (p / CHECKPOINT_META).unlink(), "", "rlflow_checkpoint.json is"),
    "bad_pickle": (_old_meta_bad_pickle, CHECKPOINT_STATE, "cannot unpickle (UnpicklingError"),
    "newer_format": (_set_meta(version=99), CHECKPOINT_META, "written by a newer rlflow"),
    "foreign": (_set_meta(format="other"), CHECKPOINT_META, "not an rlflow checkpoint"),
    "empty_dir": (_empty, "", "is empty"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_checkpoint_is_a_config_error_naming_the_file(
    case: str, good_checkpoint: Path, tmp_path: Path
) -> None:
    damage, file, message = DAMAGE[case]
    path = _copy(good_checkpoint, tmp_path / "checkpoint_000001")
    damage(path)
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        Trainer.restore(path, backend="local")
    assert str(path / file).rstrip("/") in str(info.value)
    assert not flow.is_initialized()  # rejected before anything started


def test_not_a_checkpoint_and_run_dir_hints(good_checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_checkpoint(tmp_path / "nowhere")
    run_dir = tmp_path / "run"
    _copy(good_checkpoint, run_dir / "checkpoint_000001")
    _copy(good_checkpoint, run_dir / "checkpoint_000010")
    with pytest.raises(ConfigError, match=r"its latest checkpoint is .*checkpoint_000010"):
        load_checkpoint(run_dir)
    assert latest_checkpoint(run_dir) == run_dir / "checkpoint_000010"
    assert latest_checkpoint(run_dir / "checkpoint_000001") == run_dir / "checkpoint_000001"


def test_unimportable_code_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "gone_envs.py").write_text("def make():\n    return None\n")
    monkeypatch.syspath_prepend(str(module_dir))
    import gone_envs  # type: ignore[import-not-found]

    state = {"algorithm": "pg", "config": {"env": gone_envs.make}, "iteration": 0}
    path = Path(write_checkpoint(tmp_path / "ckpt", state, {}))
    (path / CHECKPOINT_STATE).write_bytes(pickle.dumps(state))  # by reference, as plain pickle
    meta = json.loads((path / CHECKPOINT_META).read_text())
    meta.pop("state_bytes"), meta.pop("state_sha256")
    (path / CHECKPOINT_META).write_text(json.dumps(meta))
    monkeypatch.delitem(sys.modules, "gone_envs")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(module_dir)])
    with pytest.raises(ConfigError, match=r"cannot be imported here .*gone_envs"):
        load_checkpoint(path)


# --------------------------------------------------------------------------- atomic writes
class _Interrupt:
    def __reduce__(self) -> Any:
        raise KeyboardInterrupt  # a Ctrl-C in the middle of pickling


def test_interrupted_save_leaves_the_old_checkpoint(good_checkpoint: Path, tmp_path: Path) -> None:
    path = _copy(good_checkpoint, tmp_path / "ckpt")
    before = load_checkpoint(path)["iteration"]
    with pytest.raises(KeyboardInterrupt):
        write_checkpoint(path, {"algorithm": "pg", "junk": [np.zeros(10_000), _Interrupt()]}, {})
    assert load_checkpoint(path)["iteration"] == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no temp dir left behind


def test_save_replaces_a_checkpoint_but_never_a_user_dir(
    good_checkpoint: Path, tmp_path: Path
) -> None:
    path = _copy(good_checkpoint, tmp_path / "ckpt")
    write_checkpoint(path, {"algorithm": "pg", "config": {}, "iteration": 7}, {})
    assert load_checkpoint(path)["iteration"] == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not an rlflow checkpoint; refusing"):
        write_checkpoint(user, {"algorithm": "pg"}, {})
    assert (user / "notes.txt").read_text() == "keep me"


# --------------------------------------------------------------------------- callables
def _main_creator() -> Any:
    return gym.make("CartPole-v1")


_main_creator.__module__ = "__main__"  # as if defined in the script that trained


@pytest.mark.parametrize("creator", ["lambda", "__main__"])
def test_callable_env_and_mapping_round_trip(creator: str, tmp_path: Path) -> None:
    env = (lambda: gym.make("CartPole-v1")) if creator == "lambda" else _main_creator
    with Trainer("pg", env=env, backend="local", **TINY) as trainer:
        first = trainer.train()
        path = trainer.save(tmp_path / "ckpt")
    assert json.loads((Path(path) / CHECKPOINT_META).read_text())["env"].endswith(
        "<lambda>" if creator == "lambda" else "_main_creator"
    )
    with Trainer.restore(path, backend="local") as restored:
        assert callable(restored.config.env)
        result = restored.train()
    assert result["num_env_steps_sampled"] == 2 * first["num_env_steps_sampled"]


def test_restore_keeps_the_env(good_checkpoint: Path) -> None:
    with pytest.raises(ConfigError, match="differs from the checkpoint's env 'CartPole-v1'"):
        Trainer.restore(good_checkpoint, backend="local", env="Acrobot-v1")


def test_restore_with_another_lr_steps_at_that_lr_with_the_saved_moments(
    good_checkpoint: Path,
) -> None:
    saved = load_checkpoint(good_checkpoint)
    with Trainer.restore(good_checkpoint, backend="local", lr=0.0123) as restored:
        policy = restored.workers.local_worker().get_policy()
        assert [g["lr"] for g in policy.update.optimizer.param_groups] == [0.0123]
        moments = policy.update.get_state()["optimizer"]["state"]
        assert moments and moments.keys() == saved_moments(saved).keys()
    with Trainer.restore(good_checkpoint, backend="local") as same:
        policy = same.workers.local_worker().get_policy()
        assert [g["lr"] for g in policy.update.optimizer.param_groups] == [same.config.lr]


def saved_moments(state: dict[str, Any]) -> dict[Any, Any]:
    """The Adam moments of the default policy in a loaded checkpoint's state."""
    found: list[dict[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "optimizer" in node and isinstance(node["optimizer"], dict):
                found.append(node["optimizer"]["state"])
            for value in node.values():
                walk(value)

    walk(state)
    return found[0]


def test_restore_keeps_the_algorithm(good_checkpoint: Path) -> None:
    algo = load_checkpoint(good_checkpoint)["algorithm"]
    other = "dqn" if algo != "dqn" else "ppo"
    with pytest.raises(ConfigError, match=rf"checkpoint is a '{algo}' run, not '{other}'"):
        Trainer.restore(good_checkpoint, backend="local", algo=other)
    with pytest.raises(ConfigError, match=r"unknown algorithm 'ppx'"):
        Trainer.restore(good_checkpoint, backend="local", algo="ppx")
    with Trainer.restore(good_checkpoint, backend="local", algo=algo.upper()) as restored:
        assert restored.algorithm == algo  # the saved one, named in any case


# --------------------------------------------------------------------------- replay buffers
DQN = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "seed": 2,
    "rollout_fragment_length": 8,
    "train_batch_size": 16,
    "learning_starts": 32,
    "min_steps_per_iteration": 64,
    "min_time_s_per_iteration": 0.0,  # iterations by steps alone, not DQN's 1 s floor
    "buffer_size": 1000,
    "model": {"hidden": (16,)},
}


@pytest.mark.parametrize("keep", [True, False])
def test_dqn_replay_buffer_in_the_checkpoint(keep: bool, tmp_path: Path) -> None:
    with Trainer("dqn", backend="local", checkpoint_replay_buffers=keep, **DQN) as trainer:
        trainer.train()
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        buffer: Any = replay_buffers(trainer.workers)["replay_buffer"]
        size, sample = len(buffer), buffer.sample(8)
    assert size > 0
    with Trainer.restore(path, backend="local") as restored:
        got: Any = replay_buffers(restored.workers)["replay_buffer"]
        if not keep:
            assert len(got) == 0
            return
        assert len(got) == size
        again = got.sample(8)  # the buffer's RNG came back too: the same draw
        for key in sample:
            assert np.array_equal(sample[key], again[key]), key
        assert restored.train()["iteration"] == 3


def test_a_checkpoint_saved_before_the_model_was_typed_restores_the_same_config(
    tmp_path: Path,
) -> None:
    with Trainer("dqn", backend="local", **DQN) as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        config = trainer.config
    state = load_checkpoint(path)
    assert state["config"]["model"] == config.model.to_dict()  # saved whole, a plain dict
    # Before, the saved model was the dict the run was given (DQN's relu left to the
    # policy) and self_play {} when off.
    state["config"] = {**state["config"], "model": {"hidden": [16]}, "self_play": {}}
    with Trainer.restore(state, backend="local") as restored:
        assert restored.config == config
        assert restored.config.model == ModelConfig(hidden=(16,), activation="relu")
        assert restored.train()["iteration"] == 2


def test_impala_mix_in_replay_in_the_checkpoint(tmp_path: Path) -> None:
    fields = {"env": "CartPole-v1", "num_workers": 1, "rollout_fragment_length": 10}
    fields |= {"train_batch_size": 20, "replay_proportion": 1.0, "replay_buffer_num_slots": 4}
    with Trainer(
        "impala", backend="local", checkpoint_replay_buffers=True, model={"hidden": (8,)}, **fields
    ) as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        ring = replay_buffers(trainer.workers)["mix_in_replay"].get_state()["ring"]
    assert ring
    with Trainer.restore(path, backend="local") as restored:
        got = replay_buffers(restored.workers)["mix_in_replay"].get_state()["ring"]
        assert [b.count for b in got] == [b.count for b in ring]


def test_apex_replay_shards_in_the_checkpoint(tmp_path: Path) -> None:
    fields = dict(DQN, num_workers=1, num_envs_per_worker=1, num_replay_buffer_shards=2)
    fields |= {"max_weight_sync_delay": 16, "target_network_update_freq": 64, "n_step": 1}
    with Trainer("apex", backend="local", checkpoint_replay_buffers=True, **fields) as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        shards: Any = replay_buffers(trainer.workers)["replay_shards"]
        sizes = [len(s["priorities"]) for s in shards.get_state()]
    assert sum(sizes) > 0
    with Trainer.restore(path, backend="local") as restored:
        got: Any = replay_buffers(restored.workers)["replay_shards"]
        assert [len(s["priorities"]) for s in got.get_state()] == sizes


# --------------------------------------------------------------------------- workers that are gone
def test_a_checkpoint_is_written_when_a_worker_is_gone_and_a_restore_fills_it_in(
    tmp_path: Path,
) -> None:
    # A worker found dead while its state is gathered (e.g. killed with the driver's process
    # group) is saved as None, not an error: the checkpoint still holds the learner and the rest.
    config = {**TINY, "num_workers": 2}
    with Trainer("pg", env="CartPole-v1", backend="local", **config) as trainer:
        trainer.train()
        flow.kill(trainer.workers.remote_workers()[0])
        trainer.save(tmp_path / "checkpoint_000001")
    state = load_checkpoint(tmp_path / "checkpoint_000001")
    first, second = state["remote_workers"]
    assert first is None and second is not None
    with Trainer.restore(state, backend="local") as restored:
        assert restored.train()["iteration"] == 2
