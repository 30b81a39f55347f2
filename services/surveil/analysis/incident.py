"""The incident report: each alert of a replay with the part of the log that proves it, laid out
as one self-contained HTML page a game-protection analyst can hand on
(``surveil replay LOG --report FILE.html``; docs/incident-report.md says how to read it).

Collected in one pass, alongside the replay: ``IncidentCollector.event`` is the replay's
``on_event`` and ``IncidentCollector.alert`` its ``on_alert``. The replay hands every event to
``on_event`` before the detectors see it, so when an alert is raised the collector already holds
what led to it. What it keeps is bounded per table, whatever the length of the log:

- the last ``ROUND_WINDOW`` rounds (every table, bet and settlement event of each): as many as the
  detectors may still judge, so a late alert (a settlement checked rounds later, an unsettled bet
  found when a later round settles) still finds its round;
- the last ``SHOE_WINDOW`` shoes, packed (a byte per card read, a byte for where it went, two for
  which round): the current shoe and the earlier ones a ``SHOE_REPEAT`` may name;
- per patron, counts and the last ``STRIP_LENGTH`` decided bets as W/L bytes; per dealer, counts
  and the rounds the alerts blamed on them.

An alert *pins* what it needs (its round, its shoe, for a repeat the earlier shoe, for a drift the
table's recent shoes): pinned rounds and shoes leave the windows and keep taking their later events
(a settlement after the alert, the rest of the shoe's reads). Memory therefore grows with the
number of alerts, not the number of events. A second pass over the file would keep even less, but
a second read of a multi-gigabyte log costs more than these windows, and the report would then
need the file twice (not a pipe).

The rendering only reads what was collected: the round in shoe order (burns, hands, cards no hand
took), the correct play from the same cards (``core.play.deal``), each bet's payout against
``core.money.settle`` under the round's house profile, and for shoe and pattern alerts the view
that fits them (the burn, the cut position, the outcome counts, the patron's record, the repeated
run side by side).
"""

from __future__ import annotations

import html
import json
from array import array
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from ..core import money
from ..core.cards import CARDS
from ..core.findings import AlertCode
from ..core.money import BetResult, Commission, Rounding, Settlement, Spot
from ..core.play import Coup, Outcome, RoundResult, banker_rule, deal, hand_total, player_rule, result_of
from ..core.procedure import CUT_CARD_MIN_BEHIND
from ..core.profiles import InvalidProfileError, load_profile
from ..core.shoe import CARDS_PER_DECK
from ..detect import patterns
from ..detect.watch import DEALER_CODES, RECENT_ROUNDS
from ..events import models as m
from .replay import ReplayResult
from .report import stake_of

ROUND_WINDOW = 4 * RECENT_ROUNDS  # the detectors forget a round at the latest after this many
SHOE_WINDOW = patterns.REPEAT_SHOES_KEPT + 1  # the current shoe and the earlier ones a repeat may name
STRIP_LENGTH = 60  # a patron's last decided Player/Banker bets, kept as W/L
MAX_INDEX = 2 * 12 * CARDS_PER_DECK  # shoe indices beyond this are not kept (no real shoe gets there)

CARD_CODES: tuple[str, ...] = tuple(CARDS)  # card number - 1 -> code (a read is stored as number + 1)
CARD_NUMBER: dict[str, int] = {code: number + 1 for number, code in enumerate(CARD_CODES)}

# Where a card that left the shoe went.
NOWHERE, PLAYER, BANKER, BURNED = 0, 1, 2, 3
OUTCOME_LETTER = {Outcome.BANKER: "B", Outcome.PLAYER: "P", Outcome.TIE: "T"}
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
DEALER_RULES = frozenset(str(code) for code in DEALER_CODES)


# ---- what is kept ----------------------------------------------------------------------------


class ShoeTrail:
    """One shoe as the log told of it, packed: per shoe index the card read, where it went and
    in which round (``round_ids[round_slot[index]]``; slot 0 is the shoe's start)."""

    __slots__ = (
        "table_id",
        "shoe_id",
        "seq",
        "decks",
        "automatic",
        "started_at",
        "ended_at",
        "cards_out",
        "reads",
        "where",
        "round_slot",
        "round_ids",
        "slots",
        "face_up",
        "cut_index",
        "start_burn",
        "outcomes",
        "outcome_rounds",
        "pinned",
    )

    def __init__(self, table_id: str, shoe_id: str, seq: int) -> None:
        self.table_id, self.shoe_id, self.seq = table_id, shoe_id, seq
        self.decks: int | None = None
        self.automatic = False
        self.started_at: datetime | None = None
        self.ended_at: datetime | None = None
        self.cards_out: int | None = None
        self.reads = bytearray(1)  # index 0 unused
        self.where = bytearray(1)
        self.round_slot = array("H", [0])
        self.round_ids: list[str] = [""]
        self.slots: dict[str, int] = {"": 0}
        self.face_up: set[int] = set()
        self.cut_index: int | None = None
        self.start_burn: list[int] = []
        self.outcomes = bytearray()  # B/P/T of each completed, non-demo round, in order
        self.outcome_rounds: list[int] = []  # their round numbers
        self.pinned = False

    def _reach(self, index: int) -> bool:
        if not 1 <= index <= MAX_INDEX:
            return False
        missing = index + 1 - len(self.reads)
        if missing > 0:
            self.reads.extend(bytes(missing))
            self.where.extend(bytes(missing))
            self.round_slot.extend([0] * missing)
        return True

    def read(self, index: int, card: str, face_up: bool) -> None:
        if (0 < index < len(self.reads) or self._reach(index)) and not self.reads[index]:
            self.reads[index] = CARD_NUMBER[card]
            if face_up:
                self.face_up.add(index)

    def slot(self, round_id: str) -> int:
        slot = self.slots.get(round_id)
        if slot is None:
            slot = self.slots[round_id] = len(self.round_ids)
            self.round_ids.append(round_id)
        return slot

    def mark(self, index: int, where: int, round_id: str) -> None:
        if 0 < index < len(self.where) or self._reach(index):
            self.where[index] = where
            self.round_slot[index] = self.slot(round_id)

    def card(self, index: int) -> str | None:
        if 0 < index < len(self.reads) and self.reads[index]:
            return CARD_CODES[self.reads[index] - 1]
        return None

    def went(self, index: int) -> tuple[int, str | None]:
        """Where the card at ``index`` went, and the round (None for a burn at the shoe's start)."""
        if not 0 < index < len(self.where):
            return NOWHERE, None
        round_id = self.round_ids[self.round_slot[index]]
        return self.where[index], round_id or None

    @property
    def last_index(self) -> int:
        return len(self.reads) - 1

    def sequence(self) -> list[tuple[int, str]]:
        return [(i, CARD_CODES[n - 1]) for i, n in enumerate(self.reads) if n]


@dataclass(slots=True)
class BetTrail:
    bet_id: str
    patron_id: str
    seat: str
    spot: Spot
    amount: int
    history: list[tuple[datetime, str, str, int, bool]] = field(default_factory=list)  # time, action, spot, amount, late
    carried_from: str | None = None  # the round whose tie carried it here (Art. 12)
    withdrawn: bool = False


@dataclass(slots=True)
class RoundTrail:
    table_id: str
    round_id: str
    opened: m.RoundOpenedData | None = None
    opened_at: datetime | None = None
    bets: dict[str, BetTrail] = field(default_factory=dict)
    closed_at: datetime | None = None
    burns: list[int] = field(default_factory=list)
    completed: m.RoundCompletedData | None = None
    completed_at: datetime | None = None
    voided: m.RoundVoidedData | None = None
    settlements: list[tuple[datetime, str, m.BetSettledData]] = field(default_factory=list)  # time, event id, data
    round_settled: list[m.RoundSettledData] = field(default_factory=list)
    pinned: bool = False

    @property
    def shoe_id(self) -> str | None:
        if self.opened is not None:
            return self.opened.shoe_id
        return self.completed.shoe_id if self.completed is not None else None

    def active_bets(self) -> list[BetTrail]:
        return [bet for bet in self.bets.values() if not bet.withdrawn]


class TableTrail:
    """One table's windows: recent rounds and shoes, and those the alerts pinned."""

    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.rounds: OrderedDict[str, RoundTrail] = OrderedDict()
        self.pinned_rounds: dict[str, RoundTrail] = {}
        self.shoes: OrderedDict[str, ShoeTrail] = OrderedDict()
        self.pinned_shoes: dict[str, ShoeTrail] = {}
        self.last_round_id: str | None = None
        self.shoe_count = 0

    def round(self, round_id: str) -> RoundTrail | None:
        return self.rounds.get(round_id) or self.pinned_rounds.get(round_id)

    def new_round(self, round_id: str) -> RoundTrail:
        rnd = self.rounds[round_id] = RoundTrail(self.table_id, round_id)
        if len(self.rounds) > ROUND_WINDOW:
            self.rounds.popitem(last=False)
        return rnd

    def pin_round(self, round_id: str) -> RoundTrail | None:
        rnd = self.rounds.pop(round_id, None)
        if rnd is not None:
            rnd.pinned = True
            self.pinned_rounds[round_id] = rnd
            return rnd
        return self.pinned_rounds.get(round_id)

    def shoe(self, shoe_id: str) -> ShoeTrail:
        shoe = self.shoes.get(shoe_id) or self.pinned_shoes.get(shoe_id)
        if shoe is None:
            self.shoe_count += 1
            shoe = self.shoes[shoe_id] = ShoeTrail(self.table_id, shoe_id, self.shoe_count)
            if len(self.shoes) > SHOE_WINDOW:
                self.shoes.popitem(last=False)
        return shoe

    def find_shoe(self, shoe_id: str | None) -> ShoeTrail | None:
        if shoe_id is None:
            return None
        return self.shoes.get(shoe_id) or self.pinned_shoes.get(shoe_id)

    def pin_shoe(self, shoe_id: str) -> ShoeTrail | None:
        shoe = self.shoes.pop(shoe_id, None)
        if shoe is not None:
            shoe.pinned = True
            self.pinned_shoes[shoe_id] = shoe
            return shoe
        return self.pinned_shoes.get(shoe_id)

    def all_shoes(self) -> list[ShoeTrail]:
        return sorted([*self.shoes.values(), *self.pinned_shoes.values()], key=lambda s: s.seq)


