"""The Kafka topics of the contract: each one's name, in one place.

Every topic is keyed by ``table_id`` and all share one partition count, so that each table's
events stay in order on one partition and the detectors can read the topics co-partitioned
(docs/contract.md, "Topics").
"""

from __future__ import annotations

SHOE = "baccarat.shoe"
TABLE = "baccarat.table"
SETTLEMENT = "baccarat.settlement"
ALERTS = "baccarat.alerts"
INPUTS = "baccarat.inputs"  # the table's dealer-console and bet-sensor inputs
ALERT_ACTIONS = "baccarat.alert-actions"  # what the surveillance room did about each alert


def deadletter_topic(service: str) -> str:
    """The topic of ``service``'s dead letters. Each service has its own, which only it may
    write: where a dead letter is says who refused the input (the detectors alert on a device
    message refused for its signature, and only its verifier may cause that)."""
    return f"baccarat.deadletter.{service}"


DEADLETTER_SERVICES = ("shoe-reader", "table-controller", "settlement", "anomaly-detection")
DEADLETTERS: tuple[str, ...] = tuple(map(deadletter_topic, DEADLETTER_SERVICES))

ALL_TOPICS: tuple[str, ...] = (SHOE, TABLE, SETTLEMENT, ALERTS, *DEADLETTERS, INPUTS)
