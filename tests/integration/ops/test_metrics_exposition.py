"""Every service's /metrics, live, passes ``promtool check metrics``; the lag exporter measures lag.

One deployment of the whole pipeline for the module, on the session's broker and Redis under its
own TOPIC_PREFIX and REDIS_PREFIX: ``surveil serve`` shoe-reader, table-controller, settlement,
anomaly-detection and lag-exporter as subprocesses, each on a free METRICS_PORT. A simulated floor
(``surveil simulate --live``, one injected CARD_MISMATCH) plays through it, with a garbled shoe
line and an invalid table event, so that every labelled metric has series to check; then each
service's exposition goes through promtool, and what it finds is reported metric by metric.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from support.processes import SURVEIL, Launched, free_port, stop
from surveil.anomaly_detection.app import UNCHAINED_ALERTS
from surveil.events import models as m
from surveil.events import topics
from surveil.events.signing import console_device, shoe_device
from surveil.events.topics import ALL_TOPICS
from surveil.runtime.access import FLOOR_SIMULATOR, PrefixAccess
from surveil.runtime.alert_keys import PRIVATE_FILE, generate
from surveil.runtime.config import kafka_client_config
from surveil.runtime.devices import KeyStore
from surveil.runtime.lag_exporter import LagReader
from surveil.runtime.topic_admin import create_topics, delete_topics
from surveil.sim.floor import Floor, table_ids
from surveil.sim.injections import parse_codes
from surveil.sim.table import TableInput

ROOT = Path(__file__).resolve().parents[3]
SERVICES = ("shoe-reader", "table-controller", "settlement", "anomaly-detection", "lag-exporter")
TABLES = 2

# A family each service must expose with samples, so that promtool checks the real thing.
OWN_FAMILY = {
    "shoe-reader": "surveil_shoe_reader_lines_total",
    "table-controller": "surveil_batch_seconds_bucket",
    "settlement": "surveil_settlement_rounds_total",
    "anomaly-detection": "surveil_round_outcomes_total",
    "lag-exporter": "surveil_consumer_lag_messages",
}


# How far behind a caught-up group's committed offset can stay: the detectors commit up to
# processed messages, so the marker of the last transaction stays uncommitted until a message
# follows (every topic has one transactional producer).
MARKERS_AT_REST = 1


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def wait_for(what: str, check: Callable[[], bool], timeout: float, logs: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout} s waiting for {what}\n{logs()}", pytrace=False)


@dataclass
class Deployment:
    prefix: str
    ports: dict[str, int]
    logs: Path
    processes: dict[str, Launched]

    def metrics(self, service: str) -> str:
        return scrape(self.ports[service])

    def tail(self) -> str:
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()[-15:]
            parts.append(f"--- {path.name} (last lines)\n" + "\n".join(lines))
        return "\n".join(parts)


@pytest.fixture(scope="module")
def deployment(kafka_bootstrap: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    prefix = f"it-metrics-{uuid.uuid4().hex[:8]}."
    logs = tmp_path_factory.mktemp("metrics-exposition")
    create_topics(kafka_bootstrap, [prefix + name for name in ALL_TOPICS])
    ports = {service: free_port() for service in SERVICES}
    shoe_port = free_port()
    keys = KeyStore(logs / "device-keys")  # each simulated device its own key: they sign, the services check
    for table in table_ids(TABLES):
        keys.issue(shoe_device(table))
        keys.issue(console_device(table))
    generate(logs / "alert-signing")  # the detectors' key: anomaly-detection's alone
    signing = {"anomaly-detection": {"ALERT_SIGNING_KEY": str(logs / "alert-signing" / PRIVATE_FILE)}}
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP": kafka_bootstrap,
        "REDIS_URL": redis_url,
        "TOPIC_PREFIX": prefix,
        "REDIS_PREFIX": prefix.replace(".", ":"),
        "INSTANCE_ID": "it-metrics",
        "FAUST_DATADIR": str(logs / "faust"),
        "SHOE_READER_PORT": str(shoe_port),
        "LAG_INTERVAL": "1",
        "DEVICE_KEYS": str(keys.root),
    }
    processes: dict[str, Launched] = {}
    deployed = Deployment(prefix, ports, logs, processes)
    # Each service as its own principal, with the ACLs of this prefix (docs/security.md).
    access = PrefixAccess(kafka_bootstrap, redis_url, prefix, env["REDIS_PREFIX"])
    try:
        for service in SERVICES:
            service_env = access.env(service, {**env, "METRICS_PORT": str(ports[service]), **signing.get(service, {})})
            processes[service] = Launched.serve(service, service_env, logs / f"{service}.log", cwd=ROOT)
        for service in SERVICES:
            wait_for(f"{service} /metrics", lambda s=service: bool(deployed.metrics(s)), 60, deployed.tail)
        wait_for(
            "the shoe-reader's port",
            lambda: socket.create_connection(("127.0.0.1", shoe_port), timeout=1).close() is None,
            60,
            deployed.tail,
        )

        # The floor: two tables, one shoe each, a switched card at one of them.
        simulated = subprocess.run(
            [
                str(SURVEIL),
                "simulate",
                "--tables",
                str(TABLES),
                "--shoes",
                "1",
                "--seed",
                "11",
                "--inject",
                "CARD_MISMATCH",
                "--live",
                "--pace",
                "0",
                "--kafka",
                kafka_bootstrap,
                "--shoe-reader",
                f"127.0.0.1:{shoe_port}",
            ],
            env=access.env(FLOOR_SIMULATOR, env),
            capture_output=True,
            timeout=300,
            cwd=ROOT,
        )
        assert simulated.returncode == 0, simulated.stdout.decode() + simulated.stderr.decode()
        # Something for the dead letters: a garbled shoe line, an event that is not one.
        with socket.create_connection(("127.0.0.1", shoe_port), timeout=5) as shoe:
            shoe.sendall(b"this is not a shoe line\n")
            time.sleep(1)
        producer = KafkaProducer(**kafka_client_config(kafka_bootstrap), acks="all")
        producer.send(prefix + topics.TABLE, key=b"T-junk", value=b'{"not": "an event"}')
        producer.send(prefix + topics.INPUTS, key=b"T-junk", value=b"\xff\xfe not json")
        producer.flush(timeout=30)
        producer.close()

        def waiting_for() -> list[str]:
            """What the deployment has not done yet."""
            detected = samples(deployed.metrics("anomaly-detection"))
            settled = samples(deployed.metrics("settlement"))
            lag = {
                (labels["group"], labels["topic"], labels["partition"]): v
                for n, labels, v in samples(deployed.metrics("lag-exporter"))
                if n == "surveil_consumer_lag_messages"
            }
            missing = []
            if not any(n == "surveil_alerts_total" and labels["rule"] == "CARD_MISMATCH" and v > 0 for n, labels, v in detected):
                missing.append("the CARD_MISMATCH alert")
            shoes = [v for n, _, v in detected if n == "surveil_table_shoe_in_play"]
            if len(shoes) < TABLES or any(shoes):
                missing.append(f"both shoes ended (surveil_table_shoe_in_play: {shoes})")
            if not any(n == "surveil_dead_letters_total" for n, _, _ in settled):
                missing.append("settlement's dead letter")
            behind = {k: v for k, v in lag.items() if v > MARKERS_AT_REST}
            if not lag or behind:
                missing.append(f"every group caught up (behind: {behind or 'no lag read yet'})")
            return missing

        wait_for(
            "the floor to be settled, checked, and caught up with",
            lambda: not waiting_for(),
            240,
            lambda: f"still waiting for: {waiting_for()}\n{deployed.tail()}",
        )
        yield deployed
    finally:
        stop(*processes.values())
        access.close()
        admin = KafkaAdminClient(**kafka_client_config(kafka_bootstrap))
        try:
            delete_topics(kafka_bootstrap, [t for t in admin.list_topics() if t.startswith(prefix)])
        finally:
            admin.close()
        client = redis.Redis.from_url(redis_url)
        doomed = list(client.scan_iter(match=prefix.replace(".", ":") + "*", count=1000))
        for i in range(0, len(doomed), 500):
            client.unlink(*doomed[i : i + 500])
        client.close()


# ---- promtool check metrics ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if not found:
        message = "PROMTOOL IS MISSING: the services' /metrics were NOT linted. Install it with ops/install.sh."
        if os.environ.get("CI"):
            pytest.fail(message + " Under CI this is a failure: the install step did not run.", pytrace=False)
        pytest.skip(message)
    return found


@pytest.mark.parametrize("service", SERVICES)
def test_promtool_check_metrics_finds_nothing_in_the_live_exposition(deployment: Deployment, promtool: str, service: str) -> None:
    exposition = deployment.metrics(service)
    names = {name for name, _, _ in samples(exposition)}
    assert OWN_FAMILY[service] in names, f"{service} exposes no {OWN_FAMILY[service]}: nothing of its own to check"
    checked = subprocess.run([promtool, "check", "metrics"], input=exposition.encode(), capture_output=True, timeout=60)
    findings = [line for line in (checked.stdout + checked.stderr).decode().splitlines() if line.strip()]
    # promtool prints one "metric_name: problem" line per finding.
    assert checked.returncode == 0 and not findings, f"{service}: promtool check metrics:\n" + "\n".join(f"  {line}" for line in findings)


# ---- what the floor left in the metrics ---------------------------------------------------------


def test_no_patron_id_is_in_any_metrics(deployment: Deployment) -> None:
    """/metrics is unauthenticated: a patron id there is a patron's play told to anyone who asks.
    The floor's patrons are in no label of any service (nor is there a patron label at all)."""
    patrons = {
        event.data.patron_id
        for action in Floor(tables=TABLES, shoes=1, seed=11, inject=parse_codes("CARD_MISMATCH")).actions()
        if isinstance(action, TableInput) and isinstance(event := action.event, m.BetPlace)
    }
    assert len(patrons) > 5
    for service in SERVICES:
        found = samples(deployment.metrics(service))
        assert not [name for name, labels, _ in found if "patron" in labels], service
        assert not [(name, labels) for name, labels, _ in found if patrons & set(labels.values())], service


