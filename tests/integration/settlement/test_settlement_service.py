"""``surveil serve settlement`` through the real broker and Redis, on floors played by surveil.sim
through the real table side: the ledger is the sum of what the service published and what an
offline settlement of the same events gives; each bet is settled exactly once whatever kills the
service (kill -9 at random points, then a restart); events delivered twice, or unusable, change
nothing."""

from __future__ import annotations

import gzip
import random
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from click.testing import CliRunner

from integration.deployment import (
    SETTLEMENT_INPUTS,
    SETTLEMENT_SERVICE,
    Deployment,
    assert_published_once_each,
    dump_memory,
    offline_settlement,
    settlement_events,
    simulated_floor,
    table_events,
)
from surveil.cli import main
from surveil.core.money import BetResult
from surveil.events import codec, deadletter, topics
from surveil.events import models as m
from surveil.settlement import ledger as ledger_
from surveil.settlement.ledger import PatronTotals, TableTotals


def totals_from(published: list[m.Event]) -> tuple[dict[tuple[str, str], TableTotals], dict[tuple[str, str], PatronTotals]]:
    """The ledger's totals summed from settlement events: per (table, shift) and (patron, shift)."""
    by_table: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    by_patron: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    result_counter = {BetResult.WIN: "wins", BetResult.LOSE: "losses", BetResult.PUSH: "pushes"}
    for event in published:
        shift, d = ledger_.shift_of(event.time), event.data
        if isinstance(d, m.RoundSettledData):
            by_table[d.table_id, shift].update(
                staked=d.staked, paid_out=d.paid_out, commission=d.commission, house_net=d.house_net, rounds=1
            )
        elif isinstance(d, m.BetSettledData) and d.result is not BetResult.CARRIED:
            by_table[d.table_id, shift].update(bets=1)
            by_patron[d.patron_id, shift].update(
                {
                    "staked": d.amount,
                    "paid_out": ledger_.paid_out(d),
                    "commission": d.commission,
                    "net": d.net,
                    "bets": 1,
                    result_counter[d.result]: 1,
                }
            )
    return ({k: TableTotals(**c) for k, c in by_table.items()}, {k: PatronTotals(**c) for k, c in by_patron.items()})


def test_a_floor_settles_through_the_service_and_the_ledger_is_the_sum_of_what_it_published(deployment: Deployment, tmp_path: Path) -> None:
    events = simulated_floor(tables=4, shoes=1, seed=11)
    deployment.publish(table_events(events))
    deployment.start("settlement")
    deployment.wait_until_settled()

    # What the service published is what settlement published when the floor was recorded, on
    # each table's partition of the table topic (co-partitioned, as faust needs).
    assert_published_once_each(deployment, settlement_events(events))
    table_partition = {record.key: record.partition for record in deployment.records(topics.TABLE)}
    assert {(r.key, r.partition) for r in deployment.records(topics.SETTLEMENT)} == set(table_partition.items())
    by_table, by_patron = totals_from(deployment.settlement_events())
    stored = deployment.ledger()
    assert {key: stored.table(*key) for key in by_table} == by_table
    assert {key: stored.patron(*key) for key in by_patron} == by_patron
    assert sum(t.rounds for t in by_table.values()) == sum(isinstance(e, m.RoundCompleted) for e in events)
    assert deployment.dump() == dump_memory(offline_settlement(events).ledger.backend)  # type: ignore[arg-type]

    # The read side and reconciliation on the live ledger.
    log = tmp_path / "floor.jsonl.gz"
    log.write_bytes(gzip.compress(b"".join(codec.encode(e) + b"\n" for e in events)))
    options = ["--redis", deployment.redis_url, "--redis-prefix", deployment.redis_prefix]
    reconciled = CliRunner().invoke(main, ["reconcile", str(log), *options])
    assert (reconciled.exit_code, reconciled.stdout) == (0, ""), reconciled.output
    assert "the ledger agrees" in reconciled.stderr
    (table, shift), totals = sorted(by_table.items())[0]
    shown = CliRunner().invoke(main, ["ledger", "table", table, "--shift", shift, *options])
    assert shown.exit_code == 0
    assert shown.stdout.splitlines()[2].split() == [shift, *(f"{getattr(totals, f):,}" for f in TableTotals.__dataclass_fields__)]

    # The service serves its metrics, the settlement ones among them.
    staked = sum(t.staked for (t_id, _), t in by_table.items() if t_id == table)
    exported = [
        value
        for name, labels, value in deployment.metric_samples(SETTLEMENT_SERVICE)
        if name == "surveil_settlement_staked_total" and labels == {"table": table}
    ]
    assert exported == [staked]


