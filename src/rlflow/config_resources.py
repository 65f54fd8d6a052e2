"""`ResourceConfig`: what each remote rollout worker reserves, and where the workers land.

Every algorithm config inherits it (through `rlflow.config.AlgorithmConfig`); RLlib's names.
`rlflow.workers.WorkerSet` reserves one placement-group bundle per remote worker on Ray; the
local backend runs every worker in the driver and ignores these fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlflow.checks import check_choice, check_number, check_type
from rlflow.config_failures import FailureConfig
from rlflow.errors import ConfigError

__all__ = ["PLACEMENT_STRATEGIES", "ResourceConfig"]

PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
"""Ray's placement-group strategies (``placement_strategy``)."""

_BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


@dataclass(frozen=True, kw_only=True)
class ResourceConfig(FailureConfig):
    """Per-worker resources and placement (the failure fields come from `FailureConfig`)."""

    num_cpus_per_worker: float = 1
    """CPUs each remote rollout worker reserves, >= 0 (fractions allowed: 0.5 packs two
    workers on a core). A worker steps envs in a tight loop, so 1 keeps Ray from packing more
    busy workers than cores. Ignored by the local backend."""
    custom_resources_per_worker: dict[str, float] = field(default_factory=dict)
    """Custom Ray resources each remote rollout worker reserves (``{name: amount >= 0}``, e.g.
    ``{"spot_node": 1}``); CPU and GPU are not custom. Empty: none. Ignored locally."""
    placement_strategy: str = "PACK"
    """How the remote workers' bundles (one per worker) are placed on the cluster's nodes: one
    of PACK (few nodes, best effort), SPREAD (many nodes, best effort), STRICT_PACK (one node)
    or STRICT_SPREAD (one worker per node). Ignored locally."""

    def __post_init__(self) -> None:
        super().__post_init__()
        name = type(self).__name__
        check_number(self.num_cpus_per_worker, f"{name}.num_cpus_per_worker", low=0)
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

    def worker_bundle(self) -> dict[str, float]:
        """The resources one remote worker reserves (zero amounts left out; may be empty)."""
        bundle = {"CPU": float(self.num_cpus_per_worker)}
        bundle.update({k: float(v) for k, v in self.custom_resources_per_worker.items()})
        return {k: v for k, v in bundle.items() if v > 0}
