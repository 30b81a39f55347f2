"""Service state that survives a restart: typed objects and counters, committed once per batch.

A ``State`` caches decoded objects and collects a batch's changes; ``commit`` hands them to a
backend together with the input offsets the batch consumed and the events it produced (the
outbox), in one atomic step. That is what lets the Kafka runner recover exactly: whatever a crash
interrupts, the state, the offsets and the outputs were either all applied or none were. A commit
may also name the progress it expects to find (``expected``): when another process has moved it
meanwhile (it took the partitions over while this one stalled), the commit writes nothing and
raises ``StaleProgress``, so a batch is never applied twice.

Backends: ``MemoryBackend`` (embedded mode, tests) and ``RedisBackend`` (MULTI/EXEC), one
interface, one contract test suite.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import msgspec
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.exceptions import WatchError

T = TypeVar("T")


@dataclass(slots=True)
class Changes:
    """What one batch writes: whole values (None deletes) and counter increments."""

    values: dict[str, bytes | None] = field(default_factory=dict)
    counters: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    progress: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> last offset applied
    outbox: dict[str, bytes] = field(default_factory=dict)  # "topic:partition" -> events produced
    expected: dict[str, int | None] = field(default_factory=dict)  # progress that must be there before

    def __bool__(self) -> bool:
        return bool(self.values or self.counters or self.progress or self.outbox)


# Redis away (restarting, loading its append-only file, refusing a password it has not loaded
# yet): a batch that meets one of these is tried again once Redis answers, never dead-lettered.
STORE_UNAVAILABLE = (RedisConnectionError, RedisTimeoutError)


class StaleProgress(Exception):
    """The stored progress is not what the commit expected: another process applied these
    partitions meanwhile. Nothing was written."""


def _check_progress(stored: Mapping[str, int | None], expected: Mapping[str, int | None]) -> None:
    moved = {source: (stored.get(source), offset) for source, offset in expected.items() if stored.get(source) != offset}
    if moved:
        raise StaleProgress(f"progress moved under this batch (stored, expected): {moved}")


class Backend(Protocol):
    def read(self, key: str) -> bytes | None: ...
    def read_many(self, keys: list[str]) -> list[bytes | None]: ...
    def counters(self, key: str) -> dict[str, int]: ...
    def apply(self, namespace: str, changes: Changes) -> None: ...
    def progress(self, namespace: str) -> dict[str, int]: ...
    def outbox(self, namespace: str, source: str) -> bytes | None: ...


class MemoryBackend:
    """A backend in a dict, for the embedded mode and tests."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.hashes: dict[str, dict[str, int]] = defaultdict(dict)

    def read(self, key: str) -> bytes | None:
        return self.data.get(key)

    def read_many(self, keys: list[str]) -> list[bytes | None]:
        return [self.data.get(key) for key in keys]

    def counters(self, key: str) -> dict[str, int]:
        return dict(self.hashes.get(key, {}))

    def apply(self, namespace: str, changes: Changes) -> None:
        _check_progress(self.progress(namespace), changes.expected)
        for key, value in changes.values.items():
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value
        for key, increments in changes.counters.items():
            counters = self.hashes[key]
            for name, amount in increments.items():
                counters[name] = counters.get(name, 0) + amount
        for source, offset in changes.progress.items():
            self.hashes[f"{namespace}:progress"][source] = offset
        for source, events in changes.outbox.items():
            self.data[f"{namespace}:outbox:{source}"] = events

    def progress(self, namespace: str) -> dict[str, int]:
        return dict(self.hashes.get(f"{namespace}:progress", {}))

    def outbox(self, namespace: str, source: str) -> bytes | None:
        return self.data.get(f"{namespace}:outbox:{source}")


