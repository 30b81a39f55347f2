"""One contract for the State backends, run against MemoryBackend and RedisBackend alike: what
the settlement ledger and the Kafka runner's exactly-once recovery rely on. The Redis run needs
the session's Redis (``redis_url``), so it carries the integration marker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
import redis

from surveil.runtime import state as state_module
from surveil.runtime.state import Backend, MemoryBackend, RedisBackend, StaleProgress, State


class Item(msgspec.Struct):
    name: str
    count: int = 0


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "memory":
        yield MemoryBackend()
        return
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    prefix = f"it-state-contract-{uuid.uuid4().hex[:8]}:"
    try:
        yield RedisBackend(client, prefix)
    finally:
        doomed = list(client.scan_iter(match=prefix + "*", count=1000))
        if doomed:
            client.unlink(*doomed)
        client.close()


def test_nothing_stored_reads_as_none_and_no_counters(backend: Backend) -> None:
    state = State(backend, "svc")
    assert state.get("svc:missing", Item) is None
    assert backend.read("svc:missing") is None
    assert backend.counters("svc:missing") == {}
    assert backend.progress("svc") == {}
    assert backend.outbox("svc", "topic:0") is None


def test_a_value_put_is_read_back_typed_after_commit(backend: Backend) -> None:
    writer = State(backend, "svc")
    writer.put("svc:a", Item("a", 3))
    writer.commit()
    assert State(backend, "svc").get("svc:a", Item) == Item("a", 3)


def test_nothing_reaches_the_backend_before_commit(backend: Backend) -> None:
    state = State(backend, "svc")
    state.put("svc:a", Item("a"))
    state.incr("svc:c", "n", 1)
    assert state.get("svc:a", Item) == Item("a")  # the batch sees its own changes
    assert backend.read("svc:a") is None
    assert backend.counters("svc:c") == {}


def test_the_last_put_of_a_batch_wins_and_delete_removes(backend: Backend) -> None:
    state = State(backend, "svc")
    state.put("svc:a", Item("a", 1))
    state.put("svc:a", Item("a", 2))
    state.put("svc:b", Item("b"))
    state.commit()
    state.delete("svc:b")
    state.commit()
    reader = State(backend, "svc")
    assert (reader.get("svc:a", Item), reader.get("svc:b", Item)) == (Item("a", 2), None)


def test_counters_add_up_within_and_across_commits(backend: Backend) -> None:
    state = State(backend, "svc")
    state.incr("svc:c", "staked", 1_000)
    state.incr("svc:c", "staked", 500)
    state.incr("svc:c", "house_net", -300)
    state.commit()
    state.incr("svc:c", "staked", 250)
    state.incr("svc:c", "house_net", -200)
    state.commit()
    assert backend.counters("svc:c") == {"staked": 1_750, "house_net": -500}


def test_progress_and_outbox_are_kept_per_source_with_the_batch(backend: Backend) -> None:
    state = State(backend, "svc")
    state.put("svc:a", Item("a"))
    state.commit(progress={"t:0": 41, "t:1": 7}, outbox={"t:0": b"events-0", "t:1": b"events-1"})
    state.commit(progress={"t:0": 99}, outbox={"t:0": b"later"})
    assert backend.progress("svc") == {"t:0": 99, "t:1": 7}
    assert (backend.outbox("svc", "t:0"), backend.outbox("svc", "t:1")) == (b"later", b"events-1")
    assert backend.progress("other") == {}


def test_discard_forgets_the_pending_batch(backend: Backend) -> None:
    state = State(backend, "svc")
    state.put("svc:a", Item("a"))
    state.incr("svc:c", "n", 1)
    state.discard()
    state.commit(progress={"t:0": 1})
    assert backend.read("svc:a") is None
    assert backend.counters("svc:c") == {}
    assert backend.progress("svc") == {"t:0": 1}


def test_a_commit_forgets_the_cache_so_the_next_batch_reads_what_is_stored(backend: Backend) -> None:
    mine, theirs = State(backend, "svc"), State(backend, "svc")
    mine.put("svc:a", Item("a", 1))
    mine.commit()
    theirs.put("svc:a", Item("a", 2))
    theirs.commit()
    assert mine.get("svc:a", Item) == Item("a", 2)


def test_an_empty_commit_writes_nothing(backend: Backend) -> None:
    state = State(backend, "svc")
    state.commit()
    assert backend.progress("svc") == {}
    assert backend.read("svc:a") is None


def test_prefetched_values_are_read_in_one_go_and_got_as_usual(backend: Backend) -> None:
    writer = State(backend, "svc")
    writer.put("svc:a", Item("a", 1))
    writer.put("svc:b", Item("b", 2))
    writer.commit()
    assert backend.read_many(["svc:a", "svc:missing", "svc:b"])[1] is None
    state = State(backend, "svc")
    state.prefetch("svc:a", "svc:b", "svc:missing")
    writer.put("svc:a", Item("a", 9))
    writer.commit()
    # The batch reads what was there when it prefetched, as if it had read it then.
    assert (state.get("svc:a", Item), state.get("svc:b", Item), state.get("svc:missing", Item)) == (Item("a", 1), Item("b", 2), None)
    state.commit()
    assert state.get("svc:a", Item) == Item("a", 9)  # a new batch reads afresh


@pytest.mark.integration
def test_another_member_committing_its_own_partitions_meanwhile_is_no_takeover(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two members of a group share the progress hash, which the commit watches: one committing
    its partitions between the other's read of the hash and its EXEC fails that EXEC. That is
    tried again, not taken for a zombie (it once stopped a second table-controller)."""
    backend = RedisBackend(redis.Redis.from_url(redis_url), f"test-{uuid.uuid4().hex[:8]}:")
    checked = state_module._check_progress
    interleaved: list[bool] = []

    def check_then_let_the_other_member_commit(stored: Any, expected: Any) -> None:
        checked(stored, expected)
        if not interleaved:
            interleaved.append(True)
            State(backend, "svc").commit(progress={"t:1": 7}, expected={"t:1": None})

    monkeypatch.setattr(state_module, "_check_progress", check_then_let_the_other_member_commit)
    member = State(backend, "svc")
    member.put("svc:a", Item("a", 1))
    member.commit(progress={"t:0": 10}, expected={"t:0": None})
    assert interleaved and backend.progress("svc") == {"t:0": 10, "t:1": 7}
    assert State(backend, "svc").get("svc:a", Item) == Item("a", 1)


