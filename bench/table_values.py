"""What the detectors write to their tables' changelog at each commit, over a recorded shoe.

The detectors keep each table's state (and each patron's and dealer's chart) as one value, and
write every value an event changed once per offset commit (every ``COMMIT_INTERVAL_MS``,
a second by default): a table's value as a head and the parts of its state that changed
(``anomaly_detection/parts.py``). This replays a recorded log through the faust app's own functions
(``watch_record``, ``chart_record``, ``stage_changed``; no broker), at the log's own pace: every
``--commit-seconds`` of the log's clock it stages a commit, with the offsets the consumer holds
as committed then (those of the commit before: the outputs of events since then are what a
restart may have to publish again). It prints what a commit writes of a table (mean and largest,
keys and values, over the shoe's last two thirds, once the values have grown) beside its whole
value (as one record, one in 25), in how many records (heads, parts, tombstones), the bytes
written a second of play, and the time staging takes a value (encoding it, mostly: the worker's
event loop waits meanwhile; the median over the commits, as the collector's pauses land in one
commit or another), and what the table values hold (one in 25): their recent rounds, shoes,
window of seen ids and outbox; and, for each ten minutes of play, what a commit writes and how
long staging it takes: it grows with the tables' state as their shoes go on.

Each figure is given twice: as the worker writes (the committed offsets handed to the staging),
and with no offset committed (every value keeps its last ``RECENT_OUTPUTS`` outputs).

    .venv/bin/python bench/table_values.py --log /tmp/r20.jsonl
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
from faust.types import TP

from procstat import load_average
from replay import lines_of, make_log
from surveil.anomaly_detection.parts import is_part, table_of
from surveil.events import codec, topics
from surveil.runtime.config import Settings
from surveil.runtime.kafka import partition_for

os.environ.setdefault("ALERT_SIGNING_KEY", "")  # alerts unsigned: the bytes differ by a signature's
TABLE_STREAMS = (topics.SHOE, topics.TABLE, topics.SETTLEMENT)
WINDOW_SECONDS = 600  # of the log's clock: how the commits grow as the shoe goes on


def replayed(lines: list[bytes], commit_seconds: float, committed_offsets: bool) -> Iterator[tuple[int, float, list[Any], float]]:
    """The log through the app's functions, from empty tables, as the worker takes it: a commit
    staged every ``commit_seconds`` of the log's clock; for each, the number of the event it came
    before, that event's time, the changelog staged and the seconds staging took."""
    from surveil.anomaly_detection import app

    app.forget_tables()
    partitions = range(app.settings.partitions)
    assigned = {TP(app.settings.topic(t), p) for t in (*TABLE_STREAMS, app.FACTS) for p in partitions}
    # One partition a topic here, whatever the key: an offset committed on it holds on every partition.
    offsets: Counter[str] = Counter()
    committed: dict[TP, int | None] = {}
    next_commit = codec.decode(lines[0]).time.timestamp() + commit_seconds
    for number, line in enumerate(lines):
        event = codec.decode(line)
        at = event.time.timestamp()
        if at >= next_commit:
            began = time.perf_counter()
            changelog = app.stage_changed(assigned, committed)
            yield number, at, changelog, time.perf_counter() - began
            if committed_offsets:
                committed = {TP(app.settings.topic(t), p): offsets[t] for t in (*TABLE_STREAMS, "facts") for p in partitions}
            next_commit = at + commit_seconds
        key = event.subject.encode()  # on its key's partition, as a producer puts it (the worker refuses it elsewhere)
        outputs = app.watch_record(
            app.settings.topic(event.topic), partition_for(key, app.settings.partitions), offsets[event.topic], 0.0, key, line
        )
        offsets[event.topic] += 1
        for fact in (o for o in outputs if o.topic == "facts"):
            app.chart_record(
                app.settings.topic(app.FACTS), partition_for(fact.key, app.settings.partitions), offsets["facts"], fact.key, fact.value
            )
            offsets["facts"] += 1