def test_anomaly_detection_exports_each_tables_rounds_last_event_and_shoe(deployment: Deployment) -> None:
    exported = samples(deployment.metrics("anomaly-detection"))
    outcomes = [(labels, v) for n, labels, v in exported if n == "surveil_round_outcomes_total"]
    tables = {labels["table"] for labels, _ in outcomes}
    assert len(tables) == TABLES
    assert {labels["outcome"] for labels, _ in outcomes} == {"player", "banker", "tie"}
    for table in tables:
        assert sum(v for labels, v in outcomes if labels["table"] == table) > 40  # a shoe deals 70 or so
    shoe = {labels["table"]: v for n, labels, v in exported if n == "surveil_table_shoe_in_play"}
    assert shoe == {table: 0.0 for table in tables}, "the shoes ended"
    last = {labels["table"]: v for n, labels, v in exported if n == "surveil_table_last_event_timestamp_seconds"}
    assert set(last) == tables and all(0 < time.time() - v < 600 for v in last.values())  # the worker's clock
    # Every rule's series exists (from 0), the injected one counted.
    alerts = {labels["rule"]: v for n, labels, v in exported if n == "surveil_alerts_total"}
    assert len(alerts) >= 28 and alerts["CARD_MISMATCH"] >= 1


def test_anomaly_detection_times_every_event_from_its_publishing_by_topic(deployment: Deployment) -> None:
    by_topic: dict[str, dict[str, float]] = defaultdict(dict)
    for name, labels, value in samples(deployment.metrics("anomaly-detection")):
        if name.endswith(("_count", "_sum")) and "latency" in name:
            by_topic[name][labels["topic"]] = value
    events = by_topic["surveil_detection_latency_seconds_count"]
    assert set(events) == {"baccarat.shoe", "baccarat.table", "baccarat.settlement"}
    assert events["baccarat.shoe"] > 400 and events["baccarat.table"] > 400  # two shoes' cards, their rounds
    assert by_topic["surveil_detection_queue_latency_seconds_count"] == events
    # Seconds (not milliseconds) from the record's timestamp, and none of them ahead of its send.
    assert 0 < sum(by_topic["surveil_detection_queue_latency_seconds_sum"].values()) / sum(events.values()) < 60
    # The injected card mismatch's alert, timed from the event that revealed it, under that event's
    # topic; the unsigned junk input's DEVICE_SIGNATURE alert under the topic that takes it back to
    # its table's partition.
    alerts = by_topic["surveil_alert_latency_seconds_count"]
    assert UNCHAINED_ALERTS in alerts and set(alerts) <= set(events) | {UNCHAINED_ALERTS} and sum(alerts.values()) >= 2


