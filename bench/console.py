"""The console on the real broker, in a real browser (headless Chromium, Playwright):

- ``latency``: from an alert sent to ``baccarat.alerts`` to its row in an open page. N alerts
  (200 by default) are sent one after the other at a set rate; the page's MutationObserver notes
  when each row appears (``Date.now()``, the same clock as the sender's ``time.time()``). The time
  counts from just before the send, so it holds the produce, the broker, the console's fetch,
  render and push, and the browser's insert.
- ``load``: a floor of T tables (1,000 by default) playing at real pace (a round per ~50 s a
  table: open, two bets, close, five cards read, the result, two settlements) and A alerts a
  second (10 by default) for S seconds, with two pages open (the alert list and the floor); the
  console process's CPU (utime + stime from /proc) and resident memory over the window, and the
  latency of the alerts meanwhile.

Each run gets its own topics (a fresh TOPIC_PREFIX, deleted afterwards); the console runs as the
admin of the stack (`eval "$(ops/stack.sh env)"` first). Prints its figures with the load average.

    .venv/bin/python bench/console.py latency --alerts 200 --rate 5
    .venv/bin/python bench/console.py load --tables 1000 --alerts-per-second 10 --seconds 120
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "console"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from console_run import ConsoleProcess, chromium, log_in
from kafka import KafkaProducer

from surveil.events import codec
from surveil.events import models as m
from surveil.events.topics import ALL_TOPICS
from surveil.runtime.config import kafka_client_config
from surveil.runtime.topic_admin import create_topics, delete_topics

RULES = [("DRAW_BANKER_EXTRA", "Art. 9(4)(4)", "critical"), ("LATE_BET", "Art. 13", "critical"), ("TABLE_LIMIT", "Art. 14", "warning")]
OBSERVER = """() => { window.rowsAt = {}; new MutationObserver(() => {
    for (const row of document.querySelectorAll('#alert-rows tr.fresh:not([data-seen])')) {
        row.dataset.seen = '1'; window.rowsAt[row.dataset.alert] = Date.now(); }
}).observe(document.getElementById('alert-rows'), {childList: true}); }"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def event(cls: type[m.Event], data: m.Data, now: datetime) -> m.Event:
    return codec.make(cls, data, id=uuid.uuid4().hex, source="bench", time=now)


def alert(table: str, n: int, now: datetime) -> m.AlertRaised:
    rule, article, severity = RULES[n % len(RULES)]
    data = m.AlertRaisedData(
        table_id=table,
        alert_id=f"bench-{n}-{uuid.uuid4().hex[:8]}",
        rule=rule,
        article=article,
        severity=severity,  # type: ignore[arg-type]
        summary=f"bench alert {n} at {table}",
        round_id=f"{table}:S1:{n}",
        evidence={"n": n},
    )
    return event(m.AlertRaised, data, now)  # type: ignore[return-value]


