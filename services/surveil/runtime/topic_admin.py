"""Creating, listing and deleting the contract's topics (``surveil.events.topics``) on a broker,
with their settings as code.

All topics share one partition count. Each contract topic has its settings (``topic_configs``):
the evidence (the raw shoe, table-input, table and settlement streams, the alerts and what the
surveillance room did about them) is kept ``EVIDENCE_RETENTION_DAYS`` (180 by default), whatever
its size; the dead letters ``DEADLETTER_RETENTION_DAYS`` (30); each stored uncompressed, whatever
its producers send. ``create_topics`` creates the missing topics with them and alters an existing
topic whose settings differ, so a change here, or of the variables, reaches the broker at the next
``ops/stack.sh up`` (or compose's kafka-init)::

    python -m surveil.runtime.topic_admin create --bootstrap 127.0.0.1:9092 --partitions 6

``create`` also sets the cluster's feature levels the deployment needs (``FEATURES``), where the
broker's differ: a new cluster gets them at its first start, an existing one at its next.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..events import topics
from ..events.topics import ALL_TOPICS

DEFAULT_PARTITIONS = 6
DEFAULT_EVIDENCE_DAYS = 180
DEFAULT_DEADLETTER_DAYS = 30
DAY_MS = 86_400_000

# What is kept for the evidence period: what happened at the tables, what was found, what was
# done about it. The dead letters are the engineers' (what a service refused, and why): a refused
# device message is also an alert, kept with the evidence.
EVIDENCE = (topics.SHOE, topics.INPUTS, topics.TABLE, topics.SETTLEMENT, topics.ALERTS, topics.ALERT_ACTIONS)

# The broker stores a batch a producer compressed (gzip, snappy, lz4, zstd: a producer's choice)
# uncompressed: no consumer meets a codec it cannot read. kafka-python reads gzip alone without
# other libraries, and a poll that met another failed at every try: any producer allowed to
# write a topic could stop its consumers for good. (Our producers do not compress.)
STORED_UNCOMPRESSED = {"compression.type": "uncompressed"}

# Cluster-wide feature levels (KIP-584), set by ``settle_features``. Eligible leader replicas
# off: a one-node cluster killed -9 came back through unclean leader elections with them on, and
# its group coordinator fell out of step with its log (docs/faults.md, "The broker killed -9").
FEATURES = {"eligible.leader.replicas.version": 0}


def partitions_from_env() -> int:
    """The shared partition count: env ``PARTITIONS``, else 6."""
    return int(os.environ.get("PARTITIONS", DEFAULT_PARTITIONS))


def _days(variable: str, value: str | None, default: int) -> int:
    value = value or str(default)
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{variable}={value!r}: a whole number of days, at least 1")
    return int(value)


def topic_configs(evidence_days: int | None = None, deadletter_days: int | None = None) -> dict[str, dict[str, str]]:
    """Each contract topic's settings on the broker, by its name in the contract. The days default
    to env ``EVIDENCE_RETENTION_DAYS`` (180) and ``DEADLETTER_RETENTION_DAYS`` (30). Deleted by
    age only (``retention.bytes`` -1): a busy night must not push evidence out early. Stored
    uncompressed (``STORED_UNCOMPRESSED``)."""
    if evidence_days is None:
        evidence_days = _days("EVIDENCE_RETENTION_DAYS", os.environ.get("EVIDENCE_RETENTION_DAYS"), DEFAULT_EVIDENCE_DAYS)
    if deadletter_days is None:
        deadletter_days = _days("DEADLETTER_RETENTION_DAYS", os.environ.get("DEADLETTER_RETENTION_DAYS"), DEFAULT_DEADLETTER_DAYS)

    def kept(days: int) -> dict[str, str]:
        return {"cleanup.policy": "delete", "retention.ms": str(days * DAY_MS), "retention.bytes": "-1", **STORED_UNCOMPRESSED}

    return {**{name: kept(evidence_days) for name in EVIDENCE}, **{name: kept(deadletter_days) for name in topics.DEADLETTERS}}


def configs_for(name: str, configs: Mapping[str, Mapping[str, str]]) -> Mapping[str, str] | None:
    """The settings of the topic called ``name`` on the broker (the contract's name, after any
    ``TOPIC_PREFIX``); None for a topic that is not the contract's (faust's own, a test's)."""
    for contract_name, wanted in configs.items():
        if name.endswith(contract_name):
            return wanted
    return None


