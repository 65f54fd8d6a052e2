"""Counter, timer and info keys that RL operators share through ``flow.current_metrics()``.

One place for every key, never scattered strings. Counters live in ``ctx.counters`` (ints, kept
in checkpoints), timers in ``ctx.timers`` (not kept), info in ``ctx.info``.
"""

from __future__ import annotations

from typing import Final

from rlflow.data.sample_batch import TD_ERROR as TD_ERROR_COLUMN

# ----------------------------------------------------------------------------- counters
NUM_ENV_STEPS_SAMPLED: Final = "num_env_steps_sampled"
"""Env steps sampled by rollout workers (written by the rollout sources)."""
NUM_AGENT_STEPS_SAMPLED: Final = "num_agent_steps_sampled"
"""Agent steps sampled (equal to env steps for single-agent experience)."""
NUM_ENV_STEPS_TRAINED: Final = "num_env_steps_trained"
"""Env steps the learner trained on (written by TrainOneStep / ApplyGradients)."""
NUM_AGENT_STEPS_TRAINED: Final = "num_agent_steps_trained"
"""Agent steps the learner trained on."""
NUM_EPISODES: Final = "num_episodes"
"""Finished episodes reported so far (written by CollectMetrics)."""
NUM_TRAIN_STEPS: Final = "num_train_steps"
"""Learner updates (one per TrainOneStep or ApplyGradients call)."""
NUM_WEIGHT_SYNCS: Final = "num_weight_syncs"
"""Weight pushes to remote workers (one per ``put``, whatever the number of receivers)."""
LAST_TARGET_UPDATE_TS: Final = "last_target_update_ts"
"""Counter value at the last target-network update."""
NUM_TARGET_UPDATES: Final = "num_target_updates"
"""Target-network updates so far."""
NUM_SELF_PLAY_ITERATIONS: Final = "self_play_iterations"
"""Iterations seen by the self-play stage (`rlflow.ops.self_play.SnapshotPolicies`)."""
NUM_SELF_PLAY_SNAPSHOTS: Final = "self_play_snapshots"
"""Self-play snapshots taken (each shifts every learner's pool by one)."""
NUM_ENV_STEPS_STORED: Final = "num_env_steps_stored"
"""Env steps added to replay buffers (written by StoreToReplayBuffer)."""
NUM_ENV_STEPS_REPLAYED: Final = "num_env_steps_replayed"
"""Env steps read back from replay buffers (written by the replay source)."""
NUM_WORKER_RESTARTS: Final = "num_worker_restarts"
"""Rollout workers recreated after they died (written by the rollout sources' recovery)."""
NUM_LEARNER_RESTARTS: Final = "num_learner_restarts"
"""Learner actors (``num_learners``) restarted after they died (CollectMetrics adds the learner
group's new restarts at each result: a restored run goes on counting from its checkpoint)."""
NUM_REPLAY_SHARD_RESTARTS: Final = "num_replay_shard_restarts"
"""Replay shards started again (empty) after they died (written by the replay ops)."""
NUM_ENV_RESTARTS: Final = "num_env_restarts"
"""Sub-envs rebuilt after they raised (``restart_failed_sub_environments``; CollectMetrics)."""
NUM_NONFINITE_EPISODES: Final = "num_nonfinite_episodes"
"""Episodes dropped for a NaN or infinite reward or observation (``on_nonfinite="skip"``;
CollectMetrics)."""
NUM_NONFINITE_UPDATES: Final = "num_nonfinite_updates"
"""Learner updates skipped for a NaN or infinite loss or gradient (a result key read from the
learner's policies, not a counter: their count is in their checkpointed state)."""
NUM_LATE_SAMPLES: Final = "num_late_samples"
"""Sample requests that missed their round's ``sample_timeout_s`` (parallel_rollouts bulk_sync);
each is counted once, and its batch joins a later round."""

# ----------------------------------------------------------------------------- timers
SAMPLE_TIMER: Final = "sample"
"""Time to gather one train batch (ConcatBatches)."""
LEARN_TIMER: Final = "learn"
"""Time in the learner's ``learn_on_batch`` (TrainOneStep)."""
UPDATE_TIMER: Final = "update"
"""Time to ``put`` weights and send them to remote workers."""
GRAD_WAIT_TIMER: Final = "grad_wait"
"""Time waiting for the next gradient from a remote worker (async_gradients)."""
APPLY_GRAD_TIMER: Final = "apply_grad"
"""Time applying gradients on the learner (ApplyGradients)."""
COMPUTE_GRADS_TIMER: Final = "compute_grads"
"""Time computing gradients on the learner (ComputeGradients)."""
FILTER_SYNC_TIMER: Final = "filter_sync"
"""Time to gather, merge and broadcast the observation filters (SyncObservationFilters)."""

# ----------------------------------------------------------------------------- info
LEARNER_INFO: Final = "learner"
"""``ctx.info[LEARNER_INFO]``: ``{policy_id: loss stats}`` of the last learner update."""
LEARNER_THREAD_INFO: Final = "learner_thread"
"""``ctx.info[LEARNER_THREAD_INFO]``: queue and timing stats of a LearnerThread."""

# ----------------------------------------------------------------------------- learner stats
TD_ERROR: Final = TD_ERROR_COLUMN
"""`rlflow.data.sample_batch.TD_ERROR`: per-row TD errors in a replay policy's learner stats."""

# ----------------------------------------------------------------------------- result keys
NUM_HEALTHY_WORKERS: Final = "num_healthy_workers"
"""Remote rollout workers not known to be dead (``WorkerSet.num_healthy_workers``)."""
NUM_TARGET_WORKERS: Final = "num_target_workers"
"""Remote rollout workers the run asks for (``num_workers``): more than
`NUM_HEALTHY_WORKERS` while dead ones are recreated or an elastic run waits for nodes."""

# ----------------------------------------------------------------------------- reporting state
# Kept in the context (not on operator objects) so that a checkpoint restores it.
ITERATION_START_STEPS: Final = "iteration_start_env_steps_sampled"
"""Counter: sampled env steps when the current iteration began (standard_metrics_reporting)."""
LAST_REPORT_SAMPLED: Final = "last_report_env_steps_sampled"
"""Counter: sampled env steps at the last result (for ``*_this_iter``)."""
LAST_REPORT_TRAINED: Final = "last_report_env_steps_trained"
"""Counter: trained env steps at the last result (for ``*_this_iter``)."""
PLAN_EPISODES: Final = "_plan_episodes"
"""``ctx.info[PLAN_EPISODES]``: episodes a plan's own stage measured (ES's and ARS's
unperturbed evaluation episodes, which no sampler plays), added by
`rlflow.ops.metrics.report_episodes` and taken by the next `CollectMetrics` call."""
SELF_PLAY_LATEST: Final = "_self_play_latest"
"""``ctx.info[SELF_PLAY_LATEST]``: each self-play learner's rates against the random legal
player at its latest measurement (``{learner: {"win_rate", "draw_rate", "loss_rate",
"measured_at"}}``), which every result carries (`rlflow.ops.self_play.SnapshotPolicies`) and
checkpoints keep."""
RECENT_EPISODES: Final = "_recent_episodes"
"""``ctx.info[RECENT_EPISODES]``: the smoothing window of finished episodes (a list of
``EpisodeStat``). Info keys that start with ``_`` are internal and left out of results."""
