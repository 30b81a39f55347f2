"""Settlement's Prometheus metrics: what they count, and ``promtool check metrics`` finds nothing
to say about them (promtool comes with Debian's prometheus package, which ops/install.sh installs)."""

from __future__ import annotations

import shutil
import subprocess
import time

from prometheus_client import REGISTRY, generate_latest
from settlement_desk import Desk

from surveil.core.money import Spot
from surveil.core.play import Outcome


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_settling_a_round_counts_its_money_bets_and_lag() -> None:
    desk = Desk("T-METRICS")
    before = {
        "staked": sample("surveil_settlement_staked_total", table="T-METRICS"),
        "banker wins": sample("surveil_settlement_bets_total", result="win", spot="banker"),
        "lags": sample("surveil_settlement_lag_seconds_count"),
        "lag": sample("surveil_settlement_lag_seconds_sum"),
        "banker rounds": sample("surveil_settlement_rounds_total", outcome="banker"),
    }
    events = [desk.open("R1"), desk.bet("R1", "B1", Spot.BANKER, 2_000), desk.bet("R1", "B2", Spot.PLAYER, 700)]
    completed = desk.complete("R1", Outcome.BANKER)
    lag_at_least = time.time() - completed.time.timestamp()
    desk.send(*events, completed)
    assert sample("surveil_settlement_staked_total", table="T-METRICS") - before["staked"] == 2_700
    assert sample("surveil_settlement_paid_out_total", table="T-METRICS") == 3_900
    assert sample("surveil_settlement_commission_total", table="T-METRICS") == 100
    assert sample("surveil_settlement_house_net", table="T-METRICS") == -1_200
    assert sample("surveil_settlement_bets_total", result="win", spot="banker") - before["banker wins"] == 1
    assert sample("surveil_settlement_rounds_total", outcome="banker") - before["banker rounds"] == 1
    assert sample("surveil_settlement_lag_seconds_count") - before["lags"] == 1
    assert sample("surveil_settlement_lag_seconds_sum") - before["lag"] >= lag_at_least


def test_the_metrics_pass_promtool_check_metrics() -> None:
    desk = Desk("T-PROMTOOL")
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.TIE, 100), desk.void("R1"), desk.bet("R9", "B1", Spot.TIE, 100))
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: ops/install.sh installs it (apt-get install -y prometheus)"
    exposition = generate_latest(REGISTRY)
    assert b"surveil_settlement_rejections_total" in exposition
    checked = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True, timeout=60)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
    assert not [line for line in (checked.stdout + checked.stderr).decode().splitlines() if "surveil_settlement" in line]


def test_no_metric_names_a_patron() -> None:
    """/metrics is unauthenticated: no label may carry a patron id (docs/monitoring.md)."""
    desk = Desk("T-PRIVACY")
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.BANKER, 2_000), desk.complete("R1", Outcome.BANKER))
    exposition = generate_latest(REGISTRY).decode()
    assert "patron" not in exposition and '"P1"' not in exposition
