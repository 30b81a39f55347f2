"""The event contract v1 (docs/contract.md): one CloudEvents 1.0 structured-mode JSON object per event.

Each event type is a ``msgspec`` struct: the CloudEvents envelope (``Event``) with a typed
``data``. The ``type`` attribute tags the union, so ``decode`` picks and validates the right
model in one pass. Extension attributes on the envelope are allowed (CloudEvents permits them);
unknown fields inside ``data`` are not.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from ..core.money import BetResult, Spot
from ..core.play import Outcome
from ..core.profiles import load_profile
from . import topics

CardCode = Annotated[str, msgspec.Meta(pattern=r"^(A|[2-9]|10|J|Q|K)[SHDC]$", description="rank + suit, e.g. 10H")]
# Upper bounds far above any real table, so that absurd input is refused at the door: a trillion
# (10**12) currency units a stake, and ledger sums stay in Redis' 64-bit counters; a signed amount
# within 2**53, the largest integer every JSON reader keeps exact; 100,000 cards a shoe.
Amount = Annotated[int, msgspec.Meta(ge=0, le=10**12, description="currency units")]
SignedAmount = Annotated[int, msgspec.Meta(ge=-(2**53 - 1), le=2**53 - 1, description="currency units, signed")]
Index = Annotated[int, msgspec.Meta(ge=1, le=100_000, description="1-based position out of the shoe, burns included")]
CardCount = Annotated[int, msgspec.Meta(ge=0, le=100_000)]
# Ids, texts and lists are bounded as well, so that no one event can swell what a service keeps
# (two bets with patron ids of 600 KB made a table's detector state larger than a broker record).
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Text = Annotated[str, msgspec.Meta(max_length=4000)]
Indices = Annotated[list[Index], msgspec.Meta(max_length=1000)]
Decks = Annotated[int, msgspec.Meta(ge=6, le=12)]
Seat = Annotated[str, msgspec.Meta(pattern=r"^([1-9][0-9]?|standing)$", description="a seat number, or standing")]
# Where a bet's chips lie on the layout: the box of a seat (its number), or the standing bettors' area.
Box = Annotated[str, msgspec.Meta(pattern=r"^([1-9][0-9]?|standing)$", description="a seat's box, or standing")]
Seats = Annotated[int, msgspec.Meta(ge=7, le=99, description="the table's seats (Art. 1: seven or more)")]
Total = Annotated[int, msgspec.Meta(ge=0, le=9)]
Hash = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$", description="sha256, hex")]
Signature = Annotated[
    str, msgspec.Meta(pattern="^[0-9a-f]{16}:[0-9a-f]{128}$", description="the signing key's id and its Ed25519 signature, hex")
]
UtcTime = Annotated[datetime, msgspec.Meta(tz=True, description="RFC 3339, UTC, from 2000 to 2099")]
# An event's time: any clock a casino runs on, with room to work with it (a time at the calendar's
# ends overflows as soon as it is shifted into Macau's time zone).
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)


class Data(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    table_id: Id


# ---- baccarat.shoe ------------------------------------------------------------------------


class ShoeStartedData(Data, frozen=True, kw_only=True):
    shoe_id: Id
    decks: Decks
    automatic: bool


class CardReadData(Data, frozen=True, kw_only=True):
    shoe_id: Id
    index: Index
    card: CardCode
    face_up: bool


class CutCardReachedData(Data, frozen=True, kw_only=True):
    shoe_id: Id
    index: CardCount


class ShoeEndedData(Data, frozen=True, kw_only=True):
    shoe_id: Id
    cards_out: CardCount


# ---- baccarat.table -----------------------------------------------------------------------


class RoundOpenedData(Data, frozen=True, kw_only=True, omit_defaults=True):
    shoe_id: Id
    round_id: Id
    round_no: Annotated[int, msgspec.Meta(ge=1, le=100_000)]
    dealer_id: Id
    profile: Id
    demo: bool
    min_bet: Amount
    max_bet: Amount
    currency: Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{3}$")]
    carried_bet_ids: Annotated[list[Id], msgspec.Meta(max_length=1000)]
    seats: Seats | None = None  # added in v1.2: absent from older logs

    def __post_init__(self) -> None:  # an unknown profile is an InvalidProfileError, a ValueError
        load_profile(self.profile)  # every check of the round needs its rules (fuzzing crashed the detectors)


def round_id_of(table_id: str, shoe_id: str, round_no: int) -> str:
    """The id the table-controller gives a table's ``round_no``-th round in a shoe (demonstration
    rounds count): the same inputs give the same id after a restart or a redelivery."""
    return f"{table_id}:{shoe_id}:{round_no}"


class BetPlacedData(Data, frozen=True, kw_only=True, omit_defaults=True):
    round_id: Id
    bet_id: Id
    patron_id: Id
    seat: Seat  # who placed it: a seated bettor, or a standing one
    spot: Spot
    amount: Amount
    box: Box | None = None  # where its chips lie (added in v1.2: absent from older logs)


class BetChangedData(Data, frozen=True, kw_only=True):
    round_id: Id
    bet_id: Id
    spot: Spot
    amount: Amount


class BetWithdrawnData(Data, frozen=True, kw_only=True):
    round_id: Id
    bet_id: Id


class BetsClosedData(Data, frozen=True, kw_only=True):
    round_id: Id


class CardsBurnedData(Data, frozen=True, kw_only=True):
    shoe_id: Id
    round_id: Id | None
    indices: Indices


class HandCard(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    index: Index
    card: CardCode


class RoundCompletedData(Data, frozen=True, kw_only=True):
    shoe_id: Id
    round_id: Id
    player: Annotated[list[HandCard], msgspec.Meta(max_length=1000)]
    banker: Annotated[list[HandCard], msgspec.Meta(max_length=1000)]
    player_total: Total
    banker_total: Total
    outcome: Outcome
    player_pair: bool
    banker_pair: bool
    squeezed_by: Id | None


class PlacedCard(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A card placed in a hand box: its shoe index, and the card where the box recognised it."""

    index: Index
    card: CardCode | None = None


