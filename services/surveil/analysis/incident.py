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
from ..core.money import Commission, Rounding, Settlement
from ..core.play import Coup, Outcome, RoundResult, banker_rule, deal, hand_total, player_rule, result_of
from ..core.profiles import InvalidProfileError, load_profile
from ..core.shoe import CARDS_PER_DECK
from ..core.table import Bet, HandCard, Round, decided_bets
from ..detect import patterns
from ..detect.watch import DEALER_CODES, RECENT_ROUNDS
from ..events import models
from .replay import ReplayResult

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
class RoundTrail:
    """A round as the log told of it: the core's model of it (``round``: terms, bets, hands,
    declared result), and what the report shows besides: when each step came, each bet's history,
    the burns of the round, the settlements as they were published."""

    round: Round
    opened_at: datetime
    closed_at: datetime | None = None
    completed_at: datetime | None = None
    carried_from: str | None = None  # the round whose tie carried bets into this one (Art. 12)
    burns: list[int] = field(default_factory=list)
    history: dict[str, list[tuple[datetime, str, str, int, bool]]] = field(
        default_factory=dict
    )  # bet id -> time, action, spot, amount, late
    settlements: list[tuple[datetime, str, models.BetSettledData]] = field(default_factory=list)  # time, event id, data
    round_settled: list[models.RoundSettledData] = field(default_factory=list)
    pinned: bool = False

    @property
    def table_id(self) -> str:
        return self.round.table_id

    @property
    def round_id(self) -> str:
        return self.round.round_id

    @property
    def shoe_id(self) -> str:
        return self.round.shoe_id


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

    def new_round(self, played: Round, opened_at: datetime) -> RoundTrail:
        rnd = self.rounds[played.round_id] = RoundTrail(played, opened_at)
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

    alert: models.AlertRaised
    order: int  # in the order raised
    evidence: dict[str, Any]  # as it was when raised (a detector may keep changing what it handed over)
    round: RoundTrail | None = None
    shoe: ShoeTrail | None = None
    earlier_shoe: ShoeTrail | None = None  # SHOE_REPEAT: the shoe the run came from
    drift_shoes: list[ShoeTrail] = field(default_factory=list)  # OUTCOME_DRIFT: the table's shoes tested
    patron: PatronRecord | None = None  # PATRON_WIN_RATE: the record when the chart signalled
    dealer: DealerRecord | None = None  # DEALER_ERROR_RATE: the record when the chart signalled

    @property
    def data(self) -> models.AlertRaisedData:
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
        self.by_alert_id: dict[str, Incident] = {}
        self.wanted: dict[tuple[str, str], set[int]] = {}  # (table, shoe) -> indices an alert needs the round of
        self.first_time: datetime | None = None
        self.last_time: datetime | None = None
        self.events = 0
        self.profiles: Counter[str] = Counter()  # the house profiles the rounds were opened under

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

    def event(self, event: models.Event) -> None:
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

    def _shoe_started(self, event: models.ShoeStarted) -> None:
        d = event.data
        shoe = self.table(d.table_id).shoe(d.shoe_id)
        if shoe.started_at is None:
            shoe.decks, shoe.automatic, shoe.started_at = d.decks, d.automatic, event.time

    def _card_read(self, event: models.CardRead) -> None:
        d = event.data
        self.table(d.table_id).shoe(d.shoe_id).read(d.index, d.card, d.face_up)

    def _cut_card(self, event: models.CutCardReached) -> None:
        d = event.data
        shoe = self.table(d.table_id).shoe(d.shoe_id)
        if shoe.cut_index is None:
            shoe.cut_index = d.index

    def _shoe_ended(self, event: models.ShoeEnded) -> None:
        d = event.data
        shoe = self.table(d.table_id).shoe(d.shoe_id)
        shoe.ended_at, shoe.cards_out = event.time, d.cards_out

    def _round_opened(self, event: models.RoundOpened) -> None:
        d = event.data
        table = self.table(d.table_id)
        if table.round(d.round_id) is not None:
            return  # redelivered
        previous = table.round(table.last_round_id) if table.last_round_id else None
        played = Round(
            d.table_id, d.round_id, d.shoe_id, d.round_no, d.dealer_id, d.profile, d.demo, d.min_bet, d.max_bet, d.currency, seats=d.seats
        )
        rnd = table.new_round(played, event.time)
        if previous is not None:
            played.carry_over(previous.round, d.carried_bet_ids)
            for bet in played.bets.values():
                rnd.history[bet.bet_id] = [(event.time, "carried", str(bet.spot), bet.amount, False)]
            if played.bets:
                rnd.carried_from = previous.round_id
        table.last_round_id = d.round_id
        self.profiles[d.profile] += 1
        table.shoe(d.shoe_id).slot(d.round_id)
        tables = self.dealer(d.dealer_id).tables
        tables[d.table_id] = tables.get(d.table_id, 0) + 1

    def _bet(self, event: models.BetPlaced | models.BetChanged | models.BetWithdrawn) -> None:
        d = event.data
        rnd = self.table(d.table_id).round(d.round_id)
        if rnd is None:
            return
        played = rnd.round
        late = rnd.closed_at is not None or played.ended
        if isinstance(d, models.BetPlacedData):
            if d.bet_id not in played.bets:
                played.bets[d.bet_id] = Bet(d.bet_id, d.patron_id, d.seat, d.spot, d.amount)
                rnd.history[d.bet_id] = [(event.time, "placed", str(d.spot), d.amount, late)]
            return
        bet = played.bets.get(d.bet_id)
        if bet is None:
            return
        if isinstance(d, models.BetChangedData):
            bet.spot, bet.amount = d.spot, d.amount
            rnd.history[d.bet_id].append((event.time, "changed", str(d.spot), d.amount, late))
        else:
            bet.withdrawn = True
            rnd.history[d.bet_id].append((event.time, "withdrawn", str(bet.spot), bet.amount, late))

    def _bets_closed(self, event: models.BetsClosed) -> None:
        rnd = self.table(event.data.table_id).round(event.data.round_id)
        if rnd is not None and rnd.closed_at is None:
            rnd.closed_at = event.time

    def _cards_burned(self, event: models.CardsBurned) -> None:
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

    def _round_completed(self, event: models.RoundCompleted) -> None:
        d = event.data
        table = self.table(d.table_id)
        rnd = table.round(d.round_id)
        if rnd is None or rnd.round.ended:
            return
        played = rnd.round
        played.complete(
            [HandCard(x.index, x.card) for x in d.player],
            [HandCard(x.index, x.card) for x in d.banker],
            RoundResult(d.player_total, d.banker_total, d.outcome, d.player_pair, d.banker_pair),
            d.squeezed_by,
        )
        rnd.completed_at = event.time
        shoe = table.shoe(d.shoe_id)
        for where, hand in ((PLAYER, d.player), (BANKER, d.banker)):
            for card in hand:
                shoe.mark(card.index, where, d.round_id)
        if not played.demo:
            shoe.outcomes.append(ord(OUTCOME_LETTER[d.outcome]))
            shoe.outcome_rounds.append(played.round_no)
            self.dealer(played.dealer_id).rounds += 1
            self._patron_bets(played)
        wanted = self.wanted.get((d.table_id, d.shoe_id))
        if wanted and any(card.index in wanted for card in (*d.player, *d.banker)):
            table.pin_round(d.round_id)

    def _patron_bets(self, played: Round) -> None:
        """The decided Player/Banker bets, as the patron win-rate chart counts them."""
        for bet, won in decided_bets(played):
            record = self.patrons.get(bet.patron_id)
            if record is None:
                record = self.patrons[bet.patron_id] = PatronRecord()
            record.decided += 1
            record.wins += won
            record.staked += bet.amount
            by_table, wins_by_table = record.by_table, record.wins_by_table
            by_table[played.table_id] = by_table.get(played.table_id, 0) + 1
            wins_by_table[played.table_id] = wins_by_table.get(played.table_id, 0) + won
            strip = record.strip
            strip.append(87 if won else 76)  # W, L
            if len(strip) > STRIP_LENGTH:
                del strip[0]

    def _round_voided(self, event: models.RoundVoided) -> None:
        rnd = self.table(event.data.table_id).round(event.data.round_id)
        if rnd is not None and not rnd.round.ended:
            rnd.round.voided, rnd.round.void_reason = True, event.data.reason

    def _bet_settled(self, event: models.BetSettled) -> None:
        rnd = self.table(event.data.table_id).round(event.data.round_id)
        if rnd is not None:
            rnd.settlements.append((event.time, event.id, event.data))

    def _round_settled(self, event: models.RoundSettled) -> None:
        rnd = self.table(event.data.table_id).round(event.data.round_id)
        if rnd is not None:
            rnd.round_settled.append(event.data)

    # ---- the alerts ------------------------------------------------------------------------

    def alert(self, alert: models.AlertRaised) -> None:
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
        self.by_alert_id[d.alert_id] = incident

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

    def resolve(self, incident: Incident) -> None:
        """Pin what the alert needs that had not arrived when it was raised: live, the alerts'
        topic may be read ahead of the round's (the console renders an alert when asked)."""
        d = incident.alert.data
        table = self.tables.get(d.table_id)
        if table is None:
            return
        if incident.round is None and d.round_id:
            incident.round = table.pin_round(d.round_id)
        shoe_id = d.shoe_id or (incident.round.shoe_id if incident.round else None)
        if incident.shoe is None and shoe_id and table.find_shoe(shoe_id) is not None:
            incident.shoe = table.pin_shoe(shoe_id)

    # ---- the page --------------------------------------------------------------------------

    def render(self, result: ReplayResult | None = None, log_sha256: str | None = None) -> str:
        """The report (``incident_page``: Jinja2 templates and one stylesheet, shared with the console)."""
        from .incident_page import report_html

        return report_html(self, result, log_sha256)


