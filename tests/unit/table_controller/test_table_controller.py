"""The table-controller's state machine, case by case (docs/table-inputs.md), and the property
that what it publishes does not depend on how the shoe and input topics interleave."""

from __future__ import annotations

import random
from typing import Any

import pytest
from controller_harness import SHOE, TABLE, Table, data, types

from surveil.events import codec
from surveil.events import models as m
from surveil.events.shoe_protocol import parse_line
from surveil.sim.floor import Floor
from surveil.sim.table import ShoeLine, TableInput

PLAYER_WINS = {"player_total": 9, "banker_total": 7, "outcome": "player", "player_pair": False, "banker_pair": False}
TIE = {"player_total": 7, "banker_total": 7, "outcome": "tie", "player_pair": False, "banker_pair": False}
# Player 2S 3H (5) draws 4D: 9; Banker KD 7C: 7 stands. The box saw every card.
ROUND_CARDS = (("player", 1, "2S"), ("banker", 2, "KD"), ("player", 3, "3H"), ("banker", 4, "7C"), ("player", 5, "4D"))
ROUND_ID = f"{TABLE}:{SHOE}:1"


@pytest.fixture
def table() -> Table:
    return Table()


def open_round(table: Table, **data: Any) -> m.Event:
    (opened,) = table.do("open", **data)
    return opened


def bet(table: Table, bet_id: str, spot: str = "player", amount: int = 1000, patron: str = "P1", seat: str = "1") -> list[m.Event]:
    return table.do("place", bet_id=bet_id, patron_id=patron, seat=seat, spot=spot, amount=amount)


# ---- opening and betting ------------------------------------------------------------------------


def test_the_tables_seats_and_a_bets_layout_box_are_carried_through(table: Table) -> None:
    """Art. 1, 15: round.opened says how many seats the table has (seven or more), bet.placed the
    box the chips lie in, for the detectors to judge."""
    opened = open_round(table, seats=9)
    assert data(opened).seats == 9
    (placed,) = table.do("place", bet_id="B1", patron_id="P8", seat="standing", spot="banker", amount=1000, box="9")
    assert (data(placed).seat, data(placed).box) == ("standing", "9")
    (seated,) = table.do("place", bet_id="B2", patron_id="P9", seat="9", spot="player", amount=1000, box="9")
    assert data(seated).box == "9"
    assert table.rejects(table.input("place", bet_id="B3", patron_id="P1", seat="10", spot="player", amount=1000)) == (
        "bet.place: bet B3 names seat 10; the table has 9 seats"
    )
    assert table.rejects(table.input("place", bet_id="B4", patron_id="P1", seat="standing", spot="player", amount=1000, box="12")) == (
        "bet.place: bet B4 names box 12; the table has 9 seats"
    )


def test_inputs_without_seats_or_box_give_events_without_them(table: Table) -> None:
    opened = open_round(table)
    (placed,) = bet(table, "B1", seat="12")  # a table that does not say its seats takes any seat
    assert (data(opened).seats, data(placed).box) == (None, None)
    assert b'"box"' not in codec.encode(placed) and b'"seats"' not in codec.encode(opened)


def test_round_open_publishes_round_opened_with_an_id_from_table_shoe_and_number(table: Table) -> None:
    opened = open_round(table)
    assert isinstance(opened, m.RoundOpened)
    assert opened.id == f"{ROUND_ID}/opened"
    assert opened.source == "table-controller"
    assert opened.subject == TABLE
    assert data(opened) == m.RoundOpenedData(
        table_id=TABLE,
        shoe_id=SHOE,
        round_id=ROUND_ID,
        round_no=1,
        dealer_id="D1",
        profile="dicj",
        demo=False,
        min_bet=500,
        max_bet=200000,
        currency="HKD",
        carried_bet_ids=[],
    )