@dataclass
class TopicsReport:
    """What ``create_topics`` did: the topics it created, and per existing topic whose settings
    it altered, each setting's old and new value."""

    created: list[str] = field(default_factory=list)
    altered: dict[str, dict[str, tuple[str | None, str]]] = field(default_factory=dict)


def create_topics(
    bootstrap: str,
    names: Iterable[str] = ALL_TOPICS,
    partitions: int | None = None,
    replication: int = 1,
    timeout_s: float = 30.0,
    configs: Mapping[str, Mapping[str, str]] | None = None,
) -> TopicsReport:
    """Create the topics that do not exist yet, with their settings (``configs``, by contract
    name; default ``topic_configs()``), alter the settings of existing ones where they differ
    (partition counts are left alone), and wait until every partition of every requested topic
    has a leader."""
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    wanted = list(names)
    count = partitions_from_env() if partitions is None else partitions
    table = topic_configs() if configs is None else configs
    report = TopicsReport()
    admin = _admin(bootstrap)
    try:
        missing = [t for t in wanted if t not in set(admin.list_topics())]
        for name in missing:  # one by one: a topic created meanwhile is not an error
            try:
                admin.create_topics([NewTopic(name, count, replication, topic_configs=dict(configs_for(name, table) or {}))])
                report.created.append(name)
            except TopicAlreadyExistsError:
                pass
        _wait_for_leaders(admin, wanted, timeout_s)
        existing = {name: configs_for(name, table) for name in wanted if name not in report.created}
        report.altered = _apply_configs(admin, {name: settings for name, settings in existing.items() if settings})
        return report
    finally:
        admin.close()


def feature_levels(bootstrap: str) -> dict[str, int]:
    """Each feature the broker supports, at its finalized level (0: not finalized, off)."""
    admin = _admin(bootstrap)
    try:
        return _levels(admin)
    finally:
        admin.close()


def settle_features(bootstrap: str, features: Mapping[str, int] = FEATURES, timeout_s: float = 30.0) -> dict[str, tuple[int, int]]:
    """Set each of ``features`` to its level where the cluster's differs, and wait until the
    broker reports the new levels; what changed, by feature: (old, new)."""
    admin = _admin(bootstrap)
    try:
        current = _levels(admin)
        changes = {name: (current.get(name, 0), level) for name, level in features.items() if current.get(name, 0) != level}
        if not changes:
            return {}
        updates = {name: ("SAFE_DOWNGRADE" if new < old else "UPGRADE", new) for name, (old, new) in changes.items()}
        failed = {name: result for name, result in admin.update_features(updates).items() if result != "OK"}
        if failed:
            raise RuntimeError(f"feature levels not set: {failed}")
        deadline = time.monotonic() + timeout_s
        while any(_levels(admin).get(name, 0) != new for name, (_, new) in changes.items()):  # the broker learns them from the controller
            if time.monotonic() > deadline:
                raise TimeoutError(f"the broker still reports other feature levels after {timeout_s} s: {_levels(admin)}")
            time.sleep(0.2)
        return changes
    finally:
        admin.close()


def _levels(admin: Any) -> dict[str, int]:
    return {name: feature.get("finalized", (0, 0))[1] for name, feature in admin.describe_features().items()}


def described_configs(bootstrap: str, names: Iterable[str]) -> dict[str, dict[str, str]]:
    """Every setting of each topic as the broker has it (defaults included)."""
    admin = _admin(bootstrap)
    try:
        return _describe(admin, list(names))
    finally:
        admin.close()


def _describe(admin: Any, names: list[str]) -> dict[str, dict[str, str]]:
    from kafka.admin import ConfigResource, ConfigResourceType

    if not names:
        return {}
    found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name) for name in names], config_filter="all")
    return {name: {key: entry["value"] for key, entry in settings.items()} for name, settings in found["topic"].items()}