class RedisBackend:
    """The same on Redis: one MULTI/EXEC transaction per commit. Every key gets ``prefix``
    in front (``Settings.redis_prefix``), so deployments can share one Redis.

    A commit is MSET, DEL and one HINCRBY per counter field. No Lua: the services' Redis users
    may not run scripts (one that loops would block Redis for everyone, docs/security.md).
    """

    def __init__(self, client: Any, prefix: str = "") -> None:  # a redis.Redis
        self.client = client
        self.prefix = prefix

    def read(self, key: str) -> bytes | None:
        value: bytes | None = self.client.get(self.prefix + key)
        return value

    def read_many(self, keys: list[str]) -> list[bytes | None]:
        values: list[bytes | None] = self.client.mget([self.prefix + key for key in keys])
        return values

    def counters(self, key: str) -> dict[str, int]:
        return {k.decode(): int(v) for k, v in self.client.hgetall(self.prefix + key).items()}

    def apply(self, namespace: str, changes: Changes) -> None:
        prefix = self.prefix
        writes = {prefix + key: value for key, value in changes.values.items() if value is not None}
        writes.update((f"{prefix}{namespace}:outbox:{source}", events) for source, events in changes.outbox.items())
        deletions = [prefix + key for key, value in changes.values.items() if value is None]
        progress_key = f"{prefix}{namespace}:progress"
        increments = [(prefix + key, name, amount) for key, fields in changes.counters.items() for name, amount in fields.items()]
        with self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    if changes.expected:
                        pipe.watch(progress_key)  # EXEC fails if anyone moves the progress after this read
                        sources = list(changes.expected)
                        stored = pipe.hmget(progress_key, sources)
                        _check_progress({s: None if v is None else int(v) for s, v in zip(sources, stored)}, changes.expected)
                        pipe.multi()
                    if writes:
                        pipe.mset(writes)
                    if deletions:
                        pipe.delete(*deletions)
                    for key, name, amount in increments:
                        pipe.execute_command("HINCRBY", key, name, amount)
                    if changes.progress:
                        pipe.hset(progress_key, mapping=changes.progress)
                    pipe.execute()
                    return
                except WatchError as error:
                    # redis-py reports a connection lost while watching as a WatchError. Then
                    # whether the EXEC got through is unknown: Redis is away, and the caller
                    # recovers from what it holds once it answers.
                    if isinstance(error.__context__, STORE_UNAVAILABLE):
                        raise RedisConnectionError(str(error)) from error
                    # The hash holds every member's partitions: another member committing its own
                    # fails this EXEC too. Read again; only a move of this batch's is a takeover.
                    continue

    def progress(self, namespace: str) -> dict[str, int]:
        return self.counters(f"{namespace}:progress")

    def outbox(self, namespace: str, source: str) -> bytes | None:
        return self.read(f"{namespace}:outbox:{source}")


class State:
    """A service's view of its state: typed objects cached for one batch, plus its changes.

    Objects are msgspec structs stored as msgpack. ``put`` marks an object changed; it is
    encoded once, at ``commit``, however many events of the batch touched it. ``commit`` also
    empties the cache, so a long-running service holds only what its current batch uses.
    """

    def __init__(self, backend: Backend, namespace: str) -> None:
        self.backend = backend
        self.namespace = namespace
        self._cache: dict[str, Any] = {}
        self._fetched: dict[str, bytes | None] = {}  # read ahead by ``prefetch``, not decoded yet
        self._dirty: set[str] = set()
        self._changes = Changes()
        self._encoder = msgspec.msgpack.Encoder()

    def key(self, *parts: str) -> str:
        return ":".join((self.namespace, *parts))

    def prefetch(self, *keys: str) -> None:
        """Read ``keys`` in one round trip to the backend, for the ``get`` calls that follow."""
        wanted = [key for key in dict.fromkeys(keys) if key not in self._cache and key not in self._fetched]
        if wanted:
            self._fetched.update(zip(wanted, self.backend.read_many(wanted)))

    def get(self, key: str, type_: type[T]) -> T | None:
        if key in self._cache:
            cached: T | None = self._cache[key]
            return cached
        raw = self._fetched.pop(key) if key in self._fetched else self.backend.read(key)
        value = None if raw is None else msgspec.msgpack.decode(raw, type=type_)
        self._cache[key] = value
        return value

    def put(self, key: str, value: Any) -> None:
        self._cache[key] = value
        self._dirty.add(key)

    def delete(self, key: str) -> None:
        self.put(key, None)

    def incr(self, key: str, counter: str, amount: int) -> None:
        self._changes.counters[key][counter] += amount

    def commit(
        self,
        progress: Mapping[str, int] | None = None,
        outbox: Mapping[str, bytes] | None = None,
        expected: Mapping[str, int | None] | None = None,
    ) -> None:
        """Write the batch's changes, with the offsets and outputs that go with them, atomically;
        only if the stored progress is ``expected`` (else ``StaleProgress``, nothing written)."""
        changes = self._changes
        for key in self._dirty:
            value = self._cache[key]
            changes.values[key] = None if value is None else self._encoder.encode(value)
        changes.progress.update(progress or {})
        changes.outbox.update(outbox or {})
        changes.expected.update(expected or {})
        try:
            if changes:
                self.backend.apply(self.namespace, changes)
        finally:
            self.discard()

    def discard(self) -> None:
        """Forget the pending batch and the cache (after a commit, a failed one, or a rebalance)."""
        self._cache.clear()
        self._fetched.clear()
        self._dirty.clear()
        self._changes = Changes()
