"""The Kafka topics of the contract: each one's name, in one place; and what a record on each says
its value is.

Every topic is keyed by ``table_id`` and all share one partition count, so that each table's
events stay in order on one partition and the detectors can read the topics co-partitioned
(docs/contract.md, "Topics"). Every record the system writes carries a ``content-type`` header:
an event is a CloudEvent in the Kafka protocol binding's structured mode
(``application/cloudevents+json``), a dead letter is plain JSON (``application/json``: it is
not an event), anomaly-detection's internal records MessagePack (``application/vnd.msgpack``).
"""

from __future__ import annotations

# The largest record (key, value, headers and framing) any topic takes: the broker's
# message.max.bytes (ops/stack.sh, docker-compose.yml) and every producer's max.request.size.
MAX_RECORD_BYTES = 1_048_576
RECORD_FRAMING = 512  # bytes a record takes besides its key and value (no headers): more than enough


def fits(key: bytes, value: bytes) -> bool:
    """Whether a record of ``key`` and ``value`` (without headers) fits in ``MAX_RECORD_BYTES``."""
    return len(key) + len(value) + RECORD_FRAMING <= MAX_RECORD_BYTES


SHOE = "baccarat.shoe"
TABLE = "baccarat.table"
SETTLEMENT = "baccarat.settlement"
ALERTS = "baccarat.alerts"
INPUTS = "baccarat.inputs"  # the table's dealer-console and bet-sensor inputs
ALERT_ACTIONS = "baccarat.alert-actions"  # what the surveillance room did about each alert

DEADLETTER_SERVICES = ("shoe-reader", "table-controller", "settlement", "anomaly-detection")


def deadletter_topic(service: str) -> str:
    """The topic of ``service``'s dead letters. Each service has its own, which only it may
    write: where a dead letter is says who refused the input (the detectors alert on a device
    message refused for its signature, and only its verifier may cause that)."""
    return f"baccarat.deadletter.{service}"


DEADLETTERS: tuple[str, ...] = tuple(map(deadletter_topic, DEADLETTER_SERVICES))

ALL_TOPICS: tuple[str, ...] = (SHOE, TABLE, SETTLEMENT, ALERTS, *DEADLETTERS, INPUTS, ALERT_ACTIONS)

CONTENT_TYPE = "content-type"  # the header name of the CloudEvents Kafka protocol binding
CLOUDEVENTS_JSON = b"application/cloudevents+json"
JSON = b"application/json"
MSGPACK = b"application/vnd.msgpack"


def is_deadletter(topic: str) -> bool:
    """Whether ``topic`` (its contract name) holds dead letters."""
    return topic in DEADLETTERS


def headers(topic: str) -> list[tuple[str, bytes]]:
    """The headers of a record the system writes on ``topic`` (its contract name): a new list,
    which the caller may extend (a device's signature)."""
    return [(CONTENT_TYPE, JSON if is_deadletter(topic) else CLOUDEVENTS_JSON)]
