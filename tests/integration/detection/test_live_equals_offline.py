"""The four services on the real broker and Redis, a simulated floor with injected irregularities
played live into them: the alerts on baccarat.alerts are the offline replay's alerts for the same
events; and an anomaly-detection worker killed (kill -9) mid-run and restarted loses none and
adds none (an alert republished after the crash repeats the same id and bytes)."""

from __future__ import annotations

import time

import msgspec

from integration.deployment import Deployment
from surveil.analysis.replay import replay
from surveil.analysis.verify import verify
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.sim.floor import Floor
from surveil.sim.injections import parse_codes

INJECT = "DRAW_BANKER_EXTRA,LATE_BET,CARD_MISMATCH,DEAL_ORDER,SQUEEZE_HOLDER,CARD_EXPOSED"
FLOOR = {"tables": 3, "shoes": 1, "seed": 51}
PACE = 0.25  # seconds per round
CHECKPOINT_SECONDS = 5  # the detectors' checkpoints, so that the run's log has some to verify


def floor() -> Floor:
    return Floor(**FLOOR, inject=parse_codes(INJECT))


def offline_alerts(deployment: Deployment) -> dict[str, m.AlertRaised]:
    """The offline replay of what the deployment put on the shoe, table and settlement topics,
    once the table-controller and settlement have consumed all of their input (or died: their log)."""
    for service in ("table-controller", "settlement"):
        deployment.wait_until_consumed(service)
    recorded = [
        codec.decode(record.value) for topic in (topics.SHOE, topics.TABLE, topics.SETTLEMENT) for record in deployment.records(topic)
    ]
    recorded.sort(key=lambda event: event.time)  # any interleaving will do: the checks wait for what they need
    result = replay(iter(codec.encode(event) for event in recorded))
    assert result.rounds_checked > 150, f"{result.events_by_type}\n{deployment.log_text()}"
    return {alert.data.alert_id: alert for alert in result.alerts}


def live_alerts(deployment: Deployment, expected: int) -> list[m.AlertRaised]:
    deadline = time.monotonic() + 180
    while True:
        alerts = [a for a in deployment.read(topics.ALERTS, expected, timeout=20) if isinstance(a, m.AlertRaised)]
        if len({a.data.alert_id for a in alerts}) >= expected or time.monotonic() > deadline:
            return alerts


def same_alert(a: m.AlertRaised, b: m.AlertRaised) -> bool:
    """The same finding, told the same way (the chain may differ: live and offline order a table's
    alerts from different streams differently)."""
    unchained = [msgspec.structs.replace(x.data, chain=None, signature=None) for x in (a, b)]
    return unchained[0] == unchained[1]


def check(deployment: Deployment, live: list[m.AlertRaised]) -> None:
    offline = offline_alerts(deployment)
    by_id = {alert.data.alert_id: alert for alert in live}
    missing = sorted(f"{offline[i].data.rule} {offline[i].subject}" for i in set(offline) - set(by_id))
    extra = sorted(f"{by_id[i].data.rule} {by_id[i].subject}" for i in set(by_id) - set(offline))
    assert (missing, extra) == ([], []), f"missing {missing}, extra {extra}\n{deployment.log_text()}"
    assert all(same_alert(by_id[i], offline[i]) for i in offline)
    rules = {alert.data.rule for alert in offline.values()}
    assert set(INJECT.split(",")) <= rules
    for alert_id in {a.data.alert_id for a in live}:  # republished alerts repeat the same bytes
        assert len({codec.encode(a) for a in live if a.data.alert_id == alert_id}) == 1
    # The whole log, checkpoints with it, proves itself with the detectors' public key alone.
    proof = verify(deployment.read_values(topics.ALERTS, len(live), timeout=30), deployment.alert_verifier())
    assert (proof.breaks, proof.checkpoints > 0) == ([], True), proof


def test_live_alerts_equal_the_offline_replay_of_the_same_events(deployment: Deployment) -> None:
    deployment.env["ALERT_CHECKPOINT_SECONDS"] = str(CHECKPOINT_SECONDS)
    deployment.start_all()
    deployment.play(floor(), PACE)
    check(deployment, live_alerts(deployment, len(INJECT.split(","))))
    # And its commits keep up: past every transaction marker of the table-controller's and
    # settlement's streams (faust on its own crept one transaction a second: anomaly_detection/transport.py).
    deployment.wait_until_consumed("anomaly-detection", timeout_s=20)


def test_a_detector_killed_mid_run_loses_no_alert_and_adds_none(deployment: Deployment) -> None:
    deployment.env["ALERT_CHECKPOINT_SECONDS"] = str(CHECKPOINT_SECONDS)
    deployment.start_all()
    thread, outcome = deployment.play_in_background(floor(), PACE)
    time.sleep(8)
    deployment.kill("anomaly-detection")
    time.sleep(2)
    deployment.start("anomaly-detection")
    thread.join(timeout=300)
    assert not thread.is_alive() and "error" not in outcome, outcome
    check(deployment, live_alerts(deployment, len(INJECT.split(","))))