_HANDLERS: dict[type[models.Event], Any] = {
    models.ShoeStarted: IncidentCollector._shoe_started,
    models.CardRead: IncidentCollector._card_read,
    models.CutCardReached: IncidentCollector._cut_card,
    models.ShoeEnded: IncidentCollector._shoe_ended,
    models.RoundOpened: IncidentCollector._round_opened,
    models.BetPlaced: IncidentCollector._bet,
    models.BetChanged: IncidentCollector._bet,
    models.BetWithdrawn: IncidentCollector._bet,
    models.BetsClosed: IncidentCollector._bets_closed,
    models.CardsBurned: IncidentCollector._cards_burned,
    models.RoundCompleted: IncidentCollector._round_completed,
    models.RoundVoided: IncidentCollector._round_voided,
    models.BetSettled: IncidentCollector._bet_settled,
    models.RoundSettled: IncidentCollector._round_settled,
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
    played = rnd.round
    if not played.completed:
        return None
    hands = [(x.index, x.card) for x in (*played.player, *played.banker) if x.card]
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


def cards_result(played: Round) -> RoundResult:
    """What the cards in the hands say (Art. 5, 11-13), whatever the table declared."""
    player, banker = played.hands()
    return result_of([x.card for x in player], [x.card for x in banker])


def play_differences(played: Round, right: CorrectPlay) -> list[str]:
    """Where the round as dealt departs from the correct play, one sentence each (plain text)."""
    out: list[str] = []
    dealt_p = [(x.index, x.card) for x in played.player if x.card]
    dealt_b = [(x.index, x.card) for x in played.banker if x.card]
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
    actual = cards_result(played)
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


def rules_give(bet: Bet, result: RoundResult | None, voided: bool, commission: tuple[Commission, Rounding] | None) -> Settlement | None:
    """``core.money.settle`` for the bet as it stood, under the round's commission."""
    if voided:
        return money.VOID
    if result is None or commission is None:
        return None
    return money.settle(bet.spot, bet.amount, result, *commission)


# ---- text ------------------------------------------------------------------------------------

SUIT_SYMBOL = {"S": "\u2660", "H": "\u2665", "D": "\u2666", "C": "\u2663"}


def card_text(code: str) -> str:
    """``"10H"`` -> ``"10♥"``."""
    return code[:-1] + SUIT_SYMBOL.get(code[-1], code[-1])


def _ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")
