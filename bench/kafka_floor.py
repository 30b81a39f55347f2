"""What kafka-python itself costs per record at a table's pace, in the pattern of the project's
kafka-python services (``surveil.runtime.kafka``) with none of their work: no Redis, no decoding,
no rules, no signatures.

- A relay (a child process), built as ``KafkaRunner`` builds its clients: a ``read_committed``
  consumer in a static group (``max_poll_records=5000``, no auto commit) and a transactional
  producer (``producer_config``). Its loop is ``KafkaRunner.run`` and ``_publish`` without the
  work: ``poll(timeout_ms=200)``; for a batch, one transaction with its outputs (each input's key
  and bytes, to the partition its key maps to) and its offsets. It writes ``--outputs`` records
  per input (0.6, the table-controller's: it reads about 18.6 records a round and writes about
  11), spread evenly over the inputs.
- A feeder (another child process): a ``Publisher``'s producer (not transactional) sending
  ``--rate`` records a second, each at its time, 250-byte values keyed by ``--tables`` table ids
  (the shape of a card read), each beginning with the time it was sent. Its cost per record is
  the floor under a service that only produces (the shoe-reader). ``--feeder librdkafka``: the
  feeder is the simulated floor's devices' producer instead (``floor_producer.DeviceProducer``,
  confluent-kafka), to compare.
- ``--relay`` reads several topics given by commas, as the table-controller reads the shoes' and
  the consoles' (``bench/clients_floor.py`` chains two relays and a faust worker).
- ``--relay-client librdkafka``: the relay on librdkafka (confluent-kafka), which the services do
  not use: the same settings, translated, and the same loop, to compare.

After ``--warm-up`` s, over ``--seconds``: the CPU (utime + stime from /proc) of the relay, of the
feeder and of the broker (the process listening on the bootstrap port), per input record and as a
share of a core; the records the relay read, wrote and its transactions (its own counts, asked for
with SIGUSR1 at both ends of the window); and its consumer group's lag at the end (the input's end
offsets less the group's committed offsets): a lag past a batch or two says it did not keep up,
and its figures are then too low. ``--records-per-round`` turns the relay's cost per input into
its cost a round. ``--gather-ms G``: the relay's next batch gathers G ms at the broker while
records keep coming, as a service's (``gather_fetches``: fewer, larger transactions; what a
service adds to each hop's latency); librdkafka's, which fixes a consumer's fetch wait when it is
built, gathers every fetch (as kafka-python's does under load).
``--rate 0``: nothing is fed, and each process' idle share of a core is all.

    eval "$(ops/stack.sh env)"      # the admin's credentials
    .venv/bin/python bench/kafka_floor.py --rate 380 --seconds 60
    .venv/bin/python bench/kafka_floor.py --rate 0 --seconds 30            # idle
    .venv/bin/python bench/kafka_floor.py --rate 700 --outputs 1 --json kafka-floor.jsonl
    .venv/bin/python bench/kafka_floor.py --rate 271 --feeder librdkafka   # the simulated floor's client
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import IO, Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from floor_producer import DeviceProducer, librdkafka_config
from procstat import load_average, proc_cpu_seconds, stack_pids
from surveil.runtime.config import UNMETERED, Settings
from surveil.runtime.kafka import GATHER_MIN_BYTES, gather_fetches, partition_for, producer_config

PARTITIONS = 6  # the shared topics' count
VALUE_BYTES = 250  # a card read's event
SENT_AT = struct.Struct("<d")  # a fed value's first bytes: when it was sent (time.time())


def say(line: str) -> None:
    print(f"[kafka-floor] {line}", file=sys.stderr, flush=True)


def _stop_on_signals() -> list[bool]:
    """A flag set by SIGTERM or SIGINT, as ``KafkaRunner.stop_on_signals``."""
    stop = [False]

    def stopped(*_: Any) -> None:
        stop[0] = True

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stopped)
    return stop


def _report_on_sigusr1(counts: list[tuple[int, ...]]) -> None:
    """On SIGUSR1, the child writes its counts so far on one line of its stdout."""
    signal.signal(signal.SIGUSR1, lambda *_: print(*counts[0], flush=True))


def relay(source: str, sink: str, group: str, ratio: float, gather_ms: float) -> None:
    """Child process: ``KafkaRunner``'s clients and loop, relaying ``source`` (topics, by commas)
    to ``sink``."""
    settings = Settings.from_env("kafka-floor-relay")
    member = f"{group}-{settings.instance_id}"
    consumer = KafkaConsumer(
        **settings.kafka_client(),
        **UNMETERED,
        group_id=group,
        group_instance_id=member,
        client_id=f"kafka-floor-relay-{settings.instance_id}",
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="latest",  # the topics are new, and fed only once every partition is assigned
        max_poll_records=5000,
    )
    gather_fetches(consumer, int(gather_ms))
    producer = KafkaProducer(**producer_config(settings), transactional_id=member)
    producer.init_transactions()
    manager = producer._transaction_manager
    partitions: dict[bytes, int] = {}  # key -> the sink's partition, as KafkaRunner._partition
    counts: list[tuple[int, ...]] = [(0, 0, 0)]  # records read, records written, transactions
    stop = _stop_on_signals()
    _report_on_sigusr1(counts)
    consumer.subscribe(source.split(","))
    while not consumer.assignment() and not stop[0]:
        consumer.poll(timeout_ms=200)
    print("ready", flush=True)
    due = 0.0  # outputs owed: ratio a record, one written each time it reaches 1
    try:
        while not stop[0]:
            records = consumer.poll(timeout_ms=200)
            if not records:
                continue
            epoch = manager.producer_id_and_epoch
            producer.begin_transaction()
            sent, offsets, read = [], {}, 0
            for tp, batch in records.items():
                for record in batch:
                    due += ratio
                    while due >= 1:
                        partition = partitions.get(record.key)
                        if partition is None:
                            partition = partitions[record.key] = partition_for(record.key, len(producer.partitions_for(sink)))
                        sent.append(producer.send(sink, key=record.key, value=record.value, partition=partition))
                        due -= 1
                offsets[tp] = OffsetAndMetadata(batch[-1].offset + 1, "", -1)
                read += len(batch)
            # kafka-python 2.3 (measured against 3.0, docs/performance.md) takes the group's id.
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata() if hasattr(consumer, "group_metadata") else group)
            producer.commit_transaction()
            failed = sum(future.failed() for future in sent)
            if manager.producer_id_and_epoch != epoch or failed:  # as KafkaRunner._publish: a commit the broker aborted
                raise SystemExit(f"transaction lost: epoch {epoch.epoch} -> {manager.producer_id_and_epoch.epoch}, {failed} sends failed")
            done_in, done_out, done_tx = counts[0]
            counts[0] = (done_in + read, done_out + len(sent), done_tx + 1)
    finally:
        consumer.close()
        producer.close()


def relay_librdkafka(source: str, sink: str, group: str, ratio: float, gather_ms: float) -> None:
    """Child process: the same relay on librdkafka (confluent-kafka), the client the services do
    not use: what kafka-python's relay costs, in another client. The same settings, translated
    (``floor_producer.librdkafka_config``), and the same loop: a batch, then one transaction with
    its outputs and offsets."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as Partition

    settings = Settings.from_env("kafka-floor-relay")
    member = f"{group}-{settings.instance_id}"
    consumer = Consumer(
        librdkafka_config(
            settings.kafka_client() | ({"fetch_max_wait_ms": int(gather_ms), "fetch_min_bytes": GATHER_MIN_BYTES} if gather_ms else {})
        )
        | {
            "group.id": group,
            "group.instance.id": member,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "latest",  # as the kafka-python relay
        }
    )
    # librdkafka wants a transaction's timeout no shorter than a record's delivery timeout.
    producer_settings = librdkafka_config(producer_config(settings))
    producer = Producer(producer_settings | {"transactional.id": member, "transaction.timeout.ms": producer_settings["message.timeout.ms"]})
    producer.init_transactions()
    counts: list[tuple[int, ...]] = [(0, 0, 0)]
    stop = _stop_on_signals()
    _report_on_sigusr1(counts)
    consumer.subscribe(source.split(","))
    while not consumer.assignment() and not stop[0]:
        consumer.consume(num_messages=1, timeout=0.2)  # nothing is fed before "ready"
    print("ready", flush=True)
    due = 0.0
    try:
        while not stop[0]:
            # As kafka-python's poll: back at the first record, with what else was fetched
            # (consume alone waits out its timeout unless 5,000 came).
            first = consumer.poll(0.2)
            if first is None:
                continue
            records = [first, *consumer.consume(num_messages=4999, timeout=0)]
            producer.begin_transaction()
            offsets: dict[tuple[str, int], int] = {}
            written = 0
            for record in records:
                if record.error() is not None:
                    raise SystemExit(f"a record in error: {record.error()}")
                due += ratio
                while due >= 1:
                    key = record.key()
                    producer.produce(sink, record.value(), key, partition=partition_for(key, PARTITIONS))
                    written += 1
                    due -= 1
                offsets[record.topic(), record.partition()] = record.offset() + 1
            committed = [Partition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
            producer.send_offsets_to_transaction(committed, consumer.consumer_group_metadata())
            producer.commit_transaction()  # raises if the broker aborted it
            done_in, done_out, done_tx = counts[0]
            counts[0] = (done_in + len(records), done_out + written, done_tx + 1)
    finally:
        consumer.close()


def feeder(topic: str, rate: float, tables: int, client: str) -> None:
    """Child process: a ``Publisher``'s producer (``client`` kafka-python) or the simulated
    floor's (librdkafka) sending ``rate`` records a second to ``topic``, each at its time."""
    settings = Settings.from_env("kafka-floor-feeder")
    if client == "kafka-python":
        producer = KafkaProducer(**producer_config(settings))
    else:
        producer = DeviceProducer(settings)
        producer.prepare(topic)
    padding = b"x" * (VALUE_BYTES - SENT_AT.size)
    keys = [f"T{n:04d}".encode() for n in range(1, tables + 1)]
    counts: list[tuple[int, ...]] = [(0,)]
    stop = _stop_on_signals()
    _report_on_sigusr1(counts)
    print("ready", flush=True)
    started, sent = time.monotonic(), 0
    try:
        while not stop[0]:
            value = SENT_AT.pack(time.time()) + padding  # read by bench/clients_floor.py's worker
            producer.send(topic, key=keys[sent % tables], value=value, headers=[])
            sent += 1
            counts[0] = (sent,)
            wait = started + sent / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
    finally:
        producer.close()


def broker_pid(settings: Settings) -> int | None:
    """The broker's process: the one listening on the bootstrap port, or the stack's."""
    return stack_pids(settings.kafka_bootstrap, settings.redis_url, int(os.environ.get("PROMETHEUS_PORT", "9090"))).get("kafka")


def relay_child(source: str, sink: str, group: str, ratio: float, gather_ms: float, client: str, log: IO[str]) -> subprocess.Popen[bytes]:
    """A relay (``relay`` or ``relay_librdkafka``, by ``client``) in a child process."""
    args = ["--outputs", str(ratio), "--gather-ms", str(gather_ms), "--relay-client", client, "--relay", source, sink, group]
    return _child(args, log)


def _child(args: list[str], log: IO[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, __file__, *args],
        stdout=subprocess.PIPE,
        stderr=log,
    )


def _line(child: subprocess.Popen[bytes], timeout: float, what: str) -> str:
    """The next line of ``child``'s stdout, waited for up to ``timeout`` s."""
    assert child.stdout is not None
    if not select.select([child.stdout], [], [], timeout)[0]:
        raise SystemExit(f"no {what} from child {child.pid} in {timeout:.0f} s")
    line = child.stdout.readline().decode().strip()
    if not line:
        raise SystemExit(f"child {child.pid} exited ({child.wait()}) before its {what}")
    return line


def _counts(child: subprocess.Popen[bytes] | None) -> list[int]:
    if child is None:
        return [0, 0, 0]
    child.send_signal(signal.SIGUSR1)
    return [int(n) for n in _line(child, 10, "counts").split()]


def _lag(settings: Settings, admin: KafkaAdminClient, topic: str, group: str) -> int:
    """Records of ``topic`` the group has not committed yet: end offsets less committed ones."""
    consumer = KafkaConsumer(**settings.kafka_client(), group_id=None, enable_auto_commit=False, isolation_level="read_committed")
    try:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
    finally:
        consumer.close()
    listed = getattr(admin, "list_group_offsets", None)  # kafka-python 2.3: list_consumer_group_offsets
    committed = listed(group).get(group, {}) if listed else admin.list_consumer_group_offsets(group)
    lag = 0
    for tp, end in ends.items():
        done = committed.get(tp)
        lag += max(end - (done.offset if done is not None and done.offset >= 0 else 0), 0)
    return lag


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=380.0, help="records a second fed (0: idle, nothing fed)")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window (after the warm-up)")
    parser.add_argument("--warm-up", type=float, default=20.0, help="seconds fed before the window")
    parser.add_argument("--tables", type=int, default=1000, help="table ids the records are keyed by")
    parser.add_argument("--outputs", type=float, default=0.6, help="records the relay writes per record read")
    parser.add_argument(
        "--gather-ms",
        type=float,
        default=0.0,
        help="after a fetch that brought records, the relay's next waits up to this long at the broker (librdkafka's: every fetch)",
    )
    parser.add_argument("--records-per-round", type=float, default=18.6, help="records a service reads a round")
    parser.add_argument("--feeder", choices=("kafka-python", "librdkafka"), default="kafka-python", help="the feeder's client")
    parser.add_argument("--json", type=Path, help="append the result here as one JSON line")
    parser.add_argument("--relay-client", choices=("kafka-python", "librdkafka"), default="kafka-python", help="the relay's client")
    parser.add_argument("--relay", nargs=3, metavar=("SOURCE", "SINK", "GROUP"), help=argparse.SUPPRESS)
    parser.add_argument("--feed", metavar="TOPIC", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay:
        source, sink, group = args.relay
        (relay if args.relay_client == "kafka-python" else relay_librdkafka)(source, sink, group, args.outputs, args.gather_ms)
        return
    if args.feed:
        feeder(args.feed, args.rate, args.tables, args.feeder)
        return

    settings = Settings.from_env("bench")
    broker = broker_pid(settings)
    if broker is None:
        say(f"the broker's process is not found (listening on {settings.kafka_bootstrap}, or in .stack/): not measured")
    run = uuid.uuid4().hex[:8]
    source, sink, group = f"bench-kafka-{run}-in", f"bench-kafka-{run}-out", f"bench-kafka-{run}"
    admin = KafkaAdminClient(**settings.kafka_client())
    admin.create_topics([NewTopic(source, PARTITIONS, 1), NewTopic(sink, PARTITIONS, 1)])
    log = open(f"/tmp/{group}.log", "w")
    children: list[subprocess.Popen[bytes]] = []
    try:
        relayer = relay_child(source, sink, group, args.outputs, args.gather_ms, args.relay_client, log)
        children.append(relayer)
        _line(relayer, 120, "readiness")
        fed = None
        if args.rate > 0:
            fed = _child(["--rate", str(args.rate), "--tables", str(args.tables), "--feeder", args.feeder, "--feed", source], log)
            children.append(fed)
            _line(fed, 60, "readiness")
        say(
            f"relay {relayer.pid} ({args.outputs:g} out per record), feeder {fed.pid if fed else '-'}, broker {broker or '-'}: "
            f"{args.rate:.0f} records/s, {args.warm_up:.0f} s warm-up then {args.seconds:.0f} s measured (log /tmp/{group}.log)"
        )
        time.sleep(args.warm_up)
        pids = {"relay": relayer.pid, **({"feeder": fed.pid} if fed else {}), **({"broker": broker} if broker else {})}
        counts0, fed0 = _counts(relayer), _counts(fed)[0]
        cpu0, load0, t0 = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}, load_average(), time.monotonic()
        time.sleep(args.seconds)
        cpu1, t1 = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}, time.monotonic()
        counts1, fed1 = _counts(relayer), _counts(fed)[0]
        load1 = load_average()
        lag = _lag(settings, admin, source, group)
        for child in children:
            if child.poll() is not None:
                raise SystemExit(f"a child exited ({child.returncode}) during the run: /tmp/{group}.log")
    finally:
        for child in reversed(children):  # the feeder first, then the relay
            child.terminate()
            child.wait(30)
        admin.delete_topics([source, sink])
        # A static member does not leave its group on close: the group stays until its session ends.
        admin.close()
        log.close()

    window = t1 - t0
    read, written, transactions = (b - a for a, b in zip(counts0, counts1))
    fed_count = fed1 - fed0
    used = {name: cpu1[name] - cpu0[name] for name in cpu0}
    share = {name: 100 * cpu / window for name, cpu in used.items()}
    per_read = {name: cpu / read * 1e6 for name, cpu in used.items()} if read else {}
    result: dict[str, Any] = {
        "rate": args.rate,
        "window_s": round(window, 2),
        "tables": args.tables,
        "outputs_per_record": args.outputs,
        "gather_ms": args.gather_ms,
        "feeder": args.feeder,
        "relay_client": args.relay_client,
        "fed": fed_count,
        "read": read,
        "written": written,
        "transactions": transactions,
        "lag_at_end": lag,
        "cpu_share_of_core_pct": {name: round(s, 2) for name, s in share.items()},
        "load_average": [load0[0], load1[0]],
    }
    print(
        f"kafka-python floor, {args.rate:.0f} records/s fed for {window:.0f} s (after {args.warm_up:.0f} s warm-up), {args.tables} tables, "
        f"relay gathering {args.gather_ms:g} ms:"
    )
    if read:
        if "feeder" in used and fed_count:
            per_read["feeder"] = used["feeder"] / fed_count * 1e6  # the feeder's: per record it sent
        result |= {
            "cpu_us_per_record": {name: round(us, 1) for name, us in per_read.items()},
            "relay_ms_per_round": round(args.records_per_round * per_read["relay"] / 1000, 3),
            "relay_ms_per_transaction": round(1000 * used["relay"] / max(transactions, 1), 3),
        }
        print(
            f"  records: {fed_count} fed, {read} read and {written} written by the relay ({read / window:.0f}/s in), "
            f"{transactions} transactions ({read / max(transactions, 1):.1f} records each); lag at the end {lag}"
        )
        print(
            f"  relay:  {per_read['relay']:.0f} us CPU a record read, {1000 * used['relay'] / max(transactions, 1):.2f} ms a transaction, "
            f"{share['relay']:.1f} % of a core"
        )
        print(
            f"          {args.records_per_round:g} records a round: {result['relay_ms_per_round']:.2f} ms a round "
            f"({args.outputs:g} out per record)"
        )
        if "feeder" in per_read:
            print(f"  feeder ({args.feeder}): {per_read['feeder']:.0f} us CPU a record sent, {share['feeder']:.1f} % of a core")
        if "broker" in per_read:
            print(f"  broker: {per_read['broker']:.0f} us CPU a record relayed, {share['broker']:.1f} % of a core")
    else:
        print(f"  records: {fed_count} fed, {read} read, {written} written; lag at the end {lag}")
        print("  " + ", ".join(f"{name} {s:.2f} % of a core" for name, s in share.items()))
    print(f"  load average {load0[0]:.1f} - {load1[0]:.1f}")
    if args.json:
        with args.json.open("a") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