def test_kill_9_at_random_points_then_a_restart_gives_the_ledger_of_an_uninterrupted_run(deployment: Deployment) -> None:
    """The table events arrive live (a few hundred a second) while the service is killed -9 at
    random moments and started again; afterwards the whole ledger in Redis is, key for key, the
    ledger of an uninterrupted offline run, and each settlement is on the topic exactly once."""
    rng = random.Random(20261129)
    events = simulated_floor(tables=6, shoes=1, seed=12)
    inputs = table_events(events)

    def publish_live() -> None:
        for first in range(0, len(inputs), 100):
            deployment.publish(inputs[first : first + 100])
            time.sleep(0.25)

    feeder = threading.Thread(target=publish_live)
    feeder.start()
    kills = 0
    while feeder.is_alive():
        deployment.start("settlement")
        time.sleep(rng.uniform(1.0, 3.0))
        deployment.kill("settlement")
        kills += 1
    feeder.join()
    applied_at_last_kill = sum(deployment.applied_offsets().values())
    deployment.start("settlement")
    deployment.wait_until_settled()

    assert kills >= 3
    assert applied_at_last_kill < len(inputs), "the last kill came after the work was done"
    assert deployment.dump() == dump_memory(offline_settlement(events).ledger.backend)  # type: ignore[arg-type]
    assert_published_once_each(deployment, settlement_events(events))


def test_the_same_events_delivered_twice_change_nothing(deployment: Deployment) -> None:
    events = simulated_floor(tables=2, shoes=1, seed=13)
    inputs = table_events(events)
    deployment.publish(inputs)
    deployment.publish(inputs)  # again, at new offsets: a producer that resent everything
    deployment.start("settlement")
    deployment.wait_until_settled()

    assert deployment.dump() == dump_memory(offline_settlement(events).ledger.backend)  # type: ignore[arg-type]
    assert_published_once_each(deployment, settlement_events(events))
    letters = [deadletter.decode(record.value) for record in deployment.records(topics.deadletter_topic("settlement"))]
    handled = [e for e in inputs if isinstance(e, SETTLEMENT_INPUTS)]  # it has no use for bets.closed, cards.burned
    assert len(letters) == len(handled)
    assert {letter.reason.split(" was ")[-1] for letter in letters} == {"already opened", "already settled"}
    assert sorted(letter.payload for letter in letters) == sorted(codec.encode(e) for e in handled)


def test_unusable_input_is_dead_lettered_with_its_reason_and_settlement_goes_on(deployment: Deployment) -> None:
    events = simulated_floor(tables=2, shoes=1, seed=14)
    inputs = table_events(events)
    first_round = next(e for e in inputs if isinstance(e, m.RoundOpened))
    table = first_round.subject
    unknown_round = codec.make(
        m.BetPlaced,
        m.BetPlacedData(
            table_id=table,
            round_id="no-such-round",
            bet_id="B-x",
            patron_id="P-x",
            seat="1",
            spot="player",
            amount=1_000,  # type: ignore[arg-type]
        ),
        id="bad-1",
        source="test",
        time=first_round.time,
    )
    deployment.publish_raw([(table.encode(), b"not json at all"), (table.encode(), codec.encode(unknown_round))])
    deployment.publish(inputs)
    deployment.start("settlement")
    deployment.wait_until_settled()

    letters = [deadletter.decode(record.value) for record in deployment.records(topics.deadletter_topic("settlement"))]
    assert [(letter.payload, letter.origin, letter.service) for letter in letters] == [
        (b"not json at all", deployment.topic(topics.TABLE), "settlement"),
        (codec.encode(unknown_round), deployment.topic(topics.TABLE), "settlement"),
    ]
    assert letters[0].reason.startswith("JSON is malformed")
    assert letters[1].reason == f"unknown round no-such-round at {table}"
    assert deployment.dump() == dump_memory(offline_settlement(events).ledger.backend)  # type: ignore[arg-type]
    assert_published_once_each(deployment, settlement_events(events))
