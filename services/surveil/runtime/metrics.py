"""Prometheus metrics every service exports, and the /metrics endpoint."""

from __future__ import annotations

import gc
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.utils import floatToGoString

# No ``_created`` series: nothing here reads them, and at a thousand tables they were half of
# the detectors' exposition, which takes the interpreter from the event loop for its duration.
disable_created_metrics()  # type: ignore[no-untyped-call]

EVENTS_CONSUMED = Counter("surveil_events_consumed_total", "Events a service took from a topic.", ["service", "topic"])
EVENTS_PRODUCED = Counter("surveil_events_produced_total", "Events a service published to a topic.", ["service", "topic"])
DEAD_LETTERS = Counter(
    "surveil_dead_letters_total", "Inputs rejected to the dead-letter topic, by where they came from.", ["service", "origin"]
)
DEVICE_SIGNATURES = Gauge(
    "surveil_device_signatures_enforced",
    "1 while the service checks its devices' signatures; 0 when DEVICE_SIGNATURES=off: any device message is taken, forged or not.",
    ["service"],
)
BATCH_SECONDS = Histogram(
    "surveil_batch_seconds",
    "Time to process and commit one batch of input events.",
    ["service"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
BATCH_PHASE_SECONDS = Histogram(
    "surveil_batch_phase_seconds",
    "A batch's time by phase, one after the other: apply (its events decoded, checked and processed, "
    "their state read from Redis), state_commit (the state, progress and outputs to Redis in one transaction), "
    "transaction (the outputs published and the offsets committed in one Kafka transaction).",
    ["service", "phase"],
    buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
# Where a runner's input waited before its batch took it up: at its publisher, gathering at the
# broker (KAFKA_GATHER_MS), in the consumer, or for the batch before.
_INTAKE_BUCKETS = (0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5)
INTAKE_LATENCY = Histogram(
    "surveil_intake_latency_seconds",
    "From an input event's time at the table to the start of the batch that took it up, by service and input topic.",
    ["service", "topic"],
    buckets=_INTAKE_BUCKETS,
)
INTAKE_QUEUE_LATENCY = Histogram(
    "surveil_intake_queue_latency_seconds",
    "From an input record's Kafka timestamp (its publisher's send) to the start of the batch that took it up, "
    "by service and input topic: the gathering's, the broker's and the runner's share of surveil_intake_latency_seconds.",
    ["service", "topic"],
    buckets=_INTAKE_BUCKETS,
)
GC_PAUSE_SECONDS = Histogram(
    "surveil_gc_pause_seconds",
    "Pauses of the cyclic garbage collector, by generation: the process runs nothing else meanwhile. "
    "A full collection (generation 2) walks every object the collector tracks.",
    ["generation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)


_GC_PAUSES = [GC_PAUSE_SECONDS.labels(str(generation)) for generation in range(3)]
_collection_started = [0.0]


def _time_collection(phase: str, info: dict[str, int]) -> None:
    """A ``gc.callbacks`` entry: each collection's pause into ``GC_PAUSE_SECONDS`` (about a
    microsecond a collection, hundreds of them a second in a busy service)."""
    if phase == "start":
        _collection_started[0] = time.perf_counter()
    else:
        _GC_PAUSES[info["generation"]].observe(time.perf_counter() - _collection_started[0])


class TableFamily:
    """A metric family with a series per table (and more labels), kept in dicts and written out
    by hand. prometheus_client's exposition takes about 10 µs a sample, holding the interpreter:
    at 1,000 tables a scrape of the detectors' 14,000 per-table samples stopped their event loop
    for 150 ms every 5 s (``bench/scrape.py``). Here each series' line is written when its value
    changes, and a scrape only joins the lines."""

    def __init__(self, name: str, documentation: str, kind: Literal["counter", "gauge"], labelnames: tuple[str, ...]) -> None:
        self.name, self.documentation, self.kind, self.labelnames = name, documentation, kind, labelnames
        self._header = f"# HELP {name} {_escape_help(documentation)}\n# TYPE {name} {kind}\n"
        self._values: dict[tuple[str, ...], float] = {}
        self._prefixes: dict[tuple[str, ...], str] = {}  # a series' name and labels, escaped once
        self._lines: dict[tuple[str, ...], str] = {}  # a series' line as a scrape gives it
        _TABLE_FAMILIES.append(self)

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        self.set(*labels, value=self._values.get(labels, 0.0) + amount)

    def set(self, *labels: str, value: float) -> None:
        prefix = self._prefixes.get(labels)
        if prefix is None:
            pairs = ",".join(f'{name}="{_escape_label(label)}"' for name, label in zip(self.labelnames, labels, strict=True))
            prefix = self._prefixes[labels] = f"{self.name}{{{pairs}}} "
        self._values[labels] = value
        self._lines[labels] = f"{prefix}{floatToGoString(value)}\n"  # type: ignore[no-untyped-call]

    def touch(self, *labels: str) -> None:
        """The series exists from now on, at 0 until it changes."""
        if labels not in self._values:
            self.set(*labels, value=0.0)

    def series(self) -> list[tuple[tuple[str, ...], float]]:
        return list(self._values.items())  # a copy, taken at once: the event loop may add a series meanwhile

    def exposition(self) -> str:
        return self._header + "".join(list(self._lines.values()))


_TABLE_FAMILIES: list[TableFamily] = []


def table_families() -> list[TableFamily]:
    return list(_TABLE_FAMILIES)


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _escape_label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def exposition() -> bytes:
    """What /metrics answers: the default registry, then the per-table families (text format 0.0.4)."""
    return generate_latest(REGISTRY) + "".join(family.exposition() for family in _TABLE_FAMILIES).encode()


class _MetricsHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802  # the name http.server calls
        body = exposition()
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  # a scrape every 5 s is not worth a log line
        pass


def serve(port: int, addr: str = "0.0.0.0") -> ThreadingHTTPServer:  # noqa: S104  # Prometheus scrapes it from another container
    """Expose ``exposition()`` on http://addr:port/metrics (any path answers), from a daemon thread,
    with the process' collections timed from now on."""
    if _time_collection not in gc.callbacks:
        gc.callbacks.append(_time_collection)
    server = ThreadingHTTPServer((addr, port), _MetricsHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