def test_a_commit_expecting_progress_that_moved_writes_nothing(backend: Backend) -> None:
    """What fences a zombie: it expects the progress it last saw; another member moved it."""
    first = State(backend, "svc")
    first.put("svc:a", Item("a", 1))
    first.commit(progress={"t:0": 10}, expected={"t:0": None})
    zombie = State(backend, "svc")
    zombie.put("svc:a", Item("a", 99))
    zombie.incr("svc:c", "n", 1)
    with pytest.raises(StaleProgress):
        zombie.commit(progress={"t:0": 20}, outbox={"t:0": b"zombie"}, expected={"t:0": None})
    assert backend.progress("svc") == {"t:0": 10}
    assert (State(backend, "svc").get("svc:a", Item), backend.counters("svc:c"), backend.outbox("svc", "t:0")) == (Item("a", 1), {}, None)
    zombie.commit(progress={"t:0": 20}, expected={"t:0": 10, "t:1": None})  # what is there: it goes through
    assert backend.progress("svc") == {"t:0": 20}


@pytest.mark.integration
@pytest.mark.parametrize("dies_at", ["hmget", "execute"])
def test_a_connection_that_dies_during_a_watched_commit_is_redis_away_not_a_crash(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, dies_at: str
) -> None:
    """Redis killed while a commit watches the progress: redis-py reports the lost connection as a
    WatchError, which once stopped the table-controller (read between WATCH and MULTI) and would
    have retried an EXEC that may have gone through (at EXEC). Either way it is Redis away, which the
    runner waits out and then recovers from what Redis holds; here nothing was written."""
    admin = redis.Redis.from_url(redis_url)
    backend = RedisBackend(redis.Redis.from_url(redis_url), f"test-{uuid.uuid4().hex[:8]}:")
    State(backend, "svc").commit(progress={"t:0": 10}, expected={"t:0": None})
    original = getattr(redis.client.Pipeline, dies_at)
    killed: list[int] = []

    def connection_killed_first(pipe: Any, *args: Any, **kwargs: Any) -> Any:
        if not killed:
            pipe.connection.send_command("CLIENT", "ID")
            killed.append(pipe.connection.read_response())
            admin.client_kill_filter(_id=killed[0])
        return original(pipe, *args, **kwargs)

    monkeypatch.setattr(redis.client.Pipeline, dies_at, connection_killed_first)
    batch = State(backend, "svc")
    batch.put("svc:a", Item("a", 1))
    with pytest.raises(state_module.STORE_UNAVAILABLE):
        batch.commit(progress={"t:0": 20}, expected={"t:0": 10})
    assert killed and backend.progress("svc") == {"t:0": 10} and backend.read("svc:a") is None