@dataclass(slots=True)
class PatronRecord:
    decided: int = 0
    wins: int = 0
    staked: int = 0
    strip: bytearray = field(default_factory=bytearray)  # W/L of the last decided bets
    by_table: Counter[str] = field(default_factory=Counter)  # decided bets per table
    wins_by_table: Counter[str] = field(default_factory=Counter)

    def copy(self) -> PatronRecord:
        return PatronRecord(
            self.decided, self.wins, self.staked, bytearray(self.strip), Counter(self.by_table), Counter(self.wins_by_table)
        )


@dataclass(slots=True)
class DealerRecord:
    rounds: int = 0  # completed, non-demo rounds dealt
    tables: Counter[str] = field(default_factory=Counter)
    error_rounds: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)  # (table, round) -> [(rule, alert id)]

    def copy(self) -> DealerRecord:
        return DealerRecord(self.rounds, Counter(self.tables), {k: list(v) for k, v in self.error_rounds.items()})


@dataclass(slots=True)
class Incident:
    """One alert and what it needs from the log."""

    alert: m.AlertRaised
    order: int  # in the order raised
    evidence: dict[str, Any]  # as it was when raised (a detector may keep changing what it handed over)
    round: RoundTrail | None = None
    shoe: ShoeTrail | None = None
    earlier_shoe: ShoeTrail | None = None  # SHOE_REPEAT: the shoe the run came from
    drift_shoes: list[ShoeTrail] = field(default_factory=list)  # OUTCOME_DRIFT: the table's shoes tested
    patron: PatronRecord | None = None  # PATRON_WIN_RATE: the record when the chart signalled
    dealer: DealerRecord | None = None  # DEALER_ERROR_RATE: the record when the chart signalled

    @property
    def data(self) -> m.AlertRaisedData:
        return self.alert.data

    @property
    def anchor(self) -> str:
        return f"alert-{self.alert.data.alert_id}"

    @property
    def index(self) -> int | None:
        value = self.evidence.get("index")
        return value if isinstance(value, int) else None


class IncidentCollector:
    """Feed it the replay's events (``event``) and alerts (``alert``); ``render`` writes the page."""

    def __init__(self, log_name: str, profile: str | None = None) -> None:
        self.log_name = log_name
        self.profile_override = profile
        self.tables: dict[str, TableTrail] = {}
        self.patrons: dict[str, PatronRecord] = {}
        self.dealers: dict[str, DealerRecord] = {}
        self.incidents: list[Incident] = []
        self.wanted: dict[tuple[str, str], set[int]] = {}  # (table, shoe) -> indices an alert needs the round of
        self.first_time: datetime | None = None
        self.last_time: datetime | None = None
        self.events = 0

    # ---- the events ------------------------------------------------------------------------

    def table(self, table_id: str) -> TableTrail:
        table = self.tables.get(table_id)
        if table is None:
            table = self.tables[table_id] = TableTrail(table_id)
        return table

    def dealer(self, dealer_id: str) -> DealerRecord:
        record = self.dealers.get(dealer_id)
        if record is None:
            record = self.dealers[dealer_id] = DealerRecord()
        return record

    def event(self, event: m.Event) -> None:
        self.events += 1
        time = event.time
        if self.last_time is None:
            self.first_time = self.last_time = time
        elif time > self.last_time:
            self.last_time = time
        elif time < self.first_time:  # type: ignore[operator]
            self.first_time = time
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _shoe_started(self, event: m.ShoeStarted) -> None:
        d = event.data
        shoe = self.table(d.table_id).shoe(d.shoe_id)
        if shoe.started_at is None:
            shoe.decks, shoe.automatic, shoe.started_at = d.decks, d.automatic, event.time

    def _card_read(self, event: m.CardRead) -> None:
        d = event.data
        self.table(d.table_id).shoe(d.shoe_id).read(d.index, d.card, d.face_up)

    def _cut_card(self, event: m.CutCardReached) -> None:
        d = event.data
        shoe = self.table(d.table_id).shoe(d.shoe_id)
        if shoe.cut_index is None:
            shoe.cut_index = d.index

    def _shoe_ended(self, event: m.ShoeEnded) -> None:
        d = event.data
        shoe = self.table(d.table_id).shoe(d.shoe_id)
        shoe.ended_at, shoe.cards_out = event.time, d.cards_out

    def _round_opened(self, event: m.RoundOpened) -> None:
        d = event.data
        table = self.table(d.table_id)
        if table.round(d.round_id) is not None:
            return  # redelivered
        previous = table.round(table.last_round_id) if table.last_round_id else None
        rnd = table.new_round(d.round_id)
        rnd.opened, rnd.opened_at = d, event.time
        if previous is not None and previous.completed is not None:
            for bet_id in d.carried_bet_ids:
                bet = previous.bets.get(bet_id)
                if bet is not None and not bet.withdrawn:
                    rnd.bets[bet_id] = BetTrail(
                        bet.bet_id,
                        bet.patron_id,
                        bet.seat,
                        bet.spot,
                        bet.amount,
                        [(event.time, "carried", str(bet.spot), bet.amount, False)],
                        previous.round_id,
                    )
        table.last_round_id = d.round_id
        table.shoe(d.shoe_id).slot(d.round_id)
        tables = self.dealer(d.dealer_id).tables
        tables[d.table_id] = tables.get(d.table_id, 0) + 1

    def _bet(self, event: m.BetPlaced | m.BetChanged | m.BetWithdrawn) -> None:
        d = event.data
        rnd = self.table(d.table_id).round(d.round_id)
        if rnd is None:
            return
        late = rnd.closed_at is not None or rnd.completed is not None or rnd.voided is not None
        if isinstance(d, m.BetPlacedData):
            if d.bet_id not in rnd.bets:
                rnd.bets[d.bet_id] = BetTrail(
                    d.bet_id, d.patron_id, d.seat, d.spot, d.amount, [(event.time, "placed", str(d.spot), d.amount, late)]
                )
            return
        bet = rnd.bets.get(d.bet_id)
        if bet is None:
            return
        if isinstance(d, m.BetChangedData):
            bet.spot, bet.amount = d.spot, d.amount
            bet.history.append((event.time, "changed", str(d.spot), d.amount, late))
        else:
            bet.withdrawn = True
            bet.history.append((event.time, "withdrawn", str(bet.spot), bet.amount, late))

    def _bets_closed(self, event: m.BetsClosed) -> None:
        rnd = self.table(event.data.table_id).round(event.data.round_id)
        if rnd is not None and rnd.closed_at is None:
            rnd.closed_at = event.time

    def _cards_burned(self, event: m.CardsBurned) -> None:
        d = event.data
        table = self.table(d.table_id)
        shoe = table.shoe(d.shoe_id)
        for index in d.indices:
            shoe.mark(index, BURNED, d.round_id or "")
        if d.round_id is None:
            shoe.start_burn.extend(d.indices)
        else:
            rnd = table.round(d.round_id)
            if rnd is not None:
                rnd.burns.extend(d.indices)

    def _round_completed(self, event: m.RoundCompleted) -> None:
        d = event.data
        table = self.table(d.table_id)
        rnd = table.round(d.round_id)
        if rnd is None or rnd.completed is not None or rnd.voided is not None:
            return
        rnd.completed, rnd.completed_at = d, event.time
        shoe = table.shoe(d.shoe_id)
        for where, hand in ((PLAYER, d.player), (BANKER, d.banker)):
            for card in hand:
                shoe.mark(card.index, where, d.round_id)
        demo = rnd.opened.demo if rnd.opened else False
        if not demo:
            shoe.outcomes.append(ord(OUTCOME_LETTER[d.outcome]))
            shoe.outcome_rounds.append(rnd.opened.round_no if rnd.opened else 0)
            if rnd.opened is not None:
                self.dealer(rnd.opened.dealer_id).rounds += 1
            if d.outcome is not Outcome.TIE:
                self._patron_bets(rnd, d)
        wanted = self.wanted.get((d.table_id, d.shoe_id))
        if wanted and any(card.index in wanted for card in (*d.player, *d.banker)):
            table.pin_round(d.round_id)

    def _patron_bets(self, rnd: RoundTrail, d: m.RoundCompletedData) -> None:
        """A decided Player/Banker bet, as the patron win-rate chart counts it."""
        banker_won = d.outcome is _BANKER_OUTCOME
        for bet in rnd.bets.values():
            spot = bet.spot
            if not bet.withdrawn and (spot is _PLAYER or spot is _BANKER):
                won = (spot is _BANKER) is banker_won
                record = self.patrons.get(bet.patron_id)
                if record is None:
                    record = self.patrons[bet.patron_id] = PatronRecord()
                record.decided += 1
                record.wins += won
                record.staked += bet.amount
                by_table, wins_by_table = record.by_table, record.wins_by_table
                by_table[d.table_id] = by_table.get(d.table_id, 0) + 1
                wins_by_table[d.table_id] = wins_by_table.get(d.table_id, 0) + won
                strip = record.strip
                strip.append(87 if won else 76)  # W, L
                if len(strip) > STRIP_LENGTH:
                    del strip[0]

    def _round_voided(self, event: m.RoundVoided) -> None:
        rnd = self.table(event.data.table_id).round(event.data.round_id)
        if rnd is not None and rnd.completed is None and rnd.voided is None:
            rnd.voided = event.data

    def _bet_settled(self, event: m.BetSettled) -> None:
        rnd = self.table(event.data.table_id).round(event.data.round_id)
        if rnd is not None:
            rnd.settlements.append((event.time, event.id, event.data))

    def _round_settled(self, event: m.RoundSettled) -> None:
        rnd = self.table(event.data.table_id).round(event.data.round_id)
        if rnd is not None:
            rnd.round_settled.append(event.data)

    # ---- the alerts ------------------------------------------------------------------------

    def alert(self, alert: m.AlertRaised) -> None:
        """Keep what ``alert`` needs: pin its round and shoe, snapshot the records it judges."""
        d = alert.data
        table = self.table(d.table_id)
        incident = Incident(alert, len(self.incidents), msgspec.json.decode(msgspec.json.encode(d.evidence)))
        if d.round_id:
            incident.round = table.pin_round(d.round_id)
        shoe_id = d.shoe_id or (incident.round.shoe_id if incident.round else None)
        if shoe_id and table.find_shoe(shoe_id) is not None:
            incident.shoe = table.pin_shoe(shoe_id)
        shoe = incident.shoe
        index = incident.index
        if shoe is not None and index is not None and incident.round is None:
            where, round_id = shoe.went(index)
            if round_id and where in (PLAYER, BANKER):
                table.pin_round(round_id)
            else:
                self.wanted.setdefault((d.table_id, shoe.shoe_id), set()).add(index)
        rule = d.rule
        if rule == AlertCode.SHOE_REPEAT and shoe is not None:
            incident.earlier_shoe = self._repeat_source(table, shoe, incident.evidence)
        elif rule == AlertCode.OUTCOME_DRIFT and shoe is not None:
            ended = [s for s in table.all_shoes() if s.seq <= shoe.seq and s.outcomes]
            incident.drift_shoes = [table.pin_shoe(s.shoe_id) or s for s in ended[-patterns.DRIFT_TABLE_SHOES :]]
        elif rule == AlertCode.PATRON_WIN_RATE and d.patron_id:
            incident.patron = self.patrons.get(d.patron_id, PatronRecord()).copy()
        if rule in DEALER_RULES and d.dealer_id and d.round_id:
            record = self.dealer(d.dealer_id)
            record.error_rounds.setdefault((d.table_id, d.round_id), []).append((rule, d.alert_id))
        if rule == AlertCode.DEALER_ERROR_RATE and d.dealer_id:
            incident.dealer = self.dealers.get(d.dealer_id, DealerRecord()).copy()
        self.incidents.append(incident)

    @staticmethod
    def _repeat_source(table: TableTrail, shoe: ShoeTrail, evidence: dict[str, Any]) -> ShoeTrail | None:
        """The earlier shoe at the table that holds the repeated run (``shoes_back`` first)."""
        run = evidence.get("run")
        if not isinstance(run, list) or not run:
            return None
        earlier = [s for s in table.all_shoes() if s.seq < shoe.seq]
        back = evidence.get("shoes_back")
        if isinstance(back, int) and 0 < back <= len(earlier):
            earlier.insert(0, earlier.pop(len(earlier) - back))
        for candidate in earlier:
            if _find_run(candidate, run):
                return table.pin_shoe(candidate.shoe_id) or candidate
        return None

    # ---- the page --------------------------------------------------------------------------

    def render(self, result: ReplayResult | None = None) -> str:
        return Page(self, result).html()