def test_anomaly_detection_times_its_commits(deployment: Deployment) -> None:
    exported = {n: v for n, _, v in samples(deployment.metrics("anomaly-detection"))}
    commits = exported["surveil_detection_commit_seconds_count"]
    assert commits >= 1  # the floor's events were committed (a commit with nothing new is not made)
    # Seconds: each waited for the broker's acknowledgements, and none near the bound.
    assert 0 < exported["surveil_detection_commit_seconds_sum"] / commits < 10


@pytest.mark.parametrize("service", ["table-controller", "settlement"])
def test_a_runners_batches_are_timed_by_phase_and_the_phases_add_up_to_the_batch(deployment: Deployment, service: str) -> None:
    exported = [(n, labels, v) for n, labels, v in samples(deployment.metrics(service)) if labels.get("service") == service]
    batches = {n: v for n, _, v in exported if n.startswith("surveil_batch_seconds_")}
    phases = {labels["phase"]: v for n, labels, v in exported if n == "surveil_batch_phase_seconds_sum"}
    counts = {labels["phase"]: v for n, labels, v in exported if n == "surveil_batch_phase_seconds_count"}
    assert set(phases) == {"apply", "state_commit", "transaction"}
    assert batches["surveil_batch_seconds_count"] > 0 and set(counts.values()) == {batches["surveil_batch_seconds_count"]}
    assert all(seconds > 0 for seconds in phases.values()), phases
    assert sum(phases.values()) == pytest.approx(batches["surveil_batch_seconds_sum"], rel=0.01)


