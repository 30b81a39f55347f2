"""What bench/pipeline.py's figures rest on, without a broker: the /proc readings of
bench/procstat.py (which process listens on a port, CPU seconds, the time waited for a core, peak
RSS, the stack's pid files refused when the pid is another program's), the issue's *sustained*
(every group's lag slope under 1 event/s), the drain's end (nothing written, no group behind), and
the broker's requests a round (bench/broker_requests.py: JmxTool's output read into counts by
request type and by topic, two readings into figures a round), what bench/profile_summary.py
reads in a profile, the ages bench/clients_floor.py summarises, and the least a Python replay
does (bench/replay.py)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from surveil.detect import watch
from surveil.embedded.record import record
from surveil.events import codec
from surveil.events import models as m
from surveil.runtime.config import Settings
from surveil.runtime.kafka import producer_config
from surveil.sim.floor import Floor

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

import broker_requests  # noqa: E402
import clients_floor  # noqa: E402
import floor_producer  # noqa: E402
import pipeline  # noqa: E402
import procstat  # noqa: E402
import profile_summary  # noqa: E402
import replay as replay_bench  # noqa: E402


def test_the_process_listening_on_a_port_is_found_and_a_closed_port_has_none() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert procstat.listening_pid(port) == os.getpid()
    assert procstat.listening_pid(port) is None


def test_cpu_seconds_grow_with_work_and_a_gone_process_is_left_out() -> None:
    before = procstat.cpu_seconds({"me": os.getpid(), "gone": 2**22 + 1})
    assert set(before) == {"me"}
    total = 0
    while procstat.cpu_seconds({"me": os.getpid()})["me"] < before["me"] + 0.05:
        total += sum(range(10_000))
    assert total > 0


# Pinned to one core (sys.argv[1]) before its two threads start, each hashing without the
# interpreter's lock, its main thread asleep: only the sum over a process' threads shows its wait.
_BUSY = """
import hashlib, os, sys, threading
os.sched_setaffinity(0, {int(sys.argv[1])})
data = bytes(1 << 20)
def spin():
    while True:
        hashlib.sha256(data).digest()
