"""The incident report's collected context: for each alert, what it needs from the log, gathered
in the replay's one pass, and nothing held beyond the windows unless an alert pinned it."""

from __future__ import annotations

import random

import msgspec
import pytest

from support.scenario import BANKER_NATURAL, BetSpec, Scenario, banker_natural_from, lines, table
from surveil.analysis import incident as inc
from surveil.analysis.incident import IncidentCollector, common_run, correct_play, play_differences, rules_give
from surveil.analysis.replay import ReplayResult, replay
from surveil.core.cards import CARDS
from surveil.core.money import BetResult, Commission, Rounding, Settlement, Spot
from surveil.core.play import Coup, deal
from surveil.core.shoe import shuffled_shoe
from surveil.events import codec
from surveil.events import models as m

PLAYER_DRAWS = ["2H", "3C", "3D", "KS", "4H", "5C"]  # P 2+3=5 draws 4 -> 9; B 3 draws on a 4 -> 8


def collect(events: list[m.Event], profile: str | None = None) -> tuple[IncidentCollector, ReplayResult, list[bytes]]:
    """Replay ``events`` with a collector; also the alerts as encoded the moment they were raised."""
    collector = IncidentCollector("test.jsonl", profile)
    raised: list[bytes] = []

    def on_alert(alert: m.AlertRaised) -> None:
        raised.append(codec.encode(alert))
        collector.alert(alert)

    result = replay(iter(lines(events)), profile=profile, on_event=collector.event, on_alert=on_alert)
    assert not result.bad_lines
    return collector, result, raised


def one(collector: IncidentCollector, rule: str) -> inc.Incident:
    [found] = [i for i in collector.incidents if i.data.rule == rule]
    return found


def banker_draws_on_3_against_an_8(s: Scenario) -> None:
    round_id = s.open_round()
    s.place(round_id, BetSpec("P1", Spot.BANKER, 1000))
    s.place(round_id, BetSpec("P2", Spot.PLAYER, 2000, seat="2"))
    s.close(round_id)
    s.place_hands(round_id, ["2H", "3D", "8H"], ["3C", "KS", "5C"])  # Banker 3 must stand on a Player 8


# ---- a round and what came after its alert ----------------------------------------------------


def test_a_draw_error_keeps_its_round_cards_and_the_settlements_that_came_after() -> None:
    collector, _, _ = collect(table(banker_draws_on_3_against_an_8))
    found = one(collector, "DRAW_BANKER_EXTRA")
    rnd, shoe = found.round, found.shoe
    assert rnd is not None and shoe is not None and rnd.round.completed
    assert rnd.pinned and shoe.pinned
    # the alert is raised when the round completes; its settlements come after it, and are kept
    assert {s.bet_id for _, _, s in rnd.settlements} == set(rnd.round.bets)
    assert len(rnd.round_settled) == 1
    indices = rnd.round.indices()
    assert sorted(indices) == list(range(min(indices), min(indices) + 6))
    assert [shoe.card(c.index) for c in rnd.round.player] == ["2H", "3D", "8H"]
    assert shoe.went(indices[0]) == (inc.PLAYER, rnd.round_id)
    # the correct play from the same cards: the Banker stands on 3 against a Player third card 8
    right = correct_play(rnd, shoe)
    assert right is not None and right.source == "shoe"
    assert [c for _, c in right.player] == ["2H", "3D", "8H"]
    assert [c for _, c in right.banker] == ["3C", "KS"]
    assert (right.coup.result.player_total, right.coup.result.banker_total) == (3, 3)
    banker_third = rnd.round.banker[2]
    differences = play_differences(rnd.round, right)
    assert f"Banker drew the 5C (card {banker_third.index}) but had to stand on 3 (Art. 9(4)(1))." in differences
    assert any(d.startswith("The winner changes: as dealt Banker wins 8-3; by the rules tie at 3") for d in differences)