def test_bets_are_placed_changed_and_withdrawn_with_ids_from_their_inputs(table: Table) -> None:
    open_round(table)
    place = table.input("place", bet_id="B1", patron_id="P1", seat="3", spot="banker", amount=1000)
    (placed,) = table.feed(place)
    assert placed.id == f"{place.id}/placed"
    assert data(placed) == m.BetPlacedData(
        table_id=TABLE, round_id=ROUND_ID, bet_id="B1", patron_id="P1", seat="3", spot="banker", amount=1000
    )
    assert placed.time == place.time
    (changed,) = table.do("change", bet_id="B1", spot="player", amount=1500)
    assert data(changed) == m.BetChangedData(table_id=TABLE, round_id=ROUND_ID, bet_id="B1", spot="player", amount=1500)
    (withdrawn,) = table.do("withdraw", bet_id="B1")
    assert data(withdrawn) == m.BetWithdrawnData(table_id=TABLE, round_id=ROUND_ID, bet_id="B1")


def test_bets_close_once(table: Table) -> None:
    open_round(table)
    (closed,) = table.do("close")
    assert closed.id == f"{ROUND_ID}/closed"
    assert data(closed) == m.BetsClosedData(table_id=TABLE, round_id=ROUND_ID)
    assert table.rejects(table.input("close")) == f"bets.close: bets on round {ROUND_ID} are already closed"


def test_a_late_bet_is_recorded_not_refused(table: Table) -> None:
    """Judging a bet after bets closed is the detectors' job: the controller records it."""
    open_round(table)
    table.do("close")
    assert types(bet(table, "B9")) == ["baccarat.bet.placed"]
    assert types(table.do("change", bet_id="B9", spot="banker", amount=500)) == ["baccarat.bet.changed"]


def test_round_numbers_count_within_a_shoe_and_restart_with_the_next(table: Table) -> None:
    for expected in (1, 2):
        assert data(open_round(table)).round_no == expected
        table.do("void", reason="test")
    opened = open_round(table, shoe_id="S2")
    assert (data(opened).round_no, data(opened).round_id) == (1, f"{TABLE}:S2:1")


def test_a_demonstration_round_is_opened_as_such(table: Table) -> None:
    assert data(open_round(table, demo=True)).demo is True


# ---- cards and the result ---------------------------------------------------------------------


def test_result_completes_the_round_with_the_hands_as_placed(table: Table) -> None:
    open_round(table)
    table.do("close")
    table.do("squeeze", patron_id="P4")
    (completed,) = table.play(*ROUND_CARDS, outcome=PLAYER_WINS)
    assert completed.id == f"{ROUND_ID}/completed"
    assert data(completed) == m.RoundCompletedData(
        table_id=TABLE,
        shoe_id=SHOE,
        round_id=ROUND_ID,
        player=[m.HandCard(1, "2S"), m.HandCard(3, "3H"), m.HandCard(5, "4D")],
        banker=[m.HandCard(2, "KD"), m.HandCard(4, "7C")],
        player_total=9,
        banker_total=7,
        outcome="player",
        player_pair=False,
        banker_pair=False,
        squeezed_by="P4",
    )


def test_a_card_the_box_did_not_recognise_is_the_shoes_read(table: Table) -> None:
    for index, (_, _, card) in enumerate(ROUND_CARDS, start=1):
        table.feed(table.read(index, card))  # type: ignore[arg-type]
    open_round(table)
    (completed,) = table.play(*[(hand, index, None) for hand, index, _ in ROUND_CARDS], outcome=PLAYER_WINS)
    assert [c.card for c in data(completed).player] == ["2S", "3H", "4D"]
    assert [c.card for c in data(completed).banker] == ["KD", "7C"]


def test_the_box_card_is_recorded_even_when_the_shoe_read_another(table: Table) -> None:
    """A switched card: the hand shows what the box saw; the detectors compare it with the read."""
    table.feed(table.read(1, "2S"))
    open_round(table)
    (completed,) = table.play(("player", 1, "9S"), ("banker", 2, "KD"), ("player", 3, "3H"), ("banker", 4, "7C"))
    assert data(completed).player[0] == m.HandCard(1, "9S")


def test_a_wrong_result_and_a_wrong_draw_are_recorded_as_announced(table: Table) -> None:
    open_round(table)
    wrong = {"player_total": 3, "banker_total": 8, "outcome": "banker", "player_pair": True, "banker_pair": False}
    extra = (*ROUND_CARDS, ("banker", 6, "2C"), ("banker", 7, "5C"))
    (completed,) = table.play(*extra, outcome=wrong)
    assert (data(completed).player_total, data(completed).outcome, data(completed).player_pair) == (3, "banker", True)
    assert len(data(completed).banker) == 4


