"""The console's board: an alert's state is the fold of its actions in topic order; the floor's
shifts (Macau time)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from conftest import Room, floor_events
from surveil.console.board import Board, shift_start
from surveil.detect.alerts import checkpoint
from surveil.events import codec
from surveil.events import models as m
from surveil.runtime.alert_keys import AlertSigner


def action(alert: m.AlertRaised, what: str, n: int, user: str = "sam", **fields: str) -> m.AlertAction:
    data = m.AlertActionData(
        table_id=alert.data.table_id, alert_id=alert.data.alert_id, action=what, user=user, role="supervisor", **fields
    )  # type: ignore[arg-type]
    return codec.make(m.AlertAction, data, id=f"a{n}", source="test", time=alert.time)


def test_the_state_is_the_fold_of_the_actions_and_what_does_not_fit_stays_in_the_trail() -> None:
    _, alerts = floor_events()
    alert = alerts[0]
    board = Board()
    board.ingest(alert)
    for n, (what, fields) in enumerate(
        [
            ("acknowledge", {}),
            ("acknowledge", {}),
            ("assign", {"assignee": "olivia"}),
            ("close", {"reason": "confirmed"}),
            ("close", {"reason": "false_alarm"}),
            ("note", {"note": "done"}),
        ]
    ):
        board.ingest(action(alert, what, n, **fields))
    entry = board.alerts[alert.data.alert_id]
    assert (entry.status, entry.assignee, entry.reason) == ("closed", "olivia", "confirmed")
    assert [(a.data.action, a.applied) for a in entry.actions] == [
        ("acknowledge", True),
        ("acknowledge", False),  # already acknowledged
        ("assign", True),
        ("close", True),
        ("close", False),  # the alert is closed
        ("note", True),
    ]
    assert entry.actions[4].why_not == "the alert is closed"


def test_an_action_read_before_its_alert_waits_for_it_and_a_redelivery_counts_once() -> None:
    _, alerts = floor_events()
    alert = alerts[0]
    board = Board()
    early = action(alert, "acknowledge", 1)
    assert board.ingest(early) is None
    board.ingest(alert)
    board.ingest(alert)  # redelivered
    board.ingest(early)  # redelivered
    entry = board.alerts[alert.data.alert_id]
    assert entry.status == "acknowledged" and len(entry.actions) == 1 and len(board.alerts) == 1


def test_shifts_start_at_their_macau_times() -> None:
    starts = (time(7), time(15), time(23))
    # 2026-11-29 06:30 UTC is 14:30 in Macau: the 07:00 shift (23:00 UTC the day before).
    assert shift_start(datetime(2026, 11, 29, 6, 30, tzinfo=UTC), starts) == datetime(2026, 11, 28, 23, 0, tzinfo=UTC)
    # 16:00 UTC is 00:00 in Macau the next day: the 23:00 shift, begun 15:00 UTC.
    assert shift_start(datetime(2026, 11, 29, 16, 0, tzinfo=UTC), starts) == datetime(2026, 11, 29, 15, 0, tzinfo=UTC)
    # 14:59 UTC is 22:59 Macau: the 15:00 shift, begun 07:00 UTC.
    assert shift_start(datetime(2026, 11, 29, 14, 59, tzinfo=UTC), starts) == datetime(2026, 11, 29, 7, 0, tzinfo=UTC)


def test_a_checkpoint_on_the_alerts_topic_changes_neither_the_list_nor_the_floors_clock(room: Room) -> None:
    """Checkpoints travel with the alerts (for ``surveil verify``); the console reads the topic
    whole, and a checkpoint's time is the detectors' clock, not the floor's."""
    listed, latest, events = len(room.console.board.alerts), room.console.board.latest, room.console.collector.events
    later = (latest or datetime.now(UTC)) + timedelta(days=30)
    made = checkpoint({"T01": m.ChainHead(1, "ab" * 32)}, later, AlertSigner(Ed25519PrivateKey.generate()), 0, 6, 60)
    room.console.deliver([made])
    assert (len(room.console.board.alerts), room.console.board.latest, room.console.collector.events) == (listed, latest, events)
