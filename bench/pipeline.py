"""The whole pipeline on the real broker and Redis: shoe-reader, table-controller, settlement and
anomaly-detection (``surveil serve ...`` subprocesses, each as its own principal), the floor
simulator playing live into them. Three measurements:

- ``live``: N tables at real pace (a round per ~50 s a table). The simulated floor's clock is set
  to the wall clock (its START moved to the moment play begins), so every event's time is when it
  happened, and the services' own histograms (``surveil_detection_latency_seconds``: event time to
  processed by the detectors, and of that, ``surveil_detection_queue_latency_seconds``: from the
  publisher's send; ``surveil_alert_latency_seconds``: revealing event to alert published)
  measure real latency, over all topics and by the topic the event came from (``baccarat.shoe``:
  from the card read). Every table does ``--injections`` irregularities (codes the
  table side can cause, one after the other in its rounds), and the bench times each alert from
  the revealing event's time (a card read, a round's end: when the simulator was due to send it)
  to the alert's arrival on ``baccarat.alerts``. The consumer lag of the three groups is read about
  every second, at random moments (a fixed period beats with the detectors' commits, and the lag
  read would drift with the beat); N is *sustained* when no group's lag grows
  over the measured window (each group's least-squares slope under 1 event/s; printed with its
  standard error). CPU ms per round (utime + stime from /proc over the
  window, by the rounds that ended in it) and peak RSS of each process: the four services, the
  simulated floor, and the stack's broker, Redis and Prometheus (found by the port they listen
  on, else by ``.stack/``'s pid files). ``--tables 1000,2000`` is a sweep, one run per size;
  ``--json`` writes it as one document (``bench/plot_sweep.py`` draws it); ``--profile DIR``
  records each service and the floor with py-spy over the window, and the broker with the JVM's
  flight recorder (``bench/profile_summary.py`` reads both). ``--broker-requests`` adds the
  broker's requests a round by type (Produce, Fetch, AddPartitionsToTxn, EndTxn, ...: the
  broker's own meters, read at the window's start and end, by the rounds that ended between the
  readings; ``bench/broker_requests.py``), the broker's mean time a request of each type over
  the window, received to answered, and what each topic took in a round (partition writes,
  records, bytes). Opt-in: it opens an unauthenticated JMX port in the running broker, on
  127.0.0.1, for the run (``jcmd ... ManagementAgent.start``; closed after the window). The
  counts are the whole broker's: the bench's own consumer and lag watcher, and anything else
  using the broker meanwhile, are in them.
- ``full-speed``: T tables x S shoes played as fast as the reader and broker take them
  (``--pace 0``); events/s through every topic and every consumer group, and end to end (until
  the detectors have consumed everything).
- Either with ``--instances 2``: two instances of each consumer service in its consumer group
  (``--instances anomaly-detection=2``: of that service only);
  which instance owned which partitions (``describe_consumer_groups``), and every table event,
  settlement and alert compared with the offline reference of the same floor (``--check``).

The simulator's actions are generated before the clock starts, in a process of their own, so the
measurement has the sending in it, not the simulation. Each run gets its own deployment: topics
under a fresh TOPIC_PREFIX, Redis keys under its REDIS_PREFIX, ACLs and Redis users for it
(``PrefixAccess``); all is deleted afterwards.

    eval "$(ops/stack.sh env)"      # the admin's credentials (or a private stack's stack.env)
    .venv/bin/python bench/pipeline.py live --tables 1000 --seconds 300
    .venv/bin/python bench/pipeline.py live --tables 1000,2000,3000,4000,6000 --seconds 300 --json sweep.json
    .venv/bin/python bench/pipeline.py live --tables 1000 --profile profiles/   # profiles of each process
    .venv/bin/python bench/pipeline.py live --tables 1000 --broker-requests     # the broker's requests a round
    .venv/bin/python bench/pipeline.py full-speed --tables 100 --shoes 1
    .venv/bin/python bench/pipeline.py full-speed --tables 100 --shoes 1 --instances 2 --check
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import redis
import uvloop
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import broker_requests
import surveil
from procstat import (
    STACK,
    PeakRss,
    cpu_seconds,
    load_average,
    proc_cpu_seconds,
    proc_status,
    run_queue_between,
    run_queue_seconds,
    stack_pids,
)
from profiles import Profiles
from support.processes import Launched, free_port, stop
from surveil.core.findings import AlertCode
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.events.topics import ALL_TOPICS, INPUTS
from surveil.runtime.access import FLOOR_SIMULATOR, PrefixAccess
from surveil.runtime.alert_keys import PRIVATE_FILE, generate
from surveil.runtime.config import Settings, kafka_client_config
from surveil.runtime.topic_admin import create_topics, delete_topics, partitions_from_env
from surveil.sim.live import TICK_SECONDS

SERVICES = ("shoe-reader", "table-controller", "settlement", "anomaly-detection")
CONSUMERS = ("table-controller", "settlement", "anomaly-detection")  # consumer groups, named after the service
# What each group consumes (the facts are anomaly-detection's own internal topic).
CONSUMED = {
    "table-controller": (topics.SHOE, INPUTS),
    "settlement": (topics.TABLE,),
    "anomaly-detection": (topics.SHOE, topics.TABLE, topics.SETTLEMENT, "anomaly-detection-facts"),
}
PIPELINE_TOPICS = (INPUTS, topics.SHOE, topics.TABLE, topics.SETTLEMENT, topics.ALERTS)
# Irregularities the table side can cause, live (the settlement ones are done offline only):
# card reads that reveal it themselves, and rounds found wrong when they are ready.
LIVE_INJECTIONS = (
    AlertCode.CARD_EXPOSED,
    AlertCode.CARD_MISMATCH,
    AlertCode.DRAW_BANKER_EXTRA,
    AlertCode.LATE_BET,
    AlertCode.CARD_OVERCOUNT,
    AlertCode.RESULT_MISMATCH,
)
WARMUP_SECONDS = 60.0  # tables start over the first 50 s (shoe start, burn): not measured
# A fresh broker (just after `ops/stack.sh up`) has no group coordinator yet, a new topic no
# leader: what it answers with a retriable error is asked again for this long.
RETRY_SECONDS = 120.0
PACE = 50.0  # wall-clock seconds a round takes at a table: real pace (a busy baccarat table)
SUSTAINED_SLOPE = 1.0  # events/s: a group whose lag grows faster over the window is not keeping up
COMMITS, GC_PAUSES = "surveil_detection_commit_seconds", "surveil_gc_pause_seconds"
DETECTION, SINCE_PUBLISHED = "surveil_detection_latency_seconds", "surveil_detection_queue_latency_seconds"
ALERTS_PUBLISHED = "surveil_alert_latency_seconds"
INTAKE, INTAKE_SINCE_SENT = "surveil_intake_latency_seconds", "surveil_intake_queue_latency_seconds"
BATCHES, BATCH_PHASES = "surveil_batch_seconds", "surveil_batch_phase_seconds"
DETECTORS, RUNNERS = ("anomaly-detection",), ("table-controller", "settlement")
# The histograms a run reads: the labels each is split by (none: all under ""), and the services
# whose instances fill it (every process times its collections: only the detectors' are read).
HISTOGRAMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    DETECTION: (("topic",), DETECTORS),
    SINCE_PUBLISHED: (("topic",), DETECTORS),
    ALERTS_PUBLISHED: (("topic",), DETECTORS),
    COMMITS: (("topic",), DETECTORS),
    GC_PAUSES: (("generation",), DETECTORS),
    BATCHES: (("service",), RUNNERS),
    BATCH_PHASES: (("service", "phase"), RUNNERS),
    INTAKE: (("service", "topic"), RUNNERS),
    INTAKE_SINCE_SENT: (("service", "topic"), RUNNERS),
}
T = TypeVar("T")


def say(line: str) -> None:
    print(f"[pipeline] {line}", flush=True)


def retrying(what: str, call: Callable[[], T], seconds: float = RETRY_SECONDS) -> T:
    """``call()``, and again while the broker answers with a retriable error, for up to
    ``seconds``, with a line for each wait."""
    deadline, pause = time.monotonic() + seconds, 0.5
    while True:
        try:
            return call()
        except KafkaError as error:
            if not error.retriable or time.monotonic() + pause > deadline:
                raise
            say(f"{what}: {type(error).__name__}, retriable; again in {pause:.1f} s (until {seconds:.0f} s have passed)")
            time.sleep(pause)
            pause = min(2 * pause, 5.0)


def percentile(values: list[float], share: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


# ---- the deployment ---------------------------------------------------------------------------


def instance_names(service: str, instances: int | Mapping[str, int]) -> list[str]:
    """The names of ``service``'s instances, ``instances`` of each consumer service or as named
    (one of the others; the shoe-reader is one): the service's own name when one."""
    if service not in CONSUMERS:
        count = 1
    elif isinstance(instances, int):
        count = instances
    else:
        count = instances.get(service, 1)
    return [service] if count == 1 else [f"{service}-{n}" for n in range(1, count + 1)]