# Enum members looked up once: on Python 3.11 each ``Spot.BANKER`` goes through EnumType.__getattr__.
_PLAYER, _BANKER, _BANKER_OUTCOME = Spot.PLAYER, Spot.BANKER, Outcome.BANKER

_HANDLERS: dict[type[m.Event], Any] = {
    m.ShoeStarted: IncidentCollector._shoe_started,
    m.CardRead: IncidentCollector._card_read,
    m.CutCardReached: IncidentCollector._cut_card,
    m.ShoeEnded: IncidentCollector._shoe_ended,
    m.RoundOpened: IncidentCollector._round_opened,
    m.BetPlaced: IncidentCollector._bet,
    m.BetChanged: IncidentCollector._bet,
    m.BetWithdrawn: IncidentCollector._bet,
    m.BetsClosed: IncidentCollector._bets_closed,
    m.CardsBurned: IncidentCollector._cards_burned,
    m.RoundCompleted: IncidentCollector._round_completed,
    m.RoundVoided: IncidentCollector._round_voided,
    m.BetSettled: IncidentCollector._bet_settled,
    m.RoundSettled: IncidentCollector._round_settled,
}


def _find_run(shoe: ShoeTrail, run: Sequence[str]) -> list[int]:
    """Indices in ``shoe`` where the cards ``run`` end, in shoe order."""
    sequence = shoe.sequence()
    codes = [code for _, code in sequence]
    k = len(run)
    return [sequence[i + k - 1][0] for i in range(len(codes) - k + 1) if codes[i : i + k] == list(run)]


