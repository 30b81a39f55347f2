"""The incident page: what the collector holds (``incident.IncidentCollector``) laid out by Jinja2
templates (``analysis/templates/``) with one stylesheet (``analysis/static/incident.css``).

One rendering for the two readers: ``surveil replay --report`` writes the whole report (every
alert, the stylesheet inlined, so the file stands alone), and the console shows one alert at a
time with the same templates and stylesheet (``incident_view``). The Python here only decides
*what* to show (which cards, which rows are bad, what the rules give); the templates say how.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from importlib.resources import files
from pathlib import Path
from typing import Any

from jinja2 import BaseLoader, Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from ..core import money
from ..core.cards import CARDS
from ..core.findings import AlertCode
from ..core.money import BetResult, Commission, Rounding, Settlement, Spot
from ..core.play import Outcome, RoundResult
from ..core.procedure import CUT_CARD_MIN_BEHIND
from ..core.shoe import CARDS_PER_DECK
from ..core.table import Round
from ..detect import patterns
from ..events import models
from . import articles
from .incident import (
    BANKER,
    BURNED,
    PLAYER,
    SEVERITY_ORDER,
    CorrectPlay,
    Incident,
    IncidentCollector,
    RoundTrail,
    ShoeTrail,
    card_text,
    cards_result,
    commission_of,
    common_run,
    correct_play,
    play_differences,
    rules_give,
)
from .incident import (
    _ordinal as ordinal,
)
from .replay import ReplayResult
from .report import stake_of

MACAU = timezone(timedelta(hours=8), "Macau")


# ---- text, for the templates' filters ----------------------------------------------------------


def money_text(amount: int) -> str:
    return f"{amount:,}"


def signed(amount: int) -> str:
    return f"{amount:+,}" if amount else "0"


def time_text(time: datetime | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC") if time else "—"


def macau_text(time: datetime | None) -> str:
    """The same instant on Macau's clock (UTC+8), as the floor reads it."""
    return time.astimezone(MACAU).strftime("%Y-%m-%d %H:%M:%S Macau") if time else "—"


def clock_text(time: datetime | None) -> str:
    """The time of day; with milliseconds when it has them (a late bet and the close may share a second)."""
    if time is None:
        return "—"
    return time.strftime("%H:%M:%S") + (f".{time.microsecond // 1000:03d}" if time.microsecond else "")


def settlement_text(s: Settlement | None) -> str:
    if s is None:
        return "—"
    if s.result is BetResult.CARRIED:
        return "carried (Art. 12)"
    if s.result is BetResult.PUSH:
        return "push (stake back)"
    text = f"{s.result} {signed(s.net)}"
    return text + (f" (comm. {money_text(s.commission)})" if s.commission else "")


def percent(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, (int, float)) else "?"