def test_the_payouts_against_core_money_settle() -> None:
    events = table(banker_draws_on_3_against_an_8)
    position = next(
        i for i, e in enumerate(events) if isinstance(e, m.BetSettled) and e.data.round_id == "T01-S1-R2" and e.data.patron_id == "P1"
    )
    paid = events[position]
    assert (paid.data.net, paid.data.commission) == (950, 50)
    events[position] = msgspec.structs.replace(paid, data=msgspec.structs.replace(paid.data, net=1000, commission=0))
    collector, _, _ = collect(events)
    # the bet's payout, and the round's totals that no longer add up
    assert sorted(i.data.article for i in collector.incidents) == ["Art. 17-18", "Art. 18", "Art. 9(4)(1)"]
    found = next(i for i in collector.incidents if i.data.rule == "PAYOUT_MISMATCH" and i.data.bet_id)
    assert found.data.article == "Art. 18"
    rnd = found.round
    assert rnd is not None and rnd.round.completed
    bet = rnd.round.bets[found.data.bet_id or ""]
    [(_, _, settled)] = [s for s in rnd.settlements if s[2].bet_id == bet.bet_id]
    assert (settled.net, settled.commission) == (1000, 0)
    due = rules_give(bet, rnd.round.declared, False, inc.commission_of(rnd.round.profile))
    assert due == Settlement(BetResult.WIN, 950, 50)
    # had the round been dealt right it was a tie: the Banker bet is carried, not paid
    right = correct_play(rnd, found.shoe)
    assert right is not None
    assert rules_give(bet, right.coup.result, False, (Commission.FIVE_PERCENT, Rounding.DOWN)).result is BetResult.CARRIED


def test_a_profile_override_judges_by_its_commission() -> None:
    events = table(banker_draws_on_3_against_an_8)
    collector, _, _ = collect(events, profile="no-commission")
    page = collector.render()
    assert "no_commission" in page


# ---- only what the alerts need -----------------------------------------------------------------


def short_shoes(count: int, bent_round: tuple[int, int] | None) -> list[m.Event]:
    """``count`` shoes of four legal rounds, each shoe shuffled apart; ``bent_round`` (shoe, round)
    announces a wrong result."""
    rng = random.Random(8)
    s = Scenario()
    for shoe in range(1, count + 1):
        pack = [c.code for c in shuffled_shoe(8, rng)]
        s.start_shoe(burn=pack[:8])  # dicj: one card per deck
        position = 8
        for n in range(1, 5):
            coup = deal([CARDS[c] for c in pack[position : position + 6]])
            declare = {"outcome": "tie" if coup.result.outcome != "tie" else "banker"} if (shoe, n) == bent_round else None
            s.round(pack[position : position + 6], [BetSpec("P1", Spot.PLAYER, 1000)], declare=declare)
            position += coup.cards_used
        s.end_shoe()
    return s.log()


def test_the_windows_are_bounded_and_only_alerts_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inc, "ROUND_WINDOW", 3)
    monkeypatch.setattr(inc, "SHOE_WINDOW", 2)
    clean, _, _ = collect(short_shoes(5, None))
    t = clean.tables["T01"]
    assert clean.incidents == []
    assert len(t.rounds) == 3 and not t.pinned_rounds
    assert list(t.shoes) == ["T01-S4", "T01-S5"] and not t.pinned_shoes
    collector, _, _ = collect(short_shoes(5, (1, 2)))
    t = collector.tables["T01"]
    found = one(collector, "RESULT_MISMATCH")
    assert len(t.rounds) == 3 and list(t.pinned_rounds) == ["T01-S1-R2"]
    assert list(t.shoes) == ["T01-S4", "T01-S5"] and list(t.pinned_shoes) == ["T01-S1"]
    assert found.round is t.pinned_rounds["T01-S1-R2"] and found.shoe is t.pinned_shoes["T01-S1"]
    assert found.round.round_settled, "the round's settlement, after the alert, reached the pinned round"
    assert 'data-round="T01-S1-R2"' in collector.render()


def test_a_card_alert_raised_before_its_round_completes_pins_that_round(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inc, "ROUND_WINDOW", 1)

    def build(s: Scenario) -> None:
        s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.PLAYER, 1000)], face_up=["4H"])
        for _ in range(3):  # more rounds than the window holds
            s.round(BANKER_NATURAL)

    collector, _, _ = collect(table(build))
    found = one(collector, "CARD_EXPOSED")
    assert found.round is None and found.shoe is not None and found.index is not None
    where, round_id = found.shoe.went(found.index)
    assert where == inc.PLAYER and round_id == "T01-S1-R2"
    assert round_id in collector.tables["T01"].pinned_rounds
    assert 'data-round="T01-S1-R2"' in collector.render()


def test_the_evidence_is_kept_as_it_was_when_raised() -> None:
    collector, _, raised = collect(repeated_shoes())
    found = one(collector, "SHOE_REPEAT")
    [encoded] = [codec.decode(b) for b in raised if b"SHOE_REPEAT" in b]
    assert found.evidence == encoded.data.evidence  # type: ignore[attr-defined]


# ---- shoe and pattern alerts ---------------------------------------------------------------------