@dataclass
class Pipeline:
    """Topics, Redis keys, principals and the services of one measurement."""

    bootstrap: str
    redis_url: str
    instances: int | Mapping[str, int] = 1  # of each consumer service, or by service (the shoe-reader is one: the devices connect to it)
    services: tuple[str, ...] = SERVICES
    partitions: int = field(default_factory=partitions_from_env)
    tag: str = field(default_factory=lambda: f"bench-pipeline-{uuid.uuid4().hex[:8]}")
    log_level: str = "INFO"  # faust and the runner log their partition assignments at INFO
    reader_port: int = field(default_factory=free_port)
    processes: dict[str, Launched] = field(default_factory=dict)
    metrics_ports: dict[str, int] = field(default_factory=dict)
    access: PrefixAccess | None = None

    def __post_init__(self) -> None:
        self.prefix = self.tag + "."
        self.logs = Path(tempfile.mkdtemp(prefix=self.tag + "-"))
        self.device_keys = str(self.logs / "device-keys")  # the devices sign, the services check (DEVICE_KEYS)
        Path(self.device_keys).mkdir(mode=0o700)
        generate(self.logs / "alert-signing")  # the detectors sign their alerts (ALERT_SIGNING_KEY)

    def instance_names(self, service: str) -> list[str]:
        return instance_names(service, self.instances)

    def __enter__(self) -> Pipeline:
        retrying("creating the topics", lambda: create_topics(self.bootstrap, [self.prefix + t for t in ALL_TOPICS], self.partitions))
        self.access = retrying("granting the principals", lambda: PrefixAccess(self.bootstrap, self.redis_url, self.prefix, self.prefix))
        try:
            for service in self.services:
                for name in self.instance_names(service):
                    self.start(service, name)
            self.wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def start(self, service: str, name: str) -> None:
        assert self.access is not None
        self.metrics_ports[name] = free_port()
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP": self.bootstrap,
            "REDIS_URL": self.redis_url,
            "TOPIC_PREFIX": self.prefix,
            "REDIS_PREFIX": self.prefix,
            "PARTITIONS": str(self.partitions),
            "METRICS_PORT": str(self.metrics_ports[name]),
            "SHOE_READER_PORT": str(self.reader_port),
            "INSTANCE_ID": name,
            "LOG_LEVEL": self.log_level,
            "DEVICE_KEYS": self.device_keys,
            "ALERT_SIGNING_KEY": str(self.logs / "alert-signing" / PRIVATE_FILE),
            "FAUST_DATADIR": str(self.logs / f"faust-{name}"),
        }
        env = self.access.env(service, env)  # its own principal, with the ACLs of this prefix
        self.processes[name] = Launched.serve(service, env, self.logs / f"{name}.log")

    def check_alive(self) -> None:
        dead = [name for name, process in self.processes.items() if process.poll() is not None]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited; logs in {self.logs}")

    def wait_ready(self, timeout: float = 180) -> None:
        """The reader listens; every consumer group is stable with all its members."""
        deadline = time.monotonic() + timeout
        if "shoe-reader" in self.services:
            while True:
                self.check_alive()
                try:
                    socket.create_connection(("127.0.0.1", self.reader_port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the shoe-reader does not listen; logs in {self.logs}") from None
                    time.sleep(0.2)
        groups = [g for g in CONSUMERS if g in self.services]
        while groups:
            self.check_alive()
            owners = self.assignments()
            if all(
                len(owners.get(g, {})) == len(self.instance_names(g)) and sum(map(len, owners[g].values())) >= self.partitions
                for g in groups
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumer groups not ready: {owners}; logs in {self.logs}")
            time.sleep(1)

    def assignments(self) -> dict[str, dict[str, list[str]]]:
        """Per group: each member (its client id) and the partitions it owns, from the group
        coordinator (``describe_consumer_groups``)."""
        admin = KafkaAdminClient(**kafka_client_config(self.bootstrap), client_id=f"{self.tag}-probe")
        try:
            described = retrying("describing the groups", lambda: admin.describe_groups([self.prefix + g for g in CONSUMERS]))
        finally:
            admin.close()
        owners: dict[str, dict[str, list[str]]] = {}
        for group_id, group in described.items():
            if group.get("group_state") != "Stable":
                continue
            members = owners.setdefault(group_id.removeprefix(self.prefix), {})
            for member in group.get("members") or ():
                tps = []
                for assigned in (member.get("member_assignment") or {}).get("assigned_partitions") or ():
                    tps += [f"{assigned['topic'].removeprefix(self.prefix)}:{p}" for p in sorted(assigned["partitions"])]
                name = member.get("group_instance_id") or member.get("client_id") or member.get("member_id")
                members[str(name)] = sorted(tps)
        return owners

    def __exit__(self, *_: object) -> None:
        stop(*self.processes.values(), timeout=30)
        if self.access is not None:
            self.access.close()
        admin = KafkaAdminClient(**kafka_client_config(self.bootstrap), client_id=f"{self.tag}-cleanup")
        try:
            ours = [t for t in admin.list_topics() if t.startswith(self.prefix)]
            groups = [g["group_id"] for g in admin.list_groups() if g["group_id"].startswith(self.prefix)]
            if groups:
                try:
                    admin.delete_groups(groups)
                except Exception:  # static members linger until their session ends: harmless
                    pass
        finally:
            admin.close()
        delete_topics(self.bootstrap, ours)
        client = redis.Redis.from_url(self.redis_url)
        doomed = list(client.scan_iter(match=self.prefix + "*", count=1000))
        for first in range(0, len(doomed), 500):
            client.unlink(*doomed[first : first + 500])
        client.close()

    # ---- what the processes used ----------------------------------------------------------

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.processes.items() if p.poll() is None}

    def cpu_seconds(self) -> dict[str, float]:
        return {name: proc_cpu_seconds(pid) for name, pid in self.pids().items()}

    def peak_rss_mb(self) -> dict[str, float]:
        return {name: proc_status(p.pid, "VmHWM") / 1024 for name, p in self.processes.items() if p.poll() is None}

    def metrics_text(self, name: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_ports[name]}/metrics", timeout=5) as response:
            text: str = response.read().decode()
            return text

    def histograms(self, metrics: Iterable[str]) -> dict[str, dict[str, dict[float, float]]]:
        """Each of ``metrics``' cumulative bucket counts by its labels in ``HISTOGRAMS``, summed over
        the instances of the services that fill it, from one scrape of each instance (a scrape
        holds a detectors' worker's event loop)."""
        by_services: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = defaultdict(dict)
        for metric in metrics:
            labels, services = HISTOGRAMS[metric]
            by_services[services][metric] = labels
        found: dict[str, dict[str, dict[float, float]]] = {}
        for services, labels in by_services.items():
            found |= histogram_buckets([self.metrics_text(name) for service in services for name in self.instance_names(service)], labels)
        return found

    def settings(self, principal: str) -> Settings:
        assert self.access is not None
        settings = replace(Settings.from_env(principal), kafka_bootstrap=self.bootstrap, topic_prefix=self.prefix)
        return self.access.settings(settings, principal)  # type: ignore[no-any-return]


def histogram_buckets(texts: Iterable[str], labels: Mapping[str, Sequence[str]]) -> dict[str, dict[str, dict[float, float]]]:
    """Each histogram of ``labels`` (its name, and the labels it is split by): its cumulative
    bucket counts by those labels' values, "/" between them ("" for a histogram without them),
    summed over the exposition ``texts`` (one per instance). Only the histograms' bucket lines are
    parsed: the detectors' exposition is mostly their per-table series."""
    named = {f"{metric}_bucket": metric for metric in labels}
    total: dict[str, dict[str, dict[float, float]]] = {metric: defaultdict(lambda: defaultdict(float)) for metric in labels}
    for text in texts:
        wanted = "\n".join(line for line in text.splitlines() if line.partition("{")[0].partition(" ")[0] in named)
        for family in text_string_to_metric_families(wanted):
            for sample in family.samples:
                metric = named.get(sample.name)
                if metric is not None:
                    value = "/".join(sample.labels.get(label, "") for label in labels[metric])
                    total[metric][value][float(sample.labels["le"])] += sample.value
    return {metric: {value: dict(buckets) for value, buckets in by_value.items()} for metric, by_value in total.items()}


def histogram_delta(
    after: Mapping[str, Mapping[float, float]], before: Mapping[str, Mapping[float, float]]
) -> dict[str, dict[float, float]]:
    """What each topic's buckets gained from ``before`` to ``after``."""
    return {topic: {le: count - before.get(topic, {}).get(le, 0.0) for le, count in buckets.items()} for topic, buckets in after.items()}


def ages_by_rule(
    revealed: Iterable[tuple[float, float, str]], start: float, end: float, end_included: bool = True
) -> dict[str, list[float]]:
    """Card read to alert of the alerts revealed from ``start`` to ``end`` (``revealed``: when,
    how long the alert took to arrive, its rule), by rule."""
    by_rule: dict[str, list[float]] = defaultdict(list)
    for at, age, rule in revealed:
        if start <= at and (at <= end if end_included else at < end):
            by_rule[rule].append(age)
    return by_rule


def alert_summary(by_rule: Mapping[str, list[float]]) -> dict[str, Any]:
    """``ages_by_rule``'s count, p50 and p99, over all rules and by rule."""
    ages = [age for rule_ages in by_rule.values() for age in rule_ages]
    return {
        "alerts": len(ages),
        "p50": percentile(ages, 0.5),
        "p99": percentile(ages, 0.99),
        "by_rule": {
            rule: {"alerts": len(xs), "p50": percentile(xs, 0.5), "p99": percentile(xs, 0.99)} for rule, xs in sorted(by_rule.items())
        },
    }


def ms_text(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{1000 * seconds:.0f} ms"


@dataclass(frozen=True)
class Mark:
    """The window's measures at a moment of it: the services' histograms and each process' CPU seconds."""

    t: float
    histograms: Mapping[str, Any]
    cpu: Mapping[str, float]


def histogram_figures(histograms: Mapping[str, Mapping[str, Mapping[float, float]]]) -> dict[str, Any]:
    """The services' histograms over a span (each ``histogram_delta``'d), summed up by ``latency_summary``."""
    return {
        "detection_latency": latency_summary(histograms[DETECTION]),
        "detection_since_published": latency_summary(histograms[SINCE_PUBLISHED]),
        "alert_latency_service": latency_summary(histograms[ALERTS_PUBLISHED]),
        "detectors_commit": latency_summary(histograms[COMMITS]),
        "detectors_gc_pauses": latency_summary(histograms[GC_PAUSES])["by_topic"],  # by generation
        "runners_batches": latency_summary(histograms[BATCHES])["by_topic"],  # by service
        "runners_batch_phases": latency_summary(histograms[BATCH_PHASES])["by_topic"],  # by "service/phase"
        "runners_intake": latency_summary(histograms[INTAKE])["by_topic"],  # by "service/topic"
        "runners_intake_since_sent": latency_summary(histograms[INTAKE_SINCE_SENT])["by_topic"],  # by "service/topic"
    }


def window_parts(
    marks: Sequence[Mark],
    round_ends: Sequence[float],
    samples: Sequence[Mapping[str, Any]],
    alert_ages: Sequence[tuple[float, float, str]],
) -> list[dict[str, Any]]:
    """The window cut at ``marks`` (its start, each cut, its end), each part's figures: its rounds,
    each process' CPU ms a round, the detectors' tail from a record's publication and their
    commits, card read to alert over the alerts revealed in it (``alert_ages``: when revealed,
    how long to arrive, the rule), also by rule (the kinds differ from part to part), and each
    group's lag (``lag_trend`` over the offsets' ``samples``), and the services' histograms
    (``histogram_figures``). As the tables' state grows over a run, do the commits and the CPU a
    round grow, does a backlog build (the tail from publication, the lag), and which hop's time
    grows?"""
    parts = []
    for start, end in zip(marks, marks[1:]):
        rounds = sum(start.t < t <= end.t for t in round_ends)
        used = {name: end.cpu[name] - start.cpu[name] for name in end.cpu if name in start.cpu}
        cpu_ms = {name: 1000 * s / rounds for name, s in used.items()} if rounds else {}
        if cpu_ms:
            cpu_ms["total"] = sum(cpu_ms.values())
        inside = [sample for sample in samples if start.t <= sample["t"] <= end.t]
        parts.append(
            {
                "from_s": start.t - marks[0].t,
                "to_s": end.t - marks[0].t,
                "rounds": rounds,
                "cpu_ms_per_round": cpu_ms,
                **histogram_figures({metric: histogram_delta(end.histograms[metric], start.histograms[metric]) for metric in HISTOGRAMS}),
                "alerts": alert_summary(ages_by_rule(alert_ages, start.t, end.t, end_included=end is marks[-1])),
                "lag": {group: lag_trend(inside, group) for group in CONSUMERS},
            }
        )
    return parts


def histogram_quantile(buckets: Mapping[float, float], share: float) -> float:
    """As Prometheus' histogram_quantile: linear within the bucket the rank falls in."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return math.nan
    rank, lower, below = share * total, 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if le == math.inf:
                return lower  # above the largest finite bucket: its bound is all one can say
            return lower + (le - lower) * (rank - below) / max(count - below, 1e-9)
        lower, below = le, count
    return lower


def share_within(buckets: Mapping[float, float], bound: float) -> float:
    total = buckets.get(math.inf, 0.0)
    return buckets.get(bound, math.nan) / total if total else math.nan


def latency_summary(by_topic: Mapping[str, Mapping[float, float]]) -> dict[str, Any]:
    """A latency histogram's count, p50, p99 and share within 100 ms: over all topics, and by topic."""

    def summary(buckets: Mapping[float, float]) -> dict[str, float]:
        return {
            "count": buckets.get(math.inf, 0.0),
            "p50": histogram_quantile(buckets, 0.5),
            "p99": histogram_quantile(buckets, 0.99),
            "within_100ms": share_within(buckets, 0.1),
        }

    overall: dict[float, float] = defaultdict(float)
    for buckets in by_topic.values():
        for le, count in buckets.items():
            overall[le] += count
    return {**summary(overall), "by_topic": {topic: summary(buckets) for topic, buckets in sorted(by_topic.items())}}


# ---- watching the broker ------------------------------------------------------------------------


class Offsets(threading.Thread):
    """About every ``interval`` s (a half to one and a half of it, at random: a fixed period could
    beat with the consumers' commits): each topic's end offsets (read_committed) and each group's
    committed offsets, summed over partitions, with the time and the load average."""

    def __init__(self, pipeline: Pipeline, interval: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.pipeline = pipeline
        self.interval = interval
        self.samples: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.errors = 0

    def run(self) -> None:
        prefix = self.pipeline.prefix
        config = kafka_client_config(self.pipeline.bootstrap)
        admin = KafkaAdminClient(**config, client_id=f"{self.pipeline.tag}-offsets")
        consumer = KafkaConsumer(**config, group_id=None, enable_auto_commit=False, isolation_level="read_committed")
        topics = sorted({*PIPELINE_TOPICS, *(t for ts in CONSUMED.values() for t in ts)})
        try:
            while True:
                try:
                    self.samples.append(self.sample(admin, consumer, prefix, topics))
                except Exception:
                    self.errors += 1
                if self.stop.wait(self.interval * random.uniform(0.5, 1.5)):
                    break
        finally:
            consumer.close()
            admin.close()

    def sample(self, admin: KafkaAdminClient, consumer: KafkaConsumer, prefix: str, topics: list[str]) -> dict[str, Any]:
        tps = [TopicPartition(prefix + t, p) for t in topics for p in consumer.partitions_for_topic(prefix + t) or ()]
        ends = consumer.end_offsets(tps)
        produced: dict[str, int] = Counter()
        for tp, offset in ends.items():
            produced[tp.topic.removeprefix(prefix)] += offset
        lag, consumed = {}, {}
        for group, consumes in CONSUMED.items():
            if group not in self.pipeline.services:
                continue
            committed = admin.list_group_offsets(prefix + group).get(prefix + group, {})
            total_lag = total_done = 0
            for tp in tps:
                if tp.topic.removeprefix(prefix) not in consumes:
                    continue
                done = committed.get(tp)
                position = done.offset if done is not None and done.offset >= 0 else 0
                total_lag += max(ends[tp] - position, 0)
                total_done += position
            lag[group], consumed[group] = total_lag, total_done
        return {"t": time.time(), "load": load_average()[0], "produced": dict(produced), "lag": lag, "consumed": consumed}


class Alerts(threading.Thread):
    """Consumes ``baccarat.alerts`` from the start and notes when each alert arrived."""

    def __init__(self, pipeline: Pipeline) -> None:
        super().__init__(daemon=True)
        self.pipeline = pipeline
        self.arrivals: list[tuple[float, m.AlertRaised]] = []  # (time.time() at arrival, alert)
        self.stop = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        topic = self.pipeline.prefix + topics.ALERTS
        consumer = KafkaConsumer(
            **kafka_client_config(self.pipeline.bootstrap),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
        )
        consumer.assign([TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()])
        consumer.seek_to_beginning()
        consumer.poll(timeout_ms=0)
        self.ready.set()
        while not self.stop.is_set():
            for records in consumer.poll(timeout_ms=100).values():
                now = time.time()
                for record in records:
                    alert = codec.decode(record.value)
                    if isinstance(alert, m.AlertCheckpoint):  # the detectors' signed count of each table's alerts
                        continue
                    assert isinstance(alert, m.AlertRaised)
                    self.arrivals.append((now, alert))
        consumer.close()

    def distinct(self) -> dict[str, m.AlertRaised]:
        return {alert.data.alert_id: alert for _, alert in self.arrivals}


def read_topic(bootstrap: str, topic: str) -> list[m.Event]:
    """Every committed event of ``topic`` (read to its end offsets)."""
    consumer = KafkaConsumer(
        **kafka_client_config(bootstrap),
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        max_poll_records=5000,
    )
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        events: list[m.Event] = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for records in consumer.poll(timeout_ms=1000).values():
                events += [codec.decode(r.value) for r in records]
        return events
    finally:
        consumer.close()


# ---- the simulator, in a process of its own -------------------------------------------------


@dataclass(frozen=True)
class PlaySpec:
    tables: int
    shoes: int
    seed: int
    pace: float  # wall-clock seconds per round; 0: as fast as possible
    seconds: float | None  # table time to generate (None: the whole floor)
    inject: tuple[str, ...]
    start: float | None  # Unix time the floor's clock starts at, and play begins (real pace)
    settings: Settings  # the floor-simulator's, as the deployment's principal
    reader_port: int
    device_keys: str  # the key store: the child issues a key for each device of its floor
    tick: float = TICK_SECONDS  # the play's loop wakes at most this often (play_live)


def _play(spec: PlaySpec, pipe: Any) -> None:
    """Child process: generate the floor's actions (with START at ``spec.start``) and the
    devices' records (signed, ``made_ahead``), wait for the start, play them; report through
    ``pipe``."""
    import surveil.sim.live as live_module
    import surveil.sim.table as table_module
    from floor_producer import floor_publisher, made_ahead
    from surveil.events.signing import DeviceKeys, console_device, shoe_device
    from surveil.runtime.devices import KeyStore
    from surveil.sim.floor import Floor
    from surveil.sim.table import TableInput, Truth

    if spec.start is not None:
        table_module.START = live_module.START = datetime.fromtimestamp(spec.start, UTC)
    start_of_floor = table_module.START
    generating = time.perf_counter()
    floor = Floor(spec.tables, spec.shoes, spec.seed, inject=[AlertCode(code) for code in spec.inject])
    actions: list[Any] = []
    labels: list[Any] = []  # of rounds that ended within the window: their alerts are due
    pending: dict[str, list[Any]] = defaultdict(list)  # per table: labels of the round in play
    round_ends: list[float] = []  # seconds after the start (wall clock at real pace) each round ends
    scale = spec.pace / table_module.ROUND_SECONDS
    for action in floor.actions():
        if spec.seconds is not None and (action.time - start_of_floor).total_seconds() > spec.seconds:
            break
        actions.append(action)
        if isinstance(action, Truth):
            pending[action.table_id].append(action.label)
        elif isinstance(action, TableInput) and isinstance(action.event, m.Result):
            round_ends.append((action.time - start_of_floor).total_seconds() * scale)
            labels += pending.pop(action.table_id, [])
    store = KeyStore(spec.device_keys)
    for table in floor.tables:
        for device in (shoe_device(table.table_id), console_device(table.table_id)):
            store.issue(device)
    keys = DeviceKeys(store)
    # Connected before the start: every event's time is when it is sent.
    actions, publisher = made_ahead(actions, floor_publisher(spec.settings, keys), keys)
    generated = time.perf_counter() - generating
    pipe.send({"generated_seconds": generated, "actions": len(actions), "rounds": len(round_ends), "round_ends": round_ends})
    if spec.start is not None and spec.start < time.time():
        pipe.send({"error": f"generating took {generated:.0f} s: {time.time() - spec.start:.1f} s past the start; give it more --lead"})
        return
    run = live_module.LiveRun()
    clock: dict[str, float] = {}

    async def play() -> None:
        gateway = live_module.ShoeGateway("127.0.0.1", spec.reader_port)
        clock["began"] = spec.start if spec.start is not None else time.time()  # play_live waits for its origin
        try:
            await live_module.play_live(
                SimpleNamespace(actions=lambda: iter(actions)),
                publisher,
                gateway,
                spec.pace,  # type: ignore[arg-type]
                run=run,
                origin=spec.start,
                tick=spec.tick,
            )
        finally:
            await gateway.close()

    cpu = time.process_time()
    uvloop.run(play())  # libuv's loop: the floor's wakes cost it less CPU than on asyncio's own
    ended = time.time()
    publisher.close()
    pipe.send(
        {
            "began": clock["began"],
            "ended": ended,
            "lines": run.lines,
            "inputs": run.inputs,
            "most_behind": run.most_behind,
            "reconnects": run.reconnects,
            "cpu_seconds": time.process_time() - cpu,
            "labels": [(label.table_id, label.code, label.round_id) for label in labels],
        }
    )


class Simulator:
    """The simulator's process: ``generated()`` once its actions are made, ``result()`` once played."""

    def __init__(self, spec: PlaySpec) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipe, child = context.Pipe(duplex=False)
        self.process = context.Process(target=_play, args=(spec, child), daemon=True)
        self.process.start()
        child.close()

    def _receive(self, timeout: float) -> dict[str, Any]:
        if not self.pipe.poll(timeout):
            raise TimeoutError("the simulator said nothing")
        message: dict[str, Any] = self.pipe.recv()
        if "error" in message:
            raise RuntimeError(message["error"])
        return message

    def generated(self, timeout: float = 1800) -> dict[str, Any]:
        return self._receive(timeout)

    def result(self, timeout: float = 7200) -> dict[str, Any]:
        try:
            return self._receive(timeout)
        finally:
            self.process.join(30)

    @property
    def pid(self) -> int:
        return int(self.process.pid or 0)


def injections(tables: int, per_table: int) -> tuple[str, ...]:
    """``per_table`` codes for every table (the floor deals code i to table i mod tables)."""
    return tuple(LIVE_INJECTIONS[i % len(LIVE_INJECTIONS)].value for i in range(tables * per_table))


# ---- live, at real pace -----------------------------------------------------------------------


def trades() -> dict[str, int]:
    """The services' settings that trade latency for CPU, as this run's services have them (they
    get this process's environment)."""
    settings = Settings.from_env("bench")
    return {
        "KAFKA_GATHER_MS": settings.kafka_gather_ms,
        "KAFKA_LINGER_MS": settings.kafka_linger_ms,
        "COMMIT_INTERVAL_MS": settings.commit_interval_ms,
        "FETCH_GATHER_MS": settings.fetch_gather_ms,
    }


def lag_trend(samples: list[dict[str, Any]], group: str) -> dict[str, float]:
    """Lag of ``group`` over ``samples``: mean, max, first and last quarter's means, and the
    least-squares slope (messages/s) with its standard error: a group's committed lag jumps at
    each commit, and the error says how far the slope is from what that noise could give."""
    points = [(s["t"], s["lag"][group]) for s in samples if group in s["lag"]]
    if len(points) < 4:
        return {}
    ts, lags = zip(*points)
    t0 = ts[0]
    xs = [t - t0 for t in ts]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(lags)
    spread = max(sum((x - mean_x) ** 2 for x in xs), 1e-9)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, lags)) / spread
    residuals = sum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in zip(xs, lags))
    quarter = max(len(lags) // 4, 1)
    return {
        "mean": mean_y,
        "max": max(lags),
        "first_quarter": statistics.fmean(lags[:quarter]),
        "last_quarter": statistics.fmean(lags[-quarter:]),
        "slope_per_s": slope,
        "slope_error_per_s": math.sqrt(residuals / (len(xs) - 2) / spread),
        "seconds": xs[-1],
    }


def sustained(trends: Mapping[str, Mapping[str, float]]) -> bool:
    """No group's lag grows over the window: each one's least-squares slope is under
    ``SUSTAINED_SLOPE`` events/s (a group without enough samples is not sustained)."""
    return all(trend and trend["slope_per_s"] < SUSTAINED_SLOPE for trend in trends.values())


@dataclass(frozen=True)
class LiveSpec:
    """One live run: ``tables`` at real pace for ``seconds`` of play (the first
    ``WARMUP_SECONDS`` not measured)."""

    tables: int
    seconds: float
    instances: int | Mapping[str, int] = 1
    per_table: int = 4  # injected irregularities a table
    lead: float | None = None  # seconds from the start to the floor's first action (generating)
    seed: int = 1
    prometheus_port: int = 9090  # the stack's, to find its process
    profile: Path | None = None  # py-spy's profiles of each process go here
    broker_requests: bool = False  # read the broker's request meters (opens a JMX port in it for the run)
    floor_tick: float = TICK_SECONDS  # the simulated floor's loop wakes at most this often
    parts: int = 2  # the window's figures also for each of this many equal parts of it


def live(bootstrap: str, redis_url: str, spec: LiveSpec) -> dict[str, Any]:
    tables, seconds = spec.tables, spec.seconds
    if seconds < WARMUP_SECONDS + 30:
        raise SystemExit(f"--seconds {seconds:g}: the first {WARMUP_SECONDS:.0f} s are warm-up; give at least {WARMUP_SECONDS + 30:.0f}")
    inject = injections(tables, spec.per_table)
    # Generating runs at ~700 rounds/s on a free core: give it three times that, and 20 s.
    lead = spec.lead if spec.lead is not None else 20 + 3 * tables * seconds / PACE / 700
    with Pipeline(bootstrap, redis_url, instances=spec.instances) as pipeline, ExitStack() as cleanup:
        alerts = Alerts(pipeline)
        alerts.start()
        alerts.ready.wait(60)
        start = time.time() + lead
        simulator = Simulator(
            PlaySpec(
                tables,
                1,
                spec.seed,
                PACE,
                seconds,
                inject,
                start,
                pipeline.settings(FLOOR_SIMULATOR),
                pipeline.reader_port,
                pipeline.device_keys,
                spec.floor_tick,
            )
        )
        stack = stack_pids(bootstrap, redis_url, spec.prometheus_port)
        if len(stack) < len(STACK):
            say(f"not measured (not found by port or in .stack/): {', '.join(sorted(STACK.keys() - stack.keys()))}")
        rss = PeakRss({"simulator": simulator.pid, **stack})  # the pipeline's own processes: their VmHWM
        rss.start()
        generated = simulator.generated()
        round_ends = [start + t for t in generated.pop("round_ends")]
        offsets = Offsets(pipeline)
        offsets.start()
        say(f"{tables} tables: {generated['rounds']} rounds generated; play starts in {max(start - time.time(), 0):.0f} s")
        # What the processes use idle (connected, polling, scraped), before play: the part of
        # the cost per round that is paid by the second, whatever the floor.
        idle_pids = {**pipeline.pids(), **stack}
        idle_from, idle_before = time.time(), cpu_seconds(idle_pids)
        time.sleep(max(start - time.time(), 0))
        idle_after, idle_span = cpu_seconds(idle_pids), time.time() - idle_from
        time.sleep(max(start + WARMUP_SECONDS - time.time(), 0))
        pipeline.check_alive()
        before = pipeline.histograms(HISTOGRAMS)
        # The broker's request meters (--broker-requests): its JMX port open from here to the window's
        # end; a reading is a JVM of its own (~1 s), so it comes before the CPU readings.
        requests = cleanup.enter_context(broker_requests.WindowCounts(stack.get("kafka"), say)) if spec.broker_requests else None
        requests_before = requests.read() if requests else None
        measured = {**pipeline.pids(), "simulator": simulator.pid, **stack}
        cpu_before, bench_cpu_before = cpu_seconds(measured), time.process_time()
        run_queue_before = run_queue_seconds(measured)
        window_start = time.time()
        pythons = pipeline.pids() | {"simulator": simulator.pid}
        broker = {"kafka": stack["kafka"]} if "kafka" in stack else {}  # jcmd refuses what is not its JVM
        profiles = Profiles(spec.profile / f"{tables}-tables", pythons, broker) if spec.profile else None
        if profiles:
            profiles.start(start + seconds - window_start)
        loads = [load_average()]
        # The window cut in spec.parts: does what a round costs grow with the tables' state, does a backlog build?
        marks = [Mark(window_start, before, cpu_before)]
        cuts = [window_start + (start + seconds - window_start) * k / spec.parts for k in range(1, spec.parts)]
        while time.time() < start + seconds:
            time.sleep(min(10, max(min([start + seconds, *cuts]) - time.time(), 0)))
            loads.append(load_average())
            if cuts and time.time() >= cuts[0]:
                cuts.pop(0)
                marks.append(Mark(time.time(), pipeline.histograms(before), cpu_seconds(measured)))
            pipeline.check_alive()
            say(progress(tables, time.time() - window_start, start + seconds - window_start, offsets, loads[-1][0]))
        window_end = time.time()
        after = pipeline.histograms(before)
        cpu_after = cpu_seconds(measured)
        waited = run_queue_between(run_queue_before, run_queue_seconds(measured))
        marks.append(Mark(window_end, after, cpu_after))
        bench_cpu = time.process_time() - bench_cpu_before
        requests_after = requests.read() if requests and requests_before else None
        if requests:
            requests.close()  # the JMX port is open no longer than the window
        profiled = profiles.finish() if profiles else {}
        played = simulator.result()
        window = [s for s in offsets.samples if window_start <= s["t"] <= window_end]
        # Then until the backlog is gone (what was left at the end of play), for the alerts of the last rounds.
        say(f"{tables} tables: play over; waiting for the groups to consume what is left")
        drained_at = drain(pipeline, offsets, timeout=600)
        time.sleep(3)
        stop_watching(offsets, alerts)
        peak = {**pipeline.peak_rss_mb(), **rss.peak_mb()}

    span = window_end - window_start
    rounds = sum(window_start <= t <= window_end for t in round_ends)
    produced = (
        {
            t: (window[-1]["produced"].get(t, 0) - window[0]["produced"].get(t, 0)) / (window[-1]["t"] - window[0]["t"])
            for t in PIPELINE_TOPICS
        }
        if len(window) > 1
        else {}
    )
    consumed = (
        {g: (window[-1]["consumed"][g] - window[0]["consumed"][g]) / (window[-1]["t"] - window[0]["t"]) for g in CONSUMERS}
        if len(window) > 1
        else {}
    )
    trends = {g: lag_trend(window, g) for g in CONSUMERS}
    # Alerts: from the revealing event's time (the wall clock when it happened) to arrival here.
    revealed = [(a.time.timestamp(), arrived - a.time.timestamp(), a.data.rule) for arrived, a in alerts.arrivals]
    in_window = ages_by_rule(revealed, window_start, window_end)
    found = {(a.subject, a.data.rule) for _, a in alerts.arrivals}
    missed = [label for label in played["labels"] if (label[0], label[1]) not in found]
    histograms = {metric: histogram_delta(after[metric], before[metric]) for metric in before}
    used = {name: cpu_after[name] - cpu_before[name] for name in cpu_after if name in cpu_before}
    cpu_ms = {name: 1000 * s / rounds for name, s in used.items()} if rounds else {}
    if cpu_ms:
        cpu_ms["total"] = sum(cpu_ms.values())
    cpu = {name: s / span for name, s in used.items()}
    cpu["bench (alerts, offsets)"] = bench_cpu / span  # the measuring, not in the total
    return {
        "mode": "live",
        "tables": tables,
        "seconds": seconds,
        "instances": spec.instances,
        "pace_seconds_per_round": PACE,
        "trades": trades(),
        "window_seconds": span,
        "generated": generated,
        "played": {k: v for k, v in played.items() if k != "labels"},
        "rounds_per_s": generated["rounds"] / seconds,
        "rounds_in_window": rounds,
        "rounds_per_s_window": rounds / span,
        "events_per_round": sum(produced.values()) * span / rounds if rounds else math.nan,
        "produced_per_s": produced,
        "consumed_per_s": consumed,
        "lag": trends,
        "sustained": sustained(trends),
        "sustained_bound_events_per_s": SUSTAINED_SLOPE,
        "drain_seconds": drained_at - window_end if drained_at else None,
        **histogram_figures(histograms),
        "alert_latency_end_to_end": {
            **alert_summary(in_window),
            "max": max((age for ages in in_window.values() for age in ages), default=math.nan),
        },
        "parts": window_parts(marks, round_ends, window, revealed),
        "labels": len(played["labels"]),
        "labels_missed": len(missed),
        "missed_examples": missed[:5],
        "alerts_distinct": len(alerts.distinct()),
        "alerts_received": len(alerts.arrivals),
        "cpu_share": cpu,
        "cpu_ms_per_round": cpu_ms,
        # Of each process, its threads' time in the run queue, a share of the window's (procstat.py).
        "waiting_share": {name: seconds / span for name, seconds in waited.items()},
        "idle_cpu_share": {n: (idle_after[n] - idle_before[n]) / idle_span for n in idle_after if n in idle_before}
        if idle_span > 3
        else {},
        "idle_seconds": idle_span,
        "peak_rss_mb": peak,
        "broker_requests": broker_requests_figures(requests, requests_before, requests_after, round_ends),
        "stack_pids": stack,
        "profiles": profiled,
        "load_average": {"min": min(x[0] for x in loads), "max": max(x[0] for x in loads), "start": loads[0], "end": loads[-1]},
    }


def broker_requests_figures(
    requests: broker_requests.WindowCounts | None,
    before: broker_requests.Reading | None,
    after: broker_requests.Reading | None,
    round_ends: list[float],
) -> dict[str, Any] | None:
    """The broker's requests a round by type and in total between the two readings, with the
    rounds and seconds between them and the counts; None when not asked for, ``error`` when failed."""
    if requests is None:
        return None
    if before is None or after is None:
        return {"error": requests.error or "not read"}
    rounds = broker_requests.rounds_between(before, after, round_ends)
    try:
        per_round = broker_requests.per_round(before, after, rounds)
        topics = broker_requests.topics_per_round(before, after, rounds)
    except broker_requests.BrokerRequestsError as e:
        say(f"broker requests not measured: {e}")
        return {"error": str(e)}
    counts = broker_requests.gained(before.counts, after.counts)
    return {
        "per_round": per_round,
        "rounds": rounds,
        "seconds": after.at - before.at,
        "counts": {name: n for name, n in sorted(counts.items()) if n},
        "not_in_total": sorted(broker_requests.SUBSETS),
        "broker_ms_mean": broker_requests.mean_times_ms(before, after),
        "topics_per_round": topics,
    }


def broker_requests_lines(figures: Mapping[str, Any] | None) -> list[str]:
    """The summary's lines of ``broker_requests_figures`` (none when not asked for)."""
    if figures is None:
        return []
    if "error" in figures:
        return [f"  broker requests a round: not measured ({figures['error']})"]
    per_round = dict(figures["per_round"])
    if not per_round:
        return [f"  broker requests a round: no round ended between the readings ({figures['seconds']:.0f} s)"]
    total = per_round.pop("total")
    by_type = ", ".join(f"{name} {n:.2f}" for name, n in per_round.items())
    lines = [
        f"  broker requests a round: {total:.2f} in all over {figures['rounds']} rounds in {figures['seconds']:.0f} s "
        f"({', '.join(figures['not_in_total'])}: counted in Fetch too, not in the total)",
        f"    {by_type}",
    ]
    times = figures.get("broker_ms_mean", {})
    if timed := [name for name in per_round if name in times]:
        lines.append("    the broker's time a request, received to answered, mean ms: " + ", ".join(f"{n} {times[n]:.2f}" for n in timed))
    if topics := figures.get("topics_per_round"):
        lines.append(
            "    what each topic took in a round (a partition write: a produce request's to one partition, a marker, a coordinator's record):"
        )
        for topic, taken in topics.items():
            writes, records, kb = taken.get("partition_writes", 0), taken.get("records", 0), taken.get("bytes", 0) / 1024
            lines.append(f"      {topic}: {writes:.2f} partition writes, {records:.2f} records, {kb:.2f} KB")
    return lines


def progress(tables: int, elapsed: float, window: float, offsets: Offsets, load: float) -> str:
    last = offsets.samples[-1] if offsets.samples else {"lag": {}}
    lags = ", ".join(f"{g} {last['lag'][g]}" for g in CONSUMERS if g in last["lag"])
    return f"{tables} tables: {elapsed:.0f} of {window:.0f} s measured; lag {lags or 'not read yet'}; load {load:.1f}"


def summary(result: Mapping[str, Any]) -> str:
    """A live run's figures, as the issue asks for them, for a person to read."""

    e2e, detection, load = result["alert_latency_end_to_end"], result["detection_latency"], result["load_average"]
    commits, since = result["detectors_commit"], result["detection_since_published"]
    slopes = ", ".join(
        f"{g} {t['slope_per_s']:+.2f} ± {t['slope_error_per_s']:.2f}" if t else f"{g} (too few samples)" for g, t in result["lag"].items()
    )
    lines = [
        f"{result['tables']} tables at a round every {result['pace_seconds_per_round']:g} s a table: "
        f"{result['rounds_per_s_window']:.1f} rounds/s over the {result['window_seconds']:.0f} s window "
        f"({result['events_per_round']:.1f} events a round); load average {load['min']:.1f} - {load['max']:.1f}",
        "  latency traded for CPU: " + ", ".join(f"{name} {value}" for name, value in result.get("trades", {}).items()),
        f"  sustained: {'yes' if result['sustained'] else 'NO'} (lag slope, events/s: {slopes}; under {result['sustained_bound_events_per_s']:g} is sustained)",
        f"  card read to alert: p50 {ms_text(e2e['p50'])}, p99 {ms_text(e2e['p99'])} over {e2e['alerts']} alerts; "
        f"{result['labels'] - result['labels_missed']} of {result['labels']} injected irregularities found",
        f"  detectors, event to processed: p99 {ms_text(detection['p99'])} ({100 * detection['within_100ms']:.0f} % within 100 ms)",
        f"  detectors, from a record's publication to processed: p50 {ms_text(since['p50'])}, p99 {ms_text(since['p99'])}",
        f"  detectors' commits (changelog written, offsets committed): {commits['count']:.0f}, "
        f"p50 {ms_text(commits['p50'])}, p99 {ms_text(commits['p99'])}",
    ]
    lines.append("  " + table_hop_text(result))
    lines += parts_lines(result.get("parts", []))
    lines += batches_lines(result.get("runners_batches", {}), result.get("runners_batch_phases", {}), result["window_seconds"])
    if full := result.get("detectors_gc_pauses", {}).get("2"):
        lines.append(
            "  detectors' full collections (the event loop paused): "
            + (f"{full['count']:.0f}, p50 {ms_text(full['p50'])}, p99 {ms_text(full['p99'])}" if full["count"] else "none")
        )
    lines.append(f"  {'process':<26}{'CPU ms/round':>13}{'% of a core':>13}{'% waiting':>11}{'peak RSS MB':>13}")
    for name, share in result["cpu_share"].items():
        per_round, rss, waiting = result["cpu_ms_per_round"].get(name), result["peak_rss_mb"].get(name), result["waiting_share"].get(name)
        per_round_text, rss_text = "-" if per_round is None else f"{per_round:.2f}", "-" if rss is None else f"{rss:.0f}"
        waiting_text = "-" if waiting is None else f"{100 * waiting:.1f}"
        lines.append(f"  {name:<26}{per_round_text:>13}{100 * share:>13.1f}{waiting_text:>11}{rss_text:>13}")
    lines.append(f"  {'total (without the bench)':<26}{result['cpu_ms_per_round'].get('total', math.nan):>13.2f}")
    if result["waiting_share"]:
        lines.append("  % waiting: the time its threads were ready to run and waited for a core, a share of the window's")
    if result["idle_cpu_share"]:
        idle = ", ".join(f"{n} {100 * share:.1f} %" for n, share in result["idle_cpu_share"].items())
        lines.append(f"  idle before play ({result['idle_seconds']:.0f} s), % of a core: {idle}")
    lines += broker_requests_lines(result.get("broker_requests"))
    return "\n".join(lines)


def parts_lines(parts: Sequence[Mapping[str, Any]]) -> list[str]:
    """``window_parts``' figures, a line a part: a backlog building shows as the detectors' tail
    from publication and their lag growing from part to part."""

    if len(parts) < 2:  # one part is the window, whose figures are printed already
        return []
    lines = [f"  the window in {len(parts)} parts:"]
    for part in parts:
        since, commits, alerts, cpu = part["detection_since_published"], part["detectors_commit"], part["alerts"], part["cpu_ms_per_round"]
        lag = part["lag"].get(DETECTORS[0]) or {}
        lines.append(
            f"    {part['from_s']:.0f} - {part['to_s']:.0f} s: {part['rounds']} rounds; card read to alert p50 {ms_text(alerts['p50'])}, "
            f"p99 {ms_text(alerts['p99'])} ({alerts['alerts']}); the detectors from publication p50 {ms_text(since['p50'])}, "
            f"p99 {ms_text(since['p99'])}, their commits p50 {ms_text(commits['p50'])}, their lag "
            + (f"{lag['mean']:.0f} on average ({lag['slope_per_s']:+.2f} events/s)" if lag else "not read")
            + f"; CPU ms a round: the detectors {cpu.get(DETECTORS[0], math.nan):.2f}, all {cpu.get('total', math.nan):.2f}"
        )
        if "runners_batches" in part:  # not in the runs before the parts had the histograms
            lines.append("      " + table_hop_text(part))
    return lines


def table_hop_text(figures: Mapping[str, Any]) -> str:
    """Where a table event's time goes (``histogram_figures``' keys), p50 / p99, along its way: its
    inputs (a bet, a card read) from their time at the table to the table-controller's batch, of
    which from their publisher's send; the table-controller's batches, each phase's p50; from the
    event's time at the table to the detectors, of which from the table-controller's send; to its
    alert's publication."""

    def both(summary: Mapping[str, Any] | None) -> str:
        return "n/a" if not summary else f"{ms_text(summary['p50'])} / {ms_text(summary['p99'])}"

    controller, table = RUNNERS[0], topics.TABLE
    intake, since_sent = figures.get("runners_intake", {}), figures.get("runners_intake_since_sent", {})  # not in earlier runs
    phases = service_phases(figures["runners_batch_phases"], controller)
    return (
        "table events, p50 / p99: to the table-controller's batch "
        + ", ".join(
            f"{t} {both(intake.get(f'{controller}/{t}'))} (from the send {both(since_sent.get(f'{controller}/{t}'))})"
            for t in (INPUTS, topics.SHOE)
        )
        + f"; its batches {both(figures['runners_batches'].get(controller))}"
        + (" (p50 " + ", ".join(f"{phase} {ms_text(f['p50'])}" for phase, f in phases.items()) + ")" if phases else "")
        + f"; to the detectors {both(figures['detection_latency']['by_topic'].get(table))}"
        + f" (from the send {both(figures['detection_since_published']['by_topic'].get(table))})"
        + f"; to their alerts' publication {both(figures['alert_latency_service']['by_topic'].get(table))}"
    )


def service_phases(phases: Mapping[str, Mapping[str, float]], service: str) -> dict[str, Mapping[str, float]]:
    """``service``'s share of the batch phases' summaries (by "service/phase"), by phase."""
    return {key.partition("/")[2]: figures for key, figures in phases.items() if key.partition("/")[0] == service}


def batches_lines(by_service: Mapping[str, Mapping[str, float]], phases: Mapping[str, Mapping[str, float]], seconds: float) -> list[str]:
    """The Kafka runners' batches over a window of ``seconds``, by service (``latency_summary``'s
    by label): how many a second, how long one took, p50 and p99, and each phase's p50 (``phases``
    by "service/phase")."""
    lines = []
    for service, batches in by_service.items():
        line = (
            f"  {service}'s batches: {batches['count'] / seconds:.1f} a second, "
            f"p50 {1000 * batches['p50']:.1f} ms, p99 {1000 * batches['p99']:.1f} ms"
        )
        if own := service_phases(phases, service):
            line += "; p50 by phase: " + ", ".join(f"{phase} {1000 * figures['p50']:.1f} ms" for phase, figures in own.items())
        lines.append(line)
    return lines


def stop_watching(*watchers: Any) -> None:
    """Stop the bench's watcher threads (``Offsets``, ``Alerts``) and wait for each."""
    for watcher in watchers:
        watcher.stop.set()
    for watcher in watchers:
        watcher.join()


def drain(pipeline: Pipeline, offsets: Offsets, timeout: float) -> float | None:
    """When the pipeline has consumed everything, including what the services behind at the end
    of play published afterwards (None: not within ``timeout``): the time of the first sample
    after play in which ``drained``."""
    deadline = time.time() + timeout
    ended = offsets.samples[-1]
    groups = [g for g in CONSUMERS if g in pipeline.services]
    while time.time() < deadline:
        time.sleep(1)
        previous, last = offsets.samples[-2:]
        if last is ended or previous is ended:
            continue
        if drained(previous, last, {g: len(CONSUMED[g]) * pipeline.partitions for g in groups}):
            return float(last["t"])
    return None


def drained(previous: dict[str, Any], last: dict[str, Any], markers: dict[str, int]) -> bool:
    """Whether two samples in a row (after play) show nothing left: no topic written to between
    them, and every group's lag within ``markers`` (a caught-up group's committed offsets stop
    short of the transaction markers, one a partition). A group caught up with a group still
    behind it (the detectors with the table-controller) is not drained: the later still writes."""
    return last["produced"] == previous["produced"] and all(last["lag"][g] <= allowed for g, allowed in markers.items())


# ---- full speed -------------------------------------------------------------------------------


def settled(offsets: Offsets, pipeline: Pipeline, quiet: float = 10.0) -> float:
    """Wait until nothing more is produced or consumed for ``quiet`` s and no group lags (beyond
    the transaction markers); the time the last change was seen."""
    last_change, last_state = time.time(), None
    while True:
        time.sleep(1)
        pipeline.check_alive()
        if not offsets.samples:
            continue
        s = offsets.samples[-1]
        state = (s["produced"], s["consumed"])
        if state != last_state:
            last_state, last_change = state, s["t"]
        elif time.time() - last_change > quiet and all(s["lag"].get(g, 0) <= 4 * pipeline.partitions for g in CONSUMERS):
            return float(last_change)


def full_speed(
    bootstrap: str, redis_url: str, tables: int, shoes: int, instances: int | Mapping[str, int], seed: int, check: bool, per_table: int
) -> dict[str, Any]:
    inject = injections(tables, per_table)
    with Pipeline(bootstrap, redis_url, instances=instances) as pipeline:
        alerts = Alerts(pipeline)
        alerts.start()
        alerts.ready.wait(60)
        simulator = Simulator(
            PlaySpec(
                tables,
                shoes,
                seed,
                0.0,
                None,
                inject,
                None,
                pipeline.settings(FLOOR_SIMULATOR),
                pipeline.reader_port,
                pipeline.device_keys,
            )
        )
        generated = simulator.generated()
        offsets = Offsets(pipeline, interval=2.0)
        offsets.start()
        cpu_before, load_before = pipeline.cpu_seconds(), load_average()
        owners_during: list[dict[str, Any]] = []
        played = simulator.result()
        began = played["began"]
        owners_during.append(pipeline.assignments())
        finished = settled(offsets, pipeline)
        cpu_after, load_after = pipeline.cpu_seconds(), load_average()
        stop_watching(offsets, alerts)
        peak = pipeline.peak_rss_mb()
        samples = offsets.samples
        topics_seen = {t: read_topic(bootstrap, pipeline.prefix + t) for t in (topics.TABLE, topics.SETTLEMENT)} if check else {}
        owners_after = pipeline.assignments()
        logs_dir = pipeline.logs

    seconds = finished - began
    total = {t: samples[-1]["produced"].get(t, 0) for t in PIPELINE_TOPICS}
    # Each group's busiest stretch: the highest rate over 10 s windows of the samples.
    peak_rates: dict[str, float] = {}
    for group in CONSUMERS:
        best = 0.0
        for i, s in enumerate(samples):
            for later in samples[i + 1 :]:
                if later["t"] - s["t"] >= 10:
                    best = max(best, (later["consumed"][group] - s["consumed"][group]) / (later["t"] - s["t"]))
                    break
        peak_rates[group] = best
    finished_by_group = {}
    for group in CONSUMERS:
        final = samples[-1]["consumed"][group]
        reached = next((s["t"] for s in samples if s["consumed"][group] >= final - 4 * pipeline.partitions), samples[-1]["t"])
        finished_by_group[group] = reached - began
    result: dict[str, Any] = {
        "mode": "full-speed",
        "tables": tables,
        "shoes": shoes,
        "instances": instances,
        "rounds": generated["rounds"],
        "actions": generated["actions"],
        "send_seconds": played["ended"] - played["began"],
        "seconds": seconds,
        "events": total,
        "events_total": sum(total.values()),
        "events_per_s_end_to_end": sum(total.values()) / seconds,
        "rounds_per_s": generated["rounds"] / seconds,
        "group_done_after_s": finished_by_group,
        "group_peak_events_per_s": peak_rates,
        "group_events": {g: samples[-1]["consumed"][g] for g in CONSUMERS},
        "cpu_seconds": {name: cpu_after[name] - cpu_before.get(name, 0.0) for name in cpu_after},
        "simulator_cpu_seconds": played["cpu_seconds"],
        "peak_rss_mb": peak,
        "load_average": {"start": load_before, "end": load_after},
        "alerts_distinct": len(alerts.distinct()),
        "alerts_received": len(alerts.arrivals),
        "assignments": owners_after or owners_during[-1],
        "logs": str(logs_dir),
    }
    if check:
        result["check"] = compare_with_offline(tables, shoes, seed, inject, topics_seen, alerts)
    return result


def compare_with_offline(
    tables: int, shoes: int, seed: int, inject: tuple[str, ...], seen: dict[str, list[m.Event]], alerts: Alerts
) -> dict[str, Any]:
    """Every table event, settlement and alert of the live run against the same floor recorded
    offline (``surveil simulate``'s path) and replayed through the detectors: each once, none missing."""
    from surveil.detect.floor import FloorWatch as Detectors
    from surveil.embedded.record import record
    from surveil.sim.floor import Floor

    reference: list[m.Event] = []
    record(Floor(tables, shoes, seed, inject=[AlertCode(c) for c in inject]), reference.append, lambda label: None)
    detectors = Detectors()
    offline_alerts: list[m.AlertRaised] = []
    for event in reference:
        offline_alerts += detectors.feed(event)
    offline_alerts += detectors.flush()
    report: dict[str, Any] = {}
    for topic in (topics.TABLE, topics.SETTLEMENT):
        expected = {e.id: codec.encode(e) for e in reference if e.topic == topic}
        got = Counter(e.id for e in seen[topic])
        same_bytes = {e.id for e in seen[topic] if expected.get(e.id) == codec.encode(e)}
        report[topic] = {
            "expected": len(expected),
            "live": sum(got.values()),
            "missing": len(expected.keys() - got.keys()),
            "extra": len(got.keys() - expected.keys()),
            "duplicated": sum(n - 1 for n in got.values() if n > 1),
            "byte_identical": len(same_bytes),
        }
    received = Counter(a.data.alert_id for _, a in alerts.arrivals)
    expected_ids = {a.data.alert_id for a in offline_alerts}
    report["alerts"] = {
        "expected": len(expected_ids),
        "live_distinct": len(received),
        "live_received": sum(received.values()),
        "missing": len(expected_ids - set(received)),
        "extra": len(set(received) - expected_ids),
        "republished": sum(n - 1 for n in received.values() if n > 1),
    }
    return report


# ---- the command line -------------------------------------------------------------------------


def show(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1, default=lambda o: o if not isinstance(o, float) else round(o, 4), sort_keys=False)


def code_revision(services: Path = Path(surveil.__file__).parent) -> dict[str, Any]:
    """The commit the services come from (``services``: the package this interpreter imports,
    which the services it starts import too, inheriting its environment), and whether their files
    differ from it; None for both outside a git checkout or without git. Asked before the first
    service starts: a commit made during a run is not the code it measured."""

    clean = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}  # a hook's GIT_DIR names another repository

    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(["git", "-C", str(services), *args], capture_output=True, text=True, check=False, env=clean)
        except OSError:  # no git here
            return None

    head = git("rev-parse", "HEAD")
    if head is None or head.returncode:
        return {"commit": None, "changed": None}
    status = git("status", "--porcelain", "--", ".")
    return {"commit": head.stdout.strip(), "changed": bool(status and status.stdout.strip())}


def write_sweep(path: Path, results: list[dict[str, Any]], code: dict[str, Any]) -> None:
    """The runs so far as one JSON document (rewritten after each run: a stopped sweep keeps
    the sizes it finished), with the command, the date and the services' code (``code_revision``)."""
    document = {
        "command": " ".join(["bench/pipeline.py", *sys.argv[1:]]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": code,
        "cores": os.cpu_count(),
        "runs": results,
    }
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(document, indent=1) + "\n")
    partial.replace(path)


def instance_counts(text: str) -> int | dict[str, int]:
    """``--instances``: ``2`` (each consumer service), or ``anomaly-detection=2,settlement=2``."""
    if "=" not in text:
        return _count(text, text)
    counts = {}
    for item in text.split(","):
        service, _, count = item.partition("=")
        if service not in CONSUMERS:
            raise argparse.ArgumentTypeError(f"{item!r}: SERVICE=N, SERVICE one of {', '.join(CONSUMERS)}")
        counts[service] = _count(count, item)
    return counts


def _count(text: str, given: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{given!r}: instances are a whole number, at least 1")
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument(
        "--instances",
        type=instance_counts,
        default=1,
        help="instances of each consumer service (one consumer group each): N, or SERVICE=N[,SERVICE=N] for those named",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the runs here, one JSON document (bench/plot_sweep.py reads it)")
    sub = parser.add_subparsers(dest="mode", required=True)
    p_live = sub.add_parser("live", help="N tables at real pace")
    p_live.add_argument("--tables", default="1000", help="comma-separated table counts, one run each (a sweep)")
    p_live.add_argument("--seconds", type=float, default=300, help="table time played (the first 60 s are warm-up)")
    p_live.add_argument("--injections", type=int, default=4, help="irregularities per table, one after the other")
    p_live.add_argument("--lead", type=float, help="seconds between the start and the floor's first action (generation)")
    p_live.add_argument(
        "--prometheus-port",
        type=int,
        default=int(os.environ.get("PROMETHEUS_PORT", "9090")),
        help="the stack's Prometheus, to find its process (env PROMETHEUS_PORT, default 9090)",
    )
    p_live.add_argument(
        "--profile",
        type=Path,
        help="profile each service, the floor (py-spy) and the broker (JFR) over the measured window into DIR/N-tables/",
    )
    p_live.add_argument(
        "--broker-requests",
        action="store_true",
        help="also the broker's requests a round by type (Produce, Fetch, EndTxn, ...), from its meters over JMX: "
        "opens an UNAUTHENTICATED JMX port in the running broker, on 127.0.0.1, while the run measures (jcmd "
        "ManagementAgent.start; closed after the window); needs jcmd, java and the broker's kafka-tools jar",
    )
    p_live.add_argument(
        "--floor-tick-ms",
        type=float,
        default=1000 * TICK_SECONDS,
        help="the simulated floor wakes at most this often and sends what is due together: each action goes out "
        "up to this late, which card read to alert includes (default %(default)g; 0: each at its time)",
    )
    p_live.add_argument(
        "--parts",
        type=int,
        default=2,
        help="also give the window's figures for each of this many equal parts of it (default %(default)s): "
        "does a round cost more as the tables' state grows, does a backlog build",
    )
    p_full = sub.add_parser("full-speed", help="a floor as fast as it goes")
    p_full.add_argument("--tables", type=int, default=100)
    p_full.add_argument("--shoes", type=int, default=1)
    p_full.add_argument("--injections", type=int, default=2)
    p_full.add_argument("--check", action="store_true", help="compare table events, settlements and alerts with the offline reference")
    args = parser.parse_args()

    results: list[dict[str, Any]] = []
    code = code_revision()
    if args.mode == "live":
        sizes = [int(n) for n in args.tables.split(",") if n]
        for number, tables in enumerate(sizes, 1):
            say(f"run {number} of {len(sizes)}: {tables} tables, {args.seconds:g} s of play at a round every {PACE:g} s a table")
            spec = LiveSpec(
                tables,
                args.seconds,
                args.instances,
                args.injections,
                args.lead,
                args.seed,
                args.prometheus_port,
                args.profile,
                args.broker_requests,
                args.floor_tick_ms / 1000,
                max(args.parts, 1),
            )
            results.append(live(args.bootstrap, args.redis, spec))
            print(show(results[-1]), flush=True)
            print(summary(results[-1]), flush=True)
            if args.json:
                write_sweep(args.json, results, code)
        if len(results) > 1:
            print("\nthe sweep:\n" + "\n".join(summary(r) for r in results), flush=True)
    else:
        results.append(
            full_speed(args.bootstrap, args.redis, args.tables, args.shoes, args.instances, args.seed, args.check, args.injections)
        )
        print(show(results[-1]), flush=True)
        if args.json:
            write_sweep(args.json, results, code)


if __name__ == "__main__":
    main()
