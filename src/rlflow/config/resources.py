"""`ResourceConfig`: the field group of what the learner and each remote rollout worker use, and
where they land.

Every algorithm config has it (one of the groups `rlflow.config.AlgorithmConfig` is built
from); RLlib's names.
`rlflow.workers.WorkerSet` reserves one placement-group bundle per remote worker on Ray; the
local backend runs every worker in the driver and ignores the per-worker reservations.
GPUs: ``num_gpus`` puts the learner's policies on ``cuda`` (the driver process must see a GPU),
``num_gpus_per_worker`` reserves GPUs for the remote workers and runs their inference there;
`resolve_device` says which device a policy uses and `check_gpus` refuses GPUs that are not
there before any actor starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlflow.checks import check_choice, check_number, check_type
from rlflow.config.group import FieldGroup
from rlflow.errors import ConfigError

__all__ = [
    "PLACEMENT_STRATEGIES",
    "ResourceConfig",
    "bundles_that_fit",
    "check_cluster_fits",
    "check_gpus",
    "check_learner_gpu",
    "resolve_device",
    "workers_to_start",
]

PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
"""Ray's placement-group strategies (``placement_strategy``)."""

_BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


@dataclass(frozen=True, kw_only=True)
class ResourceConfig(FieldGroup):
    """Per-worker resources and placement, and the threads each process computes with."""

    num_cpus_per_worker: float = 1
    """CPUs each remote rollout worker reserves, >= 0 (fractions allowed: 0.5 packs two
    workers on a core). A worker steps envs in a tight loop, so 1 keeps Ray from packing more
    busy workers than cores. Ignored by the local backend."""
    custom_resources_per_worker: dict[str, float] = field(default_factory=dict)
    """Custom Ray resources each remote rollout worker reserves (``{name: amount >= 0}``, e.g.
    ``{"spot_node": 1}``); CPU and GPU are not custom. Empty: none. Ignored locally."""
    num_gpus: float = 0
    """GPUs for the learner (the driver's local worker), >= 0; fractions allowed (a learner
    sharing a GPU). > 0: the learner's policies train on ``cuda`` (batches copied from pinned
    host memory, non-blocking); weights still travel to the workers as CPU arrays. 0: CPU."""
    num_gpus_per_worker: float = 0
    """GPUs each remote rollout worker reserves, >= 0 (fractions allowed); > 0: its inference
    runs on ``cuda``. 0 (the default): workers act on CPU, which is faster for small models."""
    placement_strategy: str = "PACK"
    """How the remote workers' bundles (one per worker) are placed on the cluster's nodes: one
    of PACK (few nodes, best effort), SPREAD (many nodes, best effort), STRICT_PACK (one node)
    or STRICT_SPREAD (one worker per node). Ignored locally."""
    num_learners: int = 0
    """Data-parallel learner actors, >= 0 (RLlib's name). 0: the learner is the driver's local
    worker. N >= 1: the policies train in N Ray actors joined by ``torch.distributed`` (gloo on
    CPU, NCCL on GPU); each optimizer step is split into N shards whose gradients are averaged
    (`rlflow.workers.learner_group`), the same update one learner computes on the whole step.
    For the algorithms that train with ``TrainOneStep`` or a learner thread (PG, PPO, DQN,
    SAC, TD3, IMPALA, APPO, Ape-X, ppo_dqn). On the local backend the learners are threads."""
    num_cpus_per_learner: float = 1
    """CPUs each learner actor reserves, >= 0 (``num_learners`` >= 1). Ignored locally."""
    num_gpus_per_learner: float = 0
    """GPUs each learner actor reserves, >= 0 (fractions allowed: two learners on one GPU);
    > 0: its policies train on ``cuda`` (the learners all-reduce over NCCL). With
    ``num_learners`` >= 1 this replaces ``num_gpus`` (the driver's learner)."""
    num_torch_threads: int = 1
    """Torch intra-op threads per process (learner and each worker), >= 1."""
    cluster_wait_s: float = 0.0
    """Seconds to wait, >= 0, for a Ray cluster too small for the remote workers' bundles to
    grow (an autoscaling cluster), with a progress line every 10 s. 0: a run the cluster's
    nodes cannot hold is refused at once (`check_cluster_fits`), naming the fields."""

    def __post_init__(self) -> None:
        super().__post_init__()
        name = type(self).__name__
        check_number(self.num_cpus_per_worker, f"{name}.num_cpus_per_worker", low=0)
        check_number(self.num_gpus, f"{name}.num_gpus", low=0)
        check_number(self.num_gpus_per_worker, f"{name}.num_gpus_per_worker", low=0)
        label = f"{name}.custom_resources_per_worker"
        check_type(self.custom_resources_per_worker, label, dict, "a dict of {name: amount}")
        for key, amount in self.custom_resources_per_worker.items():
            if not isinstance(key, str) or not key or key in _BUILTIN_RESOURCES:
                raise ConfigError(
                    f"{label}={self.custom_resources_per_worker!r}: key {key!r} must be a custom "
                    f"resource name (not one of {_BUILTIN_RESOURCES}; use num_cpus_per_worker)"
                )
            check_number(amount, f"{label}[{key!r}]", low=0)
        check_choice(self.placement_strategy, f"{name}.placement_strategy", PLACEMENT_STRATEGIES)
        self._check_int("num_torch_threads", 1)
        self._check_int("num_learners", 0)
        check_number(self.num_cpus_per_learner, f"{name}.num_cpus_per_learner", low=0)
        check_number(self.num_gpus_per_learner, f"{name}.num_gpus_per_learner", low=0)
        if self.num_learners and self.num_gpus:
            raise ConfigError(
                f"{name}: num_gpus={self.num_gpus} is the driver's learner, which "
                f"num_learners={self.num_learners} replaces by learner actors: set "
                "num_gpus_per_learner instead (and num_gpus=0)"
            )
        check_number(self.cluster_wait_s, f"{name}.cluster_wait_s", low=0)

    def worker_bundle(self) -> dict[str, float]:
        """The resources one remote worker reserves (zero amounts left out; may be empty)."""
        bundle = {"CPU": float(self.num_cpus_per_worker), "GPU": float(self.num_gpus_per_worker)}
        bundle.update({k: float(v) for k, v in self.custom_resources_per_worker.items()})
        return {k: v for k, v in bundle.items() if v > 0}

    def learner_bundle(self) -> dict[str, float]:
        """The resources one learner actor reserves (zero amounts left out; may be empty)."""
        bundle = {"CPU": float(self.num_cpus_per_learner), "GPU": float(self.num_gpus_per_learner)}
        return {k: v for k, v in bundle.items() if v > 0}