def number_text(value: Any) -> str:
    """An evidence number as the report writes it."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-3 else f"{value:g}"
    return str(value)


def is_card(value: Any) -> bool:
    return isinstance(value, str) and value in CARDS


def outcome_words(result: RoundResult) -> tuple[str, list[str]]:
    """The outcome, and the pairs, for a row whose totals stand beside it."""
    pairs = [name for name, yes in (("Player pair", result.player_pair), ("Banker pair", result.banker_pair)) if yes]
    outcome = "Tie" if result.outcome is Outcome.TIE else f"{result.outcome.value.capitalize()} wins"
    return outcome, pairs


@dataclass(frozen=True, slots=True)
class Word:
    """A word of a sentence: a card code shown as a card (``code``, a ``rest`` such as ``(68)``)."""

    text: str
    code: str = ""
    rest: str = ""
    tail: str = ""


def words(sentence: str) -> list[Word]:
    """``sentence`` split into words, the card codes in it (``the 7D``, ``7D(68)``) marked."""
    out = []
    for word in sentence.split(" "):
        core = word.rstrip(".,;:)")
        tail = word[len(core) :]
        code, _, rest = core.partition("(")
        out.append(Word(word, code, f"({rest}" if rest else "", tail) if code in CARDS else Word(word))
    return out


def shoes_back(back: Any) -> str:
    if back == 1:
        return "the shoe before"
    return f"{back} shoes before" if isinstance(back, int) else "an earlier shoe"


def short_round(round_id: str | None) -> str:
    return round_id.rsplit(":", 1)[-1].rsplit("-", 1)[-1] if round_id else ""


def round_label(i: Incident) -> str:
    if i.round is not None:
        return f"round {i.round.round.round_no}"
    return i.data.round_id or ""


# ---- the views: what each part of an alert shows ---------------------------------------------


@dataclass(slots=True)
class CardRow:
    index: int
    card: str | None  # what the shoe read (else the hand's card)
    face_up: bool
    went: str  # hand | burned | later | burned-later | none | unread
    hand: str = ""  # Player / Banker (went == hand or later)
    position: int = 0
    mismatch: bool = False  # the hand shows another card than the shoe read
    shown: str = ""
    read: str | None = None
    other_round: str = ""
    by_rules: str = ""
    classes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class HandRow:
    key: str  # dealt | declared | rules
    label: str
    player: list[str]
    banker: list[str]
    result: RoundResult
    bad: bool = False


@dataclass(slots=True)
class Paid:
    settlement: Settlement
    again: bool
    other: tuple[str, int] | None  # the spot and amount it was settled on, when not the bet's


@dataclass(slots=True)
class BetRow:
    bet_id: str
    patron_id: str
    seat: str
    spot: str
    amount: int
    missing: bool  # settled but never placed on the table's record
    withdrawn: bool
    history: list[tuple[str, str, str, int, bool]]  # clock, action, spot, amount, late
    carried_from: str | None
    paid: list[Paid]
    unpaid: str  # "withdrawn" | "never" | "" (what to say when nothing was paid)
    due: Settlement | None
    by_cards: Settlement | None
    if_right: Settlement | None
    gap: int
    off: bool
    classes: list[str]


@dataclass(slots=True)
class BetsView:
    rows: list[BetRow]
    show_cards: bool
    show_right: bool
    commission: tuple[Commission, Rounding] | None
    total_stake: int
    total_paid: int
    total_due: int
    spot_totals: list[tuple[str, int]]
    difference: int | None
    over: bool
    max_bet: int
    round_settled: list[list[tuple[str, int, int]]]


@dataclass(slots=True)
class RoundView:
    kind = "round"
    rnd: RoundTrail
    profile: str | None
    commission: tuple[Commission, Rounding] | None
    squeeze_hot: bool
    cards: list[CardRow] | None
    no_shoe: bool
    hands: list[HandRow] | None
    declared_differs: bool
    notes: list[list[Word]]
    ok: bool
    bets: BetsView | None


@dataclass(slots=True)
class View:
    """A shoe or pattern view: ``kind`` names its template macro, ``data`` what it shows."""

    kind: str
    data: dict[str, Any]


class Renderer:
    """Builds the views of an incident from a collector's trails."""

    def __init__(self, collector: IncidentCollector, link: Callable[[str], tuple[str, str] | None]) -> None:
        self.c = collector
        self.link = link

    def views(self, i: Incident) -> list[Any]:
        """The views that fit the alert: the shoe or pattern view, then the round."""
        rule = i.data.rule
        table = self.c.tables.get(i.data.table_id)
        out: list[Any] = []
        focus_round = i.round
        special = {
            AlertCode.BURN_COUNT: self.burn_view,
            AlertCode.CUT_CARD_DEPTH: self.cut_view,
            AlertCode.ROUNDS_AFTER_CUT_CARD: self.after_cut_view,
            AlertCode.OUTCOME_DRIFT: self.drift_view,
            AlertCode.PATRON_WIN_RATE: self.patron_view,
            AlertCode.DEALER_ERROR_RATE: self.dealer_view,
            AlertCode.SHOE_REPEAT: self.repeat_view,
            AlertCode.CARD_OVERCOUNT: self.copies_view,
        }.get(rule)  # type: ignore[call-overload]
        if special is not None:
            view = special(i)
            if view is not None:
                out.append(view)
        if rule == AlertCode.DEALER_ERROR_RATE:
            focus_round = None  # the rounds are linked from the dealer's record
        if i.index is not None and i.shoe is not None and rule != AlertCode.SHOE_REPEAT:
            if focus_round is None and table is not None:
                _, round_id = i.shoe.went(i.index)
                focus_round = table.round(round_id) if round_id else None
            if focus_round is None:
                out.append(self.strip_view(i.shoe, i.index))
        if focus_round is not None:
            out.append(self.round_view(focus_round, i))
        elif i.data.round_id and rule != AlertCode.DEALER_ERROR_RATE:
            out.append(View("round_missing", {"round_id": i.data.round_id, "table_id": i.data.table_id}))
        return out

    # ---- the round -------------------------------------------------------------------------

    def round_view(self, rnd: RoundTrail, i: Incident) -> RoundView:
        table = self.c.tables.get(rnd.table_id)
        shoe = table.find_shoe(rnd.shoe_id) if table else None
        played = rnd.round
        profile = self.c.profile_override or played.profile
        commission = commission_of(profile)
        right = correct_play(rnd, shoe)
        view = RoundView(
            rnd=rnd,
            profile=profile,
            commission=commission,
            squeeze_hot=i.data.rule == AlertCode.SQUEEZE_HOLDER,
            cards=None,
            no_shoe=shoe is None,
            hands=None,
            declared_differs=False,
            notes=[],
            ok=False,
            bets=None,
        )
        if played.completed:
            view.cards = self.cards_rows(rnd, shoe, right, i)
            self.hands(view, played, right)
        view.bets = self.bets(rnd, commission, right, i)
        return view

    def cards_rows(self, rnd: RoundTrail, shoe: ShoeTrail | None, right: CorrectPlay | None, i: Incident) -> list[CardRow]:
        in_hand: dict[int, tuple[str, int, str]] = {}
        for hand, cards in (("Player", rnd.round.player), ("Banker", rnd.round.banker)):
            for position, x in enumerate(cards, start=1):
                in_hand[x.index] = (hand, position, x.card or "")
        indices = set(in_hand) | set(rnd.burns)
        if shoe is not None and indices:
            indices |= set(range(min(indices), max(indices) + 1))
        ruled: dict[int, str] = {}
        if right is not None:
            for hand, cards_ in (("Player", right.player), ("Banker", right.banker)):
                for position, (index, _) in enumerate(cards_, start=1):
                    ruled[index] = f"{hand} {ordinal(position)}"
            if right.source == "shoe":
                indices |= set(ruled)  # a card the rules would have drawn, dealt to the next round
        rows = []
        for index in sorted(indices):
            read = shoe.card(index) if shoe else None
            row = CardRow(index, read, shoe is not None and index in shoe.face_up, "unread")
            where, other = shoe.went(index) if shoe is not None else (0, None)
            if index in in_hand:
                hand, position, shown = in_hand[index]
                row.went, row.hand, row.position = "hand", hand, position
                if row.card is None:
                    row.card = shown
                if shoe is not None and read != shown:
                    row.mismatch, row.shown, row.read = True, shown, read
                    row.classes.append("bad")
            elif index in rnd.burns or (shoe is not None and where == BURNED and other in (None, rnd.round_id)):
                row.went = "burned"
            elif shoe is not None and where in (PLAYER, BANKER):
                row.went, row.other_round, row.hand = "later", other or "", "Player" if where == PLAYER else "Banker"
            elif shoe is not None and where == BURNED:
                row.went = "burned-later"
            elif read is not None:
                row.went = "none"
                row.classes.append("bad")
            row.by_rules = ruled.get(index, "—" if row.went != "burned" else "")
            if index in in_hand and row.by_rules != f"{in_hand[index][0]} {ordinal(in_hand[index][1])}":
                row.classes.append("differs")
            elif index not in in_hand and row.by_rules not in ("—", ""):
                row.classes.append("differs")
            if index == i.index:
                row.classes.append("focus")
            rows.append(row)
        return rows

    @staticmethod
    def hands(view: RoundView, played: Round, right: CorrectPlay | None) -> None:
        actual = cards_result(played)
        declared = played.declared
        assert declared is not None
        view.declared_differs = declared != actual
        player, banker = played.hands()
        view.hands = [
            HandRow("dealt", "As dealt", [x.card.code for x in player], [x.card.code for x in banker], actual),
            HandRow("declared", "Declared by the table", [], [], declared, view.declared_differs),
        ]
        if right is not None:
            ruled = right.coup.result
            view.hands.append(
                HandRow(
                    "rules",
                    "By the rules (core.play.deal)",
                    [x for _, x in right.player],
                    [x for _, x in right.banker],
                    ruled,
                    ruled != actual,
                )
            )
        notes = []
        if view.declared_differs:
            notes.append("The declared result is not what the cards say (Art. 5, 11-13).")
        if right is not None:
            notes += play_differences(played, right)
            if right.source == "hands":
                notes.append("The shoe's reads are not in the log: the correct play is from the hands' cards in index order.")
        elif played.player and played.banker:
            notes.append("Too few cards were read after this round's first card to replay it by the rules.")
        view.notes = [words(n) for n in notes]
        view.ok = not notes and right is not None

    def bets(
        self, rnd: RoundTrail, commission: tuple[Commission, Rounding] | None, right: CorrectPlay | None, i: Incident
    ) -> BetsView | None:
        played = rnd.round
        d = i.data
        declared = played.declared
        by_cards = cards_result(played) if played.completed else None
        show_cards = played.completed and by_cards != declared
        show_right = (
            right is not None
            and declared is not None
            and right.coup.result != declared
            and commission is not None
            and any(
                money.settle(bet.spot, bet.amount, right.coup.result, *commission)
                != money.settle(bet.spot, bet.amount, declared, *commission)
                for bet in played.active_bets()
            )
        )
        settlements: dict[str, list[tuple[datetime, str, models.BetSettledData]]] = {}
        for item in rnd.settlements:
            settlements.setdefault(item[2].bet_id, []).append(item)
        bet_ids = list(played.bets) + [b for b in settlements if b not in played.bets]
        if not bet_ids:
            return None
        rows = []
        total = {"stake": 0, "paid": 0, "due": 0}
        for bet_id in bet_ids:
            bet = played.bets.get(bet_id)
            paid = settlements.get(bet_id, [])
            classes = []
            if bet_id == d.bet_id or (
                d.patron_id and ((bet and bet.patron_id == d.patron_id) or (paid and paid[0][2].patron_id == d.patron_id))
            ):
                classes.append("focus")
            due: Settlement | None
            if bet is None:
                first = paid[0][2]
                row = BetRow(
                    bet_id,
                    first.patron_id,
                    "—",
                    str(first.spot),
                    first.amount,
                    True,
                    False,
                    [],
                    None,
                    [],
                    "",
                    None,
                    None,
                    None,
                    0,
                    False,
                    classes,
                )
                due = None
            else:
                due = None if bet.withdrawn else rules_give(bet, declared, played.voided, commission)
                row = BetRow(
                    bet_id,
                    bet.patron_id,
                    bet.seat,
                    str(bet.spot),
                    bet.amount,
                    False,
                    bet.withdrawn,
                    [(clock_text(t), action, spot, amount, late) for t, action, spot, amount, late in rnd.history.get(bet_id, [])],
                    rnd.carried_from if bet.carried else None,
                    [],
                    "",
                    due,
                    rules_give(bet, by_cards, False, commission) if show_cards and not bet.withdrawn else None,
                    rules_give(bet, right.coup.result, False, commission) if show_right and not bet.withdrawn and right else None,
                    0,
                    False,
                    classes,
                )
                if not bet.withdrawn:
                    total["stake"] += bet.amount
            row.paid = [
                Paid(
                    Settlement(s.result, s.net, s.commission),
                    n > 0,
                    (str(s.spot), s.amount) if bet is not None and (s.spot, s.amount) != (bet.spot, bet.amount) else None,
                )
                for n, (_, _, s) in enumerate(paid)
            ]
            if not paid:
                row.unpaid = "withdrawn" if bet is not None and bet.withdrawn else ("never" if played.ended else "")
            paid_net = sum(s.net for _, _, s in paid)
            paid_comm = sum(s.commission for _, _, s in paid)
            total["paid"] += paid_net
            if due is not None:
                total["due"] += due.net
                row.gap = paid_net - due.net
                row.off = row.gap != 0 or paid_comm != due.commission or len(paid) != 1 or (bool(paid) and paid[0][2].result != due.result)
                if due.result is BetResult.CARRIED and not paid:
                    row.off = False  # a carry may come with the next round (Art. 12)
            else:
                row.gap = paid_net
                row.off = bool(paid)
            if row.off:
                classes.append("bad")
            rows.append(row)
        spot_totals = money.spot_totals((bet.spot, bet.amount) for bet in played.active_bets())
        difference, over = None, False
        if played.active_bets():
            difference = abs(spot_totals[Spot.BANKER] - spot_totals[Spot.PLAYER])
            over = difference > played.max_bet
        round_settled = []
        for declared_totals in rnd.round_settled:
            sums = money.RoundTotals()
            for _, _, s in rnd.settlements:
                sums = sums.add(s.amount, Settlement(s.result, s.net, s.commission))
            round_settled.append(
                [
                    ("staked", declared_totals.staked, sums.staked),
                    ("paid out", declared_totals.paid_out, sums.paid_out),
                    ("commission", declared_totals.commission, sums.commission),
                    ("house net", declared_totals.house_net, sums.house_net),
                ]
            )
        return BetsView(
            rows,
            show_cards,
            show_right,
            commission,
            total["stake"],
            total["paid"],
            total["due"],
            [(str(s), a) for s, a in spot_totals.items() if a],
            difference,
            over,
            played.max_bet,
            round_settled,
        )

    # ---- the shoe and pattern views ----------------------------------------------------------

    def burn_view(self, i: Incident) -> View | None:
        shoe = i.shoe
        if shoe is None:
            return None
        ev = i.evidence
        burned = sorted(shoe.start_burn)
        first_dealt = next((x for x in range(1, shoe.last_index + 1) if shoe.went(x)[0] in (PLAYER, BANKER)), None)
        policy = str(ev.get("policy", ""))
        explain = {
            "decks": f"one card per deck: {shoe.decks} decks",
            "fixed": "the house's fixed count",
            "first_card": "the first card, shown, plus as many as its face value (10/J/Q/K count 10)",
        }.get(policy, policy)
        first = shoe.card(burned[0]) if burned else None
        if policy == "first_card" and first:
            face = CARDS[first].rank.face_value
            explain += f"; the first card was the {card_text(first)}, face value {face}: 1 + {face}"
        return View(
            "burn",
            {
                "burned": [(x, shoe.card(x)) for x in burned],
                "first_dealt": (first_dealt, shoe.card(first_dealt)) if first_dealt is not None else None,
                "policy": policy,
                "explain": explain,
                "expected": ev.get("expected_count"),
                "seen": ev.get("seen_count"),
            },
        )

    def cut_view(self, i: Incident) -> View | None:
        shoe = i.shoe
        ev = i.evidence
        decks = ev.get("decks") or (shoe.decks if shoe else None)
        before = ev.get("cards_before")
        if not isinstance(decks, int) or not isinstance(before, int):
            return None
        size = decks * CARDS_PER_DECK
        start = max(1, min(before, size - CUT_CARD_MIN_BEHIND) - 6)
        cells = []
        for index in range(start, size + 1):
            classes = ["behind"] if index > before else []
            if index == size - CUT_CARD_MIN_BEHIND + 1:
                classes.append("min-line")
            cells.append((index, shoe.card(index) if shoe else None, classes, index == before))
        return View(
            "cut", {"decks": decks, "size": size, "before": before, "behind": size - before, "min": CUT_CARD_MIN_BEHIND, "cells": cells}
        )

    def after_cut_view(self, i: Incident) -> View | None:
        shoe = i.shoe
        if shoe is None or shoe.cut_index is None:
            return None
        spans: dict[str, list[int]] = {}
        for index in range(1, shoe.last_index + 1):
            where, round_id = shoe.went(index)
            if where in (PLAYER, BANKER) and round_id:
                spans.setdefault(round_id, []).append(index)
        cut = shoe.cut_index
        rows = []
        ordered = sorted(spans.items(), key=lambda kv: min(kv[1]))
        for round_id, indices in [kv for kv in ordered if max(kv[1]) >= cut - 12][:8]:
            first, last = min(indices), max(indices)
            relation = (
                "before the cut card" if last <= cut else ("in progress when it came out" if first <= cut else "opened after it came out")
            )
            rows.append((round_id, first, last, relation, round_id == i.data.round_id))
        return View("after_cut", {"cut": cut, "policy": str(i.evidence.get("policy", "")), "rows": rows})

    def drift_view(self, i: Incident) -> View:
        ev = i.evidence
        observed = ev.get("observed") or {}
        expected = ev.get("expected") or {}
        rounds = ev.get("rounds") or 1
        top = max([*observed.values(), *expected.values(), 1])
        bars = []
        for key, label in (("banker", "Banker"), ("player", "Player"), ("tie", "Tie")):
            o, x = observed.get(key, 0), expected.get(key, 0)
            bars.append((key, label, o, x, f"{o - x:+.1f}", f"{100 * o / top:.1f}", f"{100 * x / top:.1f}"))
        this = i.shoe
        tested = i.drift_shoes or ([this] if this else [])
        single = this is not None and len(this.outcomes) == rounds
        shoes = [(s.shoe_id, len(s.outcomes), [s.outcomes.count(ord(x)) for x in "BPT"], bead_columns(s)) for s in tested]
        return View(
            "drift",
            {
                "bars": bars,
                "rounds": rounds,
                "chi_square": ev.get("chi_square"),
                "p_value": ev.get("p_value"),
                "alpha": ev.get("alpha"),
                "single": bead_columns(this) if single and this is not None else None,
                "shoes": [] if single else shoes,
            },
        )

    def patron_view(self, i: Incident) -> View:
        ev = i.evidence
        record = i.patron
        return View(
            "patron",
            {
                "patron_id": i.data.patron_id or "",
                "decided": ev.get("decided_bets"),
                "wins": ev.get("wins"),
                "win_rate": percent(ev.get("win_rate")),
                "fair": percent(ev.get("in_control_rate")),
                "record": record,
                "strip": [chr(x) for x in record.strip] if record else [],
                "by_table": [(t, record.wins_by_table[t], n) for t, n in record.by_table.most_common()] if record else [],
                "last_bet": str(ev.get("last_bet", "")),
            },
        )

    def dealer_view(self, i: Incident) -> View:
        ev = i.evidence
        record = i.dealer
        rate = ev.get("in_control_rate")
        return View(
            "dealer",
            {
                "dealer_id": i.data.dealer_id or "",
                "with_errors": ev.get("rounds_with_errors"),
                "rounds": ev.get("rounds"),
                "usual": f"one in {round(1 / rate) if rate else '?'}",
                "record": record,
                "tables": sorted(record.tables) if record else [],
                "error_rounds": [
                    (table, round_id, [(rule, self.link(alert_id)) for rule, alert_id in found])
                    for (table, round_id), found in record.error_rounds.items()
                ]
                if record
                else [],
            },
        )

    def repeat_view(self, i: Incident) -> View:
        ev = i.evidence
        later, earlier = i.shoe, i.earlier_shoe
        run = ev.get("run") or []
        data: dict[str, Any] = {"run": run, "missing": later is None or earlier is None, "chunks": []}
        if later is None or earlier is None:
            return View("repeat", data)
        a, b = common_run(later, earlier, run, ev.get("index"))
        if a:
            data |= {
                "later": later.shoe_id,
                "earlier": earlier.shoe_id,
                "length": len(a),
                "a": (a[0][0], a[-1][0]),
                "b": (b[0][0], b[-1][0]),
                "back": shoes_back(ev.get("shoes_back")),
                "k": patterns.REPEAT_K,
                "chunks": [(a[n : n + 16], b[n : n + 16]) for n in range(0, len(a), 16)],
            }
        return View("repeat", data)

    def copies_view(self, i: Incident) -> View | None:
        shoe = i.shoe
        card = i.evidence.get("card")
        if shoe is None or not isinstance(card, str):
            return None
        rows = []
        for n, (index, code) in enumerate(((x, c) for x, c in shoe.sequence() if c == card), start=1):
            where, round_id = shoe.went(index)
            went = {PLAYER: "Player", BANKER: "Banker", BURNED: "burned"}.get(where, "not yet in a hand or burn")
            rows.append((n, index, code, went, round_id, index == i.index))
        decks = f"{'an' if shoe.decks in (8, 11) else 'a'} {shoe.decks}-deck shoe"
        return View("copies", {"card": card, "decks_text": decks.capitalize(), "decks": shoe.decks, "rows": rows})

    @staticmethod
    def strip_view(shoe: ShoeTrail, index: int, around: int = 6) -> View:
        cells = []
        for x in range(max(1, index - around), min(shoe.last_index, index + around) + 1):
            where, round_id = shoe.went(x)
            label = {PLAYER: "P", BANKER: "B", BURNED: "burn"}.get(where, "—")
            cells.append((x, shoe.card(x), label, short_round(round_id), x == index))
        return View("strip", {"shoe_id": shoe.shoe_id, "index": index, "cells": cells})