def common_run(
    later: ShoeTrail, earlier: ShoeTrail, run: Sequence[str], end_index: int | None
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """The longest run of cards the two shoes share around ``run`` (which ends at ``end_index`` of
    ``later``): the cards of each shoe with their indices, aligned."""
    a, b = later.sequence(), earlier.sequence()
    a_codes, b_codes = [c for _, c in a], [c for _, c in b]
    a_pos = {index: pos for pos, (index, _) in enumerate(a)}
    k = len(run)
    if end_index is not None and end_index in a_pos and a_codes[a_pos[end_index] - k + 1 : a_pos[end_index] + 1] == list(run):
        a_ends = [a_pos[end_index]]
    else:
        a_ends = [i + k - 1 for i in range(len(a_codes) - k + 1) if a_codes[i : i + k] == list(run)]
    b_ends = [i + k - 1 for i in range(len(b_codes) - k + 1) if b_codes[i : i + k] == list(run)]
    best: tuple[int, int, int] = (0, 0, 0)  # length, start in a, start in b
    for ai in a_ends:
        for bi in b_ends:
            start_a, start_b = ai - k + 1, bi - k + 1
            while start_a > 0 and start_b > 0 and a_codes[start_a - 1] == b_codes[start_b - 1]:
                start_a, start_b = start_a - 1, start_b - 1
            end_a, end_b = ai, bi
            while end_a + 1 < len(a_codes) and end_b + 1 < len(b_codes) and a_codes[end_a + 1] == b_codes[end_b + 1]:
                end_a, end_b = end_a + 1, end_b + 1
            if end_a - start_a + 1 > best[0]:
                best = (end_a - start_a + 1, start_a, start_b)
    length, start_a, start_b = best
    return a[start_a : start_a + length], b[start_b : start_b + length]


# ---- what the rules make of a round ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CorrectPlay:
    """The round played by the rules from the cards in shoe order: ``deal`` and the indices."""

    coup: Coup
    player: list[tuple[int, str]]
    banker: list[tuple[int, str]]
    source: str  # "shoe" (the shoe's reads) or "hands" (the shoe's reads are not in the log)


def correct_play(rnd: RoundTrail, shoe: ShoeTrail | None) -> CorrectPlay | None:
    """``core.play.deal`` on the cards that left the shoe from the round's first card on, skipping
    the cards burned at the shoe's or this round's start; None when fewer than the play needs."""
    c = rnd.completed
    if c is None:
        return None
    hands = [(x.index, x.card) for x in (*c.player, *c.banker)]
    if not hands:
        return None
    first = min(index for index, _ in hands)
    cards: list[tuple[int, str]] = []
    source = "hands"
    if shoe is not None and shoe.card(first) is not None:
        source = "shoe"
        for index in range(first, shoe.last_index + 1):
            code = shoe.card(index)
            if code is None:
                continue
            where, round_id = shoe.went(index)
            if where == BURNED and (round_id is None or round_id == rnd.round_id):
                continue
            cards.append((index, code))
            if len(cards) == 6:
                break
    else:
        cards = sorted(hands)
    try:
        coup = deal([CARDS[code] for _, code in cards])
    except IndexError:
        return None
    player = [cards[0], cards[2]]
    banker = [cards[1], cards[3]]
    if len(coup.player) == 3:
        player.append(cards[4])
    if len(coup.banker) == 3:
        banker.append(cards[5 if len(coup.player) == 3 else 4])
    return CorrectPlay(coup, player, banker, source)


def declared_result(c: m.RoundCompletedData) -> RoundResult:
    return RoundResult(c.player_total, c.banker_total, c.outcome, c.player_pair, c.banker_pair)


def cards_result(c: m.RoundCompletedData) -> RoundResult:
    return result_of([CARDS[x.card] for x in c.player], [CARDS[x.card] for x in c.banker])


def play_differences(c: m.RoundCompletedData, right: CorrectPlay) -> list[str]:
    """Where the round as dealt departs from the correct play, one sentence each (plain text)."""
    out: list[str] = []
    dealt_p = [(x.index, x.card) for x in c.player]
    dealt_b = [(x.index, x.card) for x in c.banker]
    p2 = hand_total([CARDS[code] for _, code in right.player[:2]])
    b2 = hand_total([CARDS[code] for _, code in right.banker[:2]])
    player_draw = player_rule(p2, b2)
    third = CARDS[right.player[2][1]] if len(right.player) == 3 else None
    banker_draw = banker_rule(b2, p2, third)
    same_places = [i for i, _ in dealt_p[:2]] == [i for i, _ in right.player[:2]] and [i for i, _ in dealt_b[:2]] == [
        i for i, _ in right.banker[:2]
    ]
    if dealt_p[:2] != right.player[:2] or dealt_b[:2] != right.banker[:2]:
        if same_places:  # the right cards went to the right places, but a hand shows another card
            for hand, dealt, by_rules in (("Player", dealt_p, right.player), ("Banker", dealt_b, right.banker)):
                for position, ((index, shown), (_, read)) in enumerate(zip(dealt[:2], by_rules[:2]), start=1):
                    if shown != read:
                        out.append(
                            f"The {hand}'s {_ordinal(position)} card shows the {shown} where the shoe read the {read} (card {index})."
                        )
        else:
            out.append(
                f"First four cards: dealt Player {_plain_cards(dealt_p[:2])}, Banker {_plain_cards(dealt_b[:2])}; "
                f"in shoe order (Art. 7: P, B, P, B) Player {_plain_cards(right.player[:2])}, Banker {_plain_cards(right.banker[:2])}."
            )
        out.append(
            f"By the rules the Player, on {p2}, {_draw_text(player_draw.draws, right.player)} ({player_draw.article}); "
            f"the Banker, on {b2}, {_draw_text(banker_draw.draws, right.banker)} ({banker_draw.article})."
        )
    else:
        out += _third_card("Player", dealt_p, right.player, p2, player_draw.article)
        out += _third_card("Banker", dealt_b, right.banker, b2, banker_draw.article)
    actual = cards_result(c)
    ruled = right.coup.result
    if actual.outcome != ruled.outcome:
        out.append(f"The winner changes: as dealt {_outcome_text(actual)}; by the rules {_outcome_text(ruled)}.")
    elif (actual.player_total, actual.banker_total) != (ruled.player_total, ruled.banker_total):
        out.append(
            f"Totals differ (as dealt Player {actual.player_total}, Banker {actual.banker_total}; by the rules "
            f"Player {ruled.player_total}, Banker {ruled.banker_total}) but the outcome is the same: {_outcome_text(ruled)}."
        )
    for name, label in (("player_pair", "Player pair"), ("banker_pair", "Banker pair")):
        if getattr(actual, name) != getattr(ruled, name):
            out.append(
                f"{label}: {'yes' if getattr(actual, name) else 'no'} as dealt, {'yes' if getattr(ruled, name) else 'no'} by the rules."
            )
    return out


def _draw_text(draws: bool, hand: list[tuple[int, str]]) -> str:
    return f"draws the {hand[2][1]} (card {hand[2][0]})" if draws else "stands"


def _third_card(hand: str, dealt: list[tuple[int, str]], right: list[tuple[int, str]], two: int, article: str) -> list[str]:
    if len(dealt) > len(right):
        extra = ", ".join(f"the {code} (card {index})" for index, code in dealt[len(right) :])
        return [f"{hand} drew {extra} but had to stand on {two} ({article})."]
    if len(dealt) < len(right):
        index, code = right[2]
        return [f"{hand} stood on {two} but had to draw ({article}): the {code} (card {index}) was the {hand}'s third card."]
    if len(dealt) == 3 and dealt[2] != right[2]:
        return [
            f"{hand}'s third card is the {dealt[2][1]} (card {dealt[2][0]}); in shoe order it is the {right[2][1]} (card {right[2][0]})."
        ]
    return []


def _plain_cards(cards: Iterable[tuple[int, str]]) -> str:
    return " ".join(f"{code}({index})" for index, code in cards)


def _outcome_text(result: RoundResult) -> str:
    if result.outcome is Outcome.TIE:
        return f"tie at {result.player_total}"
    return f"{result.outcome.value.capitalize()} wins {max(result.player_total, result.banker_total)}-{min(result.player_total, result.banker_total)}"


def commission_of(profile_name: str | None) -> tuple[Commission, Rounding] | None:
    """Art. 18 under the named house profile: its commission, and how it rounds a fraction of one."""
    if profile_name is None:
        return None
    try:
        profile = load_profile(profile_name)
    except InvalidProfileError:
        return None
    return profile.commission, profile.commission_rounding


def rules_give(
    bet: BetTrail, result: RoundResult | None, voided: bool, commission: tuple[Commission, Rounding] | None
) -> Settlement | None:
    """``core.money.settle`` for the bet as it stood, under the round's commission."""
    if voided:
        return money.VOID
    if result is None or commission is None:
        return None
    return money.settle(bet.spot, bet.amount, result, *commission)


# ---- the page ----------------------------------------------------------------------------

e = html.escape
SUIT_SYMBOL = {"S": "\u2660", "H": "\u2665", "D": "\u2666", "C": "\u2663"}
SUIT_NAME = {"S": "spades", "H": "hearts", "D": "diamonds", "C": "clubs"}


def card_text(code: str) -> str:
    """``"10H"`` -> ``"10♥"``."""
    return code[:-1] + SUIT_SYMBOL.get(code[-1], code[-1])


def card_html(code: str | None, extra: str = "") -> str:
    if not code:
        return '<span class="card none">?</span>'
    red = " red" if code[-1] in "HD" else ""
    return f'<span class="card{red}{" " + extra if extra else ""}" data-card="{e(code)}" title="{e(code)}">{e(card_text(code))}</span>'


BLANK_CARD = '<span class="card blank"></span>'


def cards_html(codes: Iterable[str]) -> str:
    return "".join(card_html(code) for code in codes)


def money_text(amount: int) -> str:
    return f"{amount:,}"


def signed(amount: int) -> str:
    return f"{amount:+,}" if amount else "0"


def time_text(time: datetime | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC") if time else "—"


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


def settlement_html(s: Settlement | None) -> str:
    """As ``settlement_text``, the commission on a line of its own (narrow money columns)."""
    if s is None or not s.commission:
        return e(settlement_text(s))
    return f'{e(s.result)} {signed(s.net)}<br><span class="small muted">comm. {money_text(s.commission)}</span>'


def _is_card(value: Any) -> bool:
    return isinstance(value, str) and value in CARDS


def value_html(value: Any) -> str:
    """Evidence values: cards as cards, lists and dicts as compact tables, the rest as text."""
    if _is_card(value):
        return card_html(value)
    if isinstance(value, list):
        if value and all(_is_card(v) for v in value):
            return cards_html(value)
        return ", ".join(value_html(v) for v in value) if value else "—"
    if isinstance(value, dict):
        rows = "".join(f"<tr><th>{e(str(k))}</th><td>{value_html(v)}</td></tr>" for k, v in value.items())
        return f'<table class="kv">{rows}</table>'
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return e(f"{value:,}") if abs(value) >= 10_000 else e(str(value))
    if isinstance(value, float):
        return e(f"{value:.3g}" if abs(value) < 1e-3 else f"{value:g}")
    return e(str(value) if isinstance(value, str) else json.dumps(value))


BET_CELL_CLASSES = {0: "id", 1: "id", 2: "id", 3: "id", 4: "num", 5: "history", 6: "money", 7: "money", 8: "money", 9: "money", 10: "money"}


class Page:
    """The HTML of the report: header, contents, one section per alert."""

    def __init__(self, collector: IncidentCollector, result: ReplayResult | None) -> None:
        self.c = collector
        self.result = result
        self.incidents = sorted(
            collector.incidents,
            key=lambda i: (SEVERITY_ORDER.get(i.data.severity, 3), i.alert.time, i.order),
        )
        self.number = {i.data.alert_id: n for n, i in enumerate(self.incidents, start=1)}

    def link(self, alert_id: str) -> str:
        n = self.number.get(alert_id)
        return f'<a href="#alert-{e(alert_id)}">#{n}</a>' if n else ""

    def html(self) -> str:
        body = [self.header(), self.contents()]
        body += [self.section(n, incident) for n, incident in enumerate(self.incidents, start=1)]
        if not self.incidents:
            body.append('<p class="clean">No alerts: every round in the log was dealt, settled and paid by the rules.</p>')
        body.append(
            f"<footer>Written by <code>surveil replay --report</code> from {e(self.c.log_name)}. "
            "Rules: the DICJ rules as docs/rules.md reads them; payouts by core.money.settle, correct play by core.play.deal.</footer>"
        )
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Incident report: {e(self.c.log_name)}</title><style>{CSS}</style></head>\n"
            f"<body>\n{''.join(body)}\n</body></html>\n"
        )

    # ---- header and contents --------------------------------------------------------------

    def header(self) -> str:
        alerts = [i.alert for i in self.incidents]
        by_severity = Counter(a.data.severity for a in alerts)
        by_rule: Counter[str] = Counter(a.data.rule for a in alerts)
        stake_by_rule: Counter[str] = Counter()
        severity_of: dict[str, str] = {}
        for a in alerts:
            stake_by_rule[a.data.rule] += stake_of(a)
            severity_of[a.data.rule] = a.data.severity
        tables = sorted(self.c.tables)
        by_table = Counter(a.data.table_id for a in alerts)
        at_stake = sum(stake_of(a) for a in alerts)
        payout_gap = sum(
            i.evidence["difference"]
            for i in self.incidents
            if i.data.rule == AlertCode.PAYOUT_MISMATCH and isinstance(i.evidence.get("difference"), int)
        )
        facts = [
            ("Log", f"<code>{e(self.c.log_name)}</code>"),
            ("Time span", f"{time_text(self.c.first_time)} to {time_text(self.c.last_time)}"),
            (
                "Tables",
                f"{len(tables)}: "
                + ", ".join(f"{e(t)}{f' ({by_table[t]})' if by_table[t] else ''}" for t in tables[:40])
                + (f" and {len(tables) - 40} more" if len(tables) > 40 else ""),
            ),
        ]
        if self.result is not None:
            facts.append(
                (
                    "Replayed",
                    f"{self.result.events:,} events, {self.result.rounds_checked:,} rounds checked"
                    + (f", {len(self.result.bad_lines)} malformed lines skipped" if self.result.bad_lines else ""),
                )
            )
        facts.append(
            (
                "Alerts",
                f"<strong>{len(alerts)}</strong>: "
                + ", ".join(f'<span class="sev {s}">{by_severity[s]} {s}</span>' for s in ("critical", "warning", "info") if by_severity[s])
                if alerts
                else "none",
            )
        )
        facts.append(
            (
                "Money at stake",
                f'<strong>{money_text(at_stake)}</strong> <span class="muted">(the stakes the alerts\' evidence names)</span>',
            )
        )
        if payout_gap:
            facts.append(
                (
                    "Paid against the rules",
                    f'<strong>{signed(payout_gap)}</strong> <span class="muted">(net paid to patrons minus what the rules give, over the payout alerts)</span>',
                )
            )
        rows = "".join(
            f'<tr><td><span class="sev {e(severity_of[rule])}">{e(severity_of[rule])}</span></td><td><code>{e(rule)}</code></td>'
            f'<td class="num">{count}</td><td class="num">{money_text(stake_by_rule[rule])}</td></tr>'
            for rule, count in sorted(by_rule.items(), key=lambda kv: (SEVERITY_ORDER.get(severity_of[kv[0]], 3), -kv[1], kv[0]))
        )
        facts_html = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts)
        rules_table = (
            (
                f'<table class="grid by-rule"><thead><tr><th>severity</th><th>rule</th><th class="num">alerts</th>'
                f'<th class="num">money at stake</th></tr></thead><tbody>{rows}</tbody></table>'
            )
            if rows
            else ""
        )
        return (
            '<header class="report-head"><h1>Incident report</h1>'
            f'<p class="subtitle">Baccarat table surveillance · {e(self.c.log_name)}</p>'
            f'<div class="head-grid"><table class="facts">{facts_html}</table>{rules_table}</div></header>'
        )

    def contents(self) -> str:
        if not self.incidents:
            return ""
        rows = []
        for n, i in enumerate(self.incidents, start=1):
            d = i.data
            where = " · ".join(e(x) for x in (d.table_id, d.shoe_id, _round_label(i)) if x)
            rows.append(
                f'<tr><td class="num"><a href="#{i.anchor}">{n}</a></td><td><span class="sev {e(d.severity)}">{e(d.severity)}</span></td>'
                f'<td><a href="#{i.anchor}"><code>{e(d.rule)}</code></a></td><td>{e(d.article)}</td><td class="where">{where}</td>'
                f'<td class="time">{clock_text(i.alert.time)}</td><td class="summary">{e(d.summary)}</td></tr>'
            )
        return (
            '<nav class="toc" id="contents"><h2>Contents</h2><table class="grid"><thead><tr><th>#</th><th>severity</th>'
            "<th>rule</th><th>article</th><th>where</th><th>time</th><th>summary</th></tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table></nav>"
        )

    # ---- one alert ---------------------------------------------------------------------------

    def section(self, n: int, i: Incident) -> str:
        d = i.data
        ids = [
            ("table", d.table_id),
            ("shoe", d.shoe_id),
            ("round", d.round_id),
            ("bet", d.bet_id),
            ("patron", d.patron_id),
            ("dealer", d.dealer_id),
        ]
        id_html = "".join(f'<span class="id"><span class="muted">{k}</span> {e(v)}</span>' for k, v in ids if v)
        parts = [
            f'<section class="alert {e(d.severity)}" id="{i.anchor}" data-rule="{e(d.rule)}" data-alert="{e(d.alert_id)}">',
            f'<h2><span class="n">{n}</span> <span class="sev {e(d.severity)}">{e(d.severity)}</span> '
            f'<code class="rule">{e(d.rule)}</code> <span class="article">{e(d.article)}</span></h2>',
            f'<p class="summary">{e(d.summary)}</p>',
            f'<p class="ids">{id_html}<span class="id"><span class="muted">raised</span> {time_text(i.alert.time)}</span>'
            f'<span class="id"><span class="muted">alert</span> <code>{e(d.alert_id)}</code></span></p>',
        ]
        parts += self.views(i)
        if i.evidence:
            rows = "".join(f"<tr><th>{e(str(k))}</th><td>{value_html(v)}</td></tr>" for k, v in i.evidence.items())
            parts.append(f'<div class="block"><h3>Evidence</h3><table class="kv evidence">{rows}</table></div>')
        parts.append('<p class="back"><a href="#contents">back to contents</a></p></section>')
        return "\n".join(parts)

    def views(self, i: Incident) -> list[str]:
        """The views that fit the alert: the shoe or pattern view, then the round."""
        rule = i.data.rule
        table = self.c.tables.get(i.data.table_id)
        out: list[str] = []
        focus_round = i.round
        if rule == AlertCode.BURN_COUNT:
            out.append(self.burn_view(i))
        elif rule == AlertCode.CUT_CARD_DEPTH:
            out.append(self.cut_view(i))
        elif rule == AlertCode.ROUNDS_AFTER_CUT_CARD:
            out.append(self.after_cut_view(i))
        elif rule == AlertCode.OUTCOME_DRIFT:
            out.append(self.drift_view(i))
        elif rule == AlertCode.PATRON_WIN_RATE:
            out.append(self.patron_view(i))
        elif rule == AlertCode.DEALER_ERROR_RATE:
            out.append(self.dealer_view(i))
            focus_round = None  # the rounds are linked from the dealer's record
        elif rule == AlertCode.SHOE_REPEAT:
            out.append(self.repeat_view(i))
        elif rule == AlertCode.CARD_OVERCOUNT:
            out.append(self.copies_view(i))
        if i.index is not None and i.shoe is not None and rule != AlertCode.SHOE_REPEAT:
            if focus_round is None and table is not None:
                _, round_id = i.shoe.went(i.index)
                focus_round = table.round(round_id) if round_id else None
            if focus_round is None:
                out.append(self.strip_view(i.shoe, i.index))
        if focus_round is not None:
            out.append(self.round_view(focus_round, i))
        elif i.data.round_id and rule != AlertCode.DEALER_ERROR_RATE:
            out.append(
                f'<p class="missing">Round {e(i.data.round_id)} is not in the log (no round.opened for it at table {e(i.data.table_id)}).</p>'
            )
        return out

    # ---- the round ------------------------------------------------------------------------------

    def round_view(self, rnd: RoundTrail, i: Incident) -> str:
        d = i.data
        table = self.c.tables.get(rnd.table_id)
        shoe = table.find_shoe(rnd.shoe_id) if table else None
        o, c = rnd.opened, rnd.completed
        profile_name = self.c.profile_override or (o.profile if o else None)
        commission = commission_of(profile_name)
        facts = []
        if o is not None:
            facts += [
                (
                    "round",
                    f'{o.round_no} <span class="muted">({e(rnd.round_id)})</span>'
                    + (' <span class="flag">demonstration</span>' if o.demo else ""),
                ),
                ("shoe", e(o.shoe_id)),
                ("dealer", e(o.dealer_id)),
                (
                    "house profile",
                    f'{e(profile_name or "")} <span class="muted">({e(str(commission[0])) if commission else "unknown profile"})</span>',
                ),
                ("table limits", f"min {money_text(o.min_bet)} · max {money_text(o.max_bet)} {e(o.currency)}"),
            ]
        else:
            facts.append(("round", f'{e(rnd.round_id)} <span class="muted">(its round.opened is not in the log)</span>'))
        facts.append(
            (
                "times",
                f"opened {clock_text(rnd.opened_at)} · bets closed {clock_text(rnd.closed_at)} · "
                + (f"completed {clock_text(rnd.completed_at)}" if c else ("voided" if rnd.voided else "not completed in the log")),
            )
        )
        if c is not None and c.squeezed_by:
            facts.append(
                (
                    "cards held by",
                    f'<span class="{"hot" if d.rule == AlertCode.SQUEEZE_HOLDER else ""}">{e(c.squeezed_by)}</span> (squeeze, Art. 16)',
                )
            )
        if rnd.voided is not None:
            facts.append(("voided", e(rnd.voided.reason)))
        facts_html = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts)
        out = [f'<div class="block round" data-round="{e(rnd.round_id)}"><h3>The round</h3><table class="facts small">{facts_html}</table>']
        right: CorrectPlay | None = None
        if c is not None:
            right = correct_play(rnd, shoe)
            out.append(self.cards_table(rnd, shoe, right, i))
            out.append(self.hands_table(c, right))
        out.append(self.bets_table(rnd, commission, right, i))
        out.append("</div>")
        return "".join(out)

    def cards_table(self, rnd: RoundTrail, shoe: ShoeTrail | None, right: CorrectPlay | None, i: Incident) -> str:
        c = rnd.completed
        assert c is not None
        in_hand: dict[int, tuple[str, int, str]] = {}
        for hand, cards in (("Player", c.player), ("Banker", c.banker)):
            for position, x in enumerate(cards, start=1):
                in_hand[x.index] = (hand, position, x.card)
        indices = set(in_hand) | set(rnd.burns)
        if shoe is not None and indices:
            indices |= set(range(min(indices), max(indices) + 1))
        ruled: dict[int, str] = {}
        if right is not None:
            for hand, cards_ in (("Player", right.player), ("Banker", right.banker)):
                for position, (index, _) in enumerate(cards_, start=1):
                    ruled[index] = f"{hand} {_ordinal(position)}"
            if right.source == "shoe":
                indices |= set(ruled)  # a card the rules would have drawn, dealt to the next round
        focus = i.index
        rows = []
        for index in sorted(indices):
            read = shoe.card(index) if shoe else None
            classes = []
            if index in in_hand:
                hand, position, shown = in_hand[index]
                went = f'<span class="hand {hand.lower()}">{hand}</span> {_ordinal(position)} card'
                data_hand = hand.lower()
                if shoe is not None and read != shown:
                    went += f' <span class="hot">the hand shows {card_html(shown)}, the shoe read {card_html(read) if read else "nothing here"}</span>'
                    classes.append("bad")
            elif index in rnd.burns or (shoe is not None and shoe.went(index)[0] == BURNED and shoe.went(index)[1] in (None, rnd.round_id)):
                went, data_hand = '<span class="burned">burned</span> (Art. 8)', "burned"
            elif shoe is not None and shoe.went(index)[0] in (PLAYER, BANKER):
                where, other = shoe.went(index)
                went = f'<span class="muted">next round ({e(other or "")}), {"Player" if where == PLAYER else "Banker"}</span>'
                data_hand = "later"
            elif shoe is not None and shoe.went(index)[0] == BURNED:
                went, data_hand = '<span class="muted">burned before the next round</span>', "burned-later"
            elif read is not None:
                went, data_hand = '<span class="hot">no hand: neither burned nor dealt</span>', "none"
                classes.append("bad")
            else:
                went, data_hand = '<span class="muted">not read by the shoe</span>', "unread"
            rule_text = ruled.get(index, "—" if data_hand != "burned" else "")
            if index in in_hand and rule_text != f"{in_hand[index][0]} {_ordinal(in_hand[index][1])}":
                classes.append("differs")
            elif index not in in_hand and rule_text not in ("—", ""):
                classes.append("differs")
            if index == focus:
                classes.append("focus")
            face = ' <span class="flag">face up</span>' if shoe is not None and index in shoe.face_up else ""
            card_cell = card_html(read) if read else (card_html(in_hand[index][2]) if index in in_hand else "—")
            rows.append(
                f'<tr class="{" ".join(classes)}" data-index="{index}" data-hand="{data_hand}"><td class="num">{index}</td>'
                f"<td>{card_cell}{face}</td><td>{went}</td><td>{e(rule_text)}</td></tr>"
            )
        note = (
            ""
            if shoe is not None
            else "<p class=\"muted\">The shoe's reads of this shoe are not in the log: the cards are the hands' own.</p>"
        )
        return (
            '<h4>Cards in shoe order</h4><table class="grid cards-order"><thead><tr><th class="num">shoe index</th><th>card</th>'
            f"<th>went to</th><th>by the rules</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{note}"
        )

    def hands_table(self, c: m.RoundCompletedData, right: CorrectPlay | None) -> str:
        actual = cards_result(c)
        declared = declared_result(c)
        rows = [
            self._hands_row("As dealt", [x.card for x in c.player], [x.card for x in c.banker], actual, "dealt"),
        ]
        declared_differs = declared != actual
        rows.append(
            f'<tr class="{"bad" if declared_differs else ""}" data-row="declared"><th>Declared by the table</th><td colspan="2" class="muted">the totals and result announced (round.completed)</td>'
            f'<td class="num">{declared.player_total}</td><td class="num">{declared.banker_total}</td><td>{_result_text(declared)}</td></tr>'
        )
        if right is not None:
            ruled = right.coup.result
            rows.append(
                self._hands_row(
                    "By the rules (core.play.deal)",
                    [code for _, code in right.player],
                    [code for _, code in right.banker],
                    ruled,
                    "rules",
                    bad=ruled != actual,
                )
            )
        table = (
            '<h4>Hands and result</h4><table class="grid hands"><thead><tr><th></th><th>Player</th><th>Banker</th>'
            f'<th class="num">Player total</th><th class="num">Banker total</th><th>result</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
        )
        notes = []
        if declared_differs:
            notes.append("The declared result is not what the cards say (Art. 5, 11-13).")
        if right is not None:
            notes += play_differences(c, right)
            if right.source == "hands":
                notes.append("The shoe's reads are not in the log: the correct play is from the hands' cards in index order.")
        elif c.player and c.banker:
            notes.append("Too few cards were read after this round's first card to replay it by the rules.")
        if notes:
            table += '<ul class="differences">' + "".join(f"<li>{_cards_in_text(n)}</li>" for n in notes) + "</ul>"
        elif right is not None:
            table += '<p class="ok-note">Dealt as the rules deal these cards.</p>'
        return table

    @staticmethod
    def _hands_row(label: str, player: list[str], banker: list[str], result: RoundResult, key: str, bad: bool = False) -> str:
        return (
            f'<tr class="{"bad" if bad else ""}" data-row="{key}"><th>{e(label)}</th><td>{cards_html(player)}</td><td>{cards_html(banker)}</td>'
            f'<td class="num">{result.player_total}</td><td class="num">{result.banker_total}</td><td>{_result_text(result)}</td></tr>'
        )

    def bets_table(self, rnd: RoundTrail, commission: tuple[Commission, Rounding] | None, right: CorrectPlay | None, i: Incident) -> str:
        c = rnd.completed
        d = i.data
        declared = declared_result(c) if c else None
        by_cards = cards_result(c) if c else None
        show_cards = c is not None and by_cards != declared
        show_right = (
            right is not None
            and declared is not None
            and right.coup.result != declared
            and commission is not None
            and any(
                money.settle(bet.spot, bet.amount, right.coup.result, *commission)
                != money.settle(bet.spot, bet.amount, declared, *commission)
                for bet in rnd.active_bets()
            )
        )
        settlements: dict[str, list[tuple[datetime, str, m.BetSettledData]]] = {}
        for item in rnd.settlements:
            settlements.setdefault(item[2].bet_id, []).append(item)
        bet_ids = list(rnd.bets) + [b for b in settlements if b not in rnd.bets]
        if not bet_ids:
            return '<h4>Bets</h4><p class="muted">No bets on this round.</p>'
        head = ["bet", "patron", "seat", "spot", "stake", "what happened", "paid", "rules give"]
        if show_cards:
            head.append("on the cards' result")
        if show_right:
            head.append("if dealt right")
        head.append("paid − due")
        rows = []
        total = {"stake": 0, "paid": 0, "due": 0}
        for bet_id in bet_ids:
            bet = rnd.bets.get(bet_id)
            paid = settlements.get(bet_id, [])
            classes = []
            if bet_id == d.bet_id or (
                d.patron_id and ((bet and bet.patron_id == d.patron_id) or (paid and paid[0][2].patron_id == d.patron_id))
            ):
                classes.append("focus")
            if bet is None:
                first = paid[0][2]
                cells = [
                    e(bet_id),
                    e(first.patron_id),
                    "—",
                    e(str(first.spot)),
                    money_text(first.amount),
                    '<span class="hot">not on the table\'s record</span>',
                ]
                due = None
            else:
                history = "; ".join(
                    f"{clock_text(t)} {e(action)} {e(spot)} {money_text(amount)}"
                    + (' <span class="hot">after bets closed</span>' if late else "")
                    for t, action, spot, amount, late in bet.history
                )
                if bet.carried_from:
                    history = f'<span class="muted">carried from the tie of {e(bet.carried_from)}</span>; ' + history
                cells = [
                    e(bet_id),
                    e(bet.patron_id),
                    e(bet.seat),
                    e(str(bet.spot)),
                    (f'<s title="withdrawn">{money_text(bet.amount)}</s>' if bet.withdrawn else money_text(bet.amount)),
                    history,
                ]
                due = None if bet.withdrawn else rules_give(bet, declared, rnd.voided is not None, commission)
                if not bet.withdrawn:
                    total["stake"] += bet.amount
            paid_text = "<br>".join(
                (
                    f"{'again: ' if n else ''}"
                    + settlement_html(Settlement(s.result, s.net, s.commission))
                    + (
                        f' <span class="muted">on {e(str(s.spot))} {money_text(s.amount)}</span>'
                        if bet is not None and (s.spot, s.amount) != (bet.spot, bet.amount)
                        else ""
                    )
                )
                for n, (_, _, s) in enumerate(paid)
            ) or (
                '<span class="muted">withdrawn: nothing to settle</span>'
                if bet is not None and bet.withdrawn
                else '<span class="hot">never settled</span>'
                if c is not None or rnd.voided
                else "—"
            )
            cells += [paid_text, settlement_html(due)]
            if show_cards:
                cells.append(settlement_html(rules_give(bet, by_cards, False, commission)) if bet and not bet.withdrawn else "—")
            if show_right:
                cells.append(
                    settlement_html(rules_give(bet, right.coup.result, False, commission)) if bet and not bet.withdrawn and right else "—"
                )
            paid_net = sum(s.net for _, _, s in paid)
            paid_comm = sum(s.commission for _, _, s in paid)
            total["paid"] += paid_net
            if due is not None:
                total["due"] += due.net
                gap = paid_net - due.net
                off = gap != 0 or paid_comm != due.commission or len(paid) != 1 or (paid and paid[0][2].result != due.result)
                if due.result is BetResult.CARRIED and not paid:
                    off = False  # a carry may come with the next round (Art. 12)
            else:
                gap = paid_net
                off = bool(paid)
            if off:
                classes.append("bad")
            cells.append(f'<span class="{"hot" if off else ""}">{signed(gap)}</span>')
            rows.append(
                f'<tr class="{" ".join(classes)}" data-bet="{e(bet_id)}">'
                + "".join(f'<td class="{BET_CELL_CLASSES.get(n, "")}">{cell}</td>' for n, cell in enumerate(cells))
                + "</tr>"
            )
        span = len(head) - 1
        rows.append(
            f'<tr class="total"><th colspan="4">total</th><td class="num">{money_text(total["stake"])}</td><td></td>'
            f"<td>net {signed(total['paid'])}</td><td>net {signed(total['due'])}</td>"
            + "<td></td>" * (span - 8)
            + f"<td>{signed(total['paid'] - total['due'])}</td></tr>"
        )
        table = (
            '<h4>Bets and payouts</h4><table class="grid bets"><thead><tr>'
            + "".join(f"<th>{e(h)}</th>" for h in head)
            + f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
        table += (
            f'<p class="muted small">Paid: each bet.settled. Rules give: core.money.settle on the declared result, commission {e(str(commission[0])) if commission else "unknown"}'
            f"{', as the settlement check judges' if show_cards or show_right else ''}"
            f"{'; if dealt right: on the result of the correct play' if show_right else ''}. Net is what the patron gains.</p>"
        )
        spot_totals = money.spot_totals((bet.spot, bet.amount) for bet in rnd.active_bets())
        if rnd.opened is not None and rnd.active_bets():
            difference = abs(spot_totals[Spot.BANKER] - spot_totals[Spot.PLAYER])
            over = difference > rnd.opened.max_bet
            table += (
                '<p class="small">On the layout: '
                + " · ".join(f"{e(str(s))} {money_text(a)}" for s, a in spot_totals.items() if a)
                + f' · Banker − Player difference <span class="{"hot" if over else ""}">{money_text(difference)}</span> against the limit {money_text(rnd.opened.max_bet)} (Art. 14)</p>'
            )
        for declared_totals in rnd.round_settled:
            sums = money.RoundTotals()
            for _, _, s in rnd.settlements:
                sums = sums.add(s.amount, Settlement(s.result, s.net, s.commission))
            pairs = [
                ("staked", declared_totals.staked, sums.staked),
                ("paid out", declared_totals.paid_out, sums.paid_out),
                ("commission", declared_totals.commission, sums.commission),
                ("house net", declared_totals.house_net, sums.house_net),
            ]
            line = " · ".join(
                f"{k} {money_text(a)}" + ("" if a == b else f' <span class="hot">(the bets add up to {money_text(b)})</span>')
                for k, a, b in pairs
            )
            table += f'<p class="small">round.settled: {line}</p>'
        return table

    # ---- the shoe views ---------------------------------------------------------------------------

    def burn_view(self, i: Incident) -> str:
        shoe = i.shoe
        ev = i.evidence
        if shoe is None:
            return ""
        burned = sorted(shoe.start_burn)
        cells = "".join(f'<div class="cell"><div class="idx">{index}</div>{card_html(shoe.card(index))}</div>' for index in burned)
        first_dealt = next((index for index in range(1, shoe.last_index + 1) if shoe.went(index)[0] in (PLAYER, BANKER)), None)
        after = ""
        if first_dealt is not None:
            after = f'<div class="cell next"><div class="idx">{first_dealt}</div>{card_html(shoe.card(first_dealt))}<div class="muted small">first card dealt</div></div>'
        policy = ev.get("policy", "")
        explain = {
            "decks": f"one card per deck: {shoe.decks} decks",
            "fixed": "the house's fixed count",
            "first_card": "the first card, shown, plus as many as its face value (10/J/Q/K count 10)",
        }.get(str(policy), str(policy))
        first = shoe.card(burned[0]) if burned else None
        if policy == "first_card" and first:
            face = CARDS[first].rank.face_value
            explain += f"; the first card was the {card_text(first)}, face value {face}: 1 + {face}"
        return (
            f'<div class="block"><h3>The burn at the shoe\'s start (Art. 2.1)</h3>'
            f"<p>Policy <strong>{e(str(policy))}</strong>: {e(explain)}. Due <strong>{e(str(ev.get('expected_count')))}</strong>, "
            f'burned <strong class="hot">{e(str(ev.get("seen_count")))}</strong>.</p>'
            f'<div class="strip">{cells}{after}</div></div>'
        )

    def cut_view(self, i: Incident) -> str:
        shoe = i.shoe
        ev = i.evidence
        decks = ev.get("decks") or (shoe.decks if shoe else None)
        before = ev.get("cards_before")
        if not isinstance(decks, int) or not isinstance(before, int):
            return ""
        size = decks * CARDS_PER_DECK
        start = max(1, min(before, size - CUT_CARD_MIN_BEHIND) - 6)
        cells = []
        for index in range(start, size + 1):
            classes = ["behind"] if index > before else []
            if index == size - CUT_CARD_MIN_BEHIND + 1:
                classes.append("min-line")
            read = shoe.card(index) if shoe else None
            cells.append(
                f'<div class="{" ".join(["cell", *classes])}"><div class="idx">{index}</div>{card_html(read) if read else BLANK_CARD}</div>'
            )
            if index == before:
                cells.append('<div class="cell cut-card"><div class="idx">cut</div><span class="card white">CUT</span></div>')
        return (
            f'<div class="block"><h3>Where the cut card went (Art. 2.1)</h3>'
            f"<p>{decks} decks, {size} cards. The cut card came out after card <strong>{before}</strong>, leaving "
            f'<strong class="hot">{size - before}</strong> cards behind it; the rules want at least about {CUT_CARD_MIN_BEHIND} '
            f'(the dashed line).</p><div class="strip end-of-shoe">{"".join(cells)}</div>'
            f'<p class="muted small">The end of the shoe: shaded cards lay behind the cut card; blank cards were never read.</p></div>'
        )

    def after_cut_view(self, i: Incident) -> str:
        shoe = i.shoe
        if shoe is None or shoe.cut_index is None:
            return ""
        spans: dict[str, list[int]] = {}
        for index in range(1, shoe.last_index + 1):
            where, round_id = shoe.went(index)
            if where in (PLAYER, BANKER) and round_id:
                spans.setdefault(round_id, []).append(index)
        cut = shoe.cut_index
        rows = []
        ordered = sorted(spans.items(), key=lambda kv: min(kv[1]))
        near = [kv for kv in ordered if max(kv[1]) >= cut - 12]
        for round_id, indices in near[:8]:
            first, last = min(indices), max(indices)
            relation = (
                "before the cut card" if last <= cut else ("in progress when it came out" if first <= cut else "opened after it came out")
            )
            hot = round_id == i.data.round_id
            rows.append(
                f'<tr class="{"bad" if hot else ""}"><td>{e(round_id)}</td><td class="num">{first}–{last}</td><td>{relation}</td></tr>'
            )
        policy = i.evidence.get("policy", "")
        return (
            f'<div class="block"><h3>Rounds around the cut card (Art. 3.1)</h3>'
            f"<p>The cut card came out after card <strong>{cut}</strong>. House policy <strong>{e(str(policy))}</strong>: "
            f"{'one more round may be played' if policy == 'one_more' else 'the round in progress is the last'}.</p>"
            f'<table class="grid"><thead><tr><th>round</th><th class="num">cards</th><th>against the cut card</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )

    def drift_view(self, i: Incident) -> str:
        ev = i.evidence
        observed = ev.get("observed") or {}
        expected = ev.get("expected") or {}
        rounds = ev.get("rounds") or 1
        top = max([*observed.values(), *expected.values(), 1])
        bars = []
        for key, label in (("banker", "Banker"), ("player", "Player"), ("tie", "Tie")):
            o, x = observed.get(key, 0), expected.get(key, 0)
            bars.append(
                f'<tr><th>{label}</th><td class="num">{o}</td><td class="num">{x}</td><td class="num">{o - x:+.1f}</td>'
                f'<td class="barcell"><div class="bar obs {key}" style="width:{100 * o / top:.1f}%"></div>'
                f'<div class="bar exp" style="width:{100 * x / top:.1f}%"></div></td></tr>'
            )
        shoes_html = ""
        this = i.shoe
        tested = i.drift_shoes or ([this] if this else [])
        single = this is not None and len(this.outcomes) == rounds
        if single and this is not None:
            shoes_html = f"<h4>The shoe's outcomes in order (bead road)</h4>{bead_road(this)}"
        elif tested:
            rows = "".join(
                f'<tr><td>{e(s.shoe_id)}</td><td class="num">{len(s.outcomes)}</td>'
                + "".join(f'<td class="num">{s.outcomes.count(ord(x))}</td>' for x in "BPT")
                + "</tr>"
                for s in tested
            )
            shoes_html = (
                '<h4>The table\'s last shoes</h4><table class="grid"><thead><tr><th>shoe</th><th class="num">rounds</th>'
                f'<th class="num">Banker</th><th class="num">Player</th><th class="num">Tie</th></tr></thead><tbody>{rows}</tbody></table>'
                + "".join(f'<p class="small">{e(s.shoe_id)}</p>{bead_road(s)}' for s in tested)
            )
        return (
            f'<div class="block"><h3>Outcomes against the exact odds</h3>'
            f'<table class="grid drift"><thead><tr><th></th><th class="num">seen</th><th class="num">expected</th><th class="num">difference</th>'
            f"<th>seen (solid) against expected (outline)</th></tr></thead><tbody>{''.join(bars)}</tbody></table>"
            f'<p class="small">{rounds} rounds; chi-square {e(str(ev.get("chi_square")))} with 2 degrees of freedom, p = {value_html(ev.get("p_value"))} '
            f"(alerts below {value_html(ev.get('alpha'))}).</p>{shoes_html}</div>"
        )

    def patron_view(self, i: Incident) -> str:
        ev = i.evidence
        record = i.patron
        rows = [
            ("decided Player/Banker bets (chart)", f"{ev.get('decided_bets')}"),
            ("won (chart)", f"{ev.get('wins')} ({_percent(ev.get('win_rate'))})"),
            ("a fair game", f"about {_percent(ev.get('in_control_rate'))}"),
        ]
        strip = ""
        tables = ""
        if record is not None:
            rows.append(
                (
                    "in this log up to the alert",
                    f"{record.wins} won of {record.decided} decided, {money_text(record.staked)} staked on them",
                )
            )
            strip = (
                '<h4>The last decided bets, oldest first</h4><div class="wl">'
                + "".join(f'<span class="{"w" if x == ord("W") else "l"}">{chr(x)}</span>' for x in record.strip)
                + "</div>"
            )
            tables = (
                '<p class="small">By table: '
                + " · ".join(f"{e(t)} {record.wins_by_table[t]}/{n}" for t, n in record.by_table.most_common())
                + "</p>"
            )
        facts = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
        return (
            f'<div class="block"><h3>Patron {e(i.data.patron_id or "")}: the record</h3><table class="facts small">{facts}</table>'
            f'{strip}{tables}<p class="muted small">The round below is the one whose bet ({e(str(ev.get("last_bet", "")))}) made the chart signal.</p></div>'
        )

    def dealer_view(self, i: Incident) -> str:
        ev = i.evidence
        record = i.dealer
        rows = [
            ("rounds with dealing errors (chart)", f"{ev.get('rounds_with_errors')} of {ev.get('rounds')}"),
            ("usual rate", f"one in {round(1 / ev['in_control_rate']) if ev.get('in_control_rate') else '?'}"),
        ]
        listing = ""
        if record is not None:
            rows.append(
                ("rounds dealt in this log up to the alert", f"{record.rounds} (tables {', '.join(e(t) for t in sorted(record.tables))})")
            )
            items = "".join(
                f"<tr><td>{e(table)}</td><td>{e(round_id)}</td><td>"
                + ", ".join(f"<code>{e(rule)}</code> {self.link(alert_id)}" for rule, alert_id in found)
                + "</td></tr>"
                for (table, round_id), found in record.error_rounds.items()
            )
            listing = (
                '<h4>Rounds the alerts blamed on this dealer</h4><table class="grid"><thead><tr><th>table</th><th>round</th><th>alerts</th></tr></thead>'
                f"<tbody>{items}</tbody></table>"
            )
        facts = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
        return f'<div class="block"><h3>Dealer {e(i.data.dealer_id or "")}: the record</h3><table class="facts small">{facts}</table>{listing}</div>'

    def repeat_view(self, i: Incident) -> str:
        ev = i.evidence
        later, earlier = i.shoe, i.earlier_shoe
        run = ev.get("run") or []
        if later is None or earlier is None:
            return f'<div class="block"><h3>The repeated run</h3><p>{cards_html(run)}</p><p class="missing">The earlier shoe is not in the log.</p></div>'
        a, b = common_run(later, earlier, run, ev.get("index"))
        if not a:
            return f'<div class="block"><h3>The repeated run</h3><p>{cards_html(run)}</p></div>'
        chunks = []
        for start in range(0, len(a), 16):
            top = "".join(f'<td><div class="idx">{index}</div>{card_html(code)}</td>' for index, code in a[start : start + 16])
            bottom = "".join(f'<td>{card_html(code)}<div class="idx">{index}</div></td>' for index, code in b[start : start + 16])
            chunks.append(
                f'<table class="pair"><tr><th>{e(later.shoe_id)}</th>{top}</tr><tr><th>{e(earlier.shoe_id)}</th>{bottom}</tr></table>'
            )
        return (
            f'<div class="block"><h3>The repeated run, side by side</h3>'
            f"<p><strong>{len(a)} cards</strong> in the same order: cards {a[0][0]}–{a[-1][0]} of shoe {e(later.shoe_id)} "
            f"are cards {b[0][0]}–{b[-1][0]} of shoe {e(earlier.shoe_id)}, {_shoes_back(ev.get('shoes_back'))} at this table. "
            f"A fair shuffle repeats a run of {patterns.REPEAT_K} practically never.</p>{''.join(chunks)}</div>"
        )

    def copies_view(self, i: Incident) -> str:
        shoe = i.shoe
        card = i.evidence.get("card")
        if shoe is None or not isinstance(card, str):
            return ""
        rows = []
        for n, (index, code) in enumerate(((x, c) for x, c in shoe.sequence() if c == card), start=1):
            where, round_id = shoe.went(index)
            went = {PLAYER: "Player", BANKER: "Banker", BURNED: "burned"}.get(where, "not yet in a hand or burn")
            rows.append(
                f'<tr class="{"bad" if index == i.index else ""}"><td class="num">{n}</td><td class="num">{index}</td><td>{card_html(code)}</td>'
                f"<td>{e(went)}{f' · {e(round_id)}' if round_id else ''}</td></tr>"
            )
        decks = f"{'an' if shoe.decks in (8, 11) else 'a'} {shoe.decks}-deck shoe"
        return (
            f'<div class="block"><h3>Every {card_html(card)} out of this shoe</h3>'
            f'<p>{decks.capitalize()} holds {shoe.decks} of each card (Art. 1); copy {len(rows)} came out.</p><table class="grid"><thead><tr><th class="num">copy</th>'
            f'<th class="num">shoe index</th><th>card</th><th>went to</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
        )

    def strip_view(self, shoe: ShoeTrail, index: int, around: int = 6) -> str:
        cells = []
        for x in range(max(1, index - around), min(shoe.last_index, index + around) + 1):
            where, round_id = shoe.went(x)
            label = {PLAYER: "P", BANKER: "B", BURNED: "burn"}.get(where, "—")
            cls = "cell focus" if x == index else "cell"
            cells.append(
                f'<div class="{cls}"><div class="idx">{x}</div>{card_html(shoe.card(x))}<div class="small">{label}</div>'
                f'<div class="muted tiny">{e(_short_round(round_id))}</div></div>'
            )
        return (
            f'<div class="block"><h3>Shoe {e(shoe.shoe_id)} around card {index}</h3>'
            f'<div class="strip">{"".join(cells)}</div>'
            '<p class="muted small">P/B: dealt to the Player/Banker; burn: burned; —: neither.</p></div>'
        )


def bead_road(shoe: ShoeTrail) -> str:
    """Outcomes in columns of six, as the table's bead plate shows them (Banker red, Player blue)."""
    cells = [chr(x) for x in shoe.outcomes]
    columns = [cells[n : n + 6] for n in range(0, len(cells), 6)]
    html_columns = "".join(
        '<div class="col">' + "".join(f'<span class="bead {x}">{x}</span>' for x in column) + "</div>" for column in columns
    )
    return f'<div class="bead-road">{html_columns}</div>'


def _shoes_back(back: Any) -> str:
    if back == 1:
        return "the shoe before"
    return f"{back} shoes before" if isinstance(back, int) else "an earlier shoe"


def _round_label(i: Incident) -> str:
    if i.round is not None and i.round.opened is not None:
        return f"round {i.round.opened.round_no}"
    return i.data.round_id or ""


def _short_round(round_id: str | None) -> str:
    return round_id.rsplit(":", 1)[-1].rsplit("-", 1)[-1] if round_id else ""


def _ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def _percent(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, (int, float)) else "?"


def _result_text(result: RoundResult) -> str:
    """The outcome and pairs, for a row whose totals stand beside it (a declared result may contradict them)."""
    pairs = [name for name, yes in (("Player pair", result.player_pair), ("Banker pair", result.banker_pair)) if yes]
    outcome = "Tie" if result.outcome is Outcome.TIE else f"{result.outcome.value.capitalize()} wins"
    return e(outcome) + (f' <span class="muted">· {", ".join(pairs)}</span>' if pairs else "")


def _cards_in_text(sentence: str) -> str:
    """Escape ``sentence`` and show the card codes in it (``the 7D``, ``7D(68)``) as cards."""
    words = []
    for word in e(sentence).split(" "):
        core = word.rstrip(".,;:)")
        tail = word[len(core) :]
        code, _, rest = core.partition("(")
        if code in CARDS:
            words.append(card_html(code) + (f'<span class="muted">({rest}</span>' if rest else "") + tail)
        else:
            words.append(word)
    return " ".join(words)


CSS = """
:root { --ink:#1c2024; --muted:#5f6b76; --line:#d3d9df; --soft:#f4f6f8; --red:#c8102e; --crit:#a3161a; --warn:#8a5a00;
  --info:#1f5fa8; --bad:#fdecec; --focus:#fff6d6; --banker:#c8102e; --player:#1f5fa8; --tie:#237a3b; }
* { box-sizing: border-box; }
html { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
body { font: 15px/1.45 "DejaVu Sans", "Segoe UI", "Helvetica Neue", Arial, sans-serif; color: var(--ink); margin: 0 auto;
  max-width: 1180px; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 26px; margin: 0; letter-spacing: .01em; }
h2 { font-size: 19px; margin: 0 0 6px; display: flex; align-items: center; gap: 10px; flex-wrap: wrap; }
h3 { font-size: 15px; margin: 18px 0 8px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); }
h4 { font-size: 14px; margin: 14px 0 6px; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: .92em; }
a { color: var(--info); text-decoration: none; }
a:hover { text-decoration: underline; }
.subtitle { color: var(--muted); margin: 2px 0 14px; }
.muted { color: var(--muted); }
.small { font-size: 13px; }
.tiny { font-size: 11px; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.report-head { border-bottom: 3px solid var(--ink); padding-bottom: 14px; margin-bottom: 18px; }
.head-grid { display: flex; gap: 28px; flex-wrap: wrap; align-items: flex-start; }
.head-grid > .facts { flex: 1 1 520px; }
.head-grid > .by-rule { flex: 0 0 auto; }
table { border-collapse: collapse; }
.facts th { text-align: left; font-weight: 600; padding: 3px 14px 3px 0; vertical-align: top; white-space: nowrap; }
.facts td { padding: 3px 0; }
.facts.small th, .facts.small td { font-size: 13.5px; padding-top: 1px; padding-bottom: 1px; }
.grid { width: auto; margin: 4px 0 8px; font-size: 13.5px; }
.grid th, .grid td { border: 1px solid var(--line); padding: 4px 8px; vertical-align: middle; }
.grid thead th { background: var(--soft); text-align: left; font-weight: 600; }
.grid tr.total td, .grid tr.total th { background: var(--soft); font-weight: 600; }
.by-rule { min-width: 400px; margin-top: 0; }
.toc { margin-bottom: 28px; }
.toc h2 { font-size: 18px; }
.toc .summary { max-width: 520px; }
.toc td.where, .toc td.time { white-space: nowrap; }
.sev { display: inline-block; border-radius: 3px; padding: 0 7px; font-size: 12px; font-weight: 700; letter-spacing: .03em;
  text-transform: uppercase; color: #fff; line-height: 20px; white-space: nowrap; }
.sev.critical { background: var(--crit); } .sev.warning { background: var(--warn); } .sev.info { background: var(--info); }
section.alert { border: 1px solid var(--line); border-left: 6px solid var(--line); border-radius: 4px; padding: 16px 20px 10px;
  margin: 0 0 26px; }
section.alert.critical { border-left-color: var(--crit); }
section.alert.warning { border-left-color: var(--warn); }
section.alert.info { border-left-color: var(--info); }
h2 .n { color: var(--muted); font-weight: 400; }
h2 .rule { font-size: 18px; }
h2 .article { font-weight: 400; color: var(--muted); }
p.summary { font-size: 17px; margin: 4px 0 8px; }
.ids { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 0 0 6px; font-size: 13px; }
.card { display: inline-block; min-width: 2.3em; padding: 1px 4px; margin: 1px 2px; border: 1px solid #9aa5b1; border-radius: 4px;
  background: #fff; color: #111; font-weight: 700; text-align: center; font-size: 14px; line-height: 1.35;
  box-shadow: 0 1px 0 rgba(0,0,0,.08); white-space: nowrap; }
.card.red { color: var(--red); }
.card.none, .card.blank { color: var(--muted); border-style: dashed; min-height: 1.5em; }
.card.white { background: #fffbe6; border-color: var(--warn); color: var(--warn); font-size: 11px; }
.hand.player { color: var(--player); font-weight: 700; } .hand.banker { color: var(--banker); font-weight: 700; }
.burned { font-style: italic; color: var(--muted); }
.hot { color: var(--crit); font-weight: 700; }
.flag { font-size: 11px; border: 1px solid var(--warn); color: var(--warn); border-radius: 3px; padding: 0 4px; }
tr.bad td { background: var(--bad); }
tr.focus td { background: var(--focus); }
tr.bad.focus td { background: #fde2cf; }
tr.differs td:last-child { font-weight: 700; color: var(--crit); }
.bets td.id, .bets td.num, .bets td.money, .bets th, .bets tr.total td { white-space: nowrap; }
.grid.bets { font-size: 13px; }
.grid.bets th, .grid.bets td { padding: 3px 6px; }
.bets td.history { min-width: 200px; }
.cards-order td:nth-child(4) { color: var(--muted); }
.hands th { text-align: left; }
ul.differences { margin: 6px 0 4px; padding-left: 20px; }
ul.differences li { margin: 2px 0; }
.ok-note { color: var(--tie); margin: 4px 0; }
.kv th { text-align: left; font-weight: 600; padding: 2px 12px 2px 0; vertical-align: top; color: var(--muted); font-size: 13px; }
.kv td { padding: 2px 0; font-size: 13.5px; }
.kv .kv { margin: 0; }
.evidence { margin-bottom: 4px; }
.strip { display: flex; flex-wrap: wrap; gap: 4px 3px; margin: 6px 0; }
.strip .cell { text-align: center; padding: 2px 1px; min-width: 2.9em; }
.idx { font-size: 11px; color: var(--muted); }
.strip .cell.focus { background: var(--focus); border-radius: 4px; }
.strip .cell.next { border-left: 2px dashed var(--line); padding-left: 6px; }
.end-of-shoe .cell.behind { background: #eceff3; }
.end-of-shoe .cell.min-line { border-left: 2px dashed var(--crit); }
.end-of-shoe .cell.cut-card { background: #fffbe6; }
.pair { border-collapse: separate; border-spacing: 3px 0; margin: 6px 0; }
.pair td { text-align: center; padding: 1px; vertical-align: top; }
.pair th { text-align: right; padding-right: 6px; font-size: 13px; }
.drift td.barcell { width: 320px; }
.bar { height: 9px; border-radius: 2px; margin: 1px 0; }
.bar.obs.banker { background: var(--banker); } .bar.obs.player { background: var(--player); } .bar.obs.tie { background: var(--tie); }
.bar.exp { background: transparent; border: 1.5px solid #333; height: 8px; }
.bead-road { display: flex; gap: 2px; flex-wrap: wrap; margin: 6px 0; }
.bead-road .col { display: flex; flex-direction: column; gap: 2px; }
.bead { width: 20px; height: 20px; border-radius: 50%; color: #fff; font-size: 11px; font-weight: 700; text-align: center; line-height: 20px; }
.bead.B { background: var(--banker); } .bead.P { background: var(--player); } .bead.T { background: var(--tie); }
.wl { display: flex; flex-wrap: wrap; gap: 2px; margin: 4px 0; }
.wl span { width: 18px; height: 18px; font-size: 11px; text-align: center; line-height: 18px; font-weight: 700; border-radius: 2px; }
.wl .w { background: var(--tie); color: #fff; } .wl .l { background: #e3e7eb; color: var(--muted); }
.missing { color: var(--warn); }
.back { text-align: right; font-size: 12px; margin: 6px 0 0; }
footer { margin-top: 30px; color: var(--muted); font-size: 12px; border-top: 1px solid var(--line); padding-top: 8px; }
@media screen { section.alert { overflow-x: auto; } }
@media print, (max-width: 900px) {
  body { padding: 10px; }
  .grid { font-size: 11.5px; }
  .grid th, .grid td, .grid.bets th, .grid.bets td { padding: 2px 4px; }
  .grid.bets { font-size: 11px; }
  .bets td.money, .bets th, .bets tr.total td, .toc td.where, .toc td.time { white-space: normal; }
  .bets td.money .small { white-space: nowrap; }
  .bets td.history { min-width: 0; }
  .card { font-size: 12px; min-width: 2em; padding: 0 2px; margin: 0 1px; }
  section.alert { padding: 10px 12px 6px; }
  p.summary { font-size: 16px; }
  .head-grid > .facts { flex-basis: 100%; }
  .by-rule { min-width: 0; }
}
@media print {
  body { max-width: none; padding: 0; font-size: 10pt; }
  .toc { break-after: page; }
  section.alert { break-inside: avoid-page; border-left-width: 4px; }
  .block, .grid, .strip { break-inside: avoid; }
  .back { display: none; }
  a { color: inherit; }
  @page { margin: 14mm 12mm; }
}
"""
