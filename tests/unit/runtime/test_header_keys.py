"""Both Kafka clients read a record whose header key is not UTF-8 (``runtime.header_keys``),
compressed or not, and every record after it in its batch."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from surveil.runtime import header_keys


class RawKey(str):
    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return b"\xff\xfe"


def batch(compression: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20
    )
    builder.append(0, timestamp=None, key=b"a", value=b"1", headers=[("ok", b"x")])
    builder.append(1, timestamp=None, key=b"b", value=b"2", headers=[(RawKey("?"), b"y"), ("signature", b"\xff")])
    builder.append(2, timestamp=None, key=b"c", value=b"3", headers=[])
    return bytes(builder.build())


EXPECTED = [(b"a", b"1", [("ok", b"x")]), (b"b", b"2", [("\ufffd\ufffd", b"y"), ("signature", b"\xff")]), (b"c", b"3", [])]


@pytest.mark.parametrize("compression", [0, 1], ids=["plain", "gzip"])
def test_kafka_python_reads_a_header_key_that_is_not_utf8(compression: int) -> None:
    header_keys.install()
    records = DefaultRecordBatch(batch(compression))
    assert [(r.key, r.value, r.headers) for r in records] == EXPECTED


@pytest.mark.parametrize("compression", [0, 1], ids=["plain", "gzip"])
def test_aiokafka_reads_a_header_key_that_is_not_utf8(compression: int) -> None:
    header_keys.install()
    import aiokafka.consumer.fetcher

    records = aiokafka.consumer.fetcher.MemoryRecords(batch(compression))
    found = []
    while records.has_next():
        found += [(r.key, r.value, r.headers) for r in records.next_batch()]
    assert [(k, v, list(h)) for k, v, h in found] == EXPECTED


@pytest.mark.parametrize("compression", [0, 1], ids=["plain", "gzip"])
def test_aiokafka_reads_a_batch_whose_header_keys_are_all_utf8(compression: int) -> None:
    """The wrapped C batch decompresses its records before the first is read: read compressed,
    they were garbage (a worker stopped on any gzip batch of its input topics)."""
    header_keys.install()
    import aiokafka.consumer.fetcher

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20
    )
    sent = [(b"k%d" % i, b"v" * 466, [("content-type", b"application/json")]) for i in range(20)]
    for offset, (key, value, headers) in enumerate(sent):
        builder.append(offset, timestamp=None, key=key, value=value, headers=headers)
    records = aiokafka.consumer.fetcher.MemoryRecords(bytes(builder.build()))
    found = []
    while records.has_next():
        found += [(r.key, r.value, list(r.headers)) for r in records.next_batch()]
    assert found == sent