def test_the_result_waits_for_a_read_the_shoe_has_not_sent_and_holds_what_follows(table: Table) -> None:
    for index in (1, 2, 3):
        table.feed(table.read(index, ROUND_CARDS[index - 1][2]))  # type: ignore[arg-type]
    open_round(table)
    bet(table, "B1")
    assert table.play(*[(hand, index, None) for hand, index, _ in ROUND_CARDS], outcome=PLAYER_WINS) == []
    # The next round goes on meanwhile; its events wait behind the first round's completion.
    assert table.do("open") == []
    assert bet(table, "B2") == []
    assert table.feed(table.read(4, "7C")) == []  # card 5 still unread
    released = table.feed(table.read(5, "4D"))
    assert types(released) == ["baccarat.round.completed", "baccarat.round.opened", "baccarat.bet.placed"]
    assert data(released[0]).player[-1] == m.HandCard(5, "4D")
    assert data(released[1]).round_no == 2
    assert table.feed(table.read(6, "QS")) == []


def test_rounds_waiting_one_behind_another_are_released_in_order(table: Table) -> None:
    open_round(table)
    table.play(("player", 1, None), ("banker", 2, "KD"), ("player", 3, "3H"), ("banker", 4, "7C"))
    assert table.do("open") == []
    assert table.play(("player", 5, "2D"), ("banker", 6, None), ("player", 7, "3D"), ("banker", 8, "7D")) == []
    assert table.feed(table.read(6, "KS")) == []  # the second round's card: the first still waits
    released = table.feed(table.read(1, "2S"))
    assert types(released) == ["baccarat.round.completed", "baccarat.round.opened", "baccarat.round.completed"]
    assert [data(e).round_id for e in released] == [ROUND_ID, f"{TABLE}:{SHOE}:2", f"{TABLE}:{SHOE}:2"]


def test_a_round_whose_card_the_shoe_never_read_is_voided_when_the_shoe_ends(table: Table) -> None:
    table.feed(table.started())
    open_round(table)
    bet(table, "B1")
    table.play(("player", 1, "2S"), ("banker", 2, "KD"), ("player", 3, None), ("banker", 4, "7C"), outcome=TIE)
    assert table.do("open") == []  # held behind the waiting round
    released = table.feed(table.ended(cards_out=4))
    assert types(released) == ["baccarat.cards.burned", "baccarat.round.voided", "baccarat.round.opened"]
    burned, voided, opened = released
    assert data(burned) == m.CardsBurnedData(table_id=TABLE, shoe_id=SHOE, round_id=ROUND_ID, indices=[1, 2, 3, 4])
    assert data(voided).reason == f"shoe {SHOE} ended without reading card 3 (player), which the hand box did not recognise"
    assert data(voided).player == [m.PlacedCard(1, "2S"), m.PlacedCard(3, None)]  # the hands as dealt, for the detectors
    assert (voided.id, voided.time) == (f"{ROUND_ID}/voided", table.clock.replace(second=table.clock.second - 2))
    assert data(opened).carried_bet_ids == ["B1"]  # the tie was announced and the table played on


def test_a_round_voided_at_the_shoes_end_before_anything_followed_carries_nothing(table: Table) -> None:
    open_round(table)
    bet(table, "B1")
    table.play(("player", 1, None), ("banker", 2, "KD"), ("player", 3, "3H"), ("banker", 4, "7C"), outcome=TIE)
    assert types(table.feed(table.ended(cards_out=4))) == ["baccarat.cards.burned", "baccarat.round.voided"]
    assert data(open_round(table)).carried_bet_ids == []


def test_a_result_after_the_shoe_ended_without_the_read_voids_at_once(table: Table) -> None:
    table.feed(table.ended(cards_out=0))
    open_round(table)
    assert types(table.play(("player", 1, None), ("banker", 2, "KD"))) == ["baccarat.cards.burned", "baccarat.round.voided"]


# ---- burns, voids, ties -------------------------------------------------------------------------


