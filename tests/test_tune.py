"""The Ray Tune adapter: resources, trial configs, a real 2-trial sweep on Ray, and
population-based training (exploit copies a trial's checkpoint, explore perturbs its config)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlflow.errors import ConfigError
from rlflow.tune import check_fields, pbt_scheduler, resource_bundles, trainable, trial_config

pytestmark = pytest.mark.timeout(300)

tune = pytest.importorskip("ray.tune")


def test_trial_config_layers_the_tuned_config_under_the_trial_fields() -> None:
    config = trial_config("ppo", {"env": "CartPole-v1", "lr": 0.01, "num_workers": 1})
    assert config.lr == 0.01 and config.num_workers == 1
    assert config.rollout_fragment_length == 32  # from ppo/tuned/CartPole-v1.yaml
    assert config.min_steps_per_iteration == 2000
    # the tuned lr_schedule would override a swept lr: the trial's lr wins
    assert trial_config("ppo", {}).lr_schedule is not None
    assert config.lr_schedule is None
    both = {"lr": 0.01, "lr_schedule": [[0, 0.01], [10, 0.0]]}
    assert trial_config("ppo", both).lr_schedule == [[0, 0.01], [10, 0.0]]


def test_trial_config_names_an_unknown_field() -> None:
    with pytest.raises(ConfigError, match="num_worker"):
        trial_config("ppo", {"num_worker": 1})


def test_resource_request_is_one_learner_bundle_and_one_per_worker() -> None:
    fields = {"num_workers": 2, "num_cpus_per_worker": 0.5, "custom_resources_per_worker": {"x": 1}}
    assert resource_bundles(trial_config("ppo", fields)) == [
        {"CPU": 1.0},
        {"CPU": 0.5, "x": 1.0},
        {"CPU": 0.5, "x": 1.0},
    ]
    factory = trainable("ppo").default_resource_request({"num_workers": 1})
    assert factory.bundles == [{"CPU": 1.0}, {"CPU": 1.0}]
    assert trainable("a2c").__name__ == "A2CTrainable"


def test_learner_actors_get_a_bundle_each_after_the_workers() -> None:
    fields = {"num_workers": 2, "num_learners": 2, "num_gpus_per_learner": 0.5}
    assert resource_bundles(trial_config("ppo", fields)) == [
        {"CPU": 1.0},
        {"CPU": 1.0},
        {"CPU": 1.0},
        {"CPU": 1.0, "GPU": 0.5},
        {"CPU": 1.0, "GPU": 0.5},
    ]


def test_workers_reserving_nothing_get_no_bundles() -> None:
    config = trial_config("ppo", {"num_workers": 3, "num_cpus_per_worker": 0})
    assert resource_bundles(config) == [{"CPU": 1.0}]


_SMALL = {
    "env": "CartPole-v1",
    "num_workers": 1,
    "num_envs_per_worker": 2,
    "train_batch_size": 128,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 2,
    "min_steps_per_iteration": 0,
    "seed": 0,
}


@pytest.mark.ray
def test_sweep_of_two_trials_reports_results_and_restores(
    ray_session: None, tmp_path: Path
) -> None:
    param_space = {**_SMALL, "lr": tune.grid_search([1e-3, 3e-4])}
    tuner = tune.Tuner(
        trainable("ppo"),
        param_space=param_space,
        run_config=tune.RunConfig(
            stop={"training_iteration": 2},
            storage_path=str(tmp_path),
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
            verbose=0,
        ),
    )
    grid = tuner.fit()
    assert not grid.errors
    results = sorted(grid, key=lambda r: r.config["lr"])
    assert [r.config["lr"] for r in results] == [3e-4, 1e-3]
    for result in results:
        assert result.metrics["training_iteration"] == 2
        assert result.metrics["iteration"] == 2
        assert result.metrics["num_env_steps_sampled"] >= 2 * 128
        assert result.checkpoint is not None
    # The trainable restored from the last trial's checkpoint continues at iteration 3.
    restored = trainable("ppo")(config=results[1].config)
    try:
        restored.restore(results[1].checkpoint)
        assert restored.trainer.iteration == 2
        assert restored.trainer.config.lr == 1e-3
        assert restored.train()["iteration"] == 3
    finally:
        restored.stop()


# ------------------------------------------------------------------ population-based training


def test_pbt_scheduler_names_a_field_that_does_not_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_actors(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an actor or a backend was started")

    monkeypatch.setattr("rlflow.trainer.acquire_backend", no_actors)
    monkeypatch.setattr("ray.init", no_actors)
    mutations = {"lr": [1e-3, 1e-4], "entropy_coef": [0.0, 0.01]}
    with pytest.raises(ConfigError) as info:
        pbt_scheduler("ppo", hyperparam_mutations=mutations, time_attr="training_iteration")
    message = str(info.value)
    assert "'entropy_coef' is not a field of PPOConfig (ppo)" in message
    assert "did you mean 'entropy_coeff'?" in message
    with pytest.raises(ConfigError, match="hyperparam_mutations=\\{\\} must be a non-empty dict"):
        pbt_scheduler("ppo", hyperparam_mutations={})
    with pytest.raises(ConfigError, match="'clip_param' is not a field of SACConfig"):
        check_fields("sac", ["lr", "clip_param"])
    scheduler = pbt_scheduler(
        "ppo", hyperparam_mutations={"lr": [1e-3], "clip_param": [0.1, 0.2]}, synch=True
    )
    assert type(scheduler).__name__ == "PopulationBasedTraining"
    assert set(scheduler._hyperparam_mutations) == {"lr", "clip_param"}


def _policy_state(trainable_instance: Any) -> dict[str, Any]:
    policy = trainable_instance.trainer.workers.local_worker().get_policy()
    return {"weights": policy.get_weights(), "update": policy.update.get_state(), "p": policy}


@pytest.mark.ray
def test_a_trial_restored_from_another_trials_checkpoint_keeps_its_own_config(
    ray_session: None, tmp_path: Path
) -> None:
    fields = {**_SMALL, "num_workers": 0, "entropy_coeff": 0.0, "clip_param": 0.2}
    donor = trainable("ppo")(config={**fields, "lr": 1e-3})
    explorer = trainable("ppo")(config={**fields, "lr": 5e-4, "entropy_coeff": 0.01})
    try:
        donor.train()
        donor.train()
        checkpoint = donor.save(str(tmp_path / "donor"))
        saved = _policy_state(donor)
        explorer.train()
        explorer.restore(checkpoint)  # PBT's exploit: another trial's checkpoint
        copied = _policy_state(explorer)
        for name, value in saved["weights"].items():
            np.testing.assert_array_equal(copied["weights"][name], value)
        moments = saved["update"]["optimizer"]["state"]
        assert copied["update"]["num_grad_updates"] == saved["update"]["num_grad_updates"] > 0
        for index, state in moments.items():
            got = copied["update"]["optimizer"]["state"][index]
            np.testing.assert_array_equal(got["exp_avg"].numpy(), state["exp_avg"].numpy())
        # the explored values are the ones it trains with: config and optimizer alike
        config = explorer.trainer.config
        assert (config.lr, config.entropy_coeff, config.clip_param) == (5e-4, 0.01, 0.2)
        assert [g["lr"] for g in copied["p"].update.optimizer.param_groups] == [5e-4]
        assert explorer.trainer.iteration == 2
        assert explorer.train()["iteration"] == 3  # continues from the copied run
    finally:
        donor.stop()
        explorer.stop()


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_pbt_exploits_and_explores_a_population_of_ppo_trials(
    ray_session: None, tmp_path: Path
) -> None:
    scheduler = pbt_scheduler(
        "ppo",
        time_attr="training_iteration",
        perturbation_interval=2,
        quantile_fraction=0.5,
        resample_probability=0.0,  # explore multiplies: every perturbed value changes
        hyperparam_mutations={
            "lr": tune.loguniform(1e-5, 1e-2),
            "clip_param": tune.uniform(0.1, 0.3),
        },
        synch=True,
    )
    tuner = tune.Tuner(
        trainable("ppo"),
        param_space={
            **_SMALL,
            "num_workers": 0,
            "lr": tune.grid_search([1e-5, 1e-2]),
            "clip_param": 0.2,
        },
        tune_config=tune.TuneConfig(
            scheduler=scheduler, metric="episode_return_mean", mode="max", reuse_actors=False
        ),
        run_config=tune.RunConfig(
            name="pbt", stop={"training_iteration": 4}, storage_path=str(tmp_path), verbose=0
        ),
    )
    grid = tuner.fit()
    assert not grid.errors
    experiment = tmp_path / "pbt"
    steps = [json.loads(line) for line in (experiment / "pbt_global.txt").read_text().splitlines()]
    assert steps, "no exploit happened"
    for target, clone, target_iter, clone_iter, clone_config, new_config in steps:
        assert target != clone
        # explore: lr and clip_param are the copied trial's, each x0.8 or x1.2
        for key in ("lr", "clip_param"):
            ratio = new_config[key] / clone_config[key]
            assert ratio == pytest.approx(0.8) or ratio == pytest.approx(1.2), (key, ratio)
    # the exploited trial went on from the copied checkpoint with its new config: its trainer's
    # iteration and counters are the copied trial's plus one iteration (a trainer built afresh
    # would report iteration 1)
    target, clone, _, _, clone_config, new_config = steps[0]

    def rows(tag: str) -> tuple[Path, list[dict[str, Any]]]:
        trial_dir = next(p for p in experiment.iterdir() if p.is_dir() and f"_{tag}_" in p.name)
        lines = (trial_dir / "result.json").read_text().splitlines()
        return trial_dir, [json.loads(line) for line in lines]

    trial_dir, target_rows = rows(target)
    after = [r for r in target_rows if r["config"]["lr"] == new_config["lr"]]
    assert after, f"trial {target} never reported with its explored lr {new_config['lr']}"
    assert after[0]["config"]["clip_param"] == new_config["clip_param"]
    copied = [r for r in rows(clone)[1] if r["iteration"] == after[0]["iteration"] - 1]
    assert after[0]["iteration"] >= 2 and copied, (after[0]["iteration"], clone)
    assert after[0]["num_env_steps_sampled"] > copied[0]["num_env_steps_sampled"]
    trial_id = "_".join(trial_dir.name.split("_")[2:4])  # PPOTrainable_<env>_<id>_<n>_...
    assert (experiment / f"pbt_policy_{trial_id}.txt").read_text().strip()