for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
threading.Event().wait()
"""


def test_busy_processes_sharing_a_core_wait_longer_than_they_run_and_a_sleeping_one_does_not() -> None:
    sleeping = subprocess.Popen(["sleep", "60"])
    core = str(min(os.sched_getaffinity(0)))
    busy = [subprocess.Popen([sys.executable, "-c", _BUSY, core]) for _ in range(3)]
    pids = {f"busy {n}": process.pid for n, process in enumerate(busy)} | {"sleeping": sleeping.pid}
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{sleeping.pid}/stat").read_text().rpartition(")")[2].split()[0] != "S":  # asleep, started
            assert time.monotonic() < deadline
            time.sleep(0.01)
        ran_before = procstat.cpu_seconds(pids)
        before = procstat.run_queue_seconds({**pids, "gone": 2**22 + 1})  # above any pid Linux gives (pid_max <= 2**22)
        assert set(before) == set(pids)
        while procstat.cpu_seconds({"busy 0": busy[0].pid})["busy 0"] < ran_before["busy 0"] + 0.4:
            assert time.monotonic() < deadline, "the busy processes did not run"
            time.sleep(0.05)
        waited, ran = procstat.run_queue_between(before, procstat.run_queue_seconds(pids)), procstat.cpu_seconds(pids)
    finally:
        for process in (*busy, sleeping):
            process.kill()
            process.wait()
    for name in ("busy 0", "busy 1", "busy 2"):  # six threads on a core: each ran a sixth of the time, and waited the rest
        assert waited[name] > 1.4 * (ran[name] - ran_before[name]) > 0.2
    assert waited["sleeping"] < 0.05


def test_the_wait_between_two_readings_is_over_the_threads_alive_at_the_second() -> None:
    before = {"a": {1: 1.0, 2: 2.0}, "b": {5: 1.0}}
    after = {"a": {1: 1.5, 3: 0.25}, "c": {7: 9.0}}  # thread 2 gone, 3 born; b gone; c new
    assert procstat.run_queue_between(before, after) == {"a": pytest.approx(0.75)}


def test_stack_pids_by_port_and_a_pid_file_of_another_program_is_refused(tmp_path: Path) -> None:
    (tmp_path / "redis").mkdir()
    (tmp_path / "redis" / "redis.pid").write_text(f"{os.getpid()}\n")  # a recycled pid: not redis-server
    with socket.socket() as kafka:
        kafka.bind(("127.0.0.1", 0))
        kafka.listen()
        port = kafka.getsockname()[1]
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            nobody = free.getsockname()[1]
        found = procstat.stack_pids(f"127.0.0.1:{port}", f"redis://u:p@127.0.0.1:{nobody}/0", nobody, tmp_path)
    assert found == {"kafka": os.getpid()}


def test_peak_rss_holds_the_largest_sample() -> None:
    sampler = procstat.PeakRss({"me": os.getpid()}, interval=0.01)
    sampler.start()
    now_kb = procstat.proc_status(os.getpid(), "VmRSS")
    peak = sampler.peak_mb()
    assert peak["me"] * 1024 >= now_kb * 0.9
    assert not sampler.is_alive()


def lag_samples(slope: float, seconds: int = 240, every: int = 5) -> list[dict[str, object]]:
    wobble = [0, 7, -5, 3, -2, 6, -7, 1]  # commits come in steps: lag is never a straight line
    return [
        {"t": 1000.0 + t, "lag": {g: 50 + slope * t + wobble[(t // every) % len(wobble)] for g in pipeline.CONSUMERS}}
        for t in range(0, seconds + 1, every)
    ]


def test_sustained_is_every_groups_lag_slope_under_one_event_a_second() -> None:
    flat = {g: pipeline.lag_trend(lag_samples(0.0), g) for g in pipeline.CONSUMERS}
    assert pipeline.sustained(flat)
    growing = dict(flat, settlement=pipeline.lag_trend(lag_samples(1.5), "settlement"))
    assert abs(growing["settlement"]["slope_per_s"] - 1.5) < 0.1
    assert not pipeline.sustained(growing)
    # The bench's bound before: 1.5 events/s over 240 s is 360 events, under two seconds of a
    # 3,000-table floor's input; it called this sustained, the issue does not.
    too_short = dict(flat, settlement=pipeline.lag_trend(lag_samples(0.0, seconds=10), "settlement"))
    assert not pipeline.sustained(too_short)


def test_the_lag_slope_comes_with_its_standard_error() -> None:
    straight = pipeline.lag_trend([{"t": float(t), "lag": {"settlement": 3 * t}} for t in range(60)], "settlement")
    assert straight["slope_per_s"] == pytest.approx(3.0)
    assert straight["slope_error_per_s"] == pytest.approx(0.0, abs=1e-9)
    # A committed lag that jumps at every commit: the same trend read through a sawtooth ten
    # times as tall is ten times as uncertain, about its spread over the samples' spread in time.
    errors = []
    for height in (100, 1000):
        sawtooth = [{"t": t / 2, "lag": {"settlement": 0.25 * t / 2 + height * (t % 3)}} for t in range(360)]
        trend = pipeline.lag_trend(sawtooth, "settlement")
        assert trend["slope_per_s"] == pytest.approx(0.25, abs=3 * trend["slope_error_per_s"])
        spread_of_lag, spread_of_time = height * (2 / 3) ** 0.5, 180 / 12**0.5
        assert trend["slope_error_per_s"] == pytest.approx(spread_of_lag / (360**0.5 * spread_of_time), rel=0.1)
        errors.append(trend["slope_error_per_s"])
    assert errors[1] == pytest.approx(10 * errors[0], rel=0.01)


# ---- the broker's requests a round (bench/broker_requests.py, pipeline.py live --broker-requests)

# JmxTool's stdout (--report-format properties, --attributes Count, --one-time true) from the
# stack's broker (Kafka 4.1.1, one KRaft node), as it printed it; the counts are since the broker started.
JMXTOOL_OUTPUT = """\
time=1796204667729
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=AddOffsetsToTxn,version=3:Count=1635
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=AddPartitionsToTxn,version=3:Count=1843
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=AddPartitionsToTxnVerification,version=5:Count=3191
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=AllocateProducerIds,version=0:Count=1
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=AlterUserScramCredentials,version=0:Count=2
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=ApiVersions,version=4:Count=5
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=BrokerHeartbeat,version=1:Count=374
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=BrokerRegistration,version=4:Count=1
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=ControllerRegistration,version=0:Count=2
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=CreateAcls,version=3:Count=2
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=CreateTopics,version=7:Count=6
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=DeleteTopics,version=6:Count=2
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=DescribeAcls,version=3:Count=1
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=DescribeConfigs,version=4:Count=1
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=EndTxn,version=3:Count=1591
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Fetch,version=12:Count=1644
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=FetchConsumer,version=12:Count=1644
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=FindCoordinator,version=6:Count=6
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Heartbeat,version=4:Count=18
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=InitProducerId,version=4:Count=5
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=JoinGroup,version=7:Count=2
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=ListGroups,version=5:Count=1
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=ListOffsets,version=10:Count=3
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Metadata,version=13:Count=44
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=OffsetFetch,version=8:Count=3
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9:Count=5463
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=SyncGroup,version=5:Count=2
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=TxnOffsetCommit,version=3:Count=1591
kafka.network:type=RequestMetrics,name=RequestsPerSec,request=WriteTxnMarkers,version=1:Count=1591
"""

# `jcmd <broker pid> ManagementAgent.status` after broker_requests.start_agent (the stub URL shortened).
AGENT_STATUS = """\
5622:
Agent: enabled