@pytest.mark.parametrize("service", ["table-controller", "settlement"])
def test_a_runner_times_each_input_from_its_time_at_the_table_and_from_its_send(deployment: Deployment, service: str) -> None:
    exported = [(n, labels, v) for n, labels, v in samples(deployment.metrics(service)) if labels.get("service") == service]
    consumed = {labels["topic"].removeprefix(deployment.prefix): v for n, labels, v in exported if n == "surveil_events_consumed_total"}
    timed = {
        n: {labels["topic"]: v for m, labels, v in exported if m == n}
        for n in (
            "surveil_intake_latency_seconds_count",
            "surveil_intake_queue_latency_seconds_count",
            "surveil_intake_latency_seconds_sum",
            "surveil_intake_queue_latency_seconds_sum",
        )
    }
    since_event, since_sent = timed["surveil_intake_latency_seconds_count"], timed["surveil_intake_queue_latency_seconds_count"]
    assert since_sent == consumed and all(v > 0 for v in consumed.values())  # every record from its send
    assert set(since_event) == set(consumed) and all(0 < since_event[t] <= consumed[t] for t in consumed)  # but what is no event
    # Seconds (not milliseconds) from the send, and none of them ahead of the batch; the floor
    # plays here as fast as it can, its events' times the simulated floor's, days ago.
    for topic in consumed:
        assert 0 < timed["surveil_intake_queue_latency_seconds_sum"][topic] / since_sent[topic] < 60
        assert timed["surveil_intake_latency_seconds_sum"][topic] / since_event[topic] > 60


def test_the_lag_exporter_sees_every_group_caught_up(deployment: Deployment) -> None:
    lag = [(labels, v) for n, labels, v in samples(deployment.metrics("lag-exporter")) if n == "surveil_consumer_lag_messages"]
    assert {labels["group"] for labels, _ in lag} == {"table-controller", "settlement", "anomaly-detection"}
    assert {(labels["group"], labels["topic"]) for labels, _ in lag} >= {
        ("table-controller", "baccarat.shoe"),
        ("table-controller", "baccarat.inputs"),
        ("settlement", "baccarat.table"),
        ("anomaly-detection", "baccarat.shoe"),
        ("anomaly-detection", "baccarat.table"),
        ("anomaly-detection", "baccarat.settlement"),
    }
    assert all(v <= MARKERS_AT_REST for labels, v in lag)
    health = {n: v for n, _, v in samples(deployment.metrics("lag-exporter")) if n.startswith("surveil_lag_exporter")}
    assert time.time() - health["surveil_lag_exporter_last_success_timestamp_seconds"] < 30


# ---- the lag reader on a group of its own -------------------------------------------------------


def test_the_lag_reader_counts_what_a_group_has_not_committed(
    kafka_bootstrap: str, new_topic: Callable[..., str], topic_prefix: str
) -> None:
    topic = new_topic(topics.TABLE, partitions=2)
    producer = KafkaProducer(**kafka_client_config(kafka_bootstrap), acks="all")
    for n in range(30):  # 20 to partition 0, 10 to partition 1
        producer.send(topic, value=b"x", partition=0 if n < 20 else 1)
    producer.flush(timeout=30)
    producer.close()
    reader = LagReader(kafka_bootstrap, topic_prefix, groups={"settlement": (topics.TABLE,)})
    try:
        # Nothing committed yet: all of it is lag.
        assert reader.read() == {("settlement", topics.TABLE, 0): 20, ("settlement", topics.TABLE, 1): 10}
        consumer = KafkaConsumer(**kafka_client_config(kafka_bootstrap), group_id=topic_prefix + "settlement", enable_auto_commit=False)
        try:
            from kafka.structs import OffsetAndMetadata

            consumer.commit(
                {TopicPartition(topic, 0): OffsetAndMetadata(15, "", -1), TopicPartition(topic, 1): OffsetAndMetadata(10, "", -1)}
            )
        finally:
            consumer.close()
        assert reader.read() == {("settlement", topics.TABLE, 0): 5, ("settlement", topics.TABLE, 1): 0}
    finally:
        reader.close()