def test_the_burn_at_a_shoes_start_is_published_in_the_next_rounds_shoe(table: Table) -> None:
    burn = table.input("burn", indices=[1, 2, 3])
    assert table.feed(burn) == []
    burned, opened = table.do("open", shoe_id="S7")
    assert burned.id == f"{burn.id}/burned"
    assert burned.time == burn.time
    assert data(burned) == m.CardsBurnedData(table_id=TABLE, shoe_id="S7", round_id=None, indices=[1, 2, 3])
    assert isinstance(opened, m.RoundOpened)


def test_a_burn_during_a_round_belongs_to_the_round(table: Table) -> None:
    open_round(table)
    (burned,) = table.do("burn", indices=[9])
    assert data(burned) == m.CardsBurnedData(table_id=TABLE, shoe_id=SHOE, round_id=ROUND_ID, indices=[9])


def test_a_void_burns_the_placed_cards_and_ends_the_round(table: Table) -> None:
    open_round(table)
    table.do("card", hand="player", index=1, card="2S")
    table.do("card", hand="banker", index=2, card="KD")
    burned, voided = table.do("void", reason="misdeal that could not be corrected (Art. 10)")
    assert (burned.id, data(burned).indices, data(burned).round_id) == (f"{ROUND_ID}/burned", [1, 2], ROUND_ID)
    assert data(voided) == m.RoundVoidedData(
        table_id=TABLE,
        round_id=ROUND_ID,
        reason="misdeal that could not be corrected (Art. 10)",
        player=[m.PlacedCard(1, "2S")],
        banker=[m.PlacedCard(2, "KD")],
    )
    assert table.rejects(table.input("close")) == f"bets.close: no round is in progress at table {TABLE}"


def test_a_void_before_any_card_only_voids(table: Table) -> None:
    open_round(table)
    (voided,) = table.do("void", reason="table closed")
    assert (data(voided).player, data(voided).banker) == ([], [])  # none dealt, said so


def test_a_tie_carries_the_player_and_banker_bets_into_the_next_round(table: Table) -> None:
    open_round(table)
    bet(table, "B1", "player")
    bet(table, "B2", "banker")
    bet(table, "B3", "tie")
    bet(table, "B4", "player_pair")
    bet(table, "B5", "banker")
    table.do("withdraw", bet_id="B5")
    table.play(*ROUND_CARDS[:4], outcome=TIE)
    opened = open_round(table)
    assert data(opened).carried_bet_ids == ["B1", "B2"]
    # The carried bets are on the new round: they can be changed (Art. 12) but not placed again.
    assert types(table.do("change", bet_id="B1", spot="banker", amount=1000)) == ["baccarat.bet.changed"]
    assert table.rejects(table.input("place", bet_id="B2", patron_id="P1", seat="1", spot="banker", amount=500)) == (
        f"bet.place: bet B2 is already on round {TABLE}:{SHOE}:2"
    )
    assert table.rejects(table.input("change", bet_id="B3", spot="tie", amount=500)) == f"bet.change: no bet B3 on round {TABLE}:{SHOE}:2"


def test_bets_are_carried_only_once(table: Table) -> None:
    open_round(table)
    bet(table, "B1")
    table.play(*ROUND_CARDS[:4], outcome=TIE)
    open_round(table)
    table.play(*ROUND_CARDS[:4], outcome=PLAYER_WINS)
    assert data(open_round(table)).carried_bet_ids == []


def test_a_void_returns_the_bets_instead_of_carrying_them(table: Table) -> None:
    open_round(table)
    bet(table, "B1")
    table.play(*ROUND_CARDS[:4], outcome=TIE)
    open_round(table)
    table.do("void", reason="table closed")
    assert data(open_round(table)).carried_bet_ids == []


