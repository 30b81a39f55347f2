"""``surveil ledger`` and ``surveil reconcile``, on a ledger in memory (the Redis runs are in
tests/integration/settlement)."""

from __future__ import annotations

import gzip
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from settlement_desk import SHIFT, Desk

from surveil.cli import ledger as settlement_cli
from surveil.cli import main
from surveil.core.money import Spot
from surveil.core.play import Outcome
from surveil.events import codec
from surveil.runtime.state import State
from surveil.settlement import ledger
from surveil.settlement.reconcile import Difference, compare, log_lines, recompute
from unit.settlement.table_play import floor, one_of_each


@pytest.fixture
def settled(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> Desk:
    """Two rounds at T07, and the commands reading desk's ledger instead of Redis."""
    desk.send(
        desk.open("R1"),
        desk.bet("R1", "B1", Spot.BANKER, 2_000, patron="P1"),
        desk.bet("R1", "B2", Spot.TIE, 500, patron="P2"),
        desk.complete("R1", Outcome.BANKER),
        desk.open("R2"),
        desk.bet("R2", "B3", Spot.PLAYER, 1_000, patron="P1"),
        desk.complete("R2", Outcome.PLAYER),
    )
    monkeypatch.setattr(settlement_cli, "open_ledger", lambda url, prefix: desk.ledger)
    return desk


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout


def test_ledger_table_shows_each_shift(settled: Desk) -> None:
    code, out = run("ledger", "table", "T07")
    assert code == 0
    assert out.splitlines() == [
        "Table T07 (house_net: what the house won)",
        "shift         staked  paid_out  commission  house_net  rounds  bets",
        f"{SHIFT}   3,500     5,900         100     -2,400       2     3",
    ]


def test_ledger_patron_with_a_shift(settled: Desk) -> None:
    code, out = run("ledger", "patron", "P1", "--shift", SHIFT)
    assert code == 0
    assert out.splitlines()[2].split() == [SHIFT, "3,000", "5,900", "100", "2,900", "2", "2", "0", "0"]


def test_ledger_sums_several_shifts(settled: Desk) -> None:
    desk = settled
    night = desk.clock.replace(hour=16)  # 00:00 in Macau: the night shift
    desk.send(desk.open("R3", at=night), desk.bet("R3", "B4", Spot.PLAYER, 400, patron="P1"), desk.complete("R3", Outcome.BANKER))
    code, out = run("ledger", "patron", "P1")
    assert [line.split()[:2] for line in out.splitlines()[2:]] == [[SHIFT, "3,000"], ["2026-11-29/3", "400"], ["all", "3,400"]]


def test_ledger_round_lists_its_bets(settled: Desk) -> None:
    code, out = run("ledger", "round", "T07", "R1")
    assert code == 0
    assert "banker" in out.splitlines()[0] and "house -1,400" in out.splitlines()[0]
    assert [line.split()[:5] for line in out.splitlines()[1:]] == [
        ["B1", "P1", "banker", "2,000", "win"],
        ["B2", "P2", "tie", "500", "lose"],
    ]
    code, _ = run("ledger", "round", "T07", "R404")
    assert code == 1


def test_ledger_says_when_there_is_nothing(settled: Desk) -> None:
    assert run("ledger", "table", "T99") == (0, "Table T99 (house_net: what the house won): nothing in the ledger\n")


# ---- reconcile -------------------------------------------------------------------------------


def write_log(path: Path, events: list, gz: bool = False) -> Path:
    data = b"".join(codec.encode(event) + b"\n" for event in events)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.fixture
def floor_log(tmp_path: Path) -> Path:
    return write_log(tmp_path / "floor.jsonl.gz", floor(["T01", "T02"], 40, one_of_each()), gz=True)


def test_log_lines_reads_plain_and_gzipped_logs_and_reports_progress(tmp_path: Path) -> None:
    events = floor(["T01"], 3, one_of_each())
    for gz in (False, True):
        path = write_log(tmp_path / f"log{gz}.jsonl{'.gz' if gz else ''}", events, gz=gz)
        seen: list[int] = []
        assert [codec.decode(line) for line in log_lines(path, seen.append)] == events
        assert seen[-1] == path.stat().st_size


def test_reconcile_agrees_with_a_ledger_built_from_the_same_events(floor_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    live = recompute(log_lines(floor_log))
    monkeypatch.setattr(settlement_cli, "open_ledger", lambda url, prefix: live.ledger)
    result = CliRunner().invoke(main, ["reconcile", str(floor_log)])
    assert (result.exit_code, result.stdout) == (0, "")
    assert (
        result.stderr.splitlines()[-1]
        == f"shift {SHIFT}: 80 rounds, {len(live.ledger.shift(SHIFT).bets)} bet settlements: the ledger agrees"
    )


def test_reconcile_lists_every_difference_and_fails(floor_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tampered = recompute(log_lines(floor_log))
    state = State(tampered.ledger.backend, ledger.NAMESPACE)
    bet = tampered.ledger.bet("T01", "T01-S1-R2", "T01-S1-R2-B1")
    assert bet is not None
    state.put(state.key(ledger.bet_key("T01", "T01-S1-R2", "T01-S1-R2-B1")), msgspec.structs.replace(bet, net=bet.net + 100))
    state.incr(state.key(ledger.table_key("T02", SHIFT)), "paid_out", 100)
    state.delete(state.key(ledger.round_key("T02", "T02-S1-R5")))
    state.commit()
    monkeypatch.setattr(settlement_cli, "open_ledger", lambda url, prefix: tampered.ledger)

    result = CliRunner().invoke(main, ["reconcile", str(floor_log), "--shift", SHIFT])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert (
        f"table T02 {SHIFT}: paid_out is {tampered.ledger.table('T02', SHIFT).paid_out} in the ledger, "
        f"{tampered.ledger.table('T02', SHIFT).paid_out - 100} from the log" in lines
    )
    assert "round T02/T02-S1-R5: in the log, missing from the ledger" in lines
    assert f"bet T01/T01-S1-R2/T01-S1-R2-B1: net is {bet.net + 100} in the ledger, {bet.net} from the log" in lines
    # The missing round's bets are missing too (the ledger finds bets through their round).
    assert sum(line.startswith("bet T02/T02-S1-R5/") for line in lines) == 5
    assert len(lines) == 3 + 5


def test_reconcile_counts_lines_that_are_not_events_and_refused_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    desk = Desk()
    events = [
        desk.open("R1"),
        desk.bet("R1", "B1", Spot.PLAYER, 100),
        desk.bet("R1", "B1", Spot.PLAYER, 100),
        desk.complete("R1", Outcome.PLAYER),
    ]
    path = write_log(tmp_path / "log.jsonl", events)
    path.write_bytes(path.read_bytes() + b'{"not": "an event"}\n\n')
    result = recompute(log_lines(path))
    assert (result.events, result.invalid, len(result.dead_letters)) == (5, 1, 1)
    assert "already placed" in result.dead_letters[0].reason


def test_differences_read_as_sentences() -> None:
    assert str(Difference("bet T1/R1/B1", "", None, "x")) == "bet T1/R1/B1: in the ledger, not in the log"
    assert str(Difference("table T1 S", "staked", 5, 7)) == "table T1 S: staked is 7 in the ledger, 5 from the log"


def test_compare_sees_entries_only_in_the_ledger(desk: Desk) -> None:
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.PLAYER, 100), desk.complete("R1", Outcome.PLAYER))
    empty = ledger.ShiftLedger(SHIFT, {}, {}, {}, {})
    assert [str(d) for d in compare(empty, desk.ledger.shift(SHIFT))] == [
        f"table T07 {SHIFT}: in the ledger, not in the log",
        f"patron P1 {SHIFT}: in the ledger, not in the log",
        "round T07/R1: in the ledger, not in the log",
        "bet T07/R1/B1: in the ledger, not in the log",
    ]
