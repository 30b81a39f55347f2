"""What bench/pipeline.py's figures rest on, without a broker: the /proc readings of
bench/procstat.py (which process listens on a port, CPU seconds, peak RSS, the stack's pid files
refused when the pid is another program's) and the issue's *sustained* (every group's lag slope
under 1 event/s)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

import pipeline  # noqa: E402
import procstat  # noqa: E402


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