# ---- input that cannot describe a table ---------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "fields", "reason"),
    [
        (
            "place",
            {"bet_id": "B1", "patron_id": "P1", "seat": "1", "spot": "player", "amount": 500},
            "bet.place: no round is in progress at table T01",
        ),
        ("change", {"bet_id": "B1", "spot": "player", "amount": 500}, "bet.change: no round is in progress at table T01"),
        ("withdraw", {"bet_id": "B1"}, "bet.withdraw: no round is in progress at table T01"),
        ("close", {}, "bets.close: no round is in progress at table T01"),
        ("card", {"hand": "player", "index": 1, "card": None}, "card.place: no round is in progress at table T01"),
        ("squeeze", {"patron_id": "P1"}, "squeeze: no round is in progress at table T01"),
        ("result", PLAYER_WINS, "result: no round is in progress at table T01"),
        ("void", {"reason": "x"}, "round.void: no round is in progress at table T01"),
        ("burn", {"indices": []}, "cards.burn names no card"),
        ("open", {"profile": "casino-royale"}, "round.open: no house profile 'casino-royale'; known: dicj, no-commission, sjm"),
    ],
)
def test_input_with_no_round_in_progress_is_rejected(table: Table, kind: str, fields: dict[str, Any], reason: str) -> None:
    assert table.rejects(table.input(kind, **fields)) == reason


@pytest.mark.parametrize(
    ("kind", "fields", "reason"),
    [
        ("open", {}, f"round.open while round {ROUND_ID} is in progress (announce its result or void it first)"),
        (
            "place",
            {"bet_id": "B1", "patron_id": "P2", "seat": "2", "spot": "tie", "amount": 500},
            f"bet.place: bet B1 is already on round {ROUND_ID}",
        ),
        ("place", {"bet_id": "B2", "patron_id": "P2", "seat": "2", "spot": "tie", "amount": 0}, "bet B2: a stake of 0 is no bet"),
        ("change", {"bet_id": "B1", "spot": "player", "amount": 0}, "bet B1: a stake of 0 is no bet"),
        ("change", {"bet_id": "B7", "spot": "player", "amount": 500}, f"bet.change: no bet B7 on round {ROUND_ID}"),
        ("change", {"bet_id": "B0", "spot": "player", "amount": 500}, f"bet.change: bet B0 on round {ROUND_ID} was withdrawn"),
        ("withdraw", {"bet_id": "B0"}, f"bet.withdraw: bet B0 on round {ROUND_ID} was withdrawn"),
        ("card", {"hand": "banker", "index": 1, "card": "AS"}, f"card.place: card 1 of the shoe is already in a hand of round {ROUND_ID}"),
    ],
)
def test_input_that_contradicts_the_round_is_rejected(table: Table, kind: str, fields: dict[str, Any], reason: str) -> None:
    open_round(table)
    bet(table, "B1")
    bet(table, "B0")
    table.do("withdraw", bet_id="B0")
    table.do("card", hand="player", index=1, card="2S")
    assert table.rejects(table.input(kind, **fields)) == reason


def test_an_input_delivered_twice_is_rejected_and_changes_nothing(table: Table) -> None:
    open_round(table)
    place = table.input("place", bet_id="B1", patron_id="P1", seat="1", spot="player", amount=500)
    table.feed(place)
    assert table.rejects(place) == f"input {place.id} was already taken: a duplicate"
    close = table.input("close")
    table.feed(close)
    assert table.rejects(close) == f"input {close.id} was already taken: a duplicate"


def test_an_event_whose_subject_is_not_its_table_is_rejected(table: Table) -> None:
    event = table.input("open")
    import msgspec

    assert table.rejects(msgspec.structs.replace(event, subject="T99")) == f"event {event.id}: subject T99 is not its table {TABLE}"


def test_a_read_that_contradicts_an_earlier_read_is_rejected(table: Table) -> None:
    table.feed(table.read(1, "2S"))
    assert table.feed(table.read(1, "2S")) == []  # the same read again changes nothing
    assert table.rejects(table.read(1, "3S")) == f"card.read: shoe {SHOE} read card 1 as 2S before, now as 3S"


def test_a_rejected_input_changes_nothing(table: Table) -> None:
    open_round(table)
    table.rejects(table.input("place", bet_id="B1", patron_id="P1", seat="1", spot="player", amount=0))
    assert types(bet(table, "B1")) == ["baccarat.bet.placed"]