def written(lines: list[bytes], commit_seconds: float, committed_offsets: bool) -> dict[str, Any]:
    from surveil.anomaly_detection import app

    table_writes: list[int] = []  # a table's records' bytes in a commit: its head, the parts it stored, tombstones
    records: Counter[str] = Counter()  # over those table writes, by kind
    whole_values: list[int] = []  # a table's value as one record, as written before the parts
    parts: defaultdict[str, list[int]] = defaultdict(list)
    chart_values: list[int] = []
    by_window: defaultdict[int, list[tuple[int, int, float]]] = defaultdict(list)  # per commit: values, bytes, seconds
    started_at = codec.decode(lines[0]).time.timestamp()
    grown = len(lines) // 3
    for number, at, changelog, staged_s in replayed(lines, commit_seconds, committed_offsets):
        writes: Counter[bytes] = Counter()  # per table: its head's, parts' and tombstones' bytes
        kinds: Counter[str] = Counter()
        charts = []
        for topic, _, key, value in changelog:
            if "table-watch" not in topic:
                charts.append(len(key) + len(value or b""))
            else:
                writes[table_of(key) if is_part(key) else key] += len(key) + len(value or b"")
                kinds["tombstones" if value is None else "parts" if is_part(key) else "heads"] += 1
        by_window[int((at - started_at) // WINDOW_SECONDS)].append(
            (len(writes) + len(charts), sum(writes.values()) + sum(charts), staged_s)
        )
        if number >= grown:
            records += kinds
            chart_values += charts
            for table, size in writes.items():
                table_writes.append(size)
                if len(table_writes) % 25 == 0:  # a sample: decoding them all slows the staging timed
                    value = app.stored_table(table)
                    whole_values.append(len(app._encode(msgspec.structs.replace(value, parts=(), carried={}))))
                    for part, size in parts_of(value).items():
                        parts[part].append(size)
    played_s = codec.decode(lines[-1]).time.timestamp() - started_at
    commits = [commit for window in by_window.values() for commit in window]
    total_bytes = sum(size for _, size, _ in commits)
    staging_us = [seconds * 1e6 / values for values, _, seconds in commits if values]  # per commit, a value
    return {
        "table_values_written": len(table_writes),
        "table_write_kb_mean": statistics.mean(table_writes) / 1024,
        "table_write_kb_max": max(table_writes) / 1024,
        "table_write_records_mean": {kind: count / len(table_writes) for kind, count in sorted(records.items())},
        "table_value_kb_mean": statistics.mean(whole_values) / 1024,
        "chart_value_kb_mean": statistics.mean(chart_values) / 1024 if chart_values else 0.0,
        "changelog_kb_a_second_of_play": total_bytes / 1024 / played_s,
        "staging_us_a_value_median": statistics.median(staging_us),
        "table_value_parts_kb_mean": {part: statistics.mean(sizes) / 1024 for part, sizes in parts.items()},
        "by_window": {
            window * WINDOW_SECONDS // 60: {
                "values_a_commit": statistics.mean(values for values, _, _ in commits),
                "kb_a_commit": statistics.mean(size for _, size, _ in commits) / 1024,
                "staging_ms_a_commit": statistics.median(seconds for _, _, seconds in commits) * 1000,
            }
            for window, commits in sorted(by_window.items())
        },
    }


def parts_of(value: Any) -> dict[str, int]:
    """The encoded bytes of a table value's parts."""
    state, size = value.state, lambda part: len(msgspec.msgpack.encode(part))
    return {
        "recent rounds": size(state.rounds),
        "shoes": size(state.shoes),
        "window of seen ids": size(state.recent_digests),
        "outbox": size(value.outbox),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log", type=Path, help="a recorded log (made if missing: 20 tables, one shoe)")
    parser.add_argument(
        "--commit-seconds",
        type=float,
        default=Settings.from_env("anomaly-detection").commit_interval_ms / 1000,
        help="seconds of the log's clock between commits (default: the detectors', COMMIT_INTERVAL_MS)",
    )
    args = parser.parse_args()
    path = args.log or Path("/tmp/bench-values-20x1-s1.jsonl")
    if not path.exists():
        make_log(path, 20, 1, 1, 6)
    lines = [line for line in lines_of(path) if line.strip()]
    print(f"log: {path}, {len(lines):,} events; load average {load_average()}", flush=True)
    for label, committed_offsets in (("as the worker writes (committed offsets)", True), ("no offset committed", False)):
        figures = written(lines, args.commit_seconds, committed_offsets)
        print(
            f"{label}: {figures['table_values_written']:,} table values written over the shoe's last two thirds, "
            f"mean {figures['table_write_kb_mean']:.1f} KB, largest {figures['table_write_kb_max']:.1f} KB (head and changed parts), "
            f"in {sum(figures['table_write_records_mean'].values()):.2f} records ("
            + ", ".join(f"{kind} {mean:.2f}" for kind, mean in figures["table_write_records_mean"].items())
            + "), "
            f"of a whole value of {figures['table_value_kb_mean']:.1f} KB on average; "
            f"charts' mean {figures['chart_value_kb_mean']:.2f} KB; "
            f"{figures['changelog_kb_a_second_of_play']:,.0f} KB written a second of play; "
            f"staging {figures['staging_us_a_value_median']:.0f} us a value (the tables' and the charts', median of the commits)",
            flush=True,
        )
        print(
            "  a table value holds, on average: "
            + ", ".join(f"{part} {kb:.1f} KB" for part, kb in figures["table_value_parts_kb_mean"].items())
        )
        for minute, commit in figures["by_window"].items():
            print(
                f"  from minute {minute:3d} of play: {commit['values_a_commit']:6.0f} values a commit, "
                f"{commit['kb_a_commit']:7.0f} KB, staged in {commit['staging_ms_a_commit']:6.2f} ms (median)"
            )
    print(f"load average at the end {load_average()}")


if __name__ == "__main__":
    main()
