"""Creating, listing and deleting the contract's topics (``surveil.events.topics``) on a broker.

All topics share one partition count. ``ops/stack.sh up`` creates them with::

    python -m surveil.runtime.topic_admin create --bootstrap 127.0.0.1:9092 --partitions 6
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable
from typing import Any

from ..events.topics import ALL_TOPICS

DEFAULT_PARTITIONS = 6


def partitions_from_env() -> int:
    """The shared partition count: env ``PARTITIONS``, else 6."""
    return int(os.environ.get("PARTITIONS", DEFAULT_PARTITIONS))


def create_topics(
    bootstrap: str,
    topics: Iterable[str] = ALL_TOPICS,
    partitions: int | None = None,
    replication: int = 1,
    timeout_s: float = 30.0,
) -> list[str]:
    """Create the topics that do not exist yet (existing ones are left alone) and wait until
    every partition of every requested topic has a leader. Returns the names it created."""
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    wanted = list(topics)
    count = partitions_from_env() if partitions is None else partitions
    admin = _admin(bootstrap)
    try:
        missing = [t for t in wanted if t not in set(admin.list_topics())]
        created = []
        for name in missing:  # one by one: a topic created meanwhile is not an error
            try:
                admin.create_topics([NewTopic(name, count, replication)])
                created.append(name)
            except TopicAlreadyExistsError:
                pass
        _wait_for_leaders(admin, wanted, timeout_s)
        return created
    finally:
        admin.close()


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
    create = sub.add_parser("create", help="create the missing topics (idempotent)")
    create.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    create.add_argument("--partitions", type=int, default=partitions_from_env())
    create.add_argument("--replication", type=int, default=1)
    create.add_argument("topics", nargs="*", help="default: all of ALL_TOPICS")
    sub.add_parser("list", help="print the topic names, one a line")
    args = parser.parse_args(argv)

    if args.command == "list":
        print("\n".join(ALL_TOPICS))
        return 0
    names = args.topics or ALL_TOPICS
    created = create_topics(args.bootstrap, names, args.partitions, args.replication)
    counts = partition_counts(args.bootstrap, names)
    mismatched = False
    for name in names:
        state = "created" if name in created else "exists"
        note = ""
        if counts[name] != args.partitions:  # created earlier with another PARTITIONS
            note, mismatched = f" (WARNING: {args.partitions} wanted)", True
        print(f"{name}: {state}, {counts[name]} partitions{note}")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
