"""What several algorithm families learn with: RL concepts, each a field group (or, for the
advantages, a whole config).

- `ActorCriticConfig`: the advantages of on-policy actor-critic policies (PG, A2C, A3C, PPO):
  an `AlgorithmConfig` with ``use_critic``, ``use_gae``, ``lambda_``, because
  `rlflow.policy.ActorCriticPolicy` reads it as its whole config;
- `LossWeightsConfig`: the value loss's and the entropy bonus's weights (PG, A2C, A3C, PPO,
  IMPALA, APPO);
- `SGDConfig`: epochs and minibatches over a train batch (PPO, IMPALA, APPO);
- `SurrogateConfig`: the clipped probability ratio and the KL term's weight (PPO, MAML, APPO);
- `AdaptiveKLConfig`: the KL the adaptive penalty steers towards (PPO, MAML);
- `TargetNetworkConfig`: how often target networks follow (DQN, Ape-X, SAC, TD3, APPO);
- `LearnerQueueConfig`: the learner thread's input queue (IMPALA, APPO, Ape-X);
- `ActorLearningRateConfig`: an actor's own learning rate (SAC, TD3, MADDPG, DreamerV3);
- `ReplayStartConfig`: how full a replay is before training starts (DQN, Ape-X, SAC, TD3,
  QMIX, DreamerV3);
- `ReplayCapacityConfig`: how much a replay of whole games or episodes keeps (AlphaZero,
  DreamerV3).

A field whose reading differs a little between families is still declared once; its docstring
gives each family's reading, and a family's stricter rule stays in its config's
``__post_init__``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.config.algorithm import AlgorithmConfig
from rlflow.config.group import FieldGroup
from rlflow.schedules import PiecewiseSchedule

__all__ = [
    "ActorCriticConfig",
    "ActorLearningRateConfig",
    "AdaptiveKLConfig",
    "LearnerQueueConfig",
    "LossWeightsConfig",
    "ReplayCapacityConfig",
    "ReplayStartConfig",
    "SGDConfig",
    "SurrogateConfig",
    "TargetNetworkConfig",
]


@dataclass(frozen=True, kw_only=True)
class ActorCriticConfig(AlgorithmConfig):
    """The advantage settings of on-policy actor-critic algorithms (PG, A2C, A3C, PPO).

    `rlflow.policy.TorchPolicy` reads them to postprocess a trajectory (GAE or discounted
    returns); algorithms whose policies postprocess otherwise (DQN, IMPALA) do not have them.
    A whole config, not only a group: it is `rlflow.policy.ActorCriticPolicy`'s
    ``config_class``.
    """

    use_critic: bool = True
    """Learn a value function; advantages are then returns (or GAE) minus V(s). PG's default
    is False (advantages are discounted returns); A2C and A3C always learn one."""
    use_gae: bool = True
    """Use GAE(``lambda_``) advantages (needs ``use_critic``); False: returns minus V(s) with a
    critic, discounted returns without."""
    lambda_: float = 1.0
    """GAE lambda, in [0, 1] (only with ``use_gae``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_range("lambda_", 0.0, 1.0)
        if self.use_gae and not self.use_critic:
            raise self._bad("use_gae", "needs use_critic=True (GAE uses the critic)")


@dataclass(frozen=True, kw_only=True)
class LossWeightsConfig(FieldGroup):
    """The weights of the value loss and of the entropy bonus in a policy-gradient loss, and the
    entropy bonus's schedule.

    The policy side, `rlflow.policy.entropy_schedule.EntropyCoeffSchedule`, moves the entropy
    coefficient with the global ``timestep`` (env steps sampled) that the learner is told after
    every train item, exactly as ``lr_schedule`` moves the learning rate.
    """

    vf_loss_coeff: float = 0.5
    """Weight of the value loss, >= 0 (PG, A2C, A3C: only with a critic, ``use_critic``)."""
    entropy_coeff: float = 0.0
    """Weight of the entropy bonus, >= 0 (``entropy_coeff_schedule`` overrides it)."""
    entropy_coeff_schedule: list[list[float]] | None = None
    """``[[timestep, entropy_coeff], ...]`` (timesteps from 0, nondecreasing, env steps
    sampled; values >= 0): the learner's entropy coefficient, linear in between and flat after
    the last point; overrides ``entropy_coeff``. None: ``entropy_coeff`` throughout."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_range("vf_loss_coeff", 0.0, float("inf"))
        self._check_range("entropy_coeff", 0.0, float("inf"))
        if self.entropy_coeff_schedule is not None:
            label = self._label("entropy_coeff_schedule")
            PiecewiseSchedule.from_points(self.entropy_coeff_schedule, label)


@dataclass(frozen=True, kw_only=True)
class SGDConfig(FieldGroup):
    """Epochs and minibatches of stochastic gradient descent over each train batch.

    The configs with this group also check ``sgd_minibatch_size <= train_batch_size`` (a rule
    across two groups).
    """

    num_sgd_iter: int = 1
    """Epochs over each train batch, >= 1 (IMPALA, APPO: passes of the learner thread)."""
    sgd_minibatch_size: int = 0
    """Rows per SGD step, <= ``train_batch_size``. PPO draws shuffled minibatches of this many
    rows in each epoch, so it must be >= 1 there; IMPALA and APPO step on contiguous slices, 0
    for the whole batch in one step (>= 0)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("num_sgd_iter", 1)
        self._check_int("sgd_minibatch_size", 0)


@dataclass(frozen=True, kw_only=True)
class SurrogateConfig(FieldGroup):
    """The clipped surrogate objective and the weight of its KL term."""

    clip_param: float = 0.3
    """Clip the probability ratio to [1 - clip_param, 1 + clip_param], > 0: PPO's pi / pi_old,
    MAML's outer (meta-update) ratio, APPO's pi / pi_target (its target network)."""
    kl_coeff: float = 0.2
    """Weight of the KL term, >= 0. PPO and MAML: the initial coefficient of a KL penalty (0:
    none), adapted towards ``kl_target`` after each train step (MAML: each meta-update; see
    `rlflow.policy.adaptive_kl_coeff`). APPO: a fixed weight of ``KL(mu || pi)`` (mu: the
    behaviour policy), in the loss only with ``use_kl_loss``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_positive("clip_param")
        self._check_range("kl_coeff", 0.0, float("inf"))


@dataclass(frozen=True, kw_only=True)
class AdaptiveKLConfig(FieldGroup):
    """The target of an adaptive KL penalty (with `SurrogateConfig`'s ``kl_coeff``)."""

    kl_target: float = 0.01
    """KL the adaptive coefficient steers towards, > 0: ``kl_coeff`` grows x1.5 when the
    sampled KL exceeds twice this and halves when it falls under half of it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_positive("kl_target")


@dataclass(frozen=True, kw_only=True)
class TargetNetworkConfig(FieldGroup):
    """How often a target network follows the trained one."""

    target_network_update_freq: int = 500
    """Update the target network(s) every this many env steps, >= 0 (0: after every train
    step). DQN (ppo_dqn's DQN learner too), SAC and TD3 count env steps *sampled*; Ape-X and
    APPO, whose learner runs apart from sampling, env steps *trained*. DQN, Ape-X and APPO
    copy the model into the target; SAC and TD3 Polyak-average with ``tau``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("target_network_update_freq", 0)


@dataclass(frozen=True, kw_only=True)
class LearnerQueueConfig(FieldGroup):
    """The input queue of a learner thread (`rlflow.ops.LearnerThread`)."""

    learner_queue_size: int = 16
    """Batches waiting for the learner thread, >= 1 (IMPALA, APPO: train batches, and a full
    queue pauses sampling; Ape-X: replayed batches)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("learner_queue_size", 1)


@dataclass(frozen=True, kw_only=True)
class ActorLearningRateConfig(FieldGroup):
    """An actor trained with a learning rate of its own (``lr`` is another part's: the critics'
    in SAC, TD3, MADDPG and MATD3; the world model's default in DreamerV3)."""

    actor_lr: float = 3e-4
    """Learning rate of the actor (Adam), > 0 (RLlib's ``actor_learning_rate``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_positive("actor_lr")


@dataclass(frozen=True, kw_only=True)
class ReplayStartConfig(FieldGroup):
    """Training waits for a replay to hold enough."""

    learning_starts: int = 1000
    """Transitions (env steps) in the replay before training starts, >= 0 (RLlib's
    ``num_steps_sampled_before_learning_starts``). Replay algorithms: at most ``buffer_size``,
    Ape-X's stored over all shards; DreamerV3: >= 1, env steps of whole episodes."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("learning_starts", 0)


@dataclass(frozen=True, kw_only=True)
class ReplayCapacityConfig(FieldGroup):
    """A replay of whole games or episodes that keeps the most recent ones."""

    replay_capacity: int = 20_000
    """What the replay keeps, >= 1, the oldest dropped first: AlphaZero's positions;
    DreamerV3's env steps (whole episodes, >= ``batch_length``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("replay_capacity", 1)
