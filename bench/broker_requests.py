"""The broker's requests by type, from its own meters: ``kafka.network:type=RequestMetrics,
name=RequestsPerSec,request=<Type>,version=<v>`` (attribute ``Count``, cumulative since the broker
started), read twice, the difference between the readings divided by the rounds played between them;
and the broker's mean time a request of each type between the readings, received to answered
(``name=TotalTimeMs,request=<Type>``: its ``Count`` and its ``Mean`` since the broker started);
and what each topic took in, from ``kafka.server:type=BrokerTopicMetrics,name=<meter>,topic=<t>``
(``Count``): its bytes, its records, and its partition writes (``TotalProduceRequestsPerSec``,
marked for each append to one of its partitions: a produce request's, a transaction's commit
marker, a coordinator's own record), which tell whose writes the broker handles.

The stack's broker (``ops/stack.sh``) has no JMX port. ``start_agent`` opens one in the running
JVM with ``jcmd <pid> ManagementAgent.start``: on 127.0.0.1 only (``jmxremote.host``; the JDK's
``jmxremote.local.only`` is on by default as well), but **without authentication or TLS**: while
it is open, any local user can read and call the broker's MBeans. ``stop_agent`` closes it
(``ManagementAgent.stop``). ``request_counts`` reads the meters with Kafka's own
``org.apache.kafka.tools.JmxTool`` (in ``kafka-tools-*.jar``, on the broker's class path), run by
the java the stack starts the broker with (``ops/stack.sh``: the ``java`` on PATH), one JVM a reading.

A meter counts every request the broker's sockets handled, whoever sent it: the pipeline's
clients, the bench's own (its alerts consumer, its lag watcher), and the broker's requests to
itself (a combined KRaft node: BrokerHeartbeat to its controller, WriteTxnMarkers from the
transaction coordinator to the partitions' leader, AddPartitionsToTxnVerification from the
produce path to the transaction coordinator). ``FetchConsumer`` and ``FetchFollower`` count the
same requests as ``Fetch`` (the broker marks both), so the total leaves them out.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from procstat import kafka_jvm

ROOT = Path(__file__).resolve().parents[1]
MBEANS = "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*,version=*"
# And the time each request took in the broker, received to answered (a histogram: its Count, and
# its Mean over every request since the broker started).
TIMES = "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=*"
# What each topic took in, by meter: the name a figure goes by.
TOPIC_METERS = {"TotalProduceRequestsPerSec": "partition_writes", "MessagesInPerSec": "records", "BytesInPerSec": "bytes"}
TOPICS = [f"kafka.server:type=BrokerTopicMetrics,name={meter},topic=*" for meter in TOPIC_METERS]
JMX_TOOL = "org.apache.kafka.tools.JmxTool"
K = TypeVar("K", bound=Hashable)
# Meters of requests another meter counts too (kafka.network.RequestChannel: a Fetch marks "Fetch"
# and one of these), left out of the total.
SUBSETS = frozenset({"FetchConsumer", "FetchFollower"})
TIMEOUT = 60.0  # seconds for one jcmd or JmxTool (a JVM starting on a loaded machine)
# A line of JmxTool's --report-format properties: OBJECT-NAME:ATTRIBUTE=VALUE.
LINE = re.compile(r"^kafka\.(?:network|server):(?P<name>[^:]*):(?P<attribute>Count|Mean)=(?P<value>[0-9.Ee+-]+)$")


class BrokerRequestsError(RuntimeError):
    """The counts could not be read (no jcmd, no java, no JmxTool, the agent would not start...)."""


@dataclass(frozen=True)
class Reading:
    """The meters' counts by request type (the versions summed), at ``at`` (s since the epoch:
    JmxTool's clock when it read them)."""

    at: float
    counts: dict[str, int]
    times: dict[str, tuple[int, float]] = field(default_factory=dict)  # by type: requests timed, their mean ms
    topics: dict[str, dict[str, int]] = field(default_factory=dict)  # by topic: its counts by TOPIC_METERS' names


def _tool(name: str, pid: int) -> str:
    """``name`` (java, jcmd) on PATH, as ops/stack.sh finds java; else the broker's own JDK's."""
    found = shutil.which(name)
    if found:
        return found
    try:
        own = Path(os.readlink(f"/proc/{pid}/exe")).with_name(name)
    except OSError:
        own = None
    if own is not None and os.access(own, os.X_OK):
        return str(own)
    raise BrokerRequestsError(f"{name} not found (not on PATH, nor next to the broker's java)")


