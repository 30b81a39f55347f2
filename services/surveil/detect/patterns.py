"""The pattern detectors: statistics over many rounds, each with a stated false-alarm rate.

Every threshold here is derived in docs/detection.md and measured by bench/detection.py.

- Outcome drift: a chi-square test of a shoe's (and a table's last shoes') Banker/Player/Tie counts
  against the exact probabilities for its deck count. With 2 degrees of freedom the tail is
  exactly exp(-x/2), so the threshold is ``-2 ln(alpha)``.
- Patron win rate, dealer error rate: one-sided CUSUM charts (Page's test) of a Bernoulli rate
  against an in-control rate ``p0`` and a rate worth catching ``p1``; the chart signals when the
  log-likelihood ratio climbs ``h`` above its running minimum, which bounds the in-control
  average run length below by roughly ``e^h`` observations.
- Shoe repeat: winnowed fingerprints of every run of ``K`` consecutive cards; a run of at least
  ``K + W - 1`` cards that came out of an earlier shoe at the table is found for certain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import msgspec

from ..core.cards import CARDS
from ..core.odds import tabled_outcome_counts
from ..core.play import Outcome

# ---- outcome drift ------------------------------------------------------------------------

DRIFT_ALPHA = 1e-4  # per test; one test per shoe and one per table window at each shoe's end
DRIFT_THRESHOLD = -2 * math.log(DRIFT_ALPHA)  # chi-square, 2 degrees of freedom
DRIFT_MIN_ROUNDS = 30  # below this the chi-square approximation is too rough to act on
DRIFT_TABLE_SHOES = 4  # the table-level test covers the last four shoes


@cache
def outcome_probabilities(decks: int) -> tuple[float, float, float]:
    """Exact (Banker, Player, Tie) probabilities of a round dealt from a full shoe."""
    counts = tabled_outcome_counts(decks)
    return (counts.banker / counts.total, counts.player / counts.total, counts.tie / counts.total)


def chi_square(observed: Sequence[int], decks: int) -> float:
    n = sum(observed)
    return sum((o - n * p) ** 2 / (n * p) for o, p in zip(observed, outcome_probabilities(decks)))


def drift_p_value(statistic: float) -> float:
    return math.exp(-statistic / 2)


OUTCOME_INDEX = {Outcome.BANKER: 0, Outcome.PLAYER: 1, Outcome.TIE: 2}

# ---- CUSUM ----------------------------------------------------------------------------------


class Cusum(msgspec.Struct, gc=False):  # gc=False: a chart's state, as a table's (core/table.py)
    """Page's one-sided CUSUM for a Bernoulli rate; ``score`` is the chart's statistic."""

    score: float = 0.0
    trials: int = 0
    hits: int = 0
    signalled: int = 0  # how many times it crossed the threshold (alert ids use it)

    def update(self, hit: bool, step_hit: float, step_miss: float, threshold: float) -> bool:
        """Add one observation; True when the chart crosses its threshold (then it restarts)."""
        self.trials += 1
        self.hits += hit
        self.score = max(0.0, self.score + (step_hit if hit else step_miss))
        if self.score >= threshold:
            self.score = 0.0
            self.signalled += 1
            return True
        return False


def cusum_steps(p0: float, p1: float) -> tuple[float, float]:
    return math.log(p1 / p0), math.log((1 - p1) / (1 - p0))


# A patron's decided Player/Banker bets: in control, a win is at most as likely as a Banker win
# among decided rounds (0.5068); worth catching: someone who wins three bets in four.
PATRON_P0 = 0.5068
PATRON_P1 = 0.75
PATRON_THRESHOLD = math.log(1e7)  # ~ one false alarm per ten million decided bets
PATRON_STEPS = cusum_steps(PATRON_P0, PATRON_P1)

# A dealer's rounds with a dealing error: in control one round in a thousand; worth catching:
# one in fifty.
DEALER_P0 = 1 / 1000
DEALER_P1 = 1 / 50
DEALER_THRESHOLD = math.log(1e6)
DEALER_STEPS = cusum_steps(DEALER_P0, DEALER_P1)

# ---- shoe repeat --------------------------------------------------------------------------

REPEAT_K = 8  # cards per fingerprinted run
REPEAT_W = 8  # winnowing window: runs of K + W - 1 = 15 cards are always found
REPEAT_SHOES_KEPT = 20  # earlier shoes remembered per table


CARD_NUMBER = {code: number for number, code in enumerate(CARDS)}
_CARD_KINDS = len(CARDS)
_RUN_SPAN: int = _CARD_KINDS**REPEAT_K


class Winnower(msgspec.Struct, gc=False):  # gc=False, tuples: a shoe's state (core/table.py)
    """Keeps the minimum of every W consecutive K-card runs (winnowing), as cards come.

    A run is fingerprinted exactly, as a base-52 number of its K cards, so two runs share a
    fingerprint only when they are the same cards in the same order.
    """

    recent_cards: tuple[str, ...] = ()
    run: int = 0  # the last K cards as a base-52 number
    recent_hashes: tuple[int, ...] = ()
    selected: tuple[int, ...] = ()

    def add(self, card: str) -> int | None:
        """Take the next card out of the shoe; return a newly selected fingerprint, if any."""
        self.run = run = (self.run * _CARD_KINDS + CARD_NUMBER[card]) % _RUN_SPAN
        self.recent_cards = cards = (*self.recent_cards, card)[-REPEAT_K:]
        if len(cards) < REPEAT_K:
            return None
        self.recent_hashes = hashes = (*self.recent_hashes, run)[-REPEAT_W:]
        if len(hashes) < REPEAT_W:
            return None
        smallest = min(hashes)
        selected = self.selected
        if selected and selected[-1] == smallest:
            return None
        self.selected = (*selected, smallest)
        return smallest
