"""The whole floor under watch: a ``TableWatch`` per table, and the patterns that cross tables
(patrons and dealers move between tables). Pure: events in, alert events out.

``FloorWatch.feed`` takes any event of the shoe, table and settlement streams; ``flush`` says the input
ended. Both return ``baccarat.alert.raised`` events, never the same alert id twice. The live
service runs the same pieces on faust: ``TableWatch`` keyed by table, ``chart_finding`` keyed
by patron or dealer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..core.findings import AlertCode, Finding
from ..events.models import AlertRaised, Event
from . import patterns
from .alerts import Chains, Context, Signer, raise_alert
from .watch import Fact, PatronBet, Raised, TableState, TableWatch


def chart_finding(chart: patterns.Cusum, fact: Fact) -> Raised | None:
    """Add ``fact`` to its patron's or dealer's chart; the alert when the chart signals."""
    if isinstance(fact, PatronBet):
        if not chart.update(fact.won, *patterns.PATRON_STEPS, patterns.PATRON_THRESHOLD):
            return None
        rate = chart.hits / chart.trials
        finding = Finding(
            AlertCode.PATRON_WIN_RATE,
            "Art. 11-12",
            f"Patron {fact.patron_id} has won {chart.hits} of {chart.trials} decided Player/Banker bets "
            f"({rate:.0%}); a fair game gives about 50%.",
            {
                "wins": chart.hits,
                "decided_bets": chart.trials,
                "win_rate": round(rate, 4),
                "in_control_rate": patterns.PATRON_P0,
                "last_bet": fact.bet_id,
                "stake": fact.amount,
            },
        )
        context = Context(fact.table_id, f"{fact.key}:{chart.signalled}", round_id=fact.round_id, patron_id=fact.patron_id, floor_wide=True)
        return Raised(finding, context, fact.time)
    if not chart.update(bool(fact.errors), *patterns.DEALER_STEPS, patterns.DEALER_THRESHOLD):
        return None
    finding = Finding(
        AlertCode.DEALER_ERROR_RATE,
        "Art. 10",
        f"Dealer {fact.dealer_id} has made dealing errors in {chart.hits} of {chart.trials} rounds, "
        f"far above the usual one in {round(1 / patterns.DEALER_P0)}.",
        {"rounds_with_errors": chart.hits, "rounds": chart.trials, "in_control_rate": patterns.DEALER_P0, "last_errors": list(fact.errors)},
    )
    context = Context(fact.table_id, f"{fact.key}:{chart.signalled}", round_id=fact.round_id, dealer_id=fact.dealer_id, floor_wide=True)
    return Raised(finding, context, fact.time)


class FloorWatch:
    def __init__(self, profile_override: str | None = None, signer: Signer | None = None) -> None:
        self.profile_override = profile_override
        self.tables: dict[str, TableWatch] = {}
        self.charts: dict[str, patterns.Cusum] = {}
        self.raised_ids: set[str] = set()
        self.chains = Chains(signer)  # alerts signed with ``signer``, the detectors' key, when given
        self.findings_by_rule: Counter[str] = Counter()

    @property
    def rounds_checked(self) -> int:
        return sum(watch.rounds_checked for watch in self.tables.values())

    @property
    def unboxed_bets(self) -> int:
        return sum(watch.unboxed_bets for watch in self.tables.values())

    def watch(self, table_id: str) -> TableWatch:
        watch = self.tables.get(table_id)
        if watch is None:
            watch = self.tables[table_id] = TableWatch(TableState(table_id), self.profile_override)
        return watch

    def feed(self, event: Event) -> list[AlertRaised]:
        raised, facts = self.watch(event.subject).feed(event)
        if raised or facts:
            return self.judge(raised, facts)
        return []

    def flush(self) -> list[AlertRaised]:
        alerts = []
        for watch in self.tables.values():
            alerts += self.judge(*watch.flush())
        return alerts

    def judge(self, raised: Iterable[Raised], facts: Iterable[Fact]) -> list[AlertRaised]:
        """The cross-table half: charts the facts, and makes alert events of what the tables raised
        and the charts signalled, each id once. Alone, for tables watched elsewhere (a replay's
        worker processes)."""
        everything = list(raised)
        charts = self.charts
        for fact in facts:
            chart = charts.get(key := fact.key)
            if chart is None:
                chart = charts[key] = patterns.Cusum()
            found = chart_finding(chart, fact)
            if found:
                everything.append(found)
        alerts = []
        for item in everything:
            alert = raise_alert(item.finding, item.context, item.time)
            if alert.data.alert_id in self.raised_ids:
                continue
            self.raised_ids.add(alert.data.alert_id)
            self.findings_by_rule[alert.data.rule] += 1
            alerts.append(self.chains.link(alert))
        return alerts