Connection Type: remote
Protocol       : rmi
Host           : 127.0.0.1
URL            : service:jmx:rmi://127.0.0.1:39395/stub/rO0ABXNyAC5qYXZheC5tYW5hZ2VtZW50LnJlbW90ZS5ybWkuUk1JU2VydmVySW1wbF9TdHVi
Properties     :
  com.sun.management.jmxremote.rmi.port = 39395
  com.sun.management.jmxremote.host = 127.0.0.1
  com.sun.management.jmxremote.authenticate = false
  com.sun.management.jmxremote.ssl.need.client.auth = false [default]
  com.sun.management.jmxremote.ssl = false
  com.sun.management.jmxremote.registry.ssl = false [default]
  com.sun.management.jmxremote.local.only = true [default]
  com.sun.management.jmxremote.password.file = jmxremote.password [default]
  com.sun.management.jmxremote.access.file = jmxremote.access [default]
  com.sun.management.config.file = management.properties [default]
  com.sun.management.jmxremote.port = 39395
"""


def test_drained_is_nothing_written_between_two_samples_and_every_group_within_its_markers() -> None:
    markers = {"table-controller": 4, "anomaly-detection": 8}
    quiet = {"produced": {"shoe": 900, "table": 500, "alerts": 3}, "lag": {"table-controller": 4, "anomaly-detection": 8}}
    assert pipeline.drained(quiet, quiet, markers)
    # The detectors caught up with what is there, but the table-controller still writes its backlog.
    writing = {"produced": {"shoe": 900, "table": 520, "alerts": 3}, "lag": {"table-controller": 4, "anomaly-detection": 8}}
    assert not pipeline.drained(quiet, writing, markers)
    behind = {**quiet, "lag": {"table-controller": 5, "anomaly-detection": 0}}
    assert not pipeline.drained(quiet, behind, markers)


def test_jmxtool_output_becomes_counts_by_request_type_with_the_versions_summed() -> None:
    reading = broker_requests.parse(JMXTOOL_OUTPUT)
    assert reading.at == 1796204667.729
    assert len(reading.counts) == 29
    assert reading.counts["Produce"] == 5463
    assert reading.counts["Fetch"] == reading.counts["FetchConsumer"] == 1644
    assert reading.counts["EndTxn"] == reading.counts["TxnOffsetCommit"] == 1591
    assert reading.counts["AddPartitionsToTxnVerification"] == 3191  # its own meter, not in AddPartitionsToTxn
    # A client on an older version of a request has a meter of its own: one type, summed.
    older = JMXTOOL_OUTPUT + "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=7:Count=37\n"
    assert broker_requests.parse(older).counts["Produce"] == 5463 + 37


def test_the_brokers_time_a_request_is_read_and_its_mean_taken_over_the_requests_between_two_readings() -> None:
    times = """kafka.network:type=RequestMetrics,name=TotalTimeMs,request=EndTxn:Count=1000
kafka.network:type=RequestMetrics,name=TotalTimeMs,request=EndTxn:Mean=0.5
kafka.network:type=RequestMetrics,name=TotalTimeMs,request=TxnOffsetCommit:Count=1000
kafka.network:type=RequestMetrics,name=TotalTimeMs,request=TxnOffsetCommit:Mean=1.25E0
kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Heartbeat:Count=7
"""
    before = broker_requests.parse(JMXTOOL_OUTPUT + times)
    assert before.counts == broker_requests.parse(JMXTOOL_OUTPUT).counts, "a time's Count is not a request count"
    assert before.times == {"EndTxn": (1000, 0.5), "TxnOffsetCommit": (1000, 1.25)}  # Heartbeat: no mean, left out
    later = times.replace("EndTxn:Count=1000", "EndTxn:Count=3000").replace("EndTxn:Mean=0.5", "EndTxn:Mean=1.5")
    after = broker_requests.parse(JMXTOOL_OUTPUT + later)
    # 2,000 more EndTxn, their total 4,500 - 500 ms: 2 ms each; no more TxnOffsetCommit, no mean.
    assert broker_requests.mean_times_ms(before, after) == {"EndTxn": 2.0}
    assert broker_requests.mean_times_ms(broker_requests.parse(JMXTOOL_OUTPUT), after) == {"EndTxn": 1.5, "TxnOffsetCommit": 1.25}


def test_what_each_topic_took_in_is_read_and_taken_a_round_between_two_readings() -> None:
    topics = """kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec,topic=baccarat.inputs:Count=600
kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=baccarat.inputs:Count=1200
kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=baccarat.inputs:Count=307200
kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec,topic=baccarat.table:Count=90
kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=baccarat.table:Count=300
kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=baccarat.table:Count=90000
kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec,topic=baccarat.alerts:Count=4
kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec,topic=baccarat.alerts:Count=999
"""
    before = broker_requests.parse(JMXTOOL_OUTPUT + topics)
    assert before.counts == broker_requests.parse(JMXTOOL_OUTPUT).counts, "a topic's meter is not a request type"
    assert before.topics["baccarat.inputs"] == {"partition_writes": 600, "records": 1200, "bytes": 307200}
    assert before.topics["baccarat.alerts"] == {"partition_writes": 4}, "only the meters asked for"
    later = (
        topics.replace("inputs:Count=600", "inputs:Count=660")
        .replace("inputs:Count=1200", "inputs:Count=1500")
        .replace("inputs:Count=307200", "inputs:Count=614400")
        .replace("table:Count=90\n", "table:Count=180\n")
        .replace("table:Count=300", "table:Count=600")
        .replace("table:Count=90000", "table:Count=180000")
    )
    after = broker_requests.parse(JMXTOOL_OUTPUT + later)
    figures = broker_requests.topics_per_round(before, after, 30)
    # The alerts took nothing between the readings: left out; the most partition writes first.
    assert figures == {
        "baccarat.table": {"partition_writes": 3.0, "records": 10.0, "bytes": 3000.0},
        "baccarat.inputs": {"partition_writes": 2.0, "records": 10.0, "bytes": 10240.0},
    }
    assert list(figures) == ["baccarat.table", "baccarat.inputs"]
    assert broker_requests.topics_per_round(before, after, 0) == {}
    try:
        broker_requests.topics_per_round(after, before, 30)
    except broker_requests.BrokerRequestsError as e:
        assert "baccarat.inputs" in str(e) and "baccarat.table" in str(e)
    else:
        raise AssertionError("a count that went down was taken for input")


def test_jmxtool_output_without_counts_is_an_error_not_an_empty_reading() -> None:
    for text in ("", "time=1796204667729\n", JMXTOOL_OUTPUT.partition("\n")[2]):  # nothing; no meters; no time
        try:
            broker_requests.parse(text)
        except broker_requests.BrokerRequestsError:
            continue
        raise AssertionError(f"parsed: {text[:40]!r}")


def test_the_agents_port_is_read_from_its_status_and_a_disabled_agent_has_none() -> None:
    assert broker_requests.agent_port(AGENT_STATUS) == 39395
    assert broker_requests.agent_port("5622:\nAgent: disabled\n") is None


def test_two_readings_become_requests_a_round_and_a_total_without_fetchs_double_count() -> None:
    before = broker_requests.parse(JMXTOOL_OUTPUT)
    after = broker_requests.Reading(
        before.at + 60,
        before.counts | {"Produce": 5463 + 300, "Fetch": 1644 + 900, "FetchConsumer": 1644 + 900, "EndTxn": 1591 + 150, "OffsetCommit": 30},
    )
    round_ends = [before.at - 1, before.at + 1, *(before.at + 2 + i for i in range(29)), before.at + 61]
    rounds = broker_requests.rounds_between(before, after, round_ends)
    assert rounds == 30
    figures = broker_requests.per_round(before, after, rounds)
    # Types with no request between the readings are left out; OffsetCommit's first request made its meter.
    assert figures == {"Fetch": 30.0, "FetchConsumer": 30.0, "Produce": 10.0, "EndTxn": 5.0, "OffsetCommit": 1.0, "total": 46.0}
    assert list(figures)[:2] == ["Fetch", "FetchConsumer"]  # the busiest first
    assert broker_requests.per_round(before, after, 0) == {}
    restarted = broker_requests.Reading(after.at, after.counts | {"Produce": 12})
    try:
        broker_requests.per_round(before, restarted, rounds)
    except broker_requests.BrokerRequestsError as e:
        assert "Produce" in str(e)
    else:
        raise AssertionError("a count that went down was taken for requests")


def test_the_summary_has_the_broker_requests_a_round_only_when_asked_for() -> None:
    before = broker_requests.parse(JMXTOOL_OUTPUT)
    after = broker_requests.Reading(before.at + 60, before.counts | {"Produce": 5463 + 300, "EndTxn": 1591 + 150})
    counts = broker_requests.WindowCounts(None, lambda _: None)
    figures = pipeline.broker_requests_figures(counts, before, after, [before.at + 1 + i for i in range(30)])
    assert figures is not None
    assert figures["per_round"] == {"Produce": 10.0, "EndTxn": 5.0, "total": 15.0}
    assert figures["counts"] == {"Produce": 300, "EndTxn": 150}
    assert figures["rounds"] == 30 and figures["seconds"] == 60
    lines = pipeline.broker_requests_lines(figures)
    assert lines[0].startswith("  broker requests a round: 15.00 in all over 30 rounds in 60 s")
    assert lines[1] == "    Produce 10.00, EndTxn 5.00"
    assert len(lines) == 2, "no times read, no line of them"
    timed = pipeline.broker_requests_lines(figures | {"broker_ms_mean": {"EndTxn": 0.25, "Heartbeat": 3.0}})
    assert timed[2] == "    the broker's time a request, received to answered, mean ms: EndTxn 0.25"
    assert figures["topics_per_round"] == {}, "no topic meters read, none taken"
    taken = pipeline.broker_requests_lines(
        figures | {"topics_per_round": {"baccarat.table": {"partition_writes": 2.0, "records": 10.0, "bytes": 3072.0}}}
    )
    assert taken[2:] == [
        "    what each topic took in a round (a partition write: a produce request's to one partition, a marker, a coordinator's record):",
        "      baccarat.table: 2.00 partition writes, 10.00 records, 3.00 KB",
    ]
    assert pipeline.broker_requests_figures(None, before, after, []) is None
    assert pipeline.broker_requests_lines(None) == []
    failed = pipeline.broker_requests_figures(counts, None, None, [])
    assert failed == {"error": "not read"}
    assert "not measured" in pipeline.broker_requests_lines(failed)[0]


def test_histograms_with_and_without_a_topic_are_summed_over_the_instances() -> None:
    exposition = """# HELP surveil_detection_commit_seconds Time an offset commit took.