def bead_columns(shoe: ShoeTrail) -> list[list[str]]:
    """Outcomes in columns of six, as the table's bead plate shows them."""
    cells = [chr(x) for x in shoe.outcomes]
    return [cells[n : n + 6] for n in range(0, len(cells), 6)]


# ---- the templates ---------------------------------------------------------------------------


def template_loader() -> BaseLoader:
    return PackageLoader("surveil.analysis", "templates")


def stylesheet() -> str:
    return files("surveil.analysis").joinpath("static/incident.css").read_text(encoding="utf-8")


def install_filters(env: Environment) -> None:
    env.filters.update(
        card_text=card_text,
        money=money_text,
        signed=signed,
        time_text=time_text,
        macau_text=macau_text,
        clock=clock_text,
        settlement_text=settlement_text,
        ordinal=ordinal,
        number=number_text,
        short_round=short_round,
    )
    env.tests["card"] = is_card
    env.globals.update(outcome_words=outcome_words, BetResult=BetResult)


def environment() -> Environment:
    env = Environment(
        loader=template_loader(),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=StrictUndefined,
    )
    install_filters(env)
    return env


_ENV: Environment | None = None


def _env() -> Environment:
    global _ENV
    if _ENV is None:
        _ENV = environment()
    return _ENV


# ---- the report --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Provenance:
    """What makes a report checkable by someone else: which log, which software, which rules, and
    each table's alert-chain head (``surveil verify`` recomputes the chain from the alerts)."""

    log_sha256: str | None
    version: str
    profiles: list[str]
    chain_heads: list[tuple[str, str]]


