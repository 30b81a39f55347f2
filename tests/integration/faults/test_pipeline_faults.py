"""The whole deployment through faults: a floor with injected irregularities played live into the
four services while each of them is killed -9 at a random moment and started again, the broker
is killed -9 and restarted, and Redis is killed -9 and restarted. At the end the topics, the
ledger and the alert set are those of an uninterrupted run (the offline references for the same
floor): nothing lost, nothing doubled.

The broker and Redis faults need the ones ``ops/stack.sh`` runs (the test skips otherwise).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable

import msgspec
import pytest

from integration.deployment import ROOT, SERVICES, Deployment, dump_memory, offline_events, offline_settlement, settlement_events
from surveil.anomaly_detection.replay import replay
from surveil.anomaly_detection.verify import verify
from surveil.events import codec
from surveil.events import models as m
from surveil.runtime import topics
from surveil.sim.floor import Floor
from surveil.sim.injections import parse_codes

pytestmark = pytest.mark.faults

INJECT = "DRAW_PLAYER_MISSING,LATE_BET,CARD_MISMATCH,TIE_BET_MOVED,CARD_EXPOSED,BURN_COUNT"
FLOOR = {"tables": 4, "shoes": 3, "seed": 8, "inject": parse_codes(INJECT)}
PACE = 0.25  # seconds per round: three shoes of ~75 rounds, about a minute of play


def stack_sh(*args: str) -> None:
    proc = subprocess.run(["bash", str(ROOT / "ops" / "stack.sh"), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ops/stack.sh {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"


def faults(deployment: Deployment) -> dict[str, Callable[[], None]]:
    """Each fault by name: what it does, and it leaves the thing it hit running again."""
    def restart_redis() -> None:
        stack_sh("restart-redis")
        deployment.restore_redis_users()  # the test's users are made at run time (see restore_redis_users)

    chosen: dict[str, Callable[[], None]] = {
        f"kill -9 {service}": (lambda service=service: deployment.restart(service, pause=1.0)) for service in SERVICES  # type: ignore[misc]
    }
    chosen["kill -9 kafka"] = lambda: stack_sh("restart-kafka")
    chosen["kill -9 redis"] = restart_redis
    return chosen


def alerts_by_id(alerts: list[m.AlertRaised]) -> dict[str, m.AlertRaised]:
    """One per id; the faust worker may republish an alert after a crash, always the same bytes."""
    for alert_id, n in Counter(a.data.alert_id for a in alerts).items():
        if n > 1:
            assert len({codec.encode(a) for a in alerts if a.data.alert_id == alert_id}) == 1, f"{alert_id} republished changed"
    return {alert.data.alert_id: alert for alert in alerts}


def unchained(alert: m.AlertRaised) -> m.AlertRaisedData:
    """The finding as told, without its place in the table's chain (live and offline order a
    table's alerts from different streams differently)."""
    return msgspec.structs.replace(alert.data, chain=None)


def test_kill_9_of_each_service_the_broker_and_redis_mid_run_loses_nothing_and_doubles_nothing(
        deployment: Deployment, kafka_broker, redis_url: str) -> None:
    if not kafka_broker.ops_controlled or f":{os.environ.get('REDIS_PORT', '6379')}/" not in redis_url:
        pytest.skip("the broker or Redis is not the one ops/stack.sh runs, so the test cannot kill it")
    rng = random.Random(20261129)
    expected = offline_events(FLOOR)
    offline_replay = replay(iter(codec.encode(event) for event in expected))
    assert {a.data.rule for a in offline_replay.alerts} >= set(INJECT.split(","))

    deployment.start_all()
    thread, outcome = deployment.play_in_background(Floor(**FLOOR), PACE)
    schedule = list(faults(deployment).items())
    rng.shuffle(schedule)
    done: list[str] = []
    for name, fault in schedule:
        time.sleep(rng.uniform(2.0, 5.0))
        fault()
        done.append(name)
    still_playing = thread.is_alive()
    thread.join(timeout=600)
    assert not thread.is_alive() and "error" not in outcome, outcome
    assert still_playing, f"the floor was over before the last fault ({done[-1]}): make it longer"
    for service in ("table-controller", "settlement", "anomaly-detection"):
        deployment.wait_until_consumed(service, timeout_s=300)
    assert deployment.exited() == [], deployment.log_text()

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

    # Detection: the alert set of the offline replay, each alert once, each table's chain whole.
    live_alerts = [a for a in deployment.read(topics.ALERTS, len(offline_replay.alerts)) if isinstance(a, m.AlertRaised)]
    live = alerts_by_id(live_alerts)
    offline = alerts_by_id(offline_replay.alerts)
    assert sorted(live) == sorted(offline), deployment.log_text()
    assert all(unchained(live[i]) == unchained(offline[i]) for i in offline)
    assert verify(iter(codec.encode(a) for a in live_alerts)).breaks == []
    assert deployment.read_values(topics.DEADLETTER, 0, timeout=10) == []

