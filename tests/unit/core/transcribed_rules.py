"""Art. 5 (card values) and Art. 9 (drawing a third card) written out by hand, independently of
``surveil.core``: the oracle the rule tests compare the code against.

Two transcriptions of the same article, in two shapes, so a slip in either shows up as a
disagreement (``test_art9_tableau.py`` checks they agree before using them):

1. ``PLAYER_GRID`` and ``BANKER_GRID``: the full tableaux, one cell per case, transcribed from
   docs/rules.md, Art. 9. Each cell is ``D`` (draws) or ``S`` (stands) followed by the clause that
   decides it: ``D31`` is "draws, Art. 9(3)(1)", ``S44`` is "stands, Art. 9(4)(4)", ``D1`` is
   "draws, Art. 9(1)". Card values are Art. 5 points: 0 is 10, J, Q or K.
2. ``ZH_CLAUSES``: the clauses of Art. 9 as the Chinese text words them (the Art. 9 clauses carry
   only the watermark, no word corruption), parsed for their totals and card values.

Nothing here imports the code under test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Player two-card total (rows) x Banker two-card total (columns).
# docs/rules.md, Art. 9(1): the Player draws on 0-5; 9(2): stands on 6 or 7, and nobody draws
# when either hand has 8 or 9.
PLAYER_GRID_TEXT = """
            b0  b1  b2  b3  b4  b5  b6  b7  b8  b9
    p0      D1  D1  D1  D1  D1  D1  D1  D1  S2  S2
    p1      D1  D1  D1  D1  D1  D1  D1  D1  S2  S2
    p2      D1  D1  D1  D1  D1  D1  D1  D1  S2  S2
    p3      D1  D1  D1  D1  D1  D1  D1  D1  S2  S2
    p4      D1  D1  D1  D1  D1  D1  D1  D1  S2  S2
    p5      D1  D1  D1  D1  D1  D1  D1  D1  S2  S2
    p6      S2  S2  S2  S2  S2  S2  S2  S2  S2  S2
    p7      S2  S2  S2  S2  S2  S2  S2  S2  S2  S2
    p8      S2  S2  S2  S2  S2  S2  S2  S2  S2  S2
    p9      S2  S2  S2  S2  S2  S2  S2  S2  S2  S2
"""

# Banker two-card total (rows) x the Player's third card (columns 0-9), and "the Player stood"
# (last column), for a Player without a natural. docs/rules.md, Art. 9(3)-(4):
#   draws on 0, 1, 2 whatever the Player drew; on 3 if the Player's third card is not 8; on 4 if
#   it is 2-7; on 5 if it is 4-7; on 6 if it is 6 or 7; on 0-5 when the Player did not draw.
#   stands on 3 against an 8; on 4 against A, 8, 9, 0; on 5 against A, 2, 3, 8, 9, 0; on 6
#   against anything but 6 or 7, or when the Player did not draw; on 7, 8, 9.
BANKER_GRID_TEXT = """
            t0   t1   t2   t3   t4   t5   t6   t7   t8   t9   stood
    b0      D31  D31  D31  D31  D31  D31  D31  D31  D31  D31  D36
    b1      D31  D31  D31  D31  D31  D31  D31  D31  D31  D31  D36
    b2      D31  D31  D31  D31  D31  D31  D31  D31  D31  D31  D36
    b3      D32  D32  D32  D32  D32  D32  D32  D32  S41  D32  D36
    b4      S42  S42  D33  D33  D33  D33  D33  D33  S42  S42  D36
    b5      S43  S43  S43  S43  D34  D34  D34  D34  S43  S43  D36
    b6      S44  S44  S44  S44  S44  S44  D35  D35  S44  S44  S44
    b7      S45  S45  S45  S45  S45  S45  S45  S45  S45  S45  S45
    b8      S45  S45  S45  S45  S45  S45  S45  S45  S45  S45  S45
    b9      S45  S45  S45  S45  S45  S45  S45  S45  S45  S45  S45
