"""Settlement's Prometheus metrics (served on /metrics with the runtime's, by ``service.main``).

Amounts are in currency units, the table's currency (one currency on the floor). No label names a
patron: /metrics is unauthenticated, and a patron's play is the ledger's to tell, to those who may
read it (``surveil ledger patron P``, docs/security.md).
"""

from __future__ import annotations

from functools import cache

from prometheus_client import Counter, Gauge, Histogram

from ..core.money import BetResult, Spot

STAKED = Counter(
    "surveil_settlement_staked",
    "Amount staked on bets decided (won, lost or pushed), in currency units.",
    ["table"],
)
PAID_OUT = Counter(
    "surveil_settlement_paid_out",
    "Amount paid back across the table (stakes and winnings), in currency units.",
    ["table"],
)
COMMISSION = Counter(
    "surveil_settlement_commission",
    "Commission taken on Banker wins (Art. 18), in currency units.",
    ["table"],
)
HOUSE_NET = Gauge(
    "surveil_settlement_house_net",
    "The house's result (staked minus paid out) since this process started, in currency units; the ledger holds the figure per shift.",
    ["table"],
)
BETS = Counter(
    "surveil_settlement_bets",
    "Bets settled, by result (win, lose, push, carried) and spot.",
    ["result", "spot"],
)
ROUNDS = Counter(
    "surveil_settlement_rounds",
    "Rounds settled, by outcome (player, banker, tie, or void).",
    ["outcome"],
)
REJECTIONS = Counter(
    "surveil_settlement_rejections",
    "Table events settlement refused (sent to the dead-letter topic), by kind.",
    ["kind"],
)
LAG_SECONDS = Histogram(
    "surveil_settlement_lag_seconds",
    "Seconds from a round's completion (or voiding) at the table to its settlement.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)


# Labelled children, looked up once: ``labels()`` costs microseconds on every round otherwise.
@cache
def for_table(table: str) -> tuple[Counter, Counter, Counter, Gauge]:
    return STAKED.labels(table), PAID_OUT.labels(table), COMMISSION.labels(table), HOUSE_NET.labels(table)


@cache
def bets(result: BetResult, spot: Spot) -> Counter:
    return BETS.labels(result.value, spot.value)