def software_version() -> str:
    try:
        return importlib.metadata.version("baccarat-surveil")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def provenance(collector: IncidentCollector, log_sha256: str | None) -> Provenance:
    heads: dict[str, tuple[datetime, int, str]] = {}
    for i in collector.incidents:
        chain = i.data.chain
        if chain:
            key = (i.alert.time, i.order, chain)
            if i.data.table_id not in heads or key[:2] > heads[i.data.table_id][:2]:
                heads[i.data.table_id] = key
    profiles = [collector.profile_override] if collector.profile_override else sorted(collector.profiles)
    return Provenance(log_sha256, software_version(), profiles, [(t, heads[t][2]) for t in sorted(heads)])


def report_html(collector: IncidentCollector, result: ReplayResult | None = None, log_sha256: str | None = None) -> str:
    incidents = sorted(collector.incidents, key=lambda i: (SEVERITY_ORDER.get(i.data.severity, 3), i.alert.time, i.order))
    number = {i.data.alert_id: n for n, i in enumerate(incidents, start=1)}

    def link(alert_id: str) -> tuple[str, str] | None:
        n = number.get(alert_id)
        return (f"#alert-{alert_id}", f"#{n}") if n else None

    renderer = Renderer(collector, link)
    alerts = [i.alert for i in incidents]
    severity_of = {a.data.rule: a.data.severity for a in alerts}
    by_rule = Counter(a.data.rule for a in alerts)
    stake_by_rule: Counter[str] = Counter()
    for a in alerts:
        stake_by_rule[a.data.rule] += stake_of(a)
    by_table = Counter(a.data.table_id for a in alerts)
    tables = sorted(collector.tables)
    payout_gap = sum(
        i.evidence["difference"]
        for i in incidents
        if i.data.rule == AlertCode.PAYOUT_MISMATCH and isinstance(i.evidence.get("difference"), int)
    )
    return (
        _env()
        .get_template("report.html.j2")
        .render(
            css=Markup(stylesheet()),
            c=collector,
            result=result,
            incidents=[(n, i, renderer.views(i), round_label(i)) for n, i in enumerate(incidents, start=1)],
            tables=[(t, by_table[t]) for t in tables[:40]],
            more_tables=max(0, len(tables) - 40),
            table_count=len(tables),
            alert_count=len(alerts),
            by_severity=Counter(a.data.severity for a in alerts),
            at_stake=sum(stake_of(a) for a in alerts),
            payout_gap=payout_gap,
            rules=[
                (severity_of[rule], rule, count, stake_by_rule[rule])
                for rule, count in sorted(by_rule.items(), key=lambda kv: (SEVERITY_ORDER.get(severity_of[kv[0]], 3), -kv[1], kv[0]))
            ],
            provenance=provenance(collector, log_sha256),
            link=link,
        )
    )


# ---- one alert, for the console -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IncidentView:
    body: Markup  # the alert's views (shoe or pattern view, the round) and its evidence
    article: articles.Quote | None
    bead_shoe: Any  # the shoe whose bead road to show (ShoeTrail), or None
    bead: list[list[str]]


def incident_view(collector: IncidentCollector, alert_id: str, link: Callable[[str], tuple[str, str] | None] | None = None) -> IncidentView:
    """The alert's views as the report shows them, for a page of its own."""
    incident = collector.by_alert_id.get(alert_id)
    if incident is None:
        return IncidentView(Markup(""), None, None, [])
    collector.resolve(incident)

    def console_link(other: str) -> tuple[str, str] | None:
        return (f"/alerts/{other}", other[:12])

    renderer = Renderer(collector, link or console_link)
    body = _env().get_template("_incident_body.html.j2").render(i=incident, views=renderer.views(incident), link=link or console_link)
    shoe = incident.shoe
    if shoe is None and incident.data.shoe_id:
        table = collector.tables.get(incident.data.table_id)
        shoe = table.find_shoe(incident.data.shoe_id) if table else None
    return IncidentView(Markup(body), articles.quote(incident.data.article), shoe, bead_columns(shoe) if shoe else [])
