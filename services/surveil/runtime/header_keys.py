"""Kafka clients that read every record the broker holds, whatever its header keys.

A header key is a string, but the broker stores any bytes a client sends as one (librdkafka
takes bytes), and both clients decode it as strict UTF-8: kafka-python raised
``CorruptRecordError`` at every poll, so a runner never got past the record, and aiokafka's
``UnicodeDecodeError`` stopped the faust worker, both for ever. ``install`` makes both decode such
a key with U+FFFD for its bad bytes: the record is read, and refused (or used) like any other.

aiokafka parses records in C; its batches are wrapped, so that a batch whose C parser fails on a
header key is read again, from the failing record on, by its Python parser.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import aiokafka.consumer.fetcher
from aiokafka.record import default_records as aiokafka_records
from aiokafka.record.memory_records import _MemoryRecordsPy
from kafka.record import default_records as kafka_records


class _LenientBuffer(bytearray):
    """A record batch's bytes whose slices decode with U+FFFD for bytes that are not UTF-8."""

    def __getitem__(self, index: Any) -> Any:
        item = super().__getitem__(index)
        return _LenientBuffer(item) if isinstance(item, bytearray) else item

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return super().decode(encoding, "replace")


def _lenient(read_msg: Callable[..., Any]) -> Callable[..., Any]:
    """A batch's ``_read_msg`` that reads a record again, leniently, when a header key is not
    UTF-8 (``_read_msg`` moves the batch's position only once a record is read)."""

    def read(self: Any, *args: Any) -> Any:
        try:
            return read_msg(self, *args)
        except UnicodeDecodeError:
            self._buffer = _LenientBuffer(self._buffer)
            return read_msg(self, *args)

    read.lenient = True  # type: ignore[attr-defined]
    return read


class _Batch:
    """An aiokafka C batch that, should it fail on a header key, goes on in Python."""

    def __init__(self, batch: Any, raw: memoryview) -> None:
        self._batch, self._raw, self._read = batch, raw, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._batch, name)

    def __iter__(self) -> Iterator[Any]:
        self._batch = iter(self._batch)  # where the C batch decompresses its records, if compressed
        return self

    def __next__(self) -> Any:
        try:
            record = next(self._batch)
        except UnicodeDecodeError:
            batch = iter(aiokafka_records._DefaultRecordBatchPy(self._raw))  # uncompressed, if need be
            for _ in range(self._read):
                next(batch)
            self._batch = batch
            record = next(batch)
        self._read += 1
        return record


class _Records(_MemoryRecordsPy):  # type: ignore[misc]  # aiokafka is untyped
    """aiokafka's records of a fetch, each batch a ``_Batch``."""

    def next_batch(self, *args: Any) -> Any:
        raw = self._next_slice
        batch = super().next_batch(*args)
        return _Batch(batch, raw) if raw is not None and batch.magic >= 2 else batch


def install() -> None:
    """Make both clients read header keys that are not UTF-8 (once; idempotent)."""
    for batch in (kafka_records.DefaultRecordBatch, aiokafka_records._DefaultRecordBatchPy):
        if not getattr(batch._read_msg, "lenient", False):
            batch._read_msg = _lenient(batch._read_msg)
    aiokafka.consumer.fetcher.MemoryRecords = _Records