def bundles_that_fit(
    bundle: Mapping[str, float], nodes: Sequence[Mapping[str, float]], strategy: str
) -> int:
    """How many copies of ``bundle`` the ``nodes`` (each node's total resources) can hold at
    once under placement ``strategy``: all nodes together (PACK, SPREAD), the largest node
    alone (STRICT_PACK), or one per node (STRICT_SPREAD).

    >>> bundles_that_fit({"CPU": 1.0}, [{"CPU": 2.0}, {"CPU": 3.5, "GPU": 1.0}], "PACK")
    5
    >>> bundles_that_fit({"CPU": 1.0, "GPU": 0.5}, [{"CPU": 2.0}, {"CPU": 4.0, "GPU": 1.0}], "PACK")
    2
    """
    per_node = [
        min(
            (int(node.get(key, 0.0) // amount) for key, amount in bundle.items() if amount > 0),
            default=0,
        )
        for node in nodes
    ]
    if strategy == "STRICT_PACK":
        return max(per_node, default=0)
    if strategy == "STRICT_SPREAD":
        return sum(1 for n in per_node if n > 0)
    return sum(per_node)


def workers_to_start(config: ResourceConfig) -> tuple[int, str]:
    """How many remote workers must fit before a run starts, and the field that says so:
    ``min_workers`` of an elastic run (`rlflow.config.RolloutConfig.min_workers`), else
    ``num_workers``."""
    workers = int(getattr(config, "num_workers", 0))
    least = getattr(config, "min_workers", None)
    if least is not None and least < workers:
        return int(least), "min_workers"
    return workers, "num_workers"


def check_cluster_fits(config: ResourceConfig, nodes: Sequence[Mapping[str, float]]) -> None:
    """Raise `ConfigError` naming ``num_workers`` (``min_workers`` of an elastic run) and the
    per-worker fields when the cluster's ``nodes`` cannot hold the bundles of the remote
    workers a run starts with (`bundles_that_fit`) at all, or naming ``num_learners`` and the
    per-learner fields when the learner actors do not fit beside them."""
    _check_learners_fit(config, nodes)
    workers, field_name = workers_to_start(config)
    bundle = config.worker_bundle()
    if not workers or not bundle:
        return
    fit = bundles_that_fit(bundle, nodes, config.placement_strategy)
    if fit >= workers:
        return
    raise ConfigError(
        f"{type(config).__name__}: {field_name}={workers} workers of {bundle} each "
        f"(num_cpus_per_worker={config.num_cpus_per_worker}, "
        f"num_gpus_per_worker={config.num_gpus_per_worker}, "
        f"placement_strategy={config.placement_strategy!r}) do not fit the Ray cluster, which "
        f"holds {fit} (nodes: {[dict(n) for n in nodes]}): lower {field_name} or "
        "num_cpus_per_worker (fractions pack several workers on a core), add nodes, or set "
        "cluster_wait_s for a cluster that scales up"
    )


def _check_learners_fit(config: ResourceConfig, nodes: Sequence[Mapping[str, float]]) -> None:
    """With learner actors: the learners' bundles, and all bundles together (workers' and
    learners'), must fit the cluster's total resources; a `ConfigError` names the fields."""
    learners, learner = config.num_learners, config.learner_bundle()
    if not learners or not learner:
        return
    workers, field_name = workers_to_start(config)
    worker = config.worker_bundle()
    need: dict[str, float] = {}
    for bundle, count in ((worker, workers), (learner, learners)):
        for key, amount in bundle.items():
            need[key] = need.get(key, 0.0) + amount * count
    have = {key: sum(float(n.get(key, 0.0)) for n in nodes) for key in need}
    short = {key: (need[key], have[key]) for key in need if need[key] > have[key] + 1e-9}
    if bundles_that_fit(learner, nodes, config.placement_strategy) >= learners and not short:
        return
    detail = ", ".join(
        f"{key}: {n:g} needed, {h:g} in the cluster" for key, (n, h) in short.items()
    )
    raise ConfigError(
        f"{type(config).__name__}: num_learners={learners} learner actors of {learner} each "
        f"(num_cpus_per_learner={config.num_cpus_per_learner}, num_gpus_per_learner="
        f"{config.num_gpus_per_learner}) and {field_name}={workers} workers of {worker} each "
        f"do not fit the Ray cluster ({detail or 'the learners alone do not fit its nodes'}): "
        "lower num_cpus_per_learner or num_cpus_per_worker (fractions share a core), "
        f"num_learners or {field_name}, or add nodes"
    )


def resolve_device(config: ResourceConfig, worker_index: int) -> Any:
    """The ``torch.device`` of a policy on worker ``worker_index`` (0: the learner): ``cuda``
    when its GPU field (``num_gpus``, ``num_gpus_per_worker``) is > 0, else ``cpu`` (a learner
    actor's worker is built with ``num_gpus = num_gpus_per_learner``)."""
    import torch

    gpus = config.num_gpus if worker_index == 0 else config.num_gpus_per_worker
    return torch.device("cuda" if gpus > 0 else "cpu")


def check_learner_gpu(config: ResourceConfig) -> None:
    """Raise `ConfigError` when ``num_gpus > 0`` and no GPU is visible to torch in this process
    (the learner's policies would be built on ``cuda``); the workers' GPUs are `check_gpus`'s,
    once the cluster is known. Torch is imported only with ``num_gpus > 0`` (a driver that
    starts its remote workers before it imports torch checks them first)."""
    if config.num_gpus <= 0:
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            f"{type(config).__name__}: num_gpus={config.num_gpus} but no GPU is visible to this "
            "process (torch.cuda.is_available() is False): set num_gpus=0 to train on CPU, or "
            "install a CUDA build of torch on a machine with a GPU"
        )


def _check_gpus_for(
    config: ResourceConfig, cluster_gpus: float | None, per: str, count: str, on_cpu: str
) -> None:
    """Raise `ConfigError` when ``per`` (a GPUs-per-actor field) x ``count`` (how many such
    actors) asks for more GPUs than there are: in the cluster (``cluster_gpus``), or on the
    local backend (None), where the actors live in this process and torch must see one;
    ``on_cpu`` says what ``per=0`` means, for the message."""
    amount, actors = getattr(config, per), getattr(config, count, 0)
    wanted = amount * actors
    if wanted <= 0:
        return
    if cluster_gpus is None:
        import torch

        visible = torch.cuda.is_available()
        have, enough, where = float(visible), visible, "this process"
    else:
        have, enough, where = cluster_gpus, cluster_gpus >= wanted, "the Ray cluster"
    if not enough:
        raise ConfigError(
            f"{type(config).__name__}: {per}={amount} x {count}={actors} needs {wanted:g} "
            f"GPUs but {where} has {have:g}: set {per}=0 ({on_cpu}) or add GPUs"
        )


def check_gpus(config: ResourceConfig, *, cluster_gpus: float | None) -> None:
    """Raise `ConfigError` when a GPU is asked for that does not exist: ``num_gpus > 0`` with
    no GPU visible to torch in this process (`check_learner_gpu`), learner actors
    (``num_gpus_per_learner`` x ``num_learners``) or ``num_gpus_per_worker >
    0`` with fewer GPUs in the cluster (``cluster_gpus``; None on the local backend, where
    workers live in this process and torch must see one) than the workers ask for in all (an
    elastic run: the ``min_workers`` it starts with)."""
    check_learner_gpu(config)
    _check_gpus_for(config, cluster_gpus, "num_gpus_per_learner", "num_learners", "learners on CPU")
    workers_field = workers_to_start(config)[1]
    _check_gpus_for(
        config, cluster_gpus, "num_gpus_per_worker", workers_field, "workers act on CPU"
    )
