"""The whole deployment through faults: a floor with injected irregularities played live into the
four services while each of them is killed -9 at a random moment and started again, Redis is
killed -9 and restarted, and (a test of its own) the broker is killed -9 and restarted. At the
end the topics, the ledger and the alert set are those of an uninterrupted run (the offline
references for the same floor): nothing lost, nothing doubled. A service that exits on its own
is started again, as a deployment's restart policy would.

The broker and Redis faults need the ones ``ops/stack.sh`` runs (the tests skip otherwise).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable

import msgspec
import pytest

from integration.deployment import CONSUMES, ROOT, SERVICES, Deployment, dump_memory, offline_events, offline_settlement, settlement_events
from surveil.analysis.replay import replay
from surveil.analysis.verify import verify
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.sim.floor import Floor
from surveil.sim.injections import parse_codes

pytestmark = pytest.mark.faults

INJECT = "DRAW_PLAYER_MISSING,LATE_BET,CARD_MISMATCH,BANKER_BET_MULTIPLE,CARD_EXPOSED,BURN_COUNT"
FLOOR = {"tables": 4, "shoes": 5, "seed": 8, "inject": parse_codes(INJECT)}
PACE = 0.3  # seconds per round: five shoes of ~75 rounds, about 110 s of play (a broker restart takes up to a minute)


def stack_sh(*args: str) -> None:
    proc = subprocess.run(["bash", str(ROOT / "ops" / "stack.sh"), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ops/stack.sh {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"


def faults(deployment: Deployment) -> dict[str, Callable[[], None]]:
    """Each fault by name: what it does, and it leaves the thing it hit running again."""

    def restart_redis() -> None:
        stack_sh("restart-redis")
        deployment.restore_redis_users()  # the test's users are made at run time (see restore_redis_users)

    chosen: dict[str, Callable[[], None]] = {
        f"kill -9 {service}": (lambda service=service: deployment.restart(service, pause=1.0))
        for service in SERVICES  # type: ignore[misc]
    }
    chosen["kill -9 kafka"] = lambda: stack_sh("restart-kafka")
    chosen["kill -9 redis"] = restart_redis
    return chosen


class Supervisor:
    """What a deployment's restart policy does (``restart: unless-stopped``): a service that exits
    on its own is started again. The faust worker exits when the broker goes away while it
    declares its topics; the Kafka runners wait the broker out. Faults and restarts take turns."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.lock = threading.Lock()
        self.restarts: list[str] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(1.0):
            with self.lock:
                for service in self.deployment.exited():
                    self.restarts.append(service)
                    self.deployment.start(service)

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


def alerts_by_id(alerts: list[m.AlertRaised]) -> dict[str, m.AlertRaised]:
    """One per id; the faust worker may republish an alert after a crash, always the same bytes."""
    for alert_id, n in Counter(a.data.alert_id for a in alerts).items():
        if n > 1:
            assert len({codec.encode(a) for a in alerts if a.data.alert_id == alert_id}) == 1, f"{alert_id} republished changed"
    return {alert.data.alert_id: alert for alert in alerts}


def unchained(alert: m.AlertRaised) -> m.AlertRaisedData:
    """The finding as told, without its place in the table's chain (live and offline order a
    table's alerts from different streams differently)."""
    return msgspec.structs.replace(alert.data, chain=None, signature=None)


def run_through(
    deployment: Deployment,
    kafka_broker,
    redis_url: str,  # type: ignore[no-untyped-def]
    wanted: tuple[str, ...],
) -> list[m.Event]:
    """The floor played live while the ``wanted`` faults strike in a random order (env FAULTS=a,b
    narrows them down further), once every service is consuming; then until every service has
    consumed everything. Returns the offline reference events."""
    if not kafka_broker.ops_controlled or f":{os.environ.get('REDIS_PORT', '6379')}/" not in redis_url:
        pytest.skip("the broker or Redis is not the one ops/stack.sh runs, so the test cannot kill it")
    rng = random.Random(20261129)
    deployment.start_all()
    supervisor = Supervisor(deployment)
    thread, outcome = deployment.play_in_background(Floor(**FLOOR), PACE)
    deadline = time.monotonic() + 120
    while not all(deployment.committed_offsets(service) for service in CONSUMES):  # all running
        assert time.monotonic() < deadline, f"the services did not start consuming\n{deployment.log_text()}"
        time.sleep(0.5)
    schedule = [(name, fault) for name, fault in faults(deployment).items() if any(word in name for word in wanted)]
    rng.shuffle(schedule)
    chosen = os.environ.get("FAULTS")
    schedule = [(name, fault) for name, fault in schedule if not chosen or any(word in name for word in chosen.split(","))]
    done: list[str] = []
    for name, fault in schedule:
        time.sleep(rng.uniform(2.0, 5.0))
        with supervisor.lock:
            fault()
        done.append(name)
    still_playing = thread.is_alive()
    thread.join(timeout=600)
    assert not thread.is_alive() and "error" not in outcome, outcome
    assert still_playing, f"the floor was over before the last fault ({done[-1]}): make it longer"
    for service in ("table-controller", "settlement", "anomaly-detection"):
        deployment.wait_until_consumed(service, timeout_s=300, check_alive=False)
    supervisor.stop()
    print(f"\nfaults in order: {', '.join(done)}; restarted after exiting on their own: {supervisor.restarts or 'none'}")
    assert deployment.exited() == [], deployment.log_text()
    return offline_events(FLOOR)


