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
DEADLETTER = "baccarat.deadletter"
INPUTS = "baccarat.inputs"  # the table's dealer-console and bet-sensor inputs
ALERT_ACTIONS = "baccarat.alert-actions"  # what the surveillance room did about each alert

ALL_TOPICS: tuple[str, ...] = (SHOE, TABLE, SETTLEMENT, ALERTS, DEADLETTER, INPUTS, ALERT_ACTIONS)
