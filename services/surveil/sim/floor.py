"""The simulated floor: N tables played side by side, their actions merged in time order.

``Floor(tables=3, shoes=2, seed=7).actions()`` is the same stream for the same arguments, on any
machine. The requested injections are dealt out to the tables in turn (the first code to the
first table, the second to the second, ...), and each table does its own one after the other.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

from ..core.findings import AlertCode
from ..core.profiles import DEFAULT_PROFILE, load_profile
from .injections import check_codes
from .table import Action, TableSim


def table_ids(count: int) -> list[str]:
    return [f"T{number:03d}" for number in range(1, count + 1)]


class Floor:
    def __init__(self, tables: int, shoes: int, seed: int = 0, profile: str = DEFAULT_PROFILE, inject: Sequence[AlertCode] = ()) -> None:
        if tables < 1 or shoes < 1:
            raise ValueError("a floor needs at least one table and one shoe")
        self.profile = load_profile(profile)
        check_codes(inject, self.profile, shoes)
        ids = table_ids(tables)
        self.tables = [TableSim(table_id, seed, self.profile, shoes, inject[number::tables]) for number, table_id in enumerate(ids)]

    def actions(self) -> Iterator[Action]:
        """Every table's actions, by time (ties in table order)."""
        return heapq.merge(*(table.actions() for table in self.tables), key=lambda action: action.time)

    def unapplied(self) -> list[tuple[str, AlertCode]]:
        """Injections that found no round or shoe to go in before the run ended."""
        return [(table.table_id, code) for table in self.tables for code in table.unapplied()]
