"""Rounds per second through the whole check of a round by the rules core, on one core.

One round = ``deal`` from a pre-shuffled shoe; ``check_play`` on the dealt cards with their shoe
indices, the outcome and the pairs; ``settle`` of four bets (Player, Banker, Tie, Player Pair).
Shoes are shuffled before the clock starts; the clock covers only the per-round work.

    .venv/bin/python bench/core_rounds.py                # 200,000 rounds, best of 3
    .venv/bin/python bench/core_rounds.py --rounds 50000 --repeat 5
"""

from __future__ import annotations

import argparse
import random
import time

from surveil.core.cards import Card
from surveil.core.money import Commission, Spot, settle
from surveil.core.play import DealtCard, check_play, deal
from surveil.core.shoe import shuffled_shoe

DECKS = 8
CUT_CARD_BEHIND = 14  # stop a shoe when this few cards are left
BETS = ((Spot.PLAYER, 1000), (Spot.BANKER, 1000), (Spot.TIE, 500), (Spot.PLAYER_PAIR, 500))


def shoes_for(rounds: int, seed: int) -> list[list[Card]]:
    """Enough shuffled shoes for ``rounds`` rounds (about 80 rounds a shoe)."""
    rng = random.Random(seed)
    return [shuffled_shoe(DECKS, rng) for _ in range(rounds // 70 + 2)]


def run(shoes: list[list[Card]], rounds: int) -> tuple[float, int]:
    """Check ``rounds`` rounds; returns the seconds taken and the findings seen (0 expected)."""
    findings = 0
    done = 0
    commission = Commission.FIVE_PERCENT
    start = time.perf_counter()
    for shoe in shoes:
        position = DECKS  # burned: one card per deck
        last = len(shoe) - CUT_CARD_BEHIND
        while position < last and done < rounds:
            coup = deal(shoe[position : position + 6])
            # Shoe indices (1-based) as Art. 7 deals them: P B P B, then P's third, then B's.
            index = position + 1
            player = [DealtCard(index, coup.player[0]), DealtCard(index + 2, coup.player[1])]
            banker = [DealtCard(index + 1, coup.banker[0]), DealtCard(index + 3, coup.banker[1])]
            following = index + 4
            if len(coup.player) == 3:
                player.append(DealtCard(following, coup.player[2]))
                following += 1
            if len(coup.banker) == 3:
                banker.append(DealtCard(following, coup.banker[2]))
            findings += len(check_play(player, banker, coup.result))
            for spot, amount in BETS:
                settle(spot, amount, coup.result, commission)
            position += coup.cards_used
            done += 1
        if done == rounds:
            break
    elapsed = time.perf_counter() - start
    if done < rounds:
        raise SystemExit(f"only {done} rounds in the prepared shoes")
    return elapsed, findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2004)
    args = parser.parse_args()
    shoes = shoes_for(args.rounds, args.seed)
    times = []
    for _ in range(args.repeat):
        elapsed, findings = run(shoes, args.rounds)
        assert findings == 0, f"{findings} findings on legal rounds"
        times.append(elapsed)
    best = min(times)
    print(
        f"{args.rounds / best:,.0f} rounds/s (best of {args.repeat}: {args.rounds:,} rounds in {best:.3f} s; "
        f"deal + check_play + settle x{len(BETS)}, {DECKS} decks, one core)"
    )


if __name__ == "__main__":
    main()
