"""Ray Tune adapter: `trainable` turns an rlflow algorithm into a ``ray.tune.Trainable``.

One Tune trial is one :class:`~rlflow.trainer.Trainer`. The trial's config (Tune's
``param_space``, after sampling) holds config fields; the base under them is the tuned config
shipped for the algorithm and the trial's ``env`` (as ``rlflow train`` builds it), or the
algorithm's defaults when none ships. Each ``step`` is one ``Trainer.train``; Tune checkpoints
are ``Trainer.save`` directories and restoring one is ``Trainer.restore``. A trial reserves a
placement group of one learner bundle (``{"CPU": 1, "GPU": num_gpus}``) and one bundle per
remote worker; the trainer joins the Ray that Tune runs in and its `rlflow.workers.WorkerSet`
puts worker i into bundle i of that group (it creates no group of its own)::

    from ray import tune
    from rlflow.tune import trainable

    tuner = tune.Tuner(
        trainable("ppo"),
        param_space={"env": "CartPole-v1", "num_workers": 1, "lr": tune.grid_search([1e-3, 3e-4])},
        run_config=tune.RunConfig(stop={"training_iteration": 5}),
    )
    results = tuner.fit()

Population-based training (Jaderberg et al. 2017) is Tune's ``PopulationBasedTraining``
scheduler over these trainables; `pbt_scheduler` builds one after checking that every field it
would perturb is one of the algorithm's config fields (a `ConfigError` naming the key before
any trial starts). Exploit copies a better trial's checkpoint: the trial is rebuilt from it
(weights, optimizer moments, counters) with its own, perturbed config, so the explored
``lr``, ``entropy_coeff`` or ``clip_param`` is the one it trains with (`RLFlowTrainable
.load_checkpoint`). Tune writes the population's progress into the experiment directory: each
trial's ``progress.csv`` and ``result.json``, and PBT's ``pbt_global.txt`` and
``pbt_policy_<trial>.txt`` (which trial copied which, at what iteration, with which config)::

    from rlflow.tune import pbt_scheduler, trainable

    tuner = tune.Tuner(
        trainable("ppo"),
        param_space={"env": "CartPole-v1", "lr": tune.grid_search([1e-4, 1e-3])},
        tune_config=tune.TuneConfig(
            scheduler=pbt_scheduler(
                "ppo",
                time_attr="training_iteration",
                perturbation_interval=2,
                hyperparam_mutations={"lr": tune.loguniform(1e-5, 1e-2)},
            ),
            metric="episode_return_mean",
            mode="max",
        ),
    )

Ray Tune is the optional extra ``tune`` (``pip install "rl-flow[tune]"``); it is imported only
when `trainable` is called.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from rlflow.algorithms import get_algorithm
from rlflow.config import AlgorithmConfig
from rlflow.config.files import build_config, load_config_file, tuned_config_path
from rlflow.errors import ConfigError
from rlflow.setup import resolve_setup
from rlflow.trainer import Trainer

__all__ = ["check_fields", "pbt_scheduler", "resource_bundles", "trainable", "trial_config"]


def trial_config(algo: str, fields: Mapping[str, Any]) -> AlgorithmConfig:
    """The validated config of one trial of ``algo``: the tuned config shipped for ``algo`` on
    ``fields["env"]`` (the algorithm's default env when absent), if any, with ``fields`` on
    top. A trial that sets ``lr`` (``entropy_coeff``) and not ``lr_schedule``
    (``entropy_coeff_schedule``) drops the tuned config's schedule, which would override the
    trial's value. Values are coerced as the command line coerces them; an unknown field is a
    `ConfigError` suggesting the closest name.
    """
    spec = get_algorithm(algo)
    env = fields.get("env", spec.config_cls().env)
    path = tuned_config_path(spec.name, env) if isinstance(env, str) else None
    base = load_config_file(path).fields if path is not None else {}
    for name in ("lr", "entropy_coeff"):  # a swept value must not lose to the tuned schedule
        if name in fields and f"{name}_schedule" not in fields:
            base.pop(f"{name}_schedule", None)
    config: AlgorithmConfig = build_config(spec.config_cls, {**base, **fields})
    return config


def resource_bundles(config: AlgorithmConfig) -> list[dict[str, float]]:
    """A trial's placement-group bundles: the learner's ``{"CPU": 1, "GPU": num_gpus}`` (GPU
    left out at 0) first, then one `ResourceConfig.worker_bundle` per remote worker (none when
    a worker reserves nothing: its actors then land in the trial's group unreserved), then one
    `ResourceConfig.learner_bundle` per learner actor (``num_learners``)."""
    learner = {"CPU": 1.0, "GPU": float(config.num_gpus)}
    bundles = [{k: v for k, v in learner.items() if v > 0}]
    worker = config.worker_bundle()
    if worker:
        bundles.extend(dict(worker) for _ in range(config.num_workers))
    learner_actor = config.learner_bundle()
    if config.num_learners and learner_actor:
        bundles.extend(dict(learner_actor) for _ in range(config.num_learners))
    return bundles


def _import_tune() -> Any:
    try:
        from ray import tune
    except ImportError as err:
        raise ImportError(
            f"rlflow.tune needs Ray Tune, which is not installed ({err}): "
            'pip install "rl-flow[tune]"'
        ) from err
    return tune


@functools.cache
def _base_class() -> type:
    """The shared ``ray.tune.Trainable`` subclass (defined once Ray Tune is imported)."""
    tune = _import_tune()

    class RLFlowTrainable(tune.Trainable):  # type: ignore[misc, name-defined]
        """A Tune trainable running one rlflow Trainer (see `rlflow.tune`)."""

        algo = ""

        @classmethod
        def default_resource_request(cls, config: dict[str, Any]) -> Any:
            """One learner bundle and one bundle per remote worker (`resource_bundles`)."""
            resolved = trial_config(cls.algo, config)
            return tune.PlacementGroupFactory(
                resource_bundles(resolved), strategy=resolved.placement_strategy
            )

        def setup(self, config: dict[str, Any]) -> None:
            """Build the trainer on the Ray this trial runs in."""
            self.trainer = Trainer(self.algo, config=trial_config(self.algo, config))

        def step(self) -> dict[str, Any]:
            """One ``Trainer.train`` iteration; its result."""
            return self.trainer.train()

        def save_checkpoint(self, checkpoint_dir: str) -> None:
            """``Trainer.save`` into Tune's (empty) checkpoint directory."""
            self.trainer.save(checkpoint_dir)

        def load_checkpoint(self, checkpoint: Any) -> None:
            """Replace the trainer by ``Trainer.restore`` of a checkpoint directory, with this
            trial's config (which may differ from the checkpoint's: population-based training
            restores a trial from another trial's checkpoint after perturbing its config).

            The weights, the optimizer's moments, the counters and the iteration come from
            the checkpoint; every config field (``lr``, ``entropy_coeff``, ``clip_param``, ...)
            is the trial's."""
            if not isinstance(checkpoint, str):
                raise ConfigError(
                    f"{type(self).__name__}.load_checkpoint({checkpoint!r}): expected the "
                    "checkpoint directory written by save_checkpoint"
                )
            setup = resolve_setup(self.algo, trial_config(self.algo, self.config))
            self.trainer.stop()
            self.trainer = Trainer.restore(checkpoint, setup)

        def cleanup(self) -> None:
            """Stop the trainer (its workers; the trial's group is Tune's)."""
            self.trainer.stop()

    return RLFlowTrainable


def trainable(algo: str) -> type:
    """A ``ray.tune.Trainable`` subclass that trains algorithm ``algo`` (a registered name).

    Pass it to ``tune.Tuner`` with a ``param_space`` of config fields (`trial_config` builds
    each trial's config). Each iteration reports the ``Trainer.train`` result; checkpoints are
    ``Trainer.save`` directories; ``default_resource_request`` asks for `resource_bundles`.
    ConfigError for an unknown algorithm; ImportError naming the ``tune`` extra when Ray Tune
    is not installed.
    """
    spec = get_algorithm(algo)
    base = _base_class()
    name = f"{spec.name.upper().replace('_', '')}Trainable"
    return type(name, (base,), {"algo": spec.name, "__doc__": f"Tune trainable of {spec.name}."})


def check_fields(algo: str, names: Iterable[str], *, what: str = "check_fields") -> list[str]:
    """``names`` as a list once each is a field of ``algo``'s config (e.g. the keys a
    population-based training scheduler perturbs: ``PopulationBasedTraining``'s
    ``hyperparam_mutations``, ``PB2``'s ``hyperparam_bounds``); else a `ConfigError` naming the
    first unknown key, ``what`` asked for it, the closest field and the config's fields.

    >>> check_fields("ppo", ["lr", "clip_param"])
    ['lr', 'clip_param']
    """
    spec = get_algorithm(algo)
    fields = sorted(f.name for f in dataclasses.fields(spec.config_cls))
    checked = []
    for name in names:
        if name not in fields:
            close = difflib.get_close_matches(str(name), fields, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"{what}: {name!r} is not a field of {spec.config_cls.__name__} ({spec.name}); "
                f"{hint}its fields are {fields}"
            )
        checked.append(name)
    return checked


def pbt_scheduler(algo: str, *, hyperparam_mutations: Mapping[str, Any], **kwargs: Any) -> Any:
    """Ray Tune's ``PopulationBasedTraining`` scheduler for trials of `trainable` ``(algo)``,
    its ``hyperparam_mutations`` checked first: each key must be a field of ``algo``'s config
    (`check_fields`; a `ConfigError` naming the key otherwise, before any trial starts).

    Args:
        algo: the algorithm the trials train (a registered name).
        hyperparam_mutations: config field -> what Tune perturbs it with (a list of values, a
            ``tune`` distribution or a function), as ``PopulationBasedTraining`` takes them.
        **kwargs: the scheduler's other arguments, under Tune's names (``time_attr``,
            ``perturbation_interval``, ``quantile_fraction``, ``resample_probability``,
            ``perturbation_factors``, ``metric``, ``mode``, ``synch``, ...).
    """
    if not isinstance(hyperparam_mutations, Mapping) or not hyperparam_mutations:
        raise ConfigError(
            f"pbt_scheduler({algo!r}): hyperparam_mutations={hyperparam_mutations!r} must be a "
            "non-empty dict of config fields to perturb"
        )
    check_fields(algo, hyperparam_mutations, what="pbt_scheduler: hyperparam_mutations key")
    _import_tune()
    from ray.tune.schedulers import PopulationBasedTraining

    return PopulationBasedTraining(hyperparam_mutations=dict(hyperparam_mutations), **kwargs)
