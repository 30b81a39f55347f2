"""The detectors read a table's events on the partition its id hashes to among ``PARTITIONS``,
and refuse a record read anywhere else; so a worker started with a count other than its input
topics' would refuse most events. It does not start."""

from __future__ import annotations

from integration.deployment import Deployment
from surveil.events import topics

DETECTORS = "anomaly-detection"


def test_the_detectors_refuse_to_start_with_a_partition_count_their_topics_do_not_have(
    deployment: Deployment, kafka_partitions: int
) -> None:
    deployment.env = {"PARTITIONS": str(kafka_partitions + 1)}
    worker = deployment.start(DETECTORS)
    assert worker.wait(timeout=90) != 0
    log = (deployment.logs / f"{DETECTORS}-1.log").read_text()
    found = ", ".join(
        f"{deployment.topic(name)} has {kafka_partitions}" for name in (topics.ALERTS, topics.SETTLEMENT, topics.SHOE, topics.TABLE)
    )
    expected = f"refusing to start: PARTITIONS is {kafka_partitions + 1}, but {found}:"
    assert expected in log, deployment.log_text()