class RoundVoidedData(Data, frozen=True, kw_only=True, omit_defaults=True):
    round_id: Id
    reason: Text
    # The cards dealt to each hand before the void, in the order dealt (added in v1.2: absent from
    # older logs, where the detectors take the cards burned for the round).
    player: Annotated[list[PlacedCard], msgspec.Meta(max_length=3)] | None = None
    banker: Annotated[list[PlacedCard], msgspec.Meta(max_length=3)] | None = None


# ---- baccarat.settlement ------------------------------------------------------------------


class BetSettledData(Data, frozen=True, kw_only=True):
    round_id: Id
    bet_id: Id
    patron_id: Id
    spot: Spot
    amount: Amount
    result: BetResult
    net: SignedAmount
    commission: Amount


class RoundSettledData(Data, frozen=True, kw_only=True):
    round_id: Id
    staked: Amount
    paid_out: Amount
    commission: Amount
    house_net: SignedAmount


# ---- baccarat.alerts ----------------------------------------------------------------------


class AlertRaisedData(Data, frozen=True, kw_only=True, omit_defaults=True):
    alert_id: Id
    rule: Id
    article: Id
    severity: Literal["info", "warning", "critical"]
    summary: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
    shoe_id: Id | None = None
    round_id: Id | None = None
    bet_id: Id | None = None
    patron_id: Id | None = None
    dealer_id: Id | None = None
    evidence: dict[str, Any] = {}
    # The proof (surveil.detect.alerts): sha256 of the table's previous alert's chain and this
    # alert (envelope and data), and the detectors' Ed25519 signature of it; `surveil verify`
    # checks a recorded alert log with the detectors' public key.
    chain: Hash | None = None
    signature: Signature | None = None


