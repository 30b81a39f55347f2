"""The whole deployment through faults: a floor with injected irregularities played live into the
four services while faults strike, each at a random point of the play drawn from the run's seed:
each service killed -9 and started again, Redis killed -9 and restarted, (a test of its own) the
broker killed -9 and restarted; and, through the real broker in both tests, a window of the
floor's inputs published again (a console resending) and one partition of the inputs held back
for seconds, then released (late, and out of order against the other partitions and the shoes'
lines). At the end the topics, the ledger and the alert set are those of an uninterrupted run
(the offline references for the same floor): nothing lost, nothing doubled; the dead letters are
exactly the table-controller's refusals of the inputs published again. A service that exits
when no fault killed it fails the test.

The seed is new each run and printed; ``FAULTS_SEED=<seed>`` runs the same faults at the same
points again (``bench/fault_runs.py`` runs the suite many times and counts the runs that held). The
broker and Redis faults need the ones ``ops/stack.sh`` runs (the tests skip otherwise).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from integration.deployment import CONSUMES, ROOT, SERVICES, Deployment, dump_memory, offline_events, offline_settlement, settlement_events
from support import seeds
from surveil.analysis.replay import replay
from surveil.analysis.verify import verify
from surveil.events import codec, deadletter, topics
from surveil.events import models as m
from surveil.runtime.kafka import Publisher, partition_for
from surveil.sim.floor import Floor
from surveil.sim.injections import parse_codes

# A run plays ~110 s, and waits for a killed broker (up to two minutes on a busy machine) and for
# every service to consume everything.
pytestmark = [pytest.mark.faults, pytest.mark.timeout(1800)]

INJECT = "DRAW_PLAYER_MISSING,LATE_BET,CARD_MISMATCH,BANKER_BET_MULTIPLE,CARD_EXPOSED,BURN_COUNT"
FLOOR = {"tables": 4, "shoes": 5, "seed": 8, "inject": parse_codes(INJECT)}
PACE = 0.3  # seconds per round: five shoes of ~75 rounds, about 110 s of play (a broker restart takes up to a minute)
STRIKE_WINDOW_S = 60.0  # each fault strikes at a random point this long after every service consumes
SEED = seeds.seed("FAULTS_SEED")


KAFKA_LOG = ROOT / ".stack" / "kafka" / "kafka.log"
# What Kafka's group coordinator logs when it fell out of step with __consumer_offsets after a
# restart (a Kafka defect, docs/faults.md "The broker killed -9"): it then refuses, or forgets, the
# groups of that partition until the broker is restarted.
OUT_OF_STEP = "is out of sync with the underlying log"


class BrokerLog:
    """What the broker of ops/stack.sh logs from now on (its log rolls at 100 MB; after a roll,
    from the new file's start)."""

    def __init__(self) -> None:
        self.offset = self._size()

    @staticmethod
    def _size() -> int:
        try:
            return KAFKA_LOG.stat().st_size
        except FileNotFoundError:
            return 0

    def read(self) -> str:
        """The whole lines written since the last read."""
        size = self._size()
        if size < self.offset:
            self.offset = 0
        if size == self.offset:
            return ""
        with KAFKA_LOG.open("rb") as log:
            log.seek(self.offset)
            written = log.read(size - self.offset)
        whole = written[: written.rfind(b"\n") + 1]
        self.offset += len(whole)
        return whole.decode(errors="replace")


def stack_sh(*args: str) -> None:
    proc = subprocess.run(["bash", str(ROOT / "ops" / "stack.sh"), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ops/stack.sh {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"


class DisturbedInputs:
    """The floor's inputs on their way to the broker, disturbed as a console and a network can:
    a window of them published again, right after (``duplicate``: the table-controller must
    refuse each copy as a duplicate), and one partition's held back for seconds, then released
    in order (``hold_back``: those tables' inputs late, out of order against the other
    partitions and against their shoes' lines). Called from the play's thread and the test's."""

    def __init__(self, publisher: Publisher, partitions: int) -> None:
        self.publisher, self.partitions = publisher, partitions
        self.lock = threading.Lock()
        self.to_copy = 0  # inputs of the window still to come
        self.window: list[m.Event] = []
        self.copied: list[bytes] = []  # every copy published
        self.held_partition: int | None = None
        self.held_until = 0.0
        self.held: list[m.Event] = []
        self.late = 0  # inputs held back and released
        self.seen: set[int] = set()  # the partitions the inputs went to (a table's are all on one)

    def publish(self, event: m.Event) -> None:
        with self.lock:
            self._release(force=False)
            partition = partition_for(event.subject.encode(), self.partitions)
            self.seen.add(partition)
            if self.held_partition == partition:
                self.held.append(event)
                return
            self.publisher.publish(event)
            if self.to_copy:
                self.window.append(event)
                self.to_copy -= 1
                if not self.to_copy:
                    self._copy()

    def duplicate(self, count: int) -> None:
        with self.lock:
            self.to_copy = count

    def hold_back(self, rng: random.Random, seconds: float) -> int:
        """Hold back a partition the inputs went to so far (one with tables), drawn with ``rng``."""
        with self.lock:
            self._release(force=True)
            partition = rng.choice(sorted(self.seen) or range(self.partitions))
            self.held_partition, self.held_until = partition, time.monotonic() + seconds
            return partition

    def flush(self) -> None:
        with self.lock:
            self._release(force=True)
            self._copy()
        self.publisher.flush()

    def _copy(self) -> None:
        for event in self.window:
            self.publisher.publish(event)
            self.copied.append(codec.encode(event))
        self.window = []

    def _release(self, force: bool) -> None:
        if self.held_partition is not None and (force or time.monotonic() >= self.held_until):
            for event in self.held:
                self.publisher.publish(event)
            self.late += len(self.held)
            self.held, self.held_partition = [], None


INSTANT = ("inputs published again", "an inputs partition held back")  # they strike on their own timeline


def faults(deployment: Deployment, inputs: DisturbedInputs, seed: str, supervisor: Supervisor) -> dict[str, Callable[[], str]]:
    """Each fault by name: it strikes, leaves what it hit running again, and says what it did
    (what it draws, from the seed and its name: the same whatever strikes before it)."""

    def kill(service: str) -> str:
        deployment.restart(service, pause=1.0)
        return "killed, started again 1 s later"

    def restart_redis() -> str:
        stack_sh("restart-redis")
        deployment.restore_redis_users()  # the test's users are made at run time (see restore_redis_users)
        return "restarted"

    def restart_kafka() -> str:
        return f"restarted, serving again {supervisor.restart_broker():.0f} s later"

    def duplicate() -> str:
        count = random.Random(f"{seed}:duplicate").randint(5, 30)
        inputs.duplicate(count)
        return f"the next {count} inputs published again"

    def hold_back() -> str:
        rng = random.Random(f"{seed}:hold back")
        seconds = rng.uniform(5.0, 15.0)
        partition = inputs.hold_back(rng, seconds)
        return f"partition {partition} of the inputs held back {seconds:.1f} s"

    chosen: dict[str, Callable[[], str]] = {f"kill -9 {service}": (lambda service=service: kill(service)) for service in SERVICES}  # type: ignore[misc]
    chosen["kill -9 kafka"] = restart_kafka
    chosen["kill -9 redis"] = restart_redis
    chosen["inputs published again"] = duplicate
    chosen["an inputs partition held back"] = hold_back
    return chosen


class Supervisor:
    """Watches the services while the faults strike: one that exits when no fault killed it fails
    the test, with its log (here an exit that no fault explains is a bug to see). A killed broker
    kills too: a service that cannot reach it at its start exits (the faust worker, a service
    killed and started again while the broker is away), a runner whose producer the restarted
    broker fenced, or whose offsets the group refuses, stops; such an exit, while the broker is
    away or within ``BROKER_GRACE_S`` of its return, is started again, as a deployment's restart
    policy would, and reported. A broker whose group coordinator fell out of step with its log
    after its restart (Kafka's defect, ``OUT_OF_STEP``) is restarted once more, as the on-call
    engineer would (docs/faults.md), and reported. Faults and the watch take turns."""

    BROKER_GRACE_S = 90.0  # past a runner's transaction timeout (60 s): a step stalled at the broker's return stops it then
    OUT_OF_STEP_WATCH_S = 300.0  # how long after a broker's return its log is watched

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.lock = threading.Lock()
        self.exits: list[str] = []  # exits no fault explains: the test fails
        self.restarts: list[str] = []  # exits the broker's absence explains: started again
        self.away: list[tuple[float, float]] = []  # when the broker was killed, and served again
        self.watched: list[tuple[float, BrokerLog]] = []  # since a broker's return: its log
        self.remedies: list[str] = []  # broker restarts for OUT_OF_STEP
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def restart_broker(self, *how: str) -> float:
        """``ops/stack.sh restart-kafka`` (``how``: ``--graceful``, else kill -9); its absence
        explains the exits it causes, and its log is watched from its return. Returns the seconds
        until it served again."""
        killed, log = time.monotonic(), BrokerLog()
        stack_sh("restart-kafka", *how)
        back = time.monotonic()
        self.away.append((killed, back))
        self.watched.append((back, log))
        return back - killed

    def _watch(self) -> None:
        while not self.done.wait(0.5):
            with self.lock:
                now = time.monotonic()
                for service in self.deployment.exited():
                    tail = self.deployment.log_tail(service, 60)
                    if any(killed <= now <= back + self.BROKER_GRACE_S for killed, back in self.away):
                        self.restarts.append(f"{service}: {tail.splitlines()[-1][:200] if tail else ''}")
                        self.deployment.start(service)
                    else:
                        self.exits.append(f"{service} exited (no fault killed it):\n{tail}")
                        self.done.set()
                self._restart_a_broker_out_of_step(now)

    def _restart_a_broker_out_of_step(self, now: float) -> None:
        self.watched = [(back, log) for back, log in self.watched if now - back < self.OUT_OF_STEP_WATCH_S]
        for watched in self.watched:
            found = next((line for line in watched[1].read().splitlines() if OUT_OF_STEP in line), None)
            if found is None:
                continue
            self.watched.remove(watched)
            if len(self.remedies) == 2:  # twice at most
                return
            try:
                self.restart_broker("--graceful")
            except AssertionError as e:
                self.exits.append(f"the broker's restart for its coordinator out of step failed: {e}")
                self.done.set()
                return
            self.remedies.append(f"{now - watched[0]:.0f} s after its return: {found[:200]}")
            return

    def check(self) -> None:
        assert not self.exits, "\n".join(self.exits)

    def stop(self) -> None:
        self.done.set()
        self.thread.join()
        self.check()


def run_through(
    deployment: Deployment,
    kafka_broker: Any,
    redis_url: str,
    pytestconfig: pytest.Config,
    wanted: tuple[str, ...],
) -> tuple[list[m.Event], DisturbedInputs]:
    """The floor played live while the ``wanted`` faults strike, each at a random point of the
    first ``STRIKE_WINDOW_S`` seconds after every service consumes (env FAULTS=a,b narrows them
    down further); then until every service has consumed everything. Returns the offline
    reference events, and what the inputs went through."""
    if not kafka_broker.ops_controlled or f":{os.environ.get('REDIS_PORT', '6379')}/" not in redis_url:
        pytest.skip("the broker or Redis is not the one ops/stack.sh runs, so the test cannot kill it")
    seeds.announce(pytestconfig, "faults", "FAULTS_SEED", SEED)
    rng = random.Random(f"{SEED}:{wanted}")
    deployment.start_all()
    supervisor = Supervisor(deployment)
    timers: list[threading.Timer] = []
    try:
        disturbed: list[DisturbedInputs] = []

        def disturb(publisher: Publisher) -> DisturbedInputs:
            disturbed.append(DisturbedInputs(publisher, int(os.environ.get("PARTITIONS", "6"))))
            return disturbed[0]

        thread, outcome = deployment.play_in_background(Floor(**FLOOR), PACE, disturb)
        deadline = time.monotonic() + 120
        while not all(deployment.committed_offsets(service) for service in CONSUMES):  # all running
            assert time.monotonic() < deadline, f"the services did not start consuming\n{deployment.log_text()}"
            supervisor.check()
            time.sleep(0.5)
        chosen = os.environ.get("FAULTS")
        named = faults(deployment, disturbed[0], f"{SEED}:{wanted}", supervisor)
        schedule = sorted(
            (rng.uniform(0.0, STRIKE_WINDOW_S), name)
            for name in named
            if any(word in name for word in wanted) and (not chosen or any(word in name for word in chosen.split(",")))
        )
        began = time.monotonic()
        done: list[str] = []
        after_the_floor: list[str] = []  # faults that struck once the floor's last input was out: they tested nothing

        def strike(at: float, name: str) -> None:
            struck, playing = time.monotonic() - began, thread.is_alive()
            done.append(f"{name} at {struck:.1f} s (drawn {at:.1f} s): {named[name]()}")
            if not playing:
                after_the_floor.append(done[-1])

        # The disturbances of the inputs take no time: they strike at their point whatever else does.
        timers += [threading.Timer(at, strike, (at, name)) for at, name in schedule if name in INSTANT]
        for timer in timers:
            timer.start()
        for at, name in schedule:
            if name in INSTANT:
                continue
            while time.monotonic() < began + at:
                supervisor.check()
                time.sleep(0.1)
            with supervisor.lock:
                strike(at, name)
        for timer in timers:
            timer.join()
        while thread.is_alive() and time.monotonic() < began + 600:
            supervisor.check()
            thread.join(timeout=1.0)
        assert not thread.is_alive() and "error" not in outcome, outcome
        # Each fault strikes while the floor plays; what it sets off (a broker serving again a
        # minute later) may end after it, the services then catching up on what waited.
        assert not after_the_floor, f"faults struck after the floor was over: {after_the_floor}: make it longer"
        for service in ("table-controller", "settlement", "anomaly-detection"):
            deployment.wait_until_consumed(service, timeout_s=300, check_alive=False)
            supervisor.check()
        supervisor.stop()
        inputs = disturbed[0]
        print(f"\nseed {SEED} (FAULTS_SEED={SEED}); faults in order:\n  " + "\n  ".join(done))
        print(f"inputs published again: {len(inputs.copied)}; held back and released late: {inputs.late}")
        struck = {line.split(" at ")[0] for line in done}
        # A disturbance that met no input tested nothing: the floor must outlast it.
        assert "inputs published again" not in struck or inputs.copied, "no input came to be published again"
        assert "an inputs partition held back" not in struck or inputs.late, "no input came to be held back"
        print(f"started again after exiting while the broker was away: {supervisor.restarts or 'none'}")
        print(f"the broker restarted again, its group coordinator out of step: {supervisor.remedies or 'never'}")
    finally:  # a test that failed leaves nothing striking, or starting services, in its teardown
        for timer in timers:
            timer.cancel()
        supervisor.done.set()
    return offline_events(FLOOR), inputs


def alerts_by_id(alerts: list[m.AlertRaised]) -> dict[str, m.AlertRaised]:
    """One per id; the faust worker may republish an alert after a crash, always the same bytes."""
    for alert_id, n in Counter(a.data.alert_id for a in alerts).items():
        if n > 1:
            assert len({codec.encode(a) for a in alerts if a.data.alert_id == alert_id}) == 1, f"{alert_id} republished changed"
    return {alert.data.alert_id: alert for alert in alerts}


def unchained(alert: m.AlertRaised) -> m.AlertRaisedData:
    """The finding as told, without its place in the table's chain (live and offline order a
    table's alerts from different streams differently)."""
    return msgspec.structs.replace(alert.data, chain=None, signature=None)


def check_table_side_and_ledger(deployment: Deployment, expected: list[m.Event]) -> None:
    # The table side: every shoe and table event once, as the offline run has it.
    for topic in (topics.SHOE, topics.TABLE):
        wanted = [e for e in expected if e.topic == topic]
        live = deployment.read(topic, len(wanted))
        twice = sorted(i for i, n in Counter(e.id for e in live).items() if n > 1)
        assert twice == [], f"{topic}: {len(twice)} events twice, e.g. {twice[:3]}"
        assert {e.id: json.loads(codec.encode(e)) for e in live} == {e.id: json.loads(codec.encode(e)) for e in wanted}
    # Settlement: each settlement once; the ledger key for key that of an uninterrupted run.
    published, wanted = deployment.settlement_events(), settlement_events(expected)
    assert sorted(map(codec.encode, published)) == sorted(map(codec.encode, wanted)), settlement_difference(deployment, published, expected)
    assert deployment.dump() == dump_memory(offline_settlement(expected).ledger.backend)  # type: ignore[arg-type]


def settlement_difference(deployment: Deployment, published: list[m.Event], expected: list[m.Event]) -> str:
    """What a settlement that differs needs to be understood: the settlements missing, extra,
    twice and changed; settlement's dead letters; the ledger keys that differ; for the tables
    concerned, where the table topic's order departs from the offline run's; and the logs of
    every settlement process."""
    wanted = {e.id: e for e in settlement_events(expected)}
    live = Counter(e.id for e in published)
    missing, extra = sorted(set(wanted) - set(live)), sorted(set(live) - set(wanted))
    twice = sorted(i for i, n in live.items() if n > 1)
    changed = sorted(e.id for e in published if e.id in wanted and codec.encode(e) != codec.encode(wanted[e.id]))
    letters = [deadletter.decode(v) for v in deployment.read_values(topics.deadletter_topic("settlement"), timeout=5)]
    named = {"missing": missing, "extra": extra, "twice": twice, "changed": changed}
    lines = [f"{what}: {len(ids)} {ids[:40]}" for what, ids in named.items()] + [f"settlement's dead letters: {len(letters)}"]
    lines += [f"  {d.topic}[{d.partition}]@{d.offset} {d.key}: {d.reason}" for d in letters[:20]]
    ledger, offline_ledger = deployment.dump(), dump_memory(offline_settlement(expected).ledger.backend)  # type: ignore[arg-type]
    differing = sorted(k for k in set(ledger) | set(offline_ledger) if ledger.get(k) != offline_ledger.get(k))
    lines.append(f"ledger keys that differ from the uninterrupted run's: {len(differing)}, e.g. {differing[:10]}")
    table_topic = deployment.read(topics.TABLE, timeout=5)
    for table in sorted({i.split(":")[0] for i in missing + extra + twice + changed}):
        live_order = [e.id for e in table_topic if e.subject == table]
        offline_order = [e.id for e in expected if e.topic == topics.TABLE and e.subject == table]
        first = next((i for i, (a, b) in enumerate(zip(live_order, offline_order)) if a != b), None)
        where = (
            "the same order"
            if first is None
            else f"from #{first}: live {live_order[first : first + 6]}, offline {offline_order[first : first + 6]}"
        )
        lines.append(f"{table} on the table topic, against the offline run: {where}")
    lines += [
        f"--- settlement-{n}.log\n{(deployment.logs / f'settlement-{n}.log').read_text(errors='replace')[-4000:]}"
        for n in range(1, deployment.starts["settlement"] + 1)
    ]
    return "\n".join(lines)


def alert_differences(deployment: Deployment, expected: list[m.Event]) -> tuple[Counter[str], Counter[str]]:
    """Alerts raised live but not by the offline replay, and the reverse, by rule and table; and
    each alert once, told as offline, each table's chain whole."""
    offline_replay = replay(iter(codec.encode(event) for event in expected))
    assert {a.data.rule for a in offline_replay.alerts} >= set(INJECT.split(","))
    log = deployment.read_values(topics.ALERTS, len(offline_replay.alerts))
    live_alerts = [a for a in map(codec.decode, log) if isinstance(a, m.AlertRaised)]
    live = alerts_by_id(live_alerts)
    offline = alerts_by_id(offline_replay.alerts)
    assert verify(log, deployment.alert_verifier()).breaks == []
    assert all(unchained(live[i]) == unchained(offline[i]) for i in set(offline) & set(live))
    extra = Counter(f"{live[i].data.rule} {live[i].data.table_id}" for i in set(live) - set(offline))
    missing = Counter(f"{offline[i].data.rule} {offline[i].data.table_id}" for i in set(offline) - set(live))
    return extra, missing


def check_dead_letters(deployment: Deployment, inputs: DisturbedInputs) -> None:
    """The dead letters are the table-controller's refusals of the inputs published again, one
    each, as duplicates; nothing else, and no other service's."""
    others = [topic for topic in topics.DEADLETTERS if topic != topics.deadletter_topic("table-controller")]
    assert [deployment.read_values(topic, 0, timeout=10) for topic in others] == [[]] * len(others)
    letters = [
        deadletter.decode(value)
        for value in deployment.read_values(topics.deadletter_topic("table-controller"), len(inputs.copied), timeout=10)
    ]
    assert sorted((x.service, x.kind, x.payload) for x in letters) == sorted(
        ("table-controller", "rejected", raw) for raw in inputs.copied
    ), [(x.service, x.kind, x.reason) for x in letters]
    assert all(x.reason.endswith("a duplicate") for x in letters), [x.reason for x in letters]


def test_kill_9_of_the_table_side_settlement_and_redis_mid_run_loses_nothing_and_doubles_nothing(
    deployment: Deployment, kafka_broker: Any, redis_url: str, pytestconfig: pytest.Config
) -> None:
    """The detectors are not killed here, but they read every transaction the others abort: their
    alerts are exactly the offline replay's."""
    wanted = ("shoe-reader", "table-controller", "settlement", "redis", "inputs")
    expected, inputs = run_through(deployment, kafka_broker, redis_url, pytestconfig, wanted)
    check_table_side_and_ledger(deployment, expected)
    check_dead_letters(deployment, inputs)
    assert alert_differences(deployment, expected) == (Counter(), Counter())


def test_the_broker_and_the_detectors_killed_mid_run(
    deployment: Deployment, kafka_broker: Any, redis_url: str, pytestconfig: pytest.Config
) -> None:
    """The table side and settlement come through whole, and the detectors' alerts are the offline
    replay's. The worker restarted after the broker was away may read the table stream late (a shoe
    or more behind the shoe stream): the detectors wait for it (docs/faults.md)."""
    expected, inputs = run_through(deployment, kafka_broker, redis_url, pytestconfig, ("kafka", "anomaly-detection", "inputs"))
    check_table_side_and_ledger(deployment, expected)
    check_dead_letters(deployment, inputs)
    assert alert_differences(deployment, expected) == (Counter(), Counter())