def _apply_configs(admin: Any, wanted: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, tuple[str | None, str]]]:
    """Set the settings of existing topics that differ from ``wanted``; what changed, by topic."""
    from kafka.admin import ConfigResource, ConfigResourceType

    current = _describe(admin, list(wanted))
    changes = {
        name: {key: (current[name].get(key), value) for key, value in settings.items() if current[name].get(key) != value}
        for name, settings in wanted.items()
    }
    changes = {name: changed for name, changed in changes.items() if changed}
    if changes:
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, name, {key: new for key, (_, new) in changed.items()})
            for name, changed in changes.items()
        ]
        results = admin.alter_configs(resources, incremental=True)  # the settings named, no other
        failed = {name: result for name, result in results.get("topic", {}).items() if result != "OK"}
        if failed:
            raise RuntimeError(f"topic settings not altered: {failed}")
    return changes


def delete_topics(bootstrap: str, topics: Iterable[str]) -> None:
    """Delete the topics that exist; unknown ones are ignored."""
    admin = _admin(bootstrap)
    try:
        present = set(admin.list_topics())
        doomed = [t for t in topics if t in present]
        if doomed:
            admin.delete_topics(doomed)
    finally:
        admin.close()


def partition_counts(bootstrap: str, topics: Iterable[str]) -> dict[str, int]:
    """How many partitions each existing topic has (missing topics are left out)."""
    admin = _admin(bootstrap)
    try:
        return {d["name"]: len(d["partitions"]) for d in admin.describe_topics(list(topics)) if d["error_code"] == 0}
    finally:
        admin.close()


def _admin(bootstrap: str) -> Any:
    """An admin client on ``bootstrap`` with the credentials in the environment (KAFKA_USERNAME,
    ...: creating and deleting topics takes the admin principal, docs/security.md)."""
    from kafka import KafkaAdminClient

    from .config import kafka_client_config

    return KafkaAdminClient(**kafka_client_config(bootstrap), client_id="surveil-topics")


def _wait_for_leaders(admin: object, topics: list[str], timeout_s: float) -> None:
    # Creation is asynchronous: a producer that comes right after may otherwise see
    # UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE.
    deadline = time.monotonic() + timeout_s
    while True:
        described = admin.describe_topics(topics)  # type: ignore[attr-defined]
        ready = all(d["error_code"] == 0 and d["partitions"] and all(p["leader_id"] >= 0 for p in d["partitions"]) for d in described)
        if ready:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics without leaders after {timeout_s} s: {described}")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m surveil.runtime.topic_admin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    create = sub.add_parser("create", help="set the cluster's features and create the missing topics (idempotent)")
    create.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    create.add_argument("--partitions", type=int, default=partitions_from_env())
    create.add_argument("--replication", type=int, default=1)
    create.add_argument("topics", nargs="*", help="default: all of ALL_TOPICS")
    sub.add_parser("list", help="print the topic names, one a line")
    sub.add_parser("configs", help="print each topic's settings, as create sets them (EVIDENCE_RETENTION_DAYS, ...)")
    args = parser.parse_args(argv)

    if args.command == "list":
        print("\n".join(ALL_TOPICS))
        return 0
    if args.command == "configs":
        for name, settings in topic_configs().items():
            print(f"{name}: {' '.join(f'{key}={value}' for key, value in settings.items())}")
        return 0
    for name, (old, new) in settle_features(args.bootstrap).items():
        print(f"feature {name}: {old} -> {new}")
    names = args.topics or ALL_TOPICS
    table = topic_configs()
    report = create_topics(args.bootstrap, names, args.partitions, args.replication, configs=table)
    counts = partition_counts(args.bootstrap, names)
    mismatched = False
    for name in names:
        state = "created" if name in report.created else "exists"
        note = ""
        if counts[name] != args.partitions:  # created earlier with another PARTITIONS
            note, mismatched = f" (WARNING: {args.partitions} wanted)", True
        wanted = configs_for(name, table)
        kept = f", kept {int(wanted['retention.ms']) // DAY_MS} days" if wanted else ""
        changed = "; ".join(f"{key} {old} -> {new}" for key, (old, new) in report.altered.get(name, {}).items())
        print(f"{name}: {state}, {counts[name]} partitions{kept}{note}{f' (changed: {changed})' if changed else ''}")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