def check_table_side_and_ledger(deployment: Deployment, expected: list[m.Event]) -> None:
    # The table side: every shoe and table event once, as the offline run has it.
    for topic in (topics.SHOE, topics.TABLE):
        wanted = [e for e in expected if e.topic == topic]
        live = deployment.read(topic, len(wanted))
        twice = sorted(i for i, n in Counter(e.id for e in live).items() if n > 1)
        assert twice == [], f"{topic}: {len(twice)} events twice, e.g. {twice[:3]}"
        assert {e.id: json.loads(codec.encode(e)) for e in live} == {e.id: json.loads(codec.encode(e)) for e in wanted}
    # Settlement: each settlement once; the ledger key for key that of an uninterrupted run.
    published = deployment.settlement_events()
    assert sorted(codec.encode(e) for e in published) == sorted(codec.encode(e) for e in settlement_events(expected))
    assert deployment.dump() == dump_memory(offline_settlement(expected).ledger.backend)  # type: ignore[arg-type]


def alert_differences(deployment: Deployment, expected: list[m.Event]) -> tuple[Counter[str], Counter[str]]:
    """Alerts raised live but not by the offline replay, and the reverse, by rule and table; and
    each alert once, told as offline, each table's chain whole."""
    offline_replay = replay(iter(codec.encode(event) for event in expected))
    assert {a.data.rule for a in offline_replay.alerts} >= set(INJECT.split(","))
    log = deployment.read_values(topics.ALERTS, len(offline_replay.alerts))
    live_alerts = [a for a in map(codec.decode, log) if isinstance(a, m.AlertRaised)]
    live = alerts_by_id(live_alerts)
    offline = alerts_by_id(offline_replay.alerts)
    assert verify(log, deployment.alert_verifier()).breaks == []
    assert all(unchained(live[i]) == unchained(offline[i]) for i in set(offline) & set(live))
    extra = Counter(f"{live[i].data.rule} {live[i].data.table_id}" for i in set(live) - set(offline))
    missing = Counter(f"{offline[i].data.rule} {offline[i].data.table_id}" for i in set(offline) - set(live))
    return extra, missing


def test_kill_9_of_the_table_side_settlement_and_redis_mid_run_loses_nothing_and_doubles_nothing(
    deployment: Deployment, kafka_broker, redis_url: str
) -> None:
    """The detectors are not killed here, but they read every transaction the others abort: their
    alerts are exactly the offline replay's."""
    expected = run_through(deployment, kafka_broker, redis_url, ("shoe-reader", "table-controller", "settlement", "redis"))
    check_table_side_and_ledger(deployment, expected)
    assert [deployment.read_values(topic, 0, timeout=10) for topic in topics.DEADLETTERS] == [[], [], [], []]
    assert alert_differences(deployment, expected) == (Counter(), Counter())


def test_the_broker_and_the_detectors_killed_mid_run(deployment: Deployment, kafka_broker, redis_url: str) -> None:
    """The table side and settlement come through whole, and the detectors' alerts are the offline
    replay's. The worker restarted after the broker was away may read the table stream late (a shoe
    or more behind the shoe stream): the detectors wait for it (docs/faults.md)."""
    expected = run_through(deployment, kafka_broker, redis_url, ("kafka", "anomaly-detection"))
    check_table_side_and_ledger(deployment, expected)
    assert [deployment.read_values(topic, 0, timeout=10) for topic in topics.DEADLETTERS] == [[], [], [], []]
    assert alert_differences(deployment, expected) == (Counter(), Counter())