def test_the_state_survives_a_fresh_controller_on_the_same_backend(table: Table) -> None:
    """Everything lives in ``State``: a restarted controller goes on where the last one stopped."""
    open_round(table)
    bet(table, "B1")
    restarted = Table()
    restarted.backend = table.backend
    restarted.state = type(table.state)(table.backend, table.state.namespace)
    restarted.clock = table.clock
    again = restarted.input("place", "T01:in:fresh", bet_id="B1", patron_id="P1", seat="1", spot="player", amount=500)
    assert restarted.rejects(again) == f"bet.place: bet B1 is already on round {ROUND_ID}"


def test_a_batch_reads_the_state_it_needs_in_one_round_trip() -> None:
    """The Kafka runner calls ``prefetch`` with a batch; the tables' states and the shoes' reads
    then come from one ``read_many`` instead of one read per event."""
    events = interleave(*table_streams(tables=3, shoes=1, seed=1), random.Random(1), 0.5)
    warm = Table()
    for event in events[:400]:
        warm.feed(event)

    class Counting(type(warm.backend)):  # type: ignore[misc]
        reads: list[str] = []

        def read(self, key: str) -> bytes | None:
            Counting.reads.append(key)
            return super().read(key)

    backend = Counting()
    backend.data, backend.hashes = warm.backend.data, warm.backend.hashes
    state = type(warm.state)(backend, warm.state.namespace)
    batch = events[400:800]
    assert {type(event) for event in batch} >= {m.CardRead, m.CardPlace, m.BetPlace, m.RoundOpen, m.Result}
    warm.controller.prefetch(batch, state)
    for event in batch:
        warm.controller.process(event, state)
    # Only a result whose shoe had no read in the batch looks that shoe up on its own.
    assert not [key for key in Counting.reads if ":table:" in key]
    assert len(Counting.reads) <= sum(isinstance(event, m.Result) for event in batch)


# ---- the topics' interleaving does not matter ---------------------------------------------------


def table_streams(tables: int, shoes: int, seed: int) -> tuple[list[m.Event], list[m.Event]]:
    """The shoe events and the inputs of a simulated floor, each in its own topic's order."""
    shoe_events, inputs = [], []
    for action in Floor(tables, shoes, seed).actions():
        if isinstance(action, ShoeLine):
            shoe_events.append(parse_line(action.line, action.time).event)
        elif isinstance(action, TableInput):
            inputs.append(action.event)
    return shoe_events, inputs


def run_controller(events: list[m.Event]) -> dict[str, list[m.Event]]:
    """What the controller publishes for ``events``, per table (a table's events keep their order
    on its partition; different tables' events have no order between them)."""
    table = Table()
    published: dict[str, list[m.Event]] = {}
    for event in events:
        for output in table.feed(event):
            published.setdefault(output.subject, []).append(output)
    return published


def interleave(first: list[m.Event], second: list[m.Event], rng: random.Random, lag: float) -> list[m.Event]:
    """Both lists merged, each in its own order, the first lagging behind by about ``lag``."""
    merged, i, j = [], 0, 0
    while i < len(first) or j < len(second):
        if j == len(second) or (i < len(first) and rng.random() > lag):
            merged.append(first[i])
            i += 1
        else:
            merged.append(second[j])
            j += 1
    return merged


@pytest.mark.parametrize("seed", range(4))
def test_the_table_events_do_not_depend_on_how_shoe_and_inputs_interleave(seed: int) -> None:
    shoe_events, inputs = table_streams(tables=2, shoes=2, seed=seed)
    in_time_order = run_controller(interleave(shoe_events, inputs, random.Random(seed), 0.5))
    rng = random.Random(1000 + seed)
    for lag in (0.1, 0.9):  # the shoe far behind, far ahead
        assert run_controller(interleave(shoe_events, inputs, rng, lag)) == in_time_order
    assert not any(isinstance(e, m.RoundVoided) for events in in_time_order.values() for e in events)


def test_a_shoe_reader_down_for_a_whole_shoe_delays_the_table_events_but_changes_none() -> None:
    shoe_events, inputs = table_streams(tables=2, shoes=1, seed=4)
    assert any(isinstance(e, m.CardPlace) and e.data.card is None for e in inputs)  # cards the shoe must supply
    assert run_controller(inputs + shoe_events) == run_controller(shoe_events + inputs)
