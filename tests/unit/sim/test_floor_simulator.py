"""The floor simulator: deterministic for a seed; without injections every round legal and every
bet within the rules; outcome frequencies as the exact odds; and each injection produces its label
and exactly the alert it is meant to (replayed through the real detectors)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import timedelta
from functools import cache

import msgspec
import pytest

from surveil.analysis.replay import replay
from surveil.core import money
from surveil.core.cards import CARDS
from surveil.core.findings import AlertCode
from surveil.core.odds import outcome_counts, pair_probability
from surveil.core.play import DealtCard, Outcome, RoundResult, check_play
from surveil.core.profiles import load_profile
from surveil.embedded.record import record
from surveil.events import codec
from surveil.events import models as m
from surveil.sim.floor import Floor
from surveil.sim.injections import INJECTABLE, TIE_CHANGES, InjectionError, Label
from surveil.sim.table import ShoeLine, TableInput, Tamper, Truth


def encoded(actions: Iterator[object]) -> list[bytes]:
    out = []
    for action in actions:
        if isinstance(action, ShoeLine):
            out.append(action.line)
        elif isinstance(action, TableInput):
            out.append(codec.encode(action.event))
        elif isinstance(action, Truth):
            out.append(msgspec.json.encode(action.label))
        else:
            out.append(repr(action).encode())
    return out


def inputs(floor: Floor) -> list[m.Event]:
    return [action.event for action in floor.actions() if isinstance(action, TableInput)]


@cache
def clean_log(profile: str) -> tuple[m.Event, ...]:
    events: list[m.Event] = []
    recording = record(Floor(tables=6, shoes=2, seed=2026, profile=profile), events.append, lambda label: None)
    assert recording.dead_letters == []
    return tuple(events)


# ---- determinism ------------------------------------------------------------------------------


def test_the_same_seed_plays_the_same_floor() -> None:
    floor = Floor(tables=3, shoes=2, seed=5, inject=(AlertCode.LATE_BET, AlertCode.CARD_EXPOSED))
    again = Floor(tables=3, shoes=2, seed=5, inject=(AlertCode.LATE_BET, AlertCode.CARD_EXPOSED))
    assert encoded(floor.actions()) == encoded(again.actions())


def test_another_seed_plays_another_floor() -> None:
    assert encoded(Floor(tables=1, shoes=1, seed=5).actions()) != encoded(Floor(tables=1, shoes=1, seed=6).actions())


def test_a_table_plays_the_same_whatever_the_size_of_the_floor() -> None:
    """Each table has its own random stream, derived from the seed and its id."""
    alone = [a for a in encoded(Floor(tables=1, shoes=1, seed=9).actions())]
    among_others = encoded(a for a in Floor(tables=4, shoes=1, seed=9).actions() if a.table_id == "T001")
    assert alone == among_others


def test_actions_come_in_time_order_with_rounds_about_fifty_seconds_apart() -> None:
    actions = list(Floor(tables=3, shoes=1, seed=4).actions())
    times = [action.time for action in actions]
    assert times == sorted(times)
    opens: dict[str, list] = defaultdict(list)
    for action in actions:
        if isinstance(action, TableInput) and isinstance(action.event, m.RoundOpen) and not action.event.data.demo:
            opens[action.table_id].append(action.time)
    gaps = [(b - a).total_seconds() for times in opens.values() for a, b in zip(times, times[1:])]
    assert 45 <= sum(gaps) / len(gaps) <= 60
    assert max(gaps) < 120


# ---- play without injections is legal -----------------------------------------------------------


@pytest.mark.parametrize("profile", ["dicj", "sjm", "no-commission"])
def test_every_completed_round_passes_check_play(profile: str) -> None:
    completed = [e.data for e in clean_log(profile) if isinstance(e, m.RoundCompleted)]
    assert len(completed) > 800
    for c in completed:
        player = [DealtCard(h.index, CARDS[h.card]) for h in c.player]
        banker = [DealtCard(h.index, CARDS[h.card]) for h in c.banker]
        declared = RoundResult(c.player_total, c.banker_total, c.outcome, c.player_pair, c.banker_pair)
        assert check_play(player, banker, declared) == [], c.round_id


@pytest.mark.parametrize("profile", ["dicj", "sjm", "no-commission"])
def test_every_bet_is_within_the_rules(profile: str) -> None:
    """The minimum and the Banker multiple for every bet, Art. 14 when bets close, changes to
    carried bets as the profile allows (Art. 12), the squeeze by the largest seated bettor."""
    house = load_profile(profile)
    bets: dict[str, dict[str, list]] = {}  # round -> bet -> [seat, spot, amount, patron, withdrawn, carried]
    tied: dict[str, dict[str, list]] = defaultdict(dict)  # table -> the bets of its last round, if a tie
    checked: Counter[str] = Counter()
    for event in clean_log(profile):
        d = event.data  # type: ignore[attr-defined]
        if isinstance(event, m.RoundOpened):
            left = tied[d.table_id]
            bets[d.round_id] = {bet_id: [*left[bet_id][:5], (left[bet_id][1], left[bet_id][2])] for bet_id in d.carried_bet_ids}
        elif isinstance(event, m.BetPlaced):
            bets[d.round_id][d.bet_id] = [d.seat, d.spot, d.amount, d.patron_id, False, None]
            assert house.offers(d.spot)
        elif isinstance(event, m.BetChanged):
            bet = bets[d.round_id][d.bet_id]
            if bet[5] is not None:
                assert money.check_tie_change(bet[5], (d.spot, d.amount), house.after_tie, profile) == []
                checked["tie changes"] += 1
            bet[1], bet[2] = d.spot, d.amount
        elif isinstance(event, m.BetWithdrawn):
            bet = bets[d.round_id][d.bet_id]
            assert bet[5] is None or money.TieMove.WITHDRAW in house.after_tie
            bet[4] = True
        elif isinstance(event, m.BetsClosed):
            active = [bet for bet in bets[d.round_id].values() if not bet[4]]
            for bet in active:
                assert money.check_amount(bet[1], bet[2], house.min_bet) == []
                checked["bets"] += 1
            assert money.check_table_limit(money.spot_totals((b[1], b[2]) for b in active), house.max_bet) == []
        elif isinstance(event, m.RoundCompleted):
            active = [bet for bet in bets[d.round_id].values() if not bet[4]]
            seated = [(bet[3], bet[1], bet[2]) for bet in active if bet[0] != "standing"]
            stakes = money.squeeze_stakes(seated, house.squeeze_holder)
            assert money.check_squeeze(d.squeezed_by, stakes, house.squeeze_allowed) is None
            checked["squeezes"] += d.squeezed_by is not None
            tied[d.table_id] = bets[d.round_id] if d.outcome == Outcome.TIE else {}
    assert checked["bets"] > 3000
    assert checked["squeezes"] > 50 or not house.squeeze_allowed
    assert checked["tie changes"] > 0


@pytest.mark.parametrize("profile", ["dicj", "sjm", "no-commission"])
def test_the_detectors_find_nothing_in_a_clean_floor(profile: str) -> None:
    result = replay(iter([codec.encode(event) for event in clean_log(profile)]))
    assert result.rounds_checked > 800
    assert [(a.data.rule, a.data.summary) for a in result.alerts] == []


def test_the_floor_has_what_a_real_one_has() -> None:
    events = clean_log("dicj")
    starts = {(e.subject, e.data.shoe_id) for e in events if isinstance(e, m.ShoeStarted)}
    cuts = [e.data.index for e in events if isinstance(e, m.CutCardReached)]
    assert len(cuts) == len(starts) == 12
    assert all(416 - 80 <= index <= 416 - 14 for index in cuts)  # Art. 2.1, 14-80 cards behind
    burns = [e.data for e in events if isinstance(e, m.CardsBurned)]
    assert all(b.round_id is None and len(b.indices) == 8 for b in burns)  # dicj: one card per deck
    opened = [e.data for e in events if isinstance(e, m.RoundOpened)]
    assert any(o.demo for o in opened) and sum(o.demo for o in opened) < len(opened) / 20
    dealers = defaultdict(set)
    for o in opened:
        dealers[o.table_id].add(o.dealer_id)
    assert all(len(ids) > 1 for ids in dealers.values())
    placed = [e.data for e in events if isinstance(e, m.BetPlaced)]
    assert {p.seat for p in placed} == {"1", "2", "3", "4", "5", "6", "7", "standing"}
    assert {p.spot for p in placed} == {"player", "banker", "tie", "player_pair", "banker_pair"}
    assert any(o.carried_bet_ids for o in opened)
    places = inputs(Floor(tables=6, shoes=1, seed=2026))
    boxes = {e.subject: e.data.card is not None for e in places if isinstance(e, m.CardPlace)}
    assert set(boxes.values()) == {True, False}  # hand boxes that recognise cards and ones that do not


def test_the_last_round_follows_the_profile() -> None:
    """Art. 3.1: the round in which the cut card comes out is the last (dicj), or one more (sjm)."""
    for profile, after in (("dicj", 0), ("sjm", 1)):
        events = clean_log(profile)
        cut: dict[tuple[str, str], int] = {}
        rounds_after: Counter = Counter()
        for e in events:
            if isinstance(e, m.CutCardReached):
                cut[(e.subject, e.data.shoe_id)] = e.data.index
            elif isinstance(e, m.RoundCompleted):
                key = (e.subject, e.data.shoe_id)
                last = max(h.index for h in (*e.data.player, *e.data.banker))
                if key in cut and last > cut[key]:
                    rounds_after[key] += 1  # the round it came out in, and any after
        assert set(rounds_after.values()) <= {1 + after}
        assert len(rounds_after) == 12


# ---- outcome frequencies ------------------------------------------------------------------------


def test_outcome_and_pair_frequencies_match_the_exact_odds_within_four_standard_errors() -> None:
    """Banker, Player and Tie against the exact figures of docs/rules.md (core.odds.outcome_counts(8)), and
    each pair against 31/415, over ~13,000 rounds. Rounds of one shoe are not quite independent,
    but the dependence is far too small to matter at four standard errors (a false failure about
    once in 16,000 runs per proportion)."""
    results = [e.data for e in inputs(Floor(tables=12, shoes=15, seed=77)) if isinstance(e, m.Result)]
    n = len(results)
    assert n > 12_000
    counts = outcome_counts(8)
    observed = Counter(r.outcome for r in results)
    expected = {outcome: float(counts.probability(outcome)) for outcome in Outcome}
    expected_pair = float(pair_probability(8))
    shares = {
        **{outcome: (observed[outcome] / n, p) for outcome, p in expected.items()},
        "player_pair": (sum(r.player_pair for r in results) / n, expected_pair),
        "banker_pair": (sum(r.banker_pair for r in results) / n, expected_pair),
    }
    for name, (share, p) in shares.items():
        standard_error = math.sqrt(p * (1 - p) / n)
        assert abs(share - p) <= 4 * standard_error, f"{name}: {share:.4f} vs {p:.4f} (n={n}, se={standard_error:.4f})"


# ---- injections ---------------------------------------------------------------------------------


def injected(code: AlertCode, seed: int = 3) -> tuple[list[Label], list[m.AlertRaised], Floor]:
    profile = "sjm" if code in TIE_CHANGES else "dicj"
    shoes = 2 if code is AlertCode.SHOE_REPEAT else 1
    floor = Floor(tables=1, shoes=shoes, seed=seed, profile=profile, inject=(code,))
    events: list[m.Event] = []
    labels: list[Label] = []
    recording = record(floor, events.append, labels.append)
    assert recording.dead_letters == []
    return labels, replay(iter([codec.encode(e) for e in events])).alerts, floor


@pytest.mark.parametrize("code", INJECTABLE)
def test_an_injection_is_labelled_and_raises_its_alert_and_nothing_else(code: AlertCode) -> None:
    labels, alerts, floor = injected(code)
    assert floor.unapplied() == []
    assert code in {label.code for label in labels}
    assert sum(label.code == code for label in labels) == 1
    # Only what was labelled is found (an error-prone dealer's errors are labelled one by one).
    assert {a.data.rule for a in alerts} == {label.code for label in labels}
    # Every alert is explained by a label, and every label by an alert.
    for alert in alerts:
        assert any(explains(label, alert.data) for label in labels), alert.data
    for label in labels:
        assert any(explains(label, alert.data) for alert in alerts), label


def explains(label: Label, alert: m.AlertRaisedData) -> bool:
    """Same code, and where the alert names a round or shoe, the labelled one (alerts about a card
    name only its shoe; patron and dealer alerts are floor-wide; a shoe's label names no round)."""
    if alert.rule != label.code or alert.shoe_id not in (None, label.shoe_id):
        return False
    return alert.round_id is None or label.round_id is None or alert.round_id == label.round_id


def test_injections_go_to_the_tables_in_turn_and_are_labelled_where_they_happened() -> None:
    codes = (AlertCode.BURN_COUNT, AlertCode.CARD_EXPOSED, AlertCode.LATE_BET, AlertCode.RESULT_MISMATCH)
    labels = [a.label for a in Floor(tables=2, shoes=1, seed=8, inject=codes).actions() if isinstance(a, Truth)]
    by_table = {(label.table_id, label.code) for label in labels}
    assert by_table == {("T001", "LATE_BET"), ("T002", "CARD_EXPOSED"), ("T001", "BURN_COUNT"), ("T002", "RESULT_MISMATCH")}
    for label in labels:
        assert label.description.endswith(".")
        if label.round_id is not None:
            assert label.round_id.startswith(f"{label.table_id}:{label.shoe_id}:")


def test_settlement_injections_are_orders_for_the_recorder() -> None:
    actions = list(Floor(tables=1, shoes=1, seed=3, inject=(AlertCode.PAYOUT_MISMATCH,)).actions())
    (tamper,) = [a for a in actions if isinstance(a, Tamper)]
    (label,) = [a.label for a in actions if isinstance(a, Truth)]
    assert (tamper.code, tamper.round_id, tamper.bet_id) == (AlertCode.PAYOUT_MISMATCH, label.round_id, label.bet_id)


def test_an_injection_the_run_has_no_room_for_is_reported_unapplied() -> None:
    floor = Floor(tables=1, shoes=1, seed=3, inject=(AlertCode.PATRON_WIN_RATE, AlertCode.OUTCOME_DRIFT))
    for _ in floor.actions():
        pass
    assert floor.unapplied() == [("T001", AlertCode.OUTCOME_DRIFT)]


@pytest.mark.parametrize(
    ("profile", "shoes", "code", "message"),
    [
        (
            "dicj",
            1,
            AlertCode.TIE_BET_WITHDRAWN,
            "TIE_BET_WITHDRAWN: the dicj profile allows that after a tie; use a profile that forbids it (e.g. --profile sjm)",
        ),
        ("dicj", 1, AlertCode.SHOE_REPEAT, "SHOE_REPEAT repeats an earlier shoe at the table: it needs at least 2 shoes"),
    ],
)
def test_injections_the_run_cannot_show_are_refused_up_front(profile: str, shoes: int, code: AlertCode, message: str) -> None:
    with pytest.raises(InjectionError) as caught:
        Floor(tables=1, shoes=shoes, profile=profile, inject=(code,))
    assert str(caught.value) == message


def test_clock_starts_at_the_fixed_start() -> None:
    from surveil.sim.table import START

    first = next(iter(Floor(tables=1, shoes=1, seed=1).actions()))
    assert START <= first.time < START + timedelta(seconds=60)
