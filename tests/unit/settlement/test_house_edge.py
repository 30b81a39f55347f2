"""Over a long run the house keeps, per unit staked, the house edges of docs/rules.md on every spot:
Banker 1.06% (with the 5% commission), Player 1.24%, Tie 14.36% at 8 to 1, each pair 10.36% at
11 to 1 (8 decks). Whole shoes are dealt by the rules, settled offline by the processor on the
InProcessBus, and the house's result is read from the published bet settlements.

A Player or Banker bet on a tie is carried (Art. 12): each round it stays on the layout counts as
one unit at stake with a result of 0, which is how the published edges count a tie (a push).
Tolerance: 4 standard errors of the mean result per unit, from the sample itself; a wrong payout
shifts a mean by far more (a commission forgotten moves the Banker by 2.3 points, a tie paid 9 to
1 the Tie by 9.5 points).
"""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from surveil.core.money import Spot
from surveil.events import models as m
from surveil.runtime.inproc import InProcessBus
from surveil.settlement.processor import SettlementProcessor
from unit.settlement.table_play import floor, one_of_each

HOUSE_EDGE = {Spot.BANKER: 0.0106, Spot.PLAYER: 0.0124, Spot.TIE: 0.1436, Spot.PLAYER_PAIR: 0.1036, Spot.BANKER_PAIR: 0.1036}
TABLES, ROUNDS = 8, 6_000  # 48,000 rounds: 240,000 bets, and the carries
STAKE = 100
TOLERANCE_SE = 4


@pytest.fixture(scope="module")
def house_results() -> dict[Spot, list[float]]:
    """Per spot, the house's result per unit of every bet settlement (carries included)."""
    bus = InProcessBus()
    bus.attach(SettlementProcessor())
    results: dict[Spot, list[float]] = defaultdict(list)

    def record(event: m.Event) -> None:
        if isinstance(event, m.BetSettled):
            results[event.data.spot].append(-event.data.net / event.data.amount)

    bus.tap(record)
    events = floor([f"EDGE{n}" for n in range(TABLES)], ROUNDS, one_of_each(STAKE), seed=20261129)
    for start in range(0, len(events), 10_000):
        bus.publish(events[start : start + 10_000])
        bus.run()
    assert not bus.dead_letters
    return results


@pytest.mark.parametrize("spot", list(Spot))
def test_the_house_result_per_unit_staked_converges_on_the_house_edge(house_results: dict[Spot, list[float]], spot: Spot) -> None:
    results = house_results[spot]
    n = len(results)
    mean = sum(results) / n
    standard_error = math.sqrt(sum((r - mean) ** 2 for r in results) / (n - 1) / n)
    assert n >= TABLES * ROUNDS
    assert abs(mean - HOUSE_EDGE[spot]) <= TOLERANCE_SE * standard_error, (
        f"{spot}: the house kept {mean:.4%} per unit over {n:,} settlements, "
        f"expected {HOUSE_EDGE[spot]:.2%} ± {TOLERANCE_SE * standard_error:.4%}"
    )
