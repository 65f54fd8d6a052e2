"""The Ray Tune adapter: resources, trial configs, and a real 2-trial sweep on Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlflow.errors import ConfigError
from rlflow.tune import resource_bundles, trainable, trial_config

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
