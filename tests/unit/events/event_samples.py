"""One valid sample per event type, as it travels on the wire (docs/contract.md).

A new event type needs a sample here: ``test_every_event_type_has_a_sample`` fails until it has one.
"""

from __future__ import annotations

import copy
from typing import Any

TABLE = "T07"

DATA: dict[str, dict[str, Any]] = {
    # baccarat.shoe
    "baccarat.shoe.started": {"table_id": TABLE, "shoe_id": "S1", "decks": 8, "automatic": False},
    "baccarat.card.read": {"table_id": TABLE, "shoe_id": "S1", "index": 9, "card": "10H", "face_up": False},
    "baccarat.cut_card.reached": {"table_id": TABLE, "shoe_id": "S1", "index": 350},
    "baccarat.shoe.ended": {"table_id": TABLE, "shoe_id": "S1", "cards_out": 362},
    # baccarat.table
    "baccarat.round.opened": {
        "table_id": TABLE,
        "shoe_id": "S1",
        "round_id": "R1",
        "round_no": 1,
        "dealer_id": "D3",
        "profile": "dicj",
        "demo": False,
        "min_bet": 500,
        "max_bet": 200000,
        "currency": "HKD",
        "carried_bet_ids": ["B0"],
    },
    "baccarat.bet.placed": {
        "table_id": TABLE,
        "round_id": "R1",
        "bet_id": "B1",
        "patron_id": "P1",
        "seat": "3",
        "spot": "banker",
        "amount": 1000,
    },
    "baccarat.bet.changed": {"table_id": TABLE, "round_id": "R1", "bet_id": "B1", "spot": "player", "amount": 1500},
    "baccarat.bet.withdrawn": {"table_id": TABLE, "round_id": "R1", "bet_id": "B1"},
    "baccarat.bets.closed": {"table_id": TABLE, "round_id": "R1"},
    "baccarat.cards.burned": {"table_id": TABLE, "shoe_id": "S1", "round_id": None, "indices": [1, 2, 3, 4, 5, 6, 7, 8]},
    "baccarat.round.completed": {
        "table_id": TABLE,
        "shoe_id": "S1",
        "round_id": "R1",
        "player": [{"index": 9, "card": "10H"}, {"index": 11, "card": "6S"}],
        "banker": [{"index": 10, "card": "3D"}, {"index": 12, "card": "KC"}, {"index": 13, "card": "4H"}],
        "player_total": 6,
        "banker_total": 7,
        "outcome": "banker",
        "player_pair": False,
        "banker_pair": False,
        "squeezed_by": "P1",
    },
    "baccarat.round.voided": {"table_id": TABLE, "round_id": "R1", "reason": "misdeal that could not be corrected (Art. 10)"},
    # baccarat.settlement
    "baccarat.bet.settled": {
        "table_id": TABLE,
        "round_id": "R1",
        "bet_id": "B1",
        "patron_id": "P1",
        "spot": "banker",
        "amount": 100,
        "result": "win",
        "net": 95,
        "commission": 5,
    },
    "baccarat.round.settled": {
        "table_id": TABLE,
        "round_id": "R1",
        "staked": 1100,
        "paid_out": 195,
        "commission": 5,
        "house_net": 905,
    },
    # baccarat.alerts
    "baccarat.alert.raised": {
        "table_id": TABLE,
        "alert_id": "A1",
        "rule": "DRAW_BANKER_EXTRA",
        "article": "Art. 9(4)(1)",
        "severity": "critical",
        "summary": "Banker drew a third card on 3 but had to stand (Art. 9(4)(1)).",
        "shoe_id": "S1",
        "round_id": "R1",
        "dealer_id": "D3",
        "evidence": {"banker": ["3D", "KC", "4H"], "rule": "Art. 9(4)(1)"},
    },
    # baccarat.alert-actions (the console)
    "baccarat.alert.action": {
        "table_id": TABLE,
        "alert_id": "A1",
        "action": "close",
        "user": "mlei",
        "role": "supervisor",
        "reason": "dealer_corrected",
        "note": "Banker's third card taken back before payout; see camera 7.",
    },
    "baccarat.alert.checkpoint": {
        "partition": 3,
        "partitions": 6,
        "every": 60,
        "tables": {TABLE: {"count": 12, "head": "ab" * 32}},
        "signature": "0123456789abcdef:" + "cd" * 64,
    },
    # baccarat.inputs (the table's console and sensors)
    "baccarat.input.round.open": {
        "table_id": TABLE,
        "shoe_id": "S1",
        "dealer_id": "D3",
        "profile": "sjm",
        "demo": False,
        "min_bet": 1000,
        "max_bet": 300000,
        "currency": "MOP",
    },
    "baccarat.input.bet.place": {
        "table_id": TABLE,
        "bet_id": "B1",
        "patron_id": "P1",
        "seat": "standing",
        "spot": "tie",
        "amount": 1000,
    },
    "baccarat.input.bet.change": {"table_id": TABLE, "bet_id": "B1", "spot": "banker_pair", "amount": 2000},
    "baccarat.input.bet.withdraw": {"table_id": TABLE, "bet_id": "B1"},
    "baccarat.input.bets.close": {"table_id": TABLE},
    "baccarat.input.cards.burn": {"table_id": TABLE, "indices": [20]},
    "baccarat.input.card.place": {"table_id": TABLE, "hand": "player", "index": 21, "card": "QS"},
    "baccarat.input.squeeze": {"table_id": TABLE, "patron_id": "P1"},
    "baccarat.input.result": {
        "table_id": TABLE,
        "player_total": 9,
        "banker_total": 9,
        "outcome": "tie",
        "player_pair": True,
        "banker_pair": False,
    },
    "baccarat.input.round.void": {"table_id": TABLE, "reason": "table closed"},
}


def event(type_name: str, **data_changes: Any) -> dict[str, Any]:
    """The sample event of ``type_name`` as a JSON object (a fresh copy), with data fields changed."""
    return {
        "specversion": "1.0",
        "id": f"{type_name}-0001",
        "source": f"test/{TABLE}",
        "type": type_name,
        "time": "2026-11-29T11:00:00Z",
        "subject": TABLE,
        "datacontenttype": "application/json",
        "data": {**copy.deepcopy(DATA[type_name]), **data_changes},
    }