def repeated_shoes() -> list[m.Event]:
    """Two shoes at a table; cards 101-130 of the first come out again as cards 201-230."""
    rng = random.Random(3)
    s = Scenario()
    first = s.play_shoe(rng)
    second = [c.code for c in shuffled_shoe(8, rng)]
    run = first[100:130]
    rest = list(second)
    for card in run:
        rest.remove(card)
    s.play_shoe(rng, pack=rest[:200] + run + rest[200:])
    return s.log()


def test_a_shoe_repeat_finds_the_earlier_shoe_and_the_whole_run() -> None:
    collector, _, _ = collect(repeated_shoes())
    found = one(collector, "SHOE_REPEAT")
    assert found.shoe is not None and found.earlier_shoe is not None
    assert (found.shoe.shoe_id, found.earlier_shoe.shoe_id) == ("T01-S2", "T01-S1")
    later, earlier = common_run(found.shoe, found.earlier_shoe, found.evidence["run"], found.evidence["index"])
    assert [c for _, c in later] == [c for _, c in earlier]
    assert later[0][0] <= 201 and later[-1][0] >= 230
    assert earlier[0][0] <= 101 and earlier[-1][0] >= 130
    assert later[0][0] - earlier[0][0] == 100


def test_a_burn_count_keeps_the_burned_cards() -> None:
    s = Scenario()
    s.start_shoe(burn=["5S", "9D", "JC", "4S", "QD", "7S", "AC"])  # dicj burns eight from an eight-deck shoe
    s.round(BANKER_NATURAL, [BetSpec("P1", Spot.BANKER, 1000)])
    s.end_shoe()
    collector, _, _ = collect(s.log())
    found = one(collector, "BURN_COUNT")
    assert found.shoe is not None
    assert [found.shoe.card(i) for i in found.shoe.start_burn] == found.evidence["burned"]
    assert all(found.shoe.went(i) == (inc.BURNED, None) for i in found.shoe.start_burn)


def test_a_patrons_record_is_the_charts() -> None:
    def bets(coup: Coup) -> list[BetSpec]:
        outcome = coup.result.outcome.value
        return [BetSpec("CHEAT", Spot(outcome) if outcome != "tie" else Spot.BANKER, 1000)]

    s = Scenario()
    s.play_shoe(random.Random(11), bets)
    collector, _, _ = collect(s.log())
    found = one(collector, "PATRON_WIN_RATE")
    record = found.patron
    assert record is not None
    assert (record.wins, record.decided) == (found.evidence["wins"], found.evidence["decided_bets"])
    assert record.strip == b"W" * min(record.decided, inc.STRIP_LENGTH)
    assert record.by_table == {"T01": record.decided}
    assert found.round is not None and found.evidence["last_bet"] in found.round.round.bets


def test_a_dealers_record_lists_the_rounds_blamed_on_them() -> None:
    s = Scenario(dealer="D9")
    s.start_shoe()
    for n in range(10):
        suit = "SHDC"[n % 4]
        round_id = s.open_round()
        s.close(round_id)
        s.place_hands(round_id, [f"8{suit}", f"K{suit}"], [f"2{suit}", f"3{suit}"], order="PPBB" if n < 6 else None)
    s.end_shoe()
    collector, _, _ = collect(s.log())
    found = one(collector, "DEALER_ERROR_RATE")
    record = found.dealer
    assert record is not None
    blamed = [i for i in collector.incidents if i.data.rule == "DEAL_ORDER" and i.order < found.order]
    assert len(record.error_rounds) == len(blamed) == found.evidence["rounds_with_errors"]
    assert record.rounds >= found.evidence["rounds"]


def test_an_outcome_drift_keeps_the_shoes_outcomes() -> None:
    rng = random.Random(5)
    pack = [c.code for c in shuffled_shoe(8, rng)]
    s = Scenario()
    s.start_shoe()
    for _ in range(40):
        s.round(banker_natural_from(pack))
    s.end_shoe()
    collector, _, _ = collect(s.log())
    found = one(collector, "OUTCOME_DRIFT")
    assert found.shoe is not None and found.drift_shoes == [found.shoe]
    assert found.evidence["observed"] == {"banker": 40, "player": 0, "tie": 0}
    assert found.shoe.outcomes == b"B" * 40


def test_settlements_of_a_round_never_opened_do_not_break_the_page() -> None:
    events = table(banker_draws_on_3_against_an_8)
    stray = next(e for e in events if isinstance(e, m.BetSettled))
    events.append(msgspec.structs.replace(stray, id="stray", data=msgspec.structs.replace(stray.data, round_id="T01-NOWHERE")))
    collector, _, _ = collect(events)
    found = [i for i in collector.incidents if i.data.round_id == "T01-NOWHERE"]
    assert found and found[0].round is None
    assert "is not in the log" in collector.render()