class Floor(threading.Thread):
    """T tables at real pace: each table's round, every ``round_seconds``, staggered."""

    def __init__(self, producer: KafkaProducer, prefix: str, tables: int, round_seconds: float = 50.0) -> None:
        super().__init__(daemon=True)
        self.producer, self.prefix, self.tables, self.round_seconds = producer, prefix, tables, round_seconds
        self.stop = threading.Event()
        self.events = 0

    def send(self, e: m.Event) -> None:
        self.producer.send(self.prefix + e.topic, key=e.data.table_id.encode(), value=codec.encode(e))
        self.events += 1

    def run(self) -> None:
        names = [f"T{n:04d}" for n in range(1, self.tables + 1)]
        now = datetime.now(UTC)
        for t in names:
            self.send(event(m.ShoeStarted, m.ShoeStartedData(table_id=t, shoe_id="S1", decks=8, automatic=False), now))
        rounds = dict.fromkeys(names, 0)
        index = dict.fromkeys(names, 8)
        interval = self.round_seconds / self.tables
        start = time.monotonic()
        k = 0
        while not self.stop.is_set():
            t = names[k % self.tables]
            k += 1
            rounds[t] += 1
            self.round(t, rounds[t], index[t])
            index[t] += 5
            delay = start + k * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def round(self, t: str, n: int, index: int) -> None:
        now = datetime.now(UTC)
        rid = f"{t}:S1:{n}"
        opened = m.RoundOpenedData(
            table_id=t, shoe_id="S1", round_id=rid, round_no=n, dealer_id=f"D{t[1:]}", profile="dicj", demo=False,
            min_bet=500, max_bet=200_000, currency="HKD", carried_bet_ids=[],
        )  # fmt: skip
        self.send(event(m.RoundOpened, opened, now))
        for b, spot in ((1, "banker"), (2, "player")):
            bet = m.BetPlacedData(table_id=t, round_id=rid, bet_id=f"{rid}:{b}", patron_id=f"P{b}", seat=str(b), spot=spot, amount=1000)  # type: ignore[arg-type]
            self.send(event(m.BetPlaced, bet, now))
        self.send(event(m.BetsClosed, m.BetsClosedData(table_id=t, round_id=rid), now))
        cards = ["2H", "8C", "3D", "KS", "4H"]
        for i, card in enumerate(cards):
            self.send(event(m.CardRead, m.CardReadData(table_id=t, shoe_id="S1", index=index + i, card=card, face_up=False), now))
        completed = m.RoundCompletedData(
            table_id=t, shoe_id="S1", round_id=rid,
            player=[m.HandCard(index=index, card="2H"), m.HandCard(index=index + 2, card="3D"), m.HandCard(index=index + 4, card="4H")],
            banker=[m.HandCard(index=index + 1, card="8C"), m.HandCard(index=index + 3, card="KS")],
            player_total=9, banker_total=8, outcome="player", player_pair=False, banker_pair=False, squeezed_by=None,  # type: ignore[arg-type]
        )  # fmt: skip
        self.send(event(m.RoundCompleted, completed, now))
        for b, spot, result, net in ((1, "banker", "lose", -1000), (2, "player", "win", 1000)):
            settled = m.BetSettledData(
                table_id=t, round_id=rid, bet_id=f"{rid}:{b}", patron_id=f"P{b}", spot=spot, amount=1000,  # type: ignore[arg-type]
                result=result, net=net, commission=0,  # type: ignore[arg-type]
            )  # fmt: skip
            self.send(event(m.BetSettled, settled, now))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def send_alerts(producer: KafkaProducer, prefix: str, tables: int, count: int, rate: float, sent: dict[str, float]) -> None:
    interval = 1.0 / rate
    start = time.monotonic()
    for n in range(count):
        a = alert(f"T{random.randrange(1, tables + 1):04d}", n, datetime.now(UTC))
        sent[a.data.alert_id] = time.time()
        producer.send(prefix + a.topic, key=a.data.table_id.encode(), value=codec.encode(a)).get(timeout=30)
        delay = start + (n + 1) * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def latencies(page: Any, sent: dict[str, float], timeout: float = 30) -> list[float]:
    deadline = time.monotonic() + timeout
    seen: dict[str, float] = {}
    while time.monotonic() < deadline:
        seen = page.evaluate("window.rowsAt")
        if len(seen) >= len(sent):
            break
        time.sleep(0.5)
    missing = set(sent) - set(seen)
    if missing:
        print(f"  {len(missing)} alerts never appeared in the page", file=sys.stderr)
    return [seen[i] / 1000 - sent[i] for i in sent if i in seen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["latency", "load"])
    parser.add_argument("--alerts", type=int, default=200, help="latency: alerts sent")
    parser.add_argument("--rate", type=float, default=5.0, help="latency: alerts a second")
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--alerts-per-second", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=120.0, help="load: the measured window")
    args = parser.parse_args()

    bootstrap = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    prefix = f"bench-console-{uuid.uuid4().hex[:8]}."
    create_topics(bootstrap, [prefix + t for t in ALL_TOPICS])
    folder = Path(tempfile.mkdtemp(prefix="bench-console-"))
    console = ConsoleProcess({**os.environ, "TOPIC_PREFIX": prefix, "LOG_LEVEL": "WARNING"}, folder)
    producer = KafkaProducer(**kafka_client_config(bootstrap), acks="all", linger_ms=0)  # the alerts'
    floor_producer = KafkaProducer(**kafka_client_config(bootstrap), acks="all", linger_ms=5)
    floor = Floor(floor_producer, prefix, args.tables) if args.mode == "load" else None
    try:
        console.start()
        console.wait_caught_up()
        assert console.process is not None
        pid = console.process.pid
        with chromium() as browser:
            page = browser.new_page()
            log_in(page, console.url, "audrey")
            page.wait_for_function("document.body.dataset.live === 'open'", timeout=10_000)
            page.evaluate(OBSERVER)
            sent: dict[str, float] = {}
            if floor is None:
                send_alerts(producer, prefix, args.tables, args.alerts, args.rate, sent)
                results = latencies(page, sent)
                report(f"latency: {len(results)} alerts at {args.rate:g}/s, alert sent -> row in the page", results)
                return
            floor_page = browser.new_page()
            log_in(floor_page, console.url, "sam")
            floor_page.goto(console.url + "/floor")
            floor.start()
            time.sleep(min(60.0, args.seconds / 2))  # every table seen, the console's windows filled
            floor_page.reload()
            cpu0, wall0, events0 = cpu_seconds(pid), time.monotonic(), floor.events
            rss = [rss_mib(pid)]
            count = int(args.seconds * args.alerts_per_second)
            sender = threading.Thread(target=send_alerts, args=(producer, prefix, args.tables, count, args.alerts_per_second, sent))
            sender.start()
            while sender.is_alive():
                time.sleep(5)
                rss.append(rss_mib(pid))
            sender.join()
            cpu, wall, events = cpu_seconds(pid) - cpu0, time.monotonic() - wall0, floor.events - events0
            results = latencies(page, sent)
            tiles = floor_page.evaluate("document.querySelectorAll('#tiles .tile').length")
            print(
                f"load: {args.tables} tables ({tiles} tiles on the floor page), {events / wall:.0f} floor events/s and "
                f"{args.alerts_per_second:g} alerts/s for {wall:.0f} s, two pages open"
            )
            print(
                f"  console CPU {100 * cpu / wall:.0f}% of one core; resident memory {min(rss):.0f}-{max(rss):.0f} MiB (at the end {rss[-1]:.0f})"
            )
            report("  alert sent -> row in the page, meanwhile", results)
    finally:
        if floor is not None:
            floor.stop.set()
        producer.close(timeout=5)
        floor_producer.close(timeout=5)
        console.stop()
        delete_topics(bootstrap, [prefix + t for t in ALL_TOPICS])
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; 2 cores")


def report(title: str, values: list[float]) -> None:
    if not values:
        print(f"{title}: nothing measured")
        return
    ms = [v * 1000 for v in values]
    print(
        f"{title}: n={len(ms)} p50 {percentile(ms, 0.5):.0f} ms, p90 {percentile(ms, 0.9):.0f} ms, "
        f"p99 {percentile(ms, 0.99):.0f} ms, max {max(ms):.0f} ms (mean {statistics.fmean(ms):.0f} ms)"
    )


if __name__ == "__main__":
    main()
