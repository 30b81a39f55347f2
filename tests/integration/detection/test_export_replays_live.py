"""``surveil export`` of a live run: the four services on the real broker and Redis, a simulated
floor with injected irregularities played live into them; the export of the run's window, read as
the auditor, replays (``surveil replay``) to the alerts the live detectors raised, and its manifest
says what it holds (sha256, events by type, the partitions to their ends)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from integration.deployment import Deployment
from support.processes import SURVEIL
from surveil.analysis.export import export_log, file_sha256, manifest_path, read_manifest
from surveil.analysis.replay import open_log, replay
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.runtime.access import AUDITOR
from surveil.runtime.config import Settings
from surveil.sim.floor import Floor
from surveil.sim.injections import parse_codes

WATCHED = (topics.SHOE, topics.TABLE, topics.SETTLEMENT)
INJECT = "DRAW_PLAYER_MISSING,LATE_BET,CARD_UNACCOUNTED,CARD_MISMATCH,DEAL_ORDER"  # what the live floor can inject
PACE = 0.25  # seconds per round


def live_alerts(deployment: Deployment, rules: set[str]) -> list[m.AlertRaised]:
    """What the live detectors put on baccarat.alerts, once it has every rule injected."""
    deadline = time.monotonic() + 180
    while True:
        alerts = [a for a in deployment.read(topics.ALERTS, len(rules), timeout=20) if isinstance(a, m.AlertRaised)]
        if rules <= {a.data.rule for a in alerts} or time.monotonic() > deadline:
            return alerts


def identities(alerts: list[m.AlertRaised]) -> set[tuple[str, str, str]]:
    return {(alert.data.alert_id, alert.data.rule, alert.subject) for alert in alerts}


def replayed(log: Path) -> list[m.AlertRaised]:
    with open_log(log) as lines:
        result = replay(iter(lines))
    assert result.bad_lines == []
    return result.alerts


def test_an_export_of_a_live_run_replays_to_the_live_alerts(deployment: Deployment, tmp_path: Path) -> None:
    assert deployment.access is not None
    start = datetime.now(UTC) - timedelta(seconds=1)
    deployment.start_all()
    deployment.play(Floor(tables=3, shoes=1, seed=7, inject=parse_codes(INJECT)), PACE)
    live_alerts(deployment, set(INJECT.split(",")))
    deployment.wait_until_consumed("anomaly-detection", timeout_s=60)
    # Read again once the detectors consumed everything: a round mis-drawn is paid as declared, and
    # its PAYOUT_MISMATCH alerts come with the settlements, after the injected rules showed.
    live = [a for a in deployment.read(topics.ALERTS, 1, timeout=20) if isinstance(a, m.AlertRaised)]
    end = datetime.now(UTC) + timedelta(seconds=1)
    assert set(INJECT.split(",")) <= {alert.data.rule for alert in live}

    settings = dataclasses.replace(Settings.from_env("export"), kafka_bootstrap=deployment.bootstrap, topic_prefix=deployment.topic_prefix)
    settings = deployment.access.settings(settings, AUDITOR)
    out = tmp_path / "run.jsonl.gz"
    seen: list[tuple[int, int]] = []
    manifest = export_log(settings, start, end, None, out, progress=lambda done, total: seen.append((done, total)))

    # The replay of the export raises what the live detectors raised: the same ids, rules, tables.
    assert identities(replayed(out)) == identities(live), deployment.log_text()

    # The manifest: the file as written, every event of the three topics, each partition to its end.
    assert manifest_path(out) == tmp_path / "run.manifest.json" and read_manifest(manifest_path(out)) == manifest
    assert manifest.sha256 == file_sha256(out) and manifest.bytes == out.stat().st_size
    with gzip.open(out, "rb") as log:
        exported = [codec.decode(line) for line in log]
    recorded = [event for topic in WATCHED for event in deployment.read(topic, 1, timeout=20)]
    assert Counter(e.id for e in exported) == Counter(e.id for e in recorded)
    assert manifest.events == len(exported) and manifest.events_by_type == dict(Counter(e.event_type for e in exported))
    for name in WATCHED:
        ends = deployment.end_offsets(name, committed_only=True)
        covered = {(r.topic, r.partition): (r.start, r.end) for r in manifest.partitions if r.topic == deployment.topic(name)}
        assert covered == {(tp.topic, tp.partition): (0, end) for tp, end in ends.items()}
    assert manifest.principal == AUDITOR and manifest.refused_count == 0 and manifest.warnings == []
    assert manifest.tables is None and len(manifest.tables_found) == 3
    assert manifest.first_event_time == min(e.time for e in exported) and manifest.last_event_time == max(e.time for e in exported)
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] == sum(r.end - r.start for r in manifest.partitions)
    # Each table's events of each topic keep their order on the topic.
    for name in WATCHED:
        for table in manifest.tables_found:
            on_topic = [e.id for e in recorded if e.topic == name and e.subject == table]
            assert [e.id for e in exported if e.topic == name and e.subject == table] == on_topic

    # The command: the same window gives the same bytes; one table gives that table's alerts.
    env = {**deployment.access.env(AUDITOR), "KAFKA_BOOTSTRAP": deployment.bootstrap, "TOPIC_PREFIX": deployment.topic_prefix}
    again = tmp_path / "again.jsonl.gz"
    window = ["--from", start.isoformat(), "--to", end.isoformat()]
    done = subprocess.run([str(SURVEIL), "export", *window, "--out", str(again)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert file_sha256(again) == manifest.sha256 and f"sha256 {manifest.sha256}" in done.stdout + done.stderr
    table = sorted(manifest.tables_found)[1]
    one = tmp_path / "one.jsonl.gz"
    done = subprocess.run(
        [str(SURVEIL), "export", *window, "--tables", table, "--out", str(one)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(manifest_path(one).read_text())["tables_found"] == [table]
    assert identities(replayed(one)) == {alert for alert in identities(live) if alert[2] == table}


def test_an_export_reads_only_its_window_and_tells_what_it_left_out(deployment: Deployment, tmp_path: Path) -> None:
    """Records before and after the window stay out; a record that is not an event, or an event
    on a topic it does not belong to, is refused (as the live detectors refuse it), by offset."""
    assert deployment.access is not None
    events = list(_events())
    deployment.publish(events[:2])
    time.sleep(1.2)
    start = datetime.now(UTC)
    deployment.publish(events[2:4])
    deployment.publish_raw([(topics.SHOE, b"T01", b"not json"), (topics.TABLE, b"T01", codec.encode(events[0]))])
    time.sleep(1.2)
    end = datetime.now(UTC)
    time.sleep(0.1)
    deployment.publish(events[4:])

    settings = dataclasses.replace(Settings.from_env("export"), kafka_bootstrap=deployment.bootstrap, topic_prefix=deployment.topic_prefix)
    out = tmp_path / "window.jsonl"
    manifest = export_log(deployment.access.settings(settings, AUDITOR), start, end, None, out)
    lines = out.read_bytes().splitlines()
    assert [codec.decode(line).id for line in lines] == [e.id for e in events[2:4]]
    assert lines == [codec.encode(e) for e in events[2:4]]  # the bytes the topic holds
    assert manifest.refused_count == 2
    reasons = {r.topic.removeprefix(deployment.topic_prefix): r.reason for r in manifest.refused}
    assert reasons[topics.SHOE].startswith("JSON is malformed")
    assert reasons[topics.TABLE] == "a baccarat.shoe.started event travels on baccarat.shoe, not on baccarat.table"


def _events() -> list[m.Event]:
    """Six shoe events of one table, a second apart."""
    base = datetime(2025, 3, 1, 12, tzinfo=UTC)
    made: list[m.Event] = [
        codec.make(m.ShoeStarted, m.ShoeStartedData(table_id="T01", shoe_id="S1", decks=8, automatic=False), id="e0", source="t", time=base)
    ]
    for i in range(1, 6):
        data = m.CardReadData(table_id="T01", shoe_id="S1", index=i, card="AS", face_up=False)
        made.append(codec.make(m.CardRead, data, id=f"e{i}", source="t", time=base + timedelta(seconds=i)))
    return made
