"""The cluster's feature levels on the real broker: ``topic_admin create`` (run by ops/stack.sh up
and compose's kafka-init) sets those the deployment needs (``FEATURES``) where the broker's
differ, so an existing data directory gets them at its next start, and the stack's broker has
them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from surveil.runtime.topic_admin import FEATURES, feature_levels, main, settle_features

ELIGIBLE_LEADER_REPLICAS = "eligible.leader.replicas.version"


def test_the_stacks_broker_runs_without_eligible_leader_replicas(kafka_bootstrap: str) -> None:
    """With them on, a one-node cluster killed -9 came back through unclean leader elections
    (docs/faults.md, "The broker killed -9")."""
    assert FEATURES[ELIGIBLE_LEADER_REPLICAS] == 0
    levels = feature_levels(kafka_bootstrap)
    assert ELIGIBLE_LEADER_REPLICAS in levels, "the broker does not know the feature: older than Kafka 4.0?"
    assert levels[ELIGIBLE_LEADER_REPLICAS] == 0


@pytest.fixture
def eligible_leader_replicas_on(kafka_bootstrap: str) -> Iterator[None]:
    """The cluster as a data directory formatted by Kafka 4.1's defaults leaves it; settled back
    afterwards, whatever the test did."""
    assert settle_features(kafka_bootstrap, {ELIGIBLE_LEADER_REPLICAS: 1}) == {ELIGIBLE_LEADER_REPLICAS: (0, 1)}
    try:
        yield
    finally:
        settle_features(kafka_bootstrap)


@pytest.mark.usefixtures("eligible_leader_replicas_on")
def test_create_turns_eligible_leader_replicas_off_on_a_cluster_that_has_them(
    kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create", "--bootstrap", kafka_bootstrap]) == 0
    assert f"feature {ELIGIBLE_LEADER_REPLICAS}: 1 -> 0" in capsys.readouterr().out.splitlines()
    assert feature_levels(kafka_bootstrap)[ELIGIBLE_LEADER_REPLICAS] == 0
    assert settle_features(kafka_bootstrap) == {}  # nothing left to change
