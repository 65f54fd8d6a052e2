"""Gathers over shards whose actors die: replaced, left out (elastic), or the error.

The sources repeat forever and the local backend runs calls in order, so every sequence below is
exact; on Ray the actor is killed for real and only what does not depend on timing is checked.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import ray

from rlflow import flow
from rlflow.errors import ActorDiedError, ConfigError, ConfigTypeError, WorkerError

pytestmark = pytest.mark.timeout(120)


class Spares:
    """A replacement hook: hands out the given actors (None: no actor now), counts in the plan."""

    def __init__(self, *actors: Any) -> None:
        self.actors = list(actors)
        self.asked: list[tuple[int, Any, type]] = []

    def __call__(self, index: int, dead: Any, err: ActorDiedError) -> Any:
        self.asked.append((index, dead, type(err)))
        actor = self.actors.pop(0)
        if actor is not None:
            flow.current_metrics().counters["replaced"] += 1
        return actor


def kill(actor: Any) -> None:
    """Kill ``actor`` and return once it is dead: Ray's kill is asynchronous, and a call sent
    right after it could still be served, which would make the sequences below timing-bound."""
    flow.kill(actor)
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        try:
            flow.get(actor.par_iter_open_reads.remote(), timeout=5.0)
        except ActorDiedError:
            return
        except (WorkerError, TimeoutError):  # busy or unreachable for a moment: ask again
            continue
        time.sleep(0.01)  # still alive: the kill has not landed yet
    raise AssertionError(f"{actor!r} still answers 60 s after flow.kill")


def spare_actor(value: int) -> Any:
    """An actor whose shard repeats ``value`` forever."""
    return flow.from_items([value], num_shards=1, repeat=True).actors()[0]


def test_sync_gather_replaces_a_dead_shard_with_the_same_transforms(backend: str) -> None:
    source = flow.from_range(10, num_shards=2, repeat=True)
    spares = Spares(spare_actor(100))
    pit = flow.from_actors(source.actors(), recovery=flow.ShardRecovery(spares))
    it = pit.for_each(lambda x: x + 1000).gather_sync()
    assert it.take(4) == [1000, 1005, 1001, 1006]
    dead = source.actors()[1]
    kill(dead)
    # The round that met the dead actor gives shard 0's item only; the spare joins the next.
    assert it.take(5) == [1002, 1003, 1100, 1004, 1100]
    assert spares.asked == [(1, dead, ActorDiedError)]
    assert it.metrics.counters["replaced"] == 1


def test_async_gather_drops_the_dead_shards_requests_and_reads_the_replacement(
    local_backend: None,
) -> None:
    source = flow.from_range(10, num_shards=2, repeat=True)
    spares = Spares(spare_actor(100))
    pit = flow.from_actors(source.actors(), recovery=flow.ShardRecovery(spares))
    it = pit.for_each(lambda x: x + 1000).gather_async(num_async=2)
    assert it.take(4) == [1000, 1005, 1001, 1006]
    kill(source.actors()[1])
    # Locally a request runs when it is sent: shard 1's two requests in flight (7, 8) were
    # answered before the kill; its next one fails and the spare's requests queue up behind
    # shard 0's.
    assert it.take(8) == [1002, 1007, 1003, 1008, 1004, 1000, 1001, 1100]
    assert [a[0] for a in spares.asked] == [1]
    assert it.metrics.counters["replaced"] == 1


def test_a_shard_left_out_is_asked_again_and_comes_back(local_backend: None) -> None:
    source = flow.from_range(10, num_shards=2, repeat=True)
    spares = Spares(None, spare_actor(100))
    pit = flow.from_actors(source.actors(), recovery=flow.ShardRecovery(spares, retry_every=2))
    rounds = pit.batch_across_shards()
    assert rounds.take(1) == [[0, 5]]
    kill(source.actors()[1])
    # Left out for two rounds (the round it died in counts), then asked again: back.
    assert rounds.take(4) == [[1], [2], [3, 100], [4, 100]]
    assert [a[0] for a in spares.asked] == [1, 1]


def test_a_replacement_dead_on_arrival_is_the_one_asked_about_next(local_backend: None) -> None:
    """The second ask names the dead replacement: a hook that answers an ask about an actor
    it already replaced with that replacement (`WorkerSet.recreate_worker`) handed the dead one
    out again and again, and never started another (found by ``benchmarks/soak.py``: a killed
    replacement left IMPALA on one of its two rollout workers for the rest of the run)."""
    source = flow.from_range(10, num_shards=2, repeat=True)
    dead_on_arrival = spare_actor(50)
    kill(dead_on_arrival)
    spares = Spares(dead_on_arrival, spare_actor(100))
    pit = flow.from_actors(source.actors(), recovery=flow.ShardRecovery(spares, retry_every=2))
    rounds = pit.batch_across_shards()
    assert rounds.take(1) == [[0, 5]]
    dead = source.actors()[1]
    kill(dead)
    assert rounds.take(4) == [[1], [2], [3, 100], [4, 100]]
    assert [(index, actor) for index, actor, _ in spares.asked] == [
        (1, dead),
        (1, dead_on_arrival),
    ]


def test_async_gather_goes_on_without_a_shard_nobody_replaces(local_backend: None) -> None:
    source = flow.from_range(10, num_shards=2, repeat=True)
    spares = Spares(None, None)
    pit = flow.from_actors(source.actors(), recovery=flow.ShardRecovery(spares, retry_every=3))
    it = pit.gather_async()
    assert it.take(2) == [0, 5]
    kill(source.actors()[1])
    assert it.take(7) == [1, 6, 2, 3, 4, 0, 1]
    assert len(spares.asked) == 2  # when it died (4 items read), and 3 items later


def test_when_every_shard_is_gone_the_read_ends_with_the_error(backend: str) -> None:
    source = flow.from_range(4, num_shards=1, repeat=True)
    spares = Spares(None, None)
    it = flow.from_actors(source.actors(), recovery=flow.ShardRecovery(spares)).gather_sync()
    assert it.take(1) == [0]
    kill(source.actors()[0])
    with pytest.raises(ActorDiedError, match="all 1 shards still to read died"):
        it.take(1)
    assert len(spares.asked) == 2  # when it died, and once more before giving up


def test_an_error_of_the_hook_names_the_stage_and_the_shard(local_backend: None) -> None:
    def refuse(index: int, dead: Any, err: ActorDiedError) -> Any:
        raise WorkerError(f"worker {index} may not be replaced")

    source = flow.from_range(4, num_shards=2, repeat=True)
    it = flow.from_actors(source.actors(), recovery=flow.ShardRecovery(refuse)).gather_async()
    kill(source.actors()[1])
    with pytest.raises(WorkerError, match="worker 1 may not be replaced") as info:
        it.take(4)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "gather_async" in notes and "shard 1 of from_actors[shards=2]" in notes


def test_without_recovery_a_dead_actor_ends_the_read(local_backend: None) -> None:
    source = flow.from_range(4, num_shards=2, repeat=True)
    it = flow.from_actors(source.actors()).gather_async()
    kill(source.actors()[0])
    with pytest.raises(ActorDiedError, match="is dead"):
        it.take(4)


def test_a_later_read_of_the_gather_starts_on_the_replacement(local_backend: None) -> None:
    source = flow.from_range(4, num_shards=1, repeat=True)
    spare = spare_actor(100)
    spares = Spares(spare)
    gathered = flow.from_actors(source.actors(), recovery=flow.ShardRecovery(spares))
    it = gathered.gather_sync()
    kill(source.actors()[0])
    assert it.take(2) == [100, 100]
    again = it.for_each(lambda x: x)  # a second chain over the same gather opens a new read
    assert again.take(1) == [100]
    assert len(spares.asked) == 1


@pytest.mark.parametrize(
    ("recovery", "error"),
    [
        ("not a recovery", ConfigTypeError),
        (flow.ShardRecovery(lambda i, a, e: None, retry_every=0), ConfigError),
        (flow.ShardRecovery(42), ConfigError),  # type: ignore[arg-type]
    ],
)
def test_from_actors_checks_the_recovery(
    local_backend: None, recovery: Any, error: type[Exception]
) -> None:
    actors = flow.from_range(2, num_shards=1).actors()
    with pytest.raises(error, match="from_actors"):
        flow.from_actors(actors, recovery=recovery)


@pytest.mark.ray
def test_ray_async_gather_survives_a_killed_actor(ray_backend: None) -> None:
    source = flow.from_items([1, 2], num_shards=2, repeat=True)
    spares = Spares(spare_actor(100))
    pit = flow.from_actors(source.actors(), recovery=flow.ShardRecovery(spares))
    # Both actors up before the read, so the slower one's start-up does not use up the bound
    # below; then both shards answer. Not "within the first ten items": the async gather is not
    # round robin, and on a loaded machine one actor can give ten instant replies while the
    # other waits for a core (failed twice that way in CI-like runs).
    ray.get([actor.par_iter_open_reads.remote() for actor in source.actors()])
    it = pit.gather_async(num_async=2)
    seen = set()
    for _ in range(10_000):
        seen.add(next(it))
        if seen == {1, 2}:
            break
    assert seen == {1, 2}
    kill(source.actors()[0])
    for _ in range(100_000):  # shard 1 goes on meanwhile; the first failed reply asks the hook
        next(it)
        if spares.asked:
            break
    assert [a[0] for a in spares.asked] == [0]
    assert 100 in set(it.take(50)) <= {2, 100}
    assert it.metrics.counters["replaced"] == 1


def test_an_absent_actor_is_read_as_a_dead_one_until_its_actor_comes(backend: str) -> None:
    """`flow.absent_actor` holds the place of an actor not started yet: a gather leaves it out
    (asking for it every ``retry_every`` items) and reads the actor it is given in its place."""
    live = flow.from_items([1], num_shards=1, repeat=True).actors()[0]
    absent = flow.absent_actor(flow.ParallelIteratorWorker)
    with pytest.raises(ActorDiedError):
        flow.get(absent.par_iter_open_reads.remote(), timeout=60)
    spares = Spares(None, spare_actor(2))
    pit = flow.from_actors([live, absent], recovery=flow.ShardRecovery(spares, retry_every=3))
    # Left out at once (no actor for it yet), asked again after 3 rounds: its actor now.
    assert pit.gather_sync().take(9) == [1, 1, 1, 1, 2, 1, 2, 1, 2]
    assert [(i, dead is absent) for i, dead, _ in spares.asked] == [(1, True), (1, True)]