# TYPE surveil_detection_commit_seconds histogram
surveil_detection_commit_seconds_bucket{le="0.05"} 3.0
surveil_detection_commit_seconds_bucket{le="0.1"} 9.0
surveil_detection_commit_seconds_bucket{le="+Inf"} 10.0
surveil_detection_commit_seconds_count 10.0
surveil_detection_commit_seconds_sum 0.6
# HELP surveil_alert_latency_seconds Event to alert.
# TYPE surveil_alert_latency_seconds histogram
surveil_alert_latency_seconds_bucket{le="0.1",topic="baccarat.shoe"} 4.0
surveil_alert_latency_seconds_bucket{le="+Inf",topic="baccarat.shoe"} 5.0
surveil_alert_latency_seconds_count{topic="baccarat.shoe"} 5.0
surveil_alert_latency_seconds_sum{topic="baccarat.shoe"} 0.3
"""
    second = exposition.replace('le="+Inf"} 10.0', 'le="+Inf"} 30.0')
    commits = pipeline.histogram_buckets([exposition, second], {"surveil_detection_commit_seconds": ("topic",)})[
        "surveil_detection_commit_seconds"
    ]
    assert commits == {"": {0.05: 6.0, 0.1: 18.0, float("inf"): 40.0}}
    alerts = pipeline.histogram_buckets([exposition, second], {"surveil_alert_latency_seconds": ("topic",)})[
        "surveil_alert_latency_seconds"
    ]
    assert alerts == {"baccarat.shoe": {0.1: 8.0, float("inf"): 10.0}}
    summary = pipeline.latency_summary(commits)
    assert summary["count"] == 40.0 and summary["p99"] == 0.1  # 22 of the 40 above the largest finite bound
    by_generation = exposition.replace("topic=", "generation=").replace('"baccarat.shoe"', '"2"')
    pauses = pipeline.histogram_buckets([by_generation], {"surveil_alert_latency_seconds": ("generation",)})[
        "surveil_alert_latency_seconds"
    ]
    assert pauses == {"2": {0.1: 4.0, float("inf"): 5.0}}


def test_the_runners_batches_are_read_by_service_summed_over_instances_and_counted_a_second() -> None:
    exposition = """# HELP surveil_batch_seconds Time to process and commit one batch of input events.
# TYPE surveil_batch_seconds histogram
surveil_batch_seconds_bucket{le="0.01",service="table-controller"} 0.0
surveil_batch_seconds_bucket{le="0.025",service="table-controller"} 90.0
surveil_batch_seconds_bucket{le="0.05",service="table-controller"} 100.0
surveil_batch_seconds_bucket{le="+Inf",service="table-controller"} 100.0
surveil_batch_seconds_count{service="table-controller"} 100.0
surveil_batch_seconds_sum{service="table-controller"} 1.8
"""
    phases = """# TYPE surveil_batch_phase_seconds histogram
