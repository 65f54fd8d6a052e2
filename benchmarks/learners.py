"""Learner throughput with data-parallel learner actors: rows/s with 0, 1 and 2 learners.

For PPO (minibatch SGD epochs) and IMPALA (V-trace) on ``--env``: one batch of ``--rows`` rows is
sampled once from the tuned config's worker, then trained on again and again for ``--seconds``
by ``WorkerSet.learner().learn_on_batch`` (what `rlflow.ops.TrainOneStep` and the learner thread
call), with

- ``num_learners=0``: the learner in the driver (the baseline, one torch thread);
- ``num_learners=1``: one learner actor (the same work in another process, plus the batch's trip
  through the object store and the weights back);
- ``num_learners=2``: two learner actors, each computing the gradients of half of every step and
  averaging them over gloo (NCCL on GPUs);

and with ``--gpu``: one learner on a whole GPU (``num_gpus_per_learner=1``) against two sharing it
(``0.5`` each), beside the driver's learner on the GPU (``num_gpus=1``). Rows/s counts each
train batch's rows once (its epochs are in the time); the ratio is against the baseline of the
same algorithm in the same run. ``--hidden`` sets the network (default: the tuned config's),
``--minibatch`` PPO's ``sgd_minibatch_size`` (every minibatch step is one all-reduce of the
gradients: small steps on a small network are bound by it).

    python benchmarks/learners.py [--env CartPole-v1] [--rows 4000] [--seconds 10]
        [--hidden 256,256] [--minibatch 1024] [--algos ppo,impala] [--gpu]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from rlflow import flow
from rlflow.algorithms import get_algorithm, tuned_config
from rlflow.workers import WorkerSet

_OPTIONS = {  # what the plans pass: PPO's epochs; IMPALA's learner thread, one pass
    "ppo": lambda c: {"num_sgd_iter": c.num_sgd_iter, "sgd_minibatch_size": c.sgd_minibatch_size},
    "impala": lambda c: {},
}


def _config(algo: str, env: str, rows: int, hidden: Any, minibatch: int, **fields: Any) -> Any:
    base: dict[str, Any] = {"num_workers": 1, "seed": 0, "num_envs_per_worker": 8}
    if minibatch and algo == "ppo":
        base.update(sgd_minibatch_size=minibatch, train_batch_size=max(rows, minibatch))
    base["rollout_fragment_length"] = max(1, rows // base["num_envs_per_worker"])
    if hidden:
        base["model"] = {"hidden": hidden}
    return tuned_config(algo, env, **{**base, **fields})


def rows_per_s(algo: str, config: Any, batch: Any, seconds: float) -> float:
    """Rows of ``batch`` learned per second by ``config``'s learner (after one warm-up step)."""
    workers = WorkerSet(config, get_algorithm(algo).policy_cls)
    options = _OPTIONS[algo](config)
    try:
        learner = workers.learner()
        learner.learn_on_batch(batch, **options)  # warm: actors built, threads started
        done, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            learner.learn_on_batch(batch, **options)
            done += batch.count
        return done / (time.perf_counter() - start)
    finally:
        workers.stop()


def main() -> None:
    """Parse the flags, start Ray, print rows/s per algorithm and learner setting."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--hidden", default="")
    parser.add_argument("--algos", default="ppo,impala")
    parser.add_argument("--minibatch", type=int, default=0, help="PPO's sgd_minibatch_size")
    parser.add_argument("--gpu", action="store_true")
    args = parser.parse_args()
    hidden = [int(h) for h in args.hidden.split(",")] if args.hidden else None
    import ray

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    flow.init(backend="ray")
    cpus = 0 if (os.cpu_count() or 1) < 4 else 1  # a 2-core machine holds the learners anyway
    settings: list[tuple[str, dict[str, Any]]] = [
        ("driver learner (num_learners=0)", {}),
        ("1 learner actor", {"num_learners": 1, "num_cpus_per_learner": cpus}),
        ("2 learner actors", {"num_learners": 2, "num_cpus_per_learner": cpus}),
    ]
    if args.gpu:
        settings = [
            ("driver learner, 1 GPU", {"num_gpus": 1}),
            ("1 learner actor, 1 GPU", {"num_learners": 1, "num_gpus_per_learner": 1}),
            ("2 learner actors, 0.5 GPU each", {"num_learners": 2, "num_gpus_per_learner": 0.5}),
        ]
    print(f"{args.env}, {os.cpu_count()} CPUs, model {hidden or 'tuned'}, {args.seconds:g} s each")
    try:
        for algo in args.algos.split(","):
            sample_config = _config(algo, args.env, args.rows, hidden, args.minibatch)
            sampler = WorkerSet(sample_config, get_algorithm(algo).policy_cls)
            batch = sampler.local_worker().sample()
            sampler.stop()
            print(f"\n{algo}: a batch of {batch.count} rows, {_OPTIONS[algo](sample_config)}")
            baseline = None
            for label, fields in settings:
                config = _config(algo, args.env, args.rows, hidden, args.minibatch, **fields)
                rate = rows_per_s(algo, config, batch, args.seconds)
                baseline = baseline or rate
                print(f"  {label:32s} {rate:9.0f} rows/s  {rate / baseline:5.2f}x")
    finally:
        flow.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
