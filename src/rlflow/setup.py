"""What a run trains, resolved and checked before anything heavy starts: `resolve_setup` looks
the algorithm up, builds its typed config and checks the env's names, without importing torch
(the algorithms' policies and plans load on first use, `rlflow.lazy`), so the command line can
refuse bad input at once and then start Ray while torch is imported beside it. `check_env`
with a policy class also builds a learner's worker (that one imports torch).

A `TrainerSetup` is what `rlflow.trainer.Trainer` takes instead of a name and fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from rlflow.config import AlgorithmConfig
from rlflow.errors import ConfigError

if TYPE_CHECKING:
    from rlflow.algorithms import AlgorithmSpec

__all__ = ["TrainerSetup", "check_env", "resolve_setup"]


class TrainerSetup(NamedTuple):
    """What a `rlflow.trainer.Trainer` runs, resolved once (:func:`resolve_setup`): the
    algorithm and its validated config, whose env names were checked. The command line builds
    one and hands it to the Trainer, which then neither looks the algorithm up nor validates the
    config again."""

    algorithm: AlgorithmSpec
    """The registered algorithm (config class, policy class, plan)."""
    config: AlgorithmConfig
    """The validated, frozen config (an instance of ``algorithm.config_cls``)."""


def resolve_setup(
    algo: str | AlgorithmSpec,
    config: AlgorithmConfig | Mapping[str, Any] | None = None,
    **fields: Any,
) -> TrainerSetup:
    """Look the algorithm up, build its config and check the env's names, once.

    ``config`` is an instance of the algorithm's config class (used as it is, or through
    ``replace`` when ``fields`` change some of it), a dict of its fields, or None (the
    defaults); ``fields`` go on top. Raises :class:`ConfigError` for an unknown algorithm,
    config key, Gymnasium id, PettingZoo module or ``env_wrappers`` name, or a bad value; builds
    no env (:func:`check_env` without a policy class).
    """
    from rlflow.algorithms import AlgorithmSpec, get_algorithm

    spec = algo if isinstance(algo, AlgorithmSpec) else get_algorithm(algo)
    typed = _typed_config(spec.config_cls, config, fields)
    check_env(typed)
    return TrainerSetup(spec, typed)


def _typed_config(
    config_cls: Any, config: AlgorithmConfig | Mapping[str, Any] | None, fields: dict[str, Any]
) -> AlgorithmConfig:
    """``config`` with ``fields`` on top, validated: an instance of ``config_cls`` is kept as
    it is (no fields) or replaced field by field; a dict or None is built from its fields."""
    if isinstance(config, AlgorithmConfig) and type(config) is config_cls:
        return config.replace(**fields) if fields else config
    base: dict[str, Any] = {}
    if isinstance(config, AlgorithmConfig):  # another class's: its model on top of ours
        base = {**config.to_dict(), "model": config.model_overrides()}
    elif isinstance(config, Mapping):
        base = dict(config)
    elif config is not None:
        raise ConfigError(
            f"Trainer(config={config!r}): must be a {config_cls.__name__}, a dict of its "
            "fields, or None"
        )
    merged: AlgorithmConfig = config_cls.from_dict(base | fields)
    return merged


def check_env(
    config: AlgorithmConfig, policy_cls: type | None = None, *, algo: str | None = None
) -> None:
    """Raise :class:`ConfigError` for an unknown Gymnasium id, PettingZoo module or
    ``env_wrappers`` name (builds no env); with ``policy_cls``, also if the policies of ``algo``
    cannot take the env's spaces or ``observation_filter`` cannot filter its observations
    (builds a learner's rollout worker on the driver, as a `Trainer` does first, and closes
    it)."""
    from rlflow.envs import config_env_creator

    config_env_creator(config)
    if policy_cls is not None:
        from rlflow.workers import RolloutWorker

        if config.num_envs_per_worker == "auto":  # the check needs one env, not the choice
            config = config.replace(num_envs_per_worker=1)
        RolloutWorker(config, policy_cls, worker_index=0, algorithm=algo).stop()
