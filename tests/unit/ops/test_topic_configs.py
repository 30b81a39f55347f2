"""The topics' settings as code (surveil.runtime.topic_admin.topic_configs), without a broker:
every contract topic has its settings, the evidence is kept for the evidence period whatever its
size, the dead letters for theirs, the periods come from the environment and a bad one is refused.
On the real broker: tests/integration/ops/test_topic_retention.py."""

from __future__ import annotations

import pytest

from surveil.events import topics
from surveil.runtime import topic_admin
from surveil.runtime.topic_admin import DAY_MS, configs_for, topic_configs


def test_every_contract_topic_has_its_settings() -> None:
    configs = topic_configs(180, 30)
    assert set(topics.ALL_TOPICS) | {topics.ALERT_ACTIONS} == set(configs)
    for settings in configs.values():
        assert settings["cleanup.policy"] == "delete" and settings["retention.bytes"] == "-1"


def test_the_evidence_is_kept_for_the_evidence_period_and_the_dead_letters_for_theirs() -> None:
    configs = topic_configs(180, 30)
    for name in (topics.SHOE, topics.INPUTS, topics.TABLE, topics.SETTLEMENT, topics.ALERTS, topics.ALERT_ACTIONS):
        assert configs[name]["retention.ms"] == str(180 * DAY_MS) == "15552000000"
    assert {configs[name]["retention.ms"] for name in topics.DEADLETTERS} == {str(30 * DAY_MS)}


def test_the_periods_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVIDENCE_RETENTION_DAYS", raising=False)
    monkeypatch.delenv("DEADLETTER_RETENTION_DAYS", raising=False)
    assert topic_configs()[topics.SHOE]["retention.ms"] == str(topic_admin.DEFAULT_EVIDENCE_DAYS * DAY_MS)
    monkeypatch.setenv("EVIDENCE_RETENTION_DAYS", "365")
    monkeypatch.setenv("DEADLETTER_RETENTION_DAYS", "7")
    assert topic_configs()[topics.ALERTS]["retention.ms"] == str(365 * DAY_MS)
    assert topic_configs()[topics.deadletter_topic("settlement")]["retention.ms"] == str(7 * DAY_MS)
    for bad in ("0", "-5", "1.5", "half a year"):
        monkeypatch.setenv("EVIDENCE_RETENTION_DAYS", bad)
        with pytest.raises(ValueError, match="EVIDENCE_RETENTION_DAYS"):
            topic_configs()


def test_a_prefixed_topic_has_its_contract_topics_settings_and_others_have_none() -> None:
    configs = topic_configs(180, 30)
    assert configs_for("it-x.baccarat.alerts", configs) is configs[topics.ALERTS]
    assert configs_for("prod-baccarat.alert-actions", configs) is configs[topics.ALERT_ACTIONS]
    for name in topics.DEADLETTERS:
        assert configs_for(name, configs) is configs[name]
    assert configs_for("baccarat.deadletter", configs) is None
    assert configs_for("anomaly-detection-table-watch-changelog", configs) is None