def _run(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BrokerRequestsError(f"{Path(command[0]).name}: {e}") from e
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise BrokerRequestsError(f"{' '.join(command[:3])} ...: exit {done.returncode}: {last}")
    return done.stdout


def jcmd(pid: int) -> list[str]:
    """jcmd, pointed at the broker ``pid``; refused for any other process (``kafka_jvm``)."""
    if not kafka_jvm(pid):
        raise BrokerRequestsError(f"the process on the broker's port (pid {pid}) is not the broker's JVM (a container's proxy?)")
    return [_tool("jcmd", pid), str(pid)]


def _jcmd(pid: int, *command: str) -> str:
    return _run([*jcmd(pid), *command])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def agent_port(status: str) -> int | None:
    """The JMX port of a running remote agent, from ``jcmd PID ManagementAgent.status`` (None:
    the agent is disabled)."""
    if "Agent: enabled" not in status:
        return None
    found = re.search(r"^\s*com\.sun\.management\.jmxremote\.port\s*=\s*(\d+)", status, re.MULTILINE)
    if found is None:
        raise BrokerRequestsError(f"the broker's management agent runs, but not on a JMX port: {status.strip()!r}")
    return int(found.group(1))


def start_agent(pid: int) -> int:
    """Open the JVM ``pid``'s JMX port on 127.0.0.1, unauthenticated; the port. Refuses when an
    agent runs there already (not ours to reuse, nor to stop)."""
    running = agent_port(_jcmd(pid, "ManagementAgent.status"))
    if running is not None:
        raise BrokerRequestsError(
            f"a management agent already runs in the broker (pid {pid}, port {running}), not started by this bench; "
            f"`jcmd {pid} ManagementAgent.stop` closes it"
        )
    port = _free_port()
    _jcmd(
        pid,
        "ManagementAgent.start",
        "jmxremote.host=127.0.0.1",
        f"jmxremote.port={port}",
        f"jmxremote.rmi.port={port}",  # one port: the registry's and the connector's
        "jmxremote.authenticate=false",
        "jmxremote.ssl=false",
        "jmxremote.registry.ssl=false",
    )
    return port


def stop_agent(pid: int) -> None:
    _jcmd(pid, "ManagementAgent.stop")


def class_path(pid: int) -> str:
    """The broker's class path (``-cp`` of its command line; else the stack's ``.stack/kafka/libs``),
    if it holds kafka-tools (JmxTool)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        args = []
    found = next((args[i + 1] for i, arg in enumerate(args[:-1]) if arg in ("-cp", "-classpath", "--class-path")), None)
    path = found or str(ROOT / ".stack" / "kafka" / "libs" / "*")
    folders = [Path(p[:-1]) if p.endswith("*") else Path(p).parent for p in path.split(os.pathsep)]
    if not any(folder.glob("kafka-tools-*.jar") for folder in folders):
        raise BrokerRequestsError(f"no kafka-tools-*.jar (JmxTool) on the broker's class path {path}")
    return path


def parse(text: str) -> Reading:
    """JmxTool's ``--report-format properties`` output of ``MBEANS`` (attribute Count),
    ``TIMES`` (Count and Mean) and ``TOPICS`` (Count): the counts by request type, the versions
    summed; the times' count and mean by request type; each topic's counts."""
    at = None
    counts: dict[str, int] = {}
    timed: dict[str, dict[str, float]] = {}
    topics: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("time="):
            at = int(line.partition("=")[2]) / 1000
            continue
        found = LINE.match(line)
        if found is None:
            continue
        keys = dict(part.partition("=")[::2] for part in found.group("name").split(","))
        if keys.get("type") == "BrokerTopicMetrics" and keys.get("name") in TOPIC_METERS and "topic" in keys:
            topics.setdefault(keys["topic"], {})[TOPIC_METERS[keys["name"]]] = int(float(found.group("value")))
            continue
        if keys.get("type") != "RequestMetrics" or "request" not in keys:
            continue
        request, attribute, value = keys["request"], found.group("attribute"), float(found.group("value"))
        if keys.get("name") == "RequestsPerSec" and attribute == "Count":
            counts[request] = counts.get(request, 0) + int(value)
        elif keys.get("name") == "TotalTimeMs":
            timed.setdefault(request, {})[attribute] = value
    if at is None or not counts:
        raise BrokerRequestsError(f"JmxTool's output has no request counts: {text[:200]!r}")
    times = {request: (int(t["Count"]), t["Mean"]) for request, t in timed.items() if {"Count", "Mean"} <= t.keys()}
    return Reading(at, counts, times, topics)


def request_counts(pid: int, port: int) -> Reading:
    """One reading of the broker ``pid``'s request meters through its JMX ``port``."""
    command = [_tool("java", pid), "-Xms16m", "-Xmx64m", "-XX:TieredStopAtLevel=1", "-cp", class_path(pid), JMX_TOOL]
    command += ["--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi"]
    command += [arg for name in (MBEANS, TIMES, *TOPICS) for arg in ("--object-name", name)]
    command += ["--attributes", "Count,Mean", "--one-time", "true", "--report-format", "properties"]
    return parse(_run(command))


def rounds_between(before: Reading, after: Reading, round_ends: Iterable[float]) -> int:
    """The rounds that ended between the two readings."""
    return sum(before.at <= t <= after.at for t in round_ends)


def gained(before: Mapping[K, int], after: Mapping[K, int], name: Callable[[K], str] = str) -> dict[K, int]:
    """What each cumulative count gained between two readings; an error naming (``name``) the
    counts that went down (the broker restarted in between)."""
    delta = {key: count - before.get(key, 0) for key, count in after.items()}
    if fell := sorted(name(key) for key, d in delta.items() if d < 0):
        raise BrokerRequestsError(f"counts went down between the readings ({', '.join(fell)}): did the broker restart?")
    return delta


def per_round(before: Reading, after: Reading, rounds: int) -> dict[str, float]:
    """Requests a round by type between the two readings (types with none left out, the busiest
    first), and ``total`` (without ``SUBSETS``: counted in Fetch already). Empty when no round
    ended between them; an error when a count went down (``gained``)."""
    delta = gained(before.counts, after.counts)
    if rounds <= 0:
        return {}
    figures = {name: d / rounds for name, d in sorted(delta.items(), key=lambda kv: (-kv[1], kv[0])) if d > 0}
    figures["total"] = sum(d for name, d in delta.items() if name not in SUBSETS) / rounds
    return figures


def topics_per_round(before: Reading, after: Reading, rounds: int) -> dict[str, dict[str, float]]:
    """What each topic took in a round between the two readings, by ``TOPIC_METERS``' names
    (topics that took nothing left out, the most partition writes first). Empty when no round
    ended between them; an error when a count went down (``gained``)."""
    delta = gained(_by_topic_meter(before), _by_topic_meter(after), name=" ".join)
    if rounds <= 0:
        return {}
    taken: dict[str, dict[str, float]] = {}
    for (topic, meter), d in delta.items():
        taken.setdefault(topic, {})[meter] = d / rounds
    busy = {topic: figures for topic, figures in taken.items() if any(figures.values())}
    return dict(sorted(busy.items(), key=lambda kv: (-kv[1].get("partition_writes", 0), kv[0])))


def _by_topic_meter(reading: Reading) -> dict[tuple[str, str], int]:
    return {(topic, meter): count for topic, counts in reading.topics.items() for meter, count in counts.items()}


def mean_times_ms(before: Reading, after: Reading) -> dict[str, float]:
    """The broker's mean time a request by type (received to answered, ms) over the requests
    between the two readings: each histogram's mean is over every request since the broker
    started, so the window's is what its sum gained over what its count gained."""
    means = {}
    for request, (count, mean) in sorted(after.times.items()):
        count_before, mean_before = before.times.get(request, (0, 0.0))
        if count > count_before:
            means[request] = (count * mean - count_before * mean_before) / (count - count_before)
    return means


class WindowCounts:
    """``--broker-requests`` in one run: the agent opened on entering, a reading on each ``read()``,
    closed by ``close()`` or on leaving. Whatever fails is said (``say``) and the figure left out:
    ``read()`` gives None from then on; the bench's other figures go on."""

    def __init__(self, pid: int | None, say: Callable[[str], None]) -> None:
        self.pid, self.say = pid, say
        self.port: int | None = None
        self.error: str | None = None

    def _fail(self, why: str) -> None:
        self.error = why
        self.say(f"broker requests not measured: {why}")

    def __enter__(self) -> WindowCounts:
        if self.pid is None:
            self._fail("the broker's process was not found (by its port, or .stack/kafka/kafka.pid)")
            return self
        try:
            self.port = start_agent(self.pid)
        except BrokerRequestsError as e:
            self._fail(str(e))
        else:
            self.say(
                f"broker requests: JMX opened in the broker (pid {self.pid}) on 127.0.0.1:{self.port}, unauthenticated, until the window ends"
            )
        return self

    def read(self) -> Reading | None:
        if self.pid is None or self.port is None or self.error is not None:
            return None
        try:
            return request_counts(self.pid, self.port)
        except BrokerRequestsError as e:
            self._fail(str(e))
            return None

    def close(self) -> None:
        if self.pid is None or self.port is None:
            return
        port, self.port = self.port, None
        try:
            stop_agent(self.pid)
        except BrokerRequestsError as e:
            self.say(f"broker requests: could not close the JMX port {port} (`jcmd {self.pid} ManagementAgent.stop`): {e}")

    def __exit__(self, *_: object) -> None:
        self.close()