surveil_batch_phase_seconds_bucket{le="0.005",phase="apply",service="table-controller"} 100.0
surveil_batch_phase_seconds_bucket{le="+Inf",phase="apply",service="table-controller"} 100.0
surveil_batch_phase_seconds_bucket{le="0.005",phase="transaction",service="table-controller"} 0.0
surveil_batch_phase_seconds_bucket{le="0.01",phase="transaction",service="table-controller"} 100.0
surveil_batch_phase_seconds_bucket{le="+Inf",phase="transaction",service="table-controller"} 100.0
"""
    settlement = exposition.replace("table-controller", "settlement")
    wanted = {metric: pipeline.HISTOGRAMS[metric][0] for metric in (pipeline.BATCHES, pipeline.BATCH_PHASES)}
    found = pipeline.histogram_buckets([exposition + phases, exposition + phases, settlement], wanted)
    assert found[pipeline.BATCHES]["table-controller"] == {0.01: 0.0, 0.025: 180.0, 0.05: 200.0, float("inf"): 200.0}
    assert found[pipeline.BATCH_PHASES]["table-controller/apply"] == {0.005: 200.0, float("inf"): 200.0}
    by_service = pipeline.latency_summary(found[pipeline.BATCHES])["by_topic"]
    by_phase = pipeline.latency_summary(found[pipeline.BATCH_PHASES])["by_topic"]
    lines = pipeline.batches_lines(by_service, by_phase, seconds=10.0)
    assert lines == [
        "  settlement's batches: 10.0 a second, p50 18.3 ms, p99 47.5 ms",
        "  table-controller's batches: 20.0 a second, p50 18.3 ms, p99 47.5 ms; p50 by phase: apply 2.5 ms, transaction 7.5 ms",
    ]


def test_each_part_of_the_window_has_what_happened_in_it() -> None:
    """A backlog building over the window shows as the later part's tail and lag above the earlier's,
    a state that costs more as its CPU a round growing."""

    def histograms(fast: float, slow: float) -> dict[str, Any]:  # cumulative: within 50 ms, then within 500 ms
        buckets = {0.05: fast, 0.5: fast + slow, float("inf"): fast + slow}
        by_label = {
            pipeline.BATCHES: {"table-controller": buckets},
            pipeline.BATCH_PHASES: {"table-controller/apply": buckets, "settlement/apply": {0.5: 0.0, float("inf"): 0.0}},
            pipeline.INTAKE: {"table-controller/baccarat.inputs": buckets},
            pipeline.INTAKE_SINCE_SENT: {"table-controller/baccarat.inputs": buckets},
        }
        return {metric: by_label.get(metric, {"baccarat.table": buckets}) for metric in pipeline.HISTOGRAMS}

    marks = [
        pipeline.Mark(100.0, histograms(10, 0), {"anomaly-detection": 1.0, "kafka": 2.0}),
        pipeline.Mark(110.0, histograms(110, 0), {"anomaly-detection": 1.5, "kafka": 2.5}),  # 100 within 50 ms
        pipeline.Mark(120.0, histograms(110, 100), {"anomaly-detection": 3.0, "kafka": 3.0}),  # 100 slower
    ]
    round_ends = [100.0, 101.0, 105.0, 111.0, 119.0, 120.0, 121.0]  # 2 rounds in (100, 110], 3 in (110, 120]
    samples = [{"t": 100.0 + t, "lag": {"anomaly-detection": 5.0 if t <= 10 else 5.0 + 4 * (t - 10)}} for t in range(21)]
    ages = [
        (100.0, 0.02, "LATE_BET"),
        (109.9, 0.04, "CARD_EXPOSED"),
        (110.0, 0.3, "LATE_BET"),
        (120.0, 0.2, "LATE_BET"),
        (120.5, 9.0, "LATE_BET"),
    ]
    first, second = pipeline.window_parts(marks, round_ends, samples, ages)
    assert (first["from_s"], first["to_s"], second["from_s"], second["to_s"]) == (0.0, 10.0, 10.0, 20.0)
    assert (first["rounds"], second["rounds"]) == (2, 3)
    assert first["cpu_ms_per_round"] == {"anomaly-detection": 250.0, "kafka": 250.0, "total": 500.0}
    assert second["cpu_ms_per_round"] == {"anomaly-detection": 500.0, "kafka": 500.0 / 3, "total": 500.0 + 500.0 / 3}
    assert first["detection_since_published"]["count"] == second["detection_since_published"]["count"] == 100.0
    assert first["detection_since_published"]["p50"] <= 0.05 < second["detection_since_published"]["p50"] <= 0.5
    assert second["detectors_commit"]["p50"] == second["detection_since_published"]["p50"]
    assert (first["alerts"]["alerts"], first["alerts"]["p50"], first["alerts"]["p99"]) == (2, 0.04, 0.04)
    assert first["alerts"]["by_rule"] == {
        "CARD_EXPOSED": {"alerts": 1, "p50": 0.04, "p99": 0.04},
        "LATE_BET": {"alerts": 1, "p50": 0.02, "p99": 0.02},
    }
    # the window's end is its last part's; an alert revealed after it is in none
    assert second["alerts"] == {"alerts": 2, "p50": 0.3, "p99": 0.3, "by_rule": {"LATE_BET": {"alerts": 2, "p50": 0.3, "p99": 0.3}}}
    assert abs(first["lag"]["anomaly-detection"]["slope_per_s"]) < 1e-9
    assert abs(second["lag"]["anomaly-detection"]["slope_per_s"] - 4.0) < 1e-9
    lines = pipeline.parts_lines([first, second])
    assert lines[0] == "  the window in 2 parts:"
    assert "10 - 20 s: 3 rounds" in lines[3] and "+4.00 events/s" in lines[3] and "the detectors 500.00, all 666.67" in lines[3]
    # where a table event's time went, part by part: the first's within 50 ms, the second's slower
    assert lines[2] == (
        "      table events, p50 / p99: to the table-controller's batch baccarat.inputs 25 ms / 50 ms (from the send 25 ms / 50 ms), "
        "baccarat.shoe n/a (from the send n/a); its batches 25 ms / 50 ms (p50 apply 25 ms); "
        "to the detectors 25 ms / 50 ms (from the send 25 ms / 50 ms); to their alerts' publication 25 ms / 50 ms"
    )
    assert lines[4] == lines[2].replace("25 ms / 50 ms", "275 ms / 496 ms").replace("apply 25 ms", "apply 275 ms")
    assert pipeline.parts_lines([first]) == []  # one part is the window: its figures are already printed


def test_a_py_spy_profile_is_shared_out_by_thread_and_function_and_its_seconds_are_a_share_of_a_core(tmp_path: Path) -> None:
    frames = [{"name": "main", "file": "/a/app.py", "line": 1}, {"name": "feed", "file": "/a/watch.py", "line": 9}]
    profiles = [
        {"name": 'Thread 7 "MainThread"', "samples": [[0, 1], [0, 1], [0]], "weights": [0.02, 0.02, 0.02]},
        {"name": 'Thread 8 "io"', "samples": [[0]], "weights": [0.02]},
    ]
    path = tmp_path / "worker.speedscope.json"
    path.write_text(json.dumps({"shared": {"frames": frames}, "profiles": profiles}))
    lines = profile_summary.summary(path, top=10, match="", seconds=0.8)
    assert lines[0] == "== worker.speedscope.json: 0.1 s sampled, 10% of a core"
    assert '   75.0%  "MainThread"' in lines and '   25.0%  "io"' in lines
    inclusive, own = lines.index("  inclusive:"), lines.index("  self:")
    assert lines[inclusive + 1 : own] == ["  100.0%  main (a/app.py)", "   50.0%  feed (a/watch.py)"]
    assert lines[own + 1 :] == ["   50.0%  feed (a/watch.py)", "   50.0%  main (a/app.py)"]


def test_a_flight_recording_is_read_innermost_frame_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def frame(type_name: str, method: str) -> dict[str, Any]:
        return {"method": {"type": {"name": type_name}, "name": method}}

    event = {
        "values": {
            "sampledThread": {"javaName": "data-plane-kafka-request-handler-3", "osName": "x"},
            "stackTrace": {"frames": [frame("java/util/HashMap", "get"), frame("kafka/server/KafkaApis", "handle")]},
        }
    }
    printed = json.dumps({"recording": {"events": [event]}}).encode()
    commands: list[list[str]] = []

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, printed, b"")

    monkeypatch.setattr(subprocess, "run", run)
    assert list(profile_summary.jfr_samples(tmp_path / "kafka.jfr")) == [
        ("data-plane-kafka-request-handler-N", ["kafka.server.KafkaApis.handle", "java.util.HashMap.get"], 1.0)
    ]
    (command,) = commands
    assert command[command.index("--stack-depth") + 1] == "64"  # jfr prints 5 frames unless asked


def test_only_a_brokers_jvm_is_taken_for_one() -> None:
    program = "import time; print('ready', flush=True); time.sleep(60)"
    broker = subprocess.Popen([sys.executable, "-c", program, "kafka.Kafka", "server.properties"], stdout=subprocess.PIPE)
    try:
        assert broker.stdout is not None and broker.stdout.readline() == b"ready\n"  # its command line is in /proc by now
        assert procstat.kafka_jvm(broker.pid)  # its command line runs kafka.Kafka
        assert not procstat.kafka_jvm(os.getpid())  # a Python process, whatever listens where
        assert not procstat.kafka_jvm(2**22 + 1)  # no such process
    finally:
        broker.kill()
        broker.wait()


# ---- the simulated floor's client (bench/floor_producer.py) -------------------------------------


def test_the_floors_devices_produce_with_the_services_producer_settings_in_librdkafkas_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "KAFKA_BOOTSTRAP": "broker:9093",
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKA_USERNAME": "floor-simulator",
        "KAFKA_PASSWORD": "secret",
        "KAFKA_SSL_CAFILE": "/run/secrets/ca.pem",
        "KAFKA_LINGER_MS": "7",
    }.items():
        monkeypatch.setenv(name, value)
    config = floor_producer.librdkafka_config(producer_config(Settings.from_env("floor-simulator")))
    assert config | {"client.id": "-"} == {
        "bootstrap.servers": "broker:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "floor-simulator",
        "sasl.password": "secret",
        "ssl.ca.location": "/run/secrets/ca.pem",
        "ssl.endpoint.identification.algorithm": "https",
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 7,
        "batch.size": 1024 * 1024,
        "retries": 2**31 - 1,
        "message.timeout.ms": 120_000,
        "message.max.bytes": 1_048_576,
        "client.id": "-",
    }
    with pytest.raises(KeyError, match="compression_type"):  # a setting it cannot translate is never dropped
        floor_producer.librdkafka_config({"compression_type": None})


def test_the_floors_records_made_ahead_are_what_its_publisher_would_send_signed_in_order() -> None:
    import itertools

    from surveil.events import codec, topics
    from surveil.events.shoe_protocol import signed_line
    from surveil.events.signing import DeviceKeys
    from surveil.runtime.kafka import Publisher
    from surveil.sim.floor import Floor
    from surveil.sim.table import ShoeLine, TableInput

    sent: list[tuple[str, bytes, bytes, list[tuple[str, bytes]]]] = []

    class Producer:
        def send(self, topic: str, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> None:
            sent.append((topic, key, value, headers))

    keys = DeviceKeys({"shoe/T001": b"s" * 32, "console/T001": b"c" * 32})
    actions = list(itertools.islice(Floor(1, 1, seed=1).actions(), 80))
    publisher = Publisher(Settings.from_env("floor-simulator"), keys, producer=Producer())
    signed, ahead = floor_producer.made_ahead(actions, publisher, keys)
    lines = [a for a in actions if isinstance(a, ShoeLine)]
    assert lines and [a.line for a in signed if isinstance(a, ShoeLine)] == [signed_line(a.line, keys) for a in lines]
    inputs = [a.event for a in actions if isinstance(a, TableInput)]
    assert inputs and not sent  # nothing is sent before play
    for event in inputs:
        ahead.publish(event)
    counters = []
    for (topic, key, value, headers), event in zip(sent, inputs, strict=True):
        assert (topic, key, value) == (publisher.topic_prefix + event.topic, event.subject.encode(), codec.encode(event))
        assert headers[:-1] == topics.headers(event.topic) and headers[-1][0] == "signature"
        counters.append(keys.counter("console/T001", value, headers[-1][1]))  # Refused if it does not verify
    assert counters == sorted(set(counters))
    with pytest.raises(RuntimeError, match="out of order"):
        floor_producer.made_ahead(actions, publisher, keys)[1].publish(inputs[1])


def test_a_runs_document_names_the_commit_its_services_came_from_and_whether_they_differed(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    services = checkout / "services" / "surveil"
    services.mkdir(parents=True)
    (services / "app.py").write_text("first\n")
    git = ["git", "-C", str(checkout), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "first"]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert pipeline.code_revision(services) == {"commit": head, "changed": False}
    (services / "app.py").write_text("edited\n")
    assert pipeline.code_revision(services) == {"commit": head, "changed": True}
    (services / "app.py").write_text("first\n")
    (checkout / "elsewhere.txt").write_text("outside the services\n")  # not the services' files
    assert pipeline.code_revision(services) == {"commit": head, "changed": False}
    assert pipeline.code_revision(tmp_path / "no such folder") == {"commit": None, "changed": None}  # no checkout there
    pipeline.write_sweep(tmp_path / "sweep.json", [], {"commit": head, "changed": False})
    assert json.loads((tmp_path / "sweep.json").read_text())["code"] == {"commit": head, "changed": False}


def test_instances_are_counted_for_every_consumer_service_or_by_service() -> None:
    assert pipeline.instance_counts("2") == 2
    assert pipeline.instance_counts("anomaly-detection=2,settlement=3") == {"anomaly-detection": 2, "settlement": 3}
    for wrong in ("0", "-1", "shoe-reader=2", "anomaly-detection=0", "anomaly-detection=two"):
        with pytest.raises(argparse.ArgumentTypeError):
            pipeline.instance_counts(wrong)
    assert pipeline.instance_names("settlement", 2) == ["settlement-1", "settlement-2"]
    assert pipeline.instance_names("shoe-reader", 2) == ["shoe-reader"]
    detectors = {"anomaly-detection": 2}
    assert pipeline.instance_names("anomaly-detection", detectors) == ["anomaly-detection-1", "anomaly-detection-2"]
    assert pipeline.instance_names("table-controller", detectors) == ["table-controller"]


def test_the_ages_of_the_records_sent_in_the_window_are_summed_up_and_the_others_left_out() -> None:
    # sent at, age: 100 records sent in the window [10, 20) (ages 1 - 100 ms, the later half the
    # older), and two sent outside it whose ages would move every figure.
    kept: list[float] = [9.9, 5.0]
    for n in range(100):
        kept += [10 + n / 10, (n + 1) / 1000]
    kept += [20.0, 7.0]
    summary = clients_floor.ages_summary(kept, 10.0, 20.0)
    assert summary == {
        "records": 100,
        "p50_ms": 51.0,
        "p99_ms": 100.0,
        "within_100ms": 1.0,
        "p50_ms_halves": [26.0, 76.0],
    }
    assert clients_floor.ages_summary(kept, 30.0, 40.0) == {"records": 0}
    assert clients_floor.ages_summary([10.0, 0.1001, 10.5, 0.05], 10.0, 20.0)["within_100ms"] == 0.5


def test_the_least_replay_feeds_each_event_once_within_a_tables_window_of_recent_ids() -> None:
    events: list[m.Event] = []
    record(Floor(tables=1, shoes=1, seed=3), events.append, lambda label: None)
    lines = [codec.encode(event) for event in events]
    assert len(lines) > watch.RECENT_IDS + 1
    assert replay_bench.least_replay(lines) == len(lines)
    again_at_once = [lines[0], lines[0], b"not json", *lines[1:]]
    assert replay_bench.least_replay(again_at_once) == len(lines)  # the copy within the window, and the bad line, skipped
    again_long_after = [*lines, lines[0]]
    assert replay_bench.least_replay(again_long_after) == len(lines) + 1  # out of the window: fed again, as the watch would
