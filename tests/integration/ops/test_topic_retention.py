"""The topics' settings on the real broker, as the broker describes them: the code that creates
the topics (surveil.runtime.topic_admin, run by ops/stack.sh up and compose's kafka-init) gives a
new topic its retention, and alters an existing topic whose settings differ, touching no other
setting; the stack's own topics carry them."""

from __future__ import annotations

from collections.abc import Callable

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from surveil.events import topics
from surveil.runtime.config import kafka_client_config
from surveil.runtime.topic_admin import DAY_MS, create_topics, described_configs, topic_configs


def test_new_topics_get_their_retention(kafka_bootstrap: str, topic_prefix: str, new_topic: Callable[..., str]) -> None:
    names = {name: new_topic(name) for name in (topics.SHOE, topics.ALERT_ACTIONS, topics.deadletter_topic("settlement"))}  # create_topics
    described = described_configs(kafka_bootstrap, names.values())
    wanted = topic_configs()
    for name, on_broker in names.items():
        assert {key: described[on_broker][key] for key in wanted[name]} == wanted[name], name
    assert described[names[topics.SHOE]]["retention.ms"] == str(180 * DAY_MS)
    assert described[names[topics.deadletter_topic("settlement")]]["retention.ms"] == str(30 * DAY_MS)


def test_an_existing_topic_whose_settings_differ_is_altered(kafka_bootstrap: str, new_topic: Callable[..., str]) -> None:
    alerts = new_topic(topics.ALERTS)
    admin = KafkaAdminClient(**kafka_client_config(kafka_bootstrap))
    try:  # as an operator might have left it: a week, and a setting of their own
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, alerts, {"retention.ms": str(7 * DAY_MS), "max.message.bytes": "2000000"})],
            incremental=True,
        )
    finally:
        admin.close()
    assert described_configs(kafka_bootstrap, [alerts])[alerts]["retention.ms"] == str(7 * DAY_MS)

    report = create_topics(kafka_bootstrap, [alerts], configs=topic_configs(evidence_days=200))
    assert report.created == [] and report.altered == {alerts: {"retention.ms": (str(7 * DAY_MS), str(200 * DAY_MS))}}
    after = described_configs(kafka_bootstrap, [alerts])[alerts]
    assert after["retention.ms"] == str(200 * DAY_MS) and after["retention.bytes"] == "-1"
    assert after["max.message.bytes"] == "2000000"  # not the code's: left as it was
    again = create_topics(kafka_bootstrap, [alerts], configs=topic_configs(evidence_days=200))
    assert again.altered == {}


def test_the_stacks_topics_carry_their_settings(kafka_bootstrap: str) -> None:
    """ops/stack.sh up (or the session's start) created them with create_topics."""
    described = described_configs(kafka_bootstrap, topics.ALL_TOPICS)
    for name, settings in topic_configs().items():
        if name in topics.ALL_TOPICS:
            assert {key: described[name][key] for key in settings} == settings, name
