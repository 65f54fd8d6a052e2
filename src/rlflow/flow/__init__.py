"""``rlflow.flow``: a general-purpose parallel iterator library over actors.

It knows nothing of RL. A :class:`ParallelIterator` is a stream sharded over actors whose
transforms run on the actors; a :class:`LocalIterator` is read in this process. Both are lazy.
Plans share a per-plan context (:func:`current_metrics`) for message passing between operators.
See ARCHITECTURE.md for the map of operators.

>>> from rlflow import flow
>>> flow.init(backend="local")
>>> flow.from_range(6, num_shards=2).for_each(lambda x: x * x).gather_sync().take(6)
[0, 9, 1, 16, 4, 25]
"""

from rlflow.flow.backend import (
    EnclosingGroup,
    absent_actor,
    available_resources,
    backend_name,
    bundle_options,
    cluster_nodes,
    cluster_resources,
    current_placement_group,
    get,
    init,
    is_initialized,
    kill,
    node_address,
    placement_group,
    put,
    remote,
    remove_placement_group,
    request_resources,
    shutdown,
    wait,
)
from rlflow.flow.graph import PlanEdge, PlanGraph, PlanNode
from rlflow.flow.local import ActorItem, LocalIterator, duplicate, from_iterable, union
from rlflow.flow.metrics import MetricsContext, StageStats, TimerStat, current_metrics
from rlflow.flow.parallel import (
    ParallelIterator,
    from_actors,
    from_items,
    from_iterators,
    from_range,
)
from rlflow.flow.recovery import ShardRecovery
from rlflow.flow.sentinels import NOT_READY, SHARD_END
from rlflow.flow.worker import READ_SLOTS, ParallelIteratorWorker, ShardReply

__all__ = [
    "NOT_READY",
    "READ_SLOTS",
    "SHARD_END",
    "ActorItem",
    "EnclosingGroup",
    "LocalIterator",
    "MetricsContext",
    "ParallelIterator",
    "ParallelIteratorWorker",
    "PlanEdge",
    "PlanGraph",
    "PlanNode",
    "ShardRecovery",
    "ShardReply",
    "StageStats",
    "TimerStat",
    "absent_actor",
    "available_resources",
    "backend_name",
    "cluster_resources",
    "node_address",
    "bundle_options",
    "current_metrics",
    "cluster_nodes",
    "current_placement_group",
    "duplicate",
    "from_actors",
    "from_items",
    "from_iterable",
    "from_iterators",
    "from_range",
    "get",
    "init",
    "is_initialized",
    "kill",
    "placement_group",
    "put",
    "remote",
    "remove_placement_group",
    "request_resources",
    "shutdown",
    "union",
    "wait",
]