"""
# And whatever the cells say: when the Player has a natural (8 or 9), the Banker stands,
# Art. 9(4)(6).
PLAYER_NATURAL_ARTICLE = "Art. 9(4)(6)"

STOOD = "stood"  # the column key for "the Player did not draw"

# docs/rules.md, Art. 5: 10, J, Q, K count 0; A counts 1; 2 to 9 their face value.
ART5_POINTS: dict[str, int] = {
    "A": 1,
    "2": 2,
    "3": 3,
    "4": 4,
    "5": 5,
    "6": 6,
    "7": 7,
    "8": 8,
    "9": 9,
    "10": 0,
    "J": 0,
    "Q": 0,
    "K": 0,
}
# One rank per value, to build hands with a given total.
RANK_OF_POINTS: dict[int, str] = {0: "K", 1: "A", **{n: str(n) for n in range(2, 10)}}


@dataclass(frozen=True)
class Cell:
    draws: bool
    article: str


def _cell(token: str) -> Cell:
    letter, digits = token[0], token[1:]
    assert letter in "DS", token
    article = f"Art. 9({digits[0]})" + (f"({digits[1]})" if len(digits) > 1 else "")
    return Cell(letter == "D", article)


def _grid(text: str) -> dict[str, dict[str, Cell]]:
    lines = [line.split() for line in text.strip().splitlines()]
    header, rows = lines[0], lines[1:]
    return {row[0]: {column: _cell(token) for column, token in zip(header, row[1:], strict=True)} for row in rows}


_PLAYER = _grid(PLAYER_GRID_TEXT)
_BANKER = _grid(BANKER_GRID_TEXT)

# PLAYER_GRID[player_two][banker_two]; BANKER_GRID[banker_two][third points or STOOD]
PLAYER_GRID: dict[int, dict[int, Cell]] = {p: {b: _PLAYER[f"p{p}"][f"b{b}"] for b in range(10)} for p in range(10)}
BANKER_GRID: dict[int, dict[int | str, Cell]] = {
    b: {**{t: _BANKER[f"b{b}"][f"t{t}"] for t in range(10)}, STOOD: _BANKER[f"b{b}"][STOOD]} for b in range(10)
}


def player_cell(player_two: int, banker_two: int) -> Cell:
    return PLAYER_GRID[player_two][banker_two]


def banker_cell(banker_two: int, player_two: int, player_third: int | None) -> Cell:
    """The Banker's decision; ``player_third`` is the third card's points, None if the Player stood."""
    if player_two >= 8:
        return Cell(False, PLAYER_NATURAL_ARTICLE)
    return BANKER_GRID[banker_two][STOOD if player_third is None else player_third]


# ---- the Chinese clauses ------------------------------------------------------------------
# Copied verbatim from macau-baccarat-rules.zh.txt, Art. 9 (watermark included).
ZH_CLAUSES: dict[str, str] = {
    "Art. 9(1)": "（一）“闲家”在下列状况下必需增牌：两牌算计1、2、3、4、5或10点。",
    "Art. 9(2)": "（二）“闲家”在下列状况下不得增牌：两牌算计6、7或8、9点，或“庄家”两牌算计8、9点例牌。",
    "Art. 9(3)(1)": "（1）两牌算计为1、2或10点时，不管“闲家”增得何牌；",
    "Art. 9(3)(2)": "（2）两牌算计为3点时，而“闲家”所增之牌是1、2、3、4、5、6、7、9或10点；",
    "Art. 9(3)(3)": "（3）两牌算计为4点时，而“闲家”所增之牌是2、3、4、5、6或7点；",
    "Art. 9(3)(4)": "（4）两牌算计为5点时，而“闲家”所增之牌是4、5、6或7点；",
    "Art. 9(3)(5)": "（5）两牌算计为6点时，而“闲家”所增之牌是6或7点；",
    "Art. 9(3)(6)": "（6）两牌算计1、2、3、4、5或10点时，而“闲家”并无增牌。",
    "Art. 9(4)(1)": "（1）两牌算计3点，而“闲家”所增之牌是8点，由百家乐论坛独家发布。",
    "Art. 9(4)(2)": "（2）两牌算计4点，而“闲家”所增之牌是1、8、9或10点；",
    "Art. 9(4)(3)": "（3）两牌算计5点，而“闲家”所增之牌是1、2、3、8、9或10点；",
    "Art. 9(4)(4)": "（4）两牌算计6点，而“闲家”所增之牌是1、2、3、4、5、8、9或10点，或“闲家”不增牌；",
    "Art. 9(4)(5)": "（5）两牌算计7点、8点或9点，由百家乐论坛独家发布。",
    "Art. 9(4)(6)": "（6）“闲家”两牌算计8或9点（例牌）。",
}


def _points(text: str) -> frozenset[int]:
    """The card values named in a clause; "10点" is a total or card worth 0 (Art. 5)."""
    return frozenset(int(number) % 10 for number in re.findall(r"\d+", text))


@dataclass(frozen=True)
class BankerClause:
    """What a Banker clause of Art. 9(3)/(4) covers: Banker totals x (third card values, stood)."""

    article: str
    draws: bool
    banker_totals: frozenset[int]
    thirds: frozenset[int]  # the Player's third card values the clause speaks of
    stood: bool  # whether it speaks of the Player not drawing


def _body(text: str) -> str:
    """A clause without its label "（1）" / "（一）", whose digit is not a card value."""
    return text.split("）", 1)[1]


def _banker_clause(article: str, text: str) -> BankerClause:
    body = _body(text)
    totals = _points(re.split("[时，]", body)[0])  # "两牌算计为3点" / "两牌算计7点、8点或9点"
    if "所增之牌是" in body:  # "... the Player's third card is 1, 2, ..." (and maybe "or he stood")
        thirds, stood = _points(body.split("所增之牌是")[1].split("点")[0]), "不增牌" in body
    elif "不管" in body:  # "whatever card the Player drew": he drew
        thirds, stood = frozenset(range(10)), False
    elif "并无增牌" in body:  # "the Player did not draw"
        thirds, stood = frozenset(), True
    else:  # no condition on the Player at all
        thirds, stood = frozenset(range(10)), True
    return BankerClause(article, article.startswith("Art. 9(3)"), totals, thirds, stood)


# Art. 9(4)(6) is about the Player's natural, not a Banker total: kept apart.
BANKER_CLAUSES: tuple[BankerClause, ...] = tuple(
    _banker_clause(article, text)
    for article, text in ZH_CLAUSES.items()
    if article.startswith(("Art. 9(3)", "Art. 9(4)")) and article != PLAYER_NATURAL_ARTICLE
)
PLAYER_DRAW_TOTALS = _points(_body(ZH_CLAUSES["Art. 9(1)"]))  # {1, 2, 3, 4, 5, 0}
PLAYER_STAND_TOTALS = _points(_body(ZH_CLAUSES["Art. 9(2)"]).split("，或")[0])  # {6, 7, 8, 9}
BANKER_NATURALS = _points(_body(ZH_CLAUSES["Art. 9(2)"]).split("，或")[1])  # {8, 9}
PLAYER_NATURALS = _points(_body(ZH_CLAUSES[PLAYER_NATURAL_ARTICLE]))  # {8, 9}


def total_of(ranks: list[str]) -> int:
    """Art. 5: a hand's total is the sum of its card values, modulo 10."""
    return sum(ART5_POINTS[rank] for rank in ranks) % 10
