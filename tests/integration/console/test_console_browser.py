"""The console in a real browser (headless Chromium driven by Playwright), against the broker:
an alert raised on ``baccarat.alerts`` appears in the open page within a second, is acknowledged
and closed through the page, and the actions are on ``baccarat.alert-actions``; a restarted
console shows the alert as it was left. Skipped without Debian's chromium (ops/install.sh
installs it, so CI has it)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_run import CHROMIUM, ConsoleProcess, chromium, consumer_env, log_in, publish
from kafka import KafkaConsumer, TopicPartition

from support.scenario import BetSpec, Scenario, lines
from surveil.analysis.replay import open_log, replay
from surveil.core.money import Spot
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.runtime.access import ANOMALY_DETECTION, CONSOLE, SETTLEMENT_SERVICE, SHOE_READER, TABLE_CONTROLLER, PrefixAccess
from surveil.runtime.config import kafka_client_config

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not at /usr/bin/chromium (ops/install.sh installs it)")


def a_round_dealt_wrong(table: str = "T07") -> tuple[list[m.Event], list[m.AlertRaised]]:
    s = Scenario(table=table)
    s.start_shoe()
    s.round(["2H", "8C", "3D", "KS"], [BetSpec("P1", Spot.BANKER, 1000)])
    s.round(["2H", "3C", "3D", "KS", "4H", "5C"], [BetSpec("P2", Spot.PLAYER, 2000, seat="2")], declare={"outcome": "banker"})
    events = s.log()
    return events, replay(iter(lines(events))).alerts


@pytest.fixture
def console(
    unique_topics: dict[str, str], topic_prefix: str, prefix_access: PrefixAccess, kafka_bootstrap: str, tmp_path: Path
) -> Iterator[ConsoleProcess]:
    env = prefix_access.env(CONSOLE, consumer_env({**os.environ, "KAFKA_BOOTSTRAP": kafka_bootstrap}, topic_prefix))
    process = ConsoleProcess(env, tmp_path)
    process.start(history_hours=24 * 365)  # the scripted rounds are stamped with the scenario's clock
    try:
        yield process
    finally:
        process.stop()


def actions_on_the_topic(kafka_bootstrap: str, topic: str, expected: int, timeout: float = 30) -> list[m.AlertAction]:
    consumer = KafkaConsumer(**kafka_client_config(kafka_bootstrap), group_id=None, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        found: list[m.AlertAction] = []
        deadline = time.monotonic() + timeout
        while len(found) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                found += [codec.decode(r.value) for r in records]  # type: ignore[misc]
        return found
    finally:
        consumer.close()


def test_an_alert_appears_live_is_handled_in_the_page_and_the_actions_are_on_the_topic(
    console: ConsoleProcess, prefix_access: PrefixAccess, topic_prefix: str, kafka_bootstrap: str
) -> None:
    events, alerts = a_round_dealt_wrong()
    shoe = [e for e in events if e.topic == topics.SHOE]
    table = [e for e in events if e.topic != topics.SHOE]
    publish(prefix_access.kafka_client(SHOE_READER), topic_prefix, shoe)
    publish(prefix_access.kafka_client(TABLE_CONTROLLER), topic_prefix, [e for e in table if e.topic == topics.TABLE])
    publish(prefix_access.kafka_client(SETTLEMENT_SERVICE), topic_prefix, [e for e in table if e.topic == topics.SETTLEMENT])
    console.wait_caught_up()
    alert = next(a for a in alerts if a.data.rule == "RESULT_MISMATCH")
    with chromium() as browser:
        page = browser.new_page()
        log_in(page, console.url, "sam")
        page.wait_for_function("document.body.dataset.live === 'open'", timeout=10_000)
        page.evaluate(
            """(id) => new MutationObserver((changes, seen) => {
                   if (document.getElementById('row-' + id)) { window.rowAt = Date.now(); seen.disconnect(); }
               }).observe(document.getElementById('alert-rows'), {childList: true})""",
            alert.data.alert_id,
        )
        sent = time.time()
        publish(prefix_access.kafka_client(ANOMALY_DETECTION), topic_prefix, [alert])
        page.wait_for_selector(f"#row-{alert.data.alert_id}", timeout=5_000)
        seen_after = page.evaluate("window.rowAt") / 1000 - sent
        assert seen_after < 1.0, f"the row came {seen_after:.3f} s after the alert was sent"
        assert page.inner_text("[data-count=critical] .n") == "1"
        row = page.inner_text(f"#row-{alert.data.alert_id}")
        assert "RESULT_MISMATCH" in row and "T07" in row and "open" in row.lower()

        page.click(f"#row-{alert.data.alert_id} td.summary a")
        page.wait_for_selector("#handling-panel")
        assert "Cards in shoe order" in page.inner_text("main") and "Art. 11: The winner" in page.inner_text("#article")
        page.click("#form-acknowledge button")
        page.wait_for_selector("#alert-status:text('acknowledged')")
        page.select_option("#form-close select[name=reason]", "dealer_corrected")
        page.fill("#form-close textarea[name=note]", "Banker paid back at the table; camera 7")
        page.click("#form-close button")
        page.wait_for_selector("#alert-status:text('closed')")
        trail = page.inner_text("#trail")
        assert "acknowledge" in trail and "dealer corrected at the table" in trail and "camera 7" in trail

    actions = actions_on_the_topic(kafka_bootstrap, topic_prefix + topics.ALERT_ACTIONS, expected=2)
    assert [(a.data.action, a.data.user, a.data.role, a.data.alert_id) for a in actions] == [
        ("acknowledge", "sam", "supervisor", alert.data.alert_id),
        ("close", "sam", "supervisor", alert.data.alert_id),
    ]
    assert actions[1].data.reason == "dealer_corrected" and actions[1].data.note == "Banker paid back at the table; camera 7"

    # A restarted console rebuilds the alert and its handling from the topics.
    console.stop()
    console.start(history_hours=24 * 365)
    console.wait_caught_up()
    with chromium() as browser:
        page = browser.new_page()
        log_in(page, console.url, "audrey")
        page.goto(console.url + "/?status=closed")
        assert "closed" in page.inner_text(f"#row-{alert.data.alert_id}").lower()
        page.goto(f"{console.url}/alerts/{alert.data.alert_id}")
        assert page.inner_text("#alert-status").lower() == "closed"
        assert "camera 7" in page.inner_text("#trail")
        # The auditor's export of the round: a log that replays to the same alert.
        page.click("#form-export button")
        page.wait_for_selector("#export-log", timeout=60_000)
        exported = page.request.get(console.url + page.get_attribute("#export-log", "href"))
        assert exported.ok
        log = console.folder / "exported.jsonl.gz"
        log.write_bytes(exported.body())
    with open_log(log) as lines_read:
        replayed = replay(lines_read)
    assert alert.data.alert_id in {a.data.alert_id for a in replayed.alerts}


def test_only_the_console_writes_the_alert_actions(unique_topics: dict[str, str], prefix_access: PrefixAccess) -> None:
    from integration.test_access import produce_one  # the access tests' probe: one record, the error or None

    for principal in (ANOMALY_DETECTION, TABLE_CONTROLLER, SHOE_READER):
        assert produce_one(prefix_access.kafka_client(principal), unique_topics[topics.ALERT_ACTIONS]) is not None, principal
    assert produce_one(prefix_access.kafka_client(CONSOLE), unique_topics[topics.ALERT_ACTIONS]) is None


def test_the_consoles_metrics_pass_promtool(console: ConsoleProcess) -> None:
    import shutil
    import subprocess
    import urllib.request

    promtool = shutil.which("promtool")
    assert promtool, "promtool is installed by ops/install.sh (Debian's prometheus)"
    console.wait_caught_up()
    text = urllib.request.urlopen(f"http://127.0.0.1:{console.metrics_port}/metrics", timeout=5).read()
    assert b"surveil_console_caught_up 1.0" in text and b"surveil_console_records_total" in text
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=30)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
