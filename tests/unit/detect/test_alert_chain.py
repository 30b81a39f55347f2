"""Alerts are tamper-evident: each table's alerts chain by hash, and `surveil verify` finds any
alert changed, removed from the middle, inserted or moved."""

from __future__ import annotations

import random

import msgspec
import pytest

from support.scenario import BetSpec, Scenario, lines
from surveil.analysis.replay import replay
from surveil.analysis.verify import verify
from surveil.core.money import Spot
from surveil.detect.alerts import chain_link
from surveil.events import codec
from surveil.events import models as m


@pytest.fixture(scope="module")
def alerts() -> list[m.AlertRaised]:
    """A table with several alerts: bets under the minimum in every round of a shoe."""
    s = Scenario()
    s.play_shoe(random.Random(1), lambda coup: [BetSpec("P1", Spot.PLAYER, 300)])
    found = replay(iter(lines(s.log()))).alerts
    assert len(found) > 10
    return found


def test_each_alert_links_to_the_previous_one_of_its_table(alerts: list[m.AlertRaised]) -> None:
    previous = ""
    for alert in alerts:
        assert alert.data.chain == chain_link(previous, alert.data)
        previous = alert.data.chain


def test_a_recorded_alert_log_verifies(alerts: list[m.AlertRaised]) -> None:
    result = verify(iter(lines(alerts)))
    assert (sum(result.alerts.values()), result.breaks) == (len(alerts), [])


def test_an_altered_alert_breaks_the_chain_at_its_line(alerts: list[m.AlertRaised]) -> None:
    changed = list(alerts)
    data = msgspec.structs.replace(changed[4].data, evidence={**changed[4].data.evidence, "stake": 1})
    changed[4] = msgspec.structs.replace(changed[4], data=data)
    assert [b.line for b in verify(iter(lines(changed))).breaks] == [5]


def test_a_removed_alert_breaks_the_chain_at_the_next_one(alerts: list[m.AlertRaised]) -> None:
    removed = alerts[:3] + alerts[4:]
    assert [b.line for b in verify(iter(lines(removed))).breaks] == [4]


def test_moved_alerts_break_the_chain(alerts: list[m.AlertRaised]) -> None:
    moved = [alerts[1], alerts[0], *alerts[2:]]
    assert [b.line for b in verify(iter(lines(moved))).breaks] == [1, 2, 3]


def test_a_republished_alert_is_a_repeat_not_a_break(alerts: list[m.AlertRaised]) -> None:
    repeated = alerts[:5] + [alerts[4]] + alerts[5:]
    result = verify(iter(lines(repeated)))
    assert (result.repeats, result.breaks) == (1, [])


def test_an_alert_without_chain_or_garbage_is_reported(alerts: list[m.AlertRaised]) -> None:
    unchained = msgspec.structs.replace(alerts[0], data=msgspec.structs.replace(alerts[0].data, chain=None))
    result = verify(iter([codec.encode(unchained), b"not json"]))
    assert [(b.line, b.reason.split(":")[0]) for b in result.breaks] == [(1, "no chain value"), (2, "not an event")]