class ChainHead(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How far a table's chain of alerts got: how many alerts, and the chain of the last."""

    count: Annotated[int, msgspec.Meta(ge=1)]
    head: Hash


class AlertCheckpointData(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the detectors had raised by the checkpoint's time at every table of one partition of
    the alerts topic (its subject, ``partition/<p>``: it is about no one table), signed. Every
    partition gets one every ``every`` seconds (0: the one closing an offline replay), in parts
    when its tables are more than a record holds (its id then ends ``/<n>of<N>``)."""

    partition: Annotated[int, msgspec.Meta(ge=0)]
    partitions: Annotated[int, msgspec.Meta(ge=1)]
    every: Annotated[int, msgspec.Meta(ge=0)]
    tables: dict[Id, ChainHead]
    signature: Signature | None = None


# ---- baccarat.alert-actions: what the surveillance room did about an alert (the console) ------

AlertActionKind = Literal["acknowledge", "assign", "note", "close"]
CloseReason = Literal["confirmed", "false_alarm", "dealer_corrected"]
Role = Literal["operator", "supervisor", "auditor"]
Note = Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]


class AlertActionData(Data, frozen=True, kw_only=True, omit_defaults=True):
    """One step in handling an alert: who (``user``, in ``role``) did what; the envelope's
    ``time`` is when. ``assignee`` goes with ``assign``, ``reason`` with ``close``; a ``note``
    with ``note`` (and may explain any other action)."""

    alert_id: Id
    action: AlertActionKind
    user: Id
    role: Role
    assignee: Id | None = None
    reason: CloseReason | None = None
    note: Note | None = None

    def __post_init__(self) -> None:
        if (self.action == "assign") != (self.assignee is not None):
            raise ValueError("assignee goes with an assign action, and only with it")
        if (self.action == "close") != (self.reason is not None):
            raise ValueError("reason goes with a close action, and only with it")
        if self.action == "note" and self.note is None:
            raise ValueError("a note action needs its note")


# ---- baccarat.inputs: what the table's dealer console and sensors report (docs/table-inputs.md) --


class RoundOpenInput(Data, frozen=True, kw_only=True, omit_defaults=True):
    """The dealer opens a round for bets (a demonstration round when ``demo``) at a table of
    ``seats`` seats."""

    shoe_id: Id
    dealer_id: Id
    profile: Id
    demo: bool
    min_bet: Amount
    max_bet: Amount
    currency: Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{3}$")]
    seats: Seats | None = None


class BetPlaceInput(Data, frozen=True, kw_only=True, omit_defaults=True):
    """A bet sensor saw a new stake on a spot, in a box of the layout, placed by a seated or a
    standing patron."""

    bet_id: Id
    patron_id: Id
    seat: Seat
    spot: Spot
    amount: Amount
    box: Box | None = None


class BetChangeInput(Data, frozen=True, kw_only=True):
    bet_id: Id
    spot: Spot
    amount: Amount


class BetWithdrawInput(Data, frozen=True, kw_only=True):
    bet_id: Id


class BetsCloseInput(Data, frozen=True, kw_only=True):
    pass


class CardsBurnInput(Data, frozen=True, kw_only=True):
    """The dealer discarded these cards (by shoe index) instead of dealing them."""

    indices: Indices


class CardPlaceInput(Data, frozen=True, kw_only=True):
    """The dealer placed the card that left the shoe at ``index`` in a hand box. Where the box
    recognises cards, ``card`` is what it saw; otherwise null and the shoe's read is used."""

    hand: Literal["player", "banker"]
    index: Index
    card: CardCode | None = None


class SqueezeInput(Data, frozen=True, kw_only=True):
    patron_id: Id


class ResultInput(Data, frozen=True, kw_only=True):
    """The result the table announces when the dealer closes the round."""

    player_total: Total
    banker_total: Total
    outcome: Outcome
    player_pair: bool
    banker_pair: bool


class RoundVoidInput(Data, frozen=True, kw_only=True):
    reason: Text


# ---- the envelope -------------------------------------------------------------------------


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """CloudEvents 1.0 attributes shared by every event; ``subject`` is the table id."""

    specversion: Literal["1.0"]
    id: Id
    source: Id
    time: UtcTime
    subject: Id
    datacontenttype: Literal["application/json"]

    topic: ClassVar[str]  # the Kafka topic this type travels on

    @property
    def event_type(self) -> str:
        """The CloudEvents ``type``, e.g. ``baccarat.card.read`` (the tag that picks the model)."""
        return str(self.__struct_config__.tag)

    def __post_init__(self) -> None:  # a ValueError here is a ValidationError when decoding
        if not EARLIEST <= self.time < LATEST:
            raise ValueError(f"time {self.time.isoformat()} is not between {EARLIEST:%Y} and {LATEST.year - 1}")


class ShoeStarted(Event, frozen=True, kw_only=True, tag="baccarat.shoe.started"):
    topic = topics.SHOE
    data: ShoeStartedData


class CardRead(Event, frozen=True, kw_only=True, tag="baccarat.card.read"):
    topic = topics.SHOE
    data: CardReadData


class CutCardReached(Event, frozen=True, kw_only=True, tag="baccarat.cut_card.reached"):
    topic = topics.SHOE
    data: CutCardReachedData


class ShoeEnded(Event, frozen=True, kw_only=True, tag="baccarat.shoe.ended"):
    topic = topics.SHOE
    data: ShoeEndedData


class RoundOpened(Event, frozen=True, kw_only=True, tag="baccarat.round.opened"):
    topic = topics.TABLE
    data: RoundOpenedData


class BetPlaced(Event, frozen=True, kw_only=True, tag="baccarat.bet.placed"):
    topic = topics.TABLE
    data: BetPlacedData


class BetChanged(Event, frozen=True, kw_only=True, tag="baccarat.bet.changed"):
    topic = topics.TABLE
    data: BetChangedData


class BetWithdrawn(Event, frozen=True, kw_only=True, tag="baccarat.bet.withdrawn"):
    topic = topics.TABLE
    data: BetWithdrawnData


class BetsClosed(Event, frozen=True, kw_only=True, tag="baccarat.bets.closed"):
    topic = topics.TABLE
    data: BetsClosedData


class CardsBurned(Event, frozen=True, kw_only=True, tag="baccarat.cards.burned"):
    topic = topics.TABLE
    data: CardsBurnedData


class RoundCompleted(Event, frozen=True, kw_only=True, tag="baccarat.round.completed"):
    topic = topics.TABLE
    data: RoundCompletedData


class RoundVoided(Event, frozen=True, kw_only=True, tag="baccarat.round.voided"):
    topic = topics.TABLE
    data: RoundVoidedData


class BetSettled(Event, frozen=True, kw_only=True, tag="baccarat.bet.settled"):
    topic = topics.SETTLEMENT
    data: BetSettledData


class RoundSettled(Event, frozen=True, kw_only=True, tag="baccarat.round.settled"):
    topic = topics.SETTLEMENT
    data: RoundSettledData


class AlertRaised(Event, frozen=True, kw_only=True, tag="baccarat.alert.raised"):
    topic = topics.ALERTS
    data: AlertRaisedData


class AlertAction(Event, frozen=True, kw_only=True, tag="baccarat.alert.action"):
    topic = topics.ALERT_ACTIONS
    data: AlertActionData


class AlertCheckpoint(Event, frozen=True, kw_only=True, tag="baccarat.alert.checkpoint"):
    topic = topics.ALERTS
    data: AlertCheckpointData


class RoundOpen(Event, frozen=True, kw_only=True, tag="baccarat.input.round.open"):
    topic = topics.INPUTS
    data: RoundOpenInput


class BetPlace(Event, frozen=True, kw_only=True, tag="baccarat.input.bet.place"):
    topic = topics.INPUTS
    data: BetPlaceInput


class BetChange(Event, frozen=True, kw_only=True, tag="baccarat.input.bet.change"):
    topic = topics.INPUTS
    data: BetChangeInput


class BetWithdraw(Event, frozen=True, kw_only=True, tag="baccarat.input.bet.withdraw"):
    topic = topics.INPUTS
    data: BetWithdrawInput


class BetsClose(Event, frozen=True, kw_only=True, tag="baccarat.input.bets.close"):
    topic = topics.INPUTS
    data: BetsCloseInput


class CardsBurn(Event, frozen=True, kw_only=True, tag="baccarat.input.cards.burn"):
    topic = topics.INPUTS
    data: CardsBurnInput


class CardPlace(Event, frozen=True, kw_only=True, tag="baccarat.input.card.place"):
    topic = topics.INPUTS
    data: CardPlaceInput


class Squeeze(Event, frozen=True, kw_only=True, tag="baccarat.input.squeeze"):
    topic = topics.INPUTS
    data: SqueezeInput


class Result(Event, frozen=True, kw_only=True, tag="baccarat.input.result"):
    topic = topics.INPUTS
    data: ResultInput


class RoundVoid(Event, frozen=True, kw_only=True, tag="baccarat.input.round.void"):
    topic = topics.INPUTS
    data: RoundVoidInput
