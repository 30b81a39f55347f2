"""What processes use, read from /proc: CPU seconds (utime + stime), the time their threads
waited for a core, resident memory, the load average, and which process listens on a port (to
find the broker, Redis and Prometheus of the stack a benchmark talks to, whichever folder started
it)."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
# The stack's own processes (ops/stack.sh): the pid file under .stack/, a word of the command line.
STACK = {
    "kafka": ("kafka/kafka.pid", "kafka.Kafka"),
    "redis": ("redis/redis.pid", "redis-server"),
    "prometheus": ("prometheus/prometheus.pid", "prometheus"),
}


def load_average() -> tuple[float, float, float]:
    one, five, fifteen = Path("/proc/loadavg").read_text().split()[:3]
    return float(one), float(five), float(fifteen)


def _proc(pid: int, tid: int | None) -> Path:
    # /proc/<tid> answers for a thread with its whole process' figures: a thread's are under task/.
    return Path(f"/proc/{pid}") if tid is None else Path(f"/proc/{pid}/task/{tid}")


def proc_cpu_seconds(pid: int, tid: int | None = None) -> float:
    """The CPU seconds of process ``pid``, or of its thread ``tid``."""
    fields = (_proc(pid, tid) / "stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_queue_seconds(pids: Mapping[str, int]) -> dict[str, dict[int, float]]:
    """Of each live process, by thread id, the seconds each thread has spent so far ready to run
    and waiting for a core (the second figure of /proc/<pid>/task/<tid>/schedstat): a process
    short of CPU waits there, one waiting for its input does not. A process gone, or not ours to
    read, is left out, as is a thread gone while it was read."""
    waited: dict[str, dict[int, float]] = {}
    for name, pid in pids.items():
        try:
            tids = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        threads = waited[name] = {}
        for tid in tids:
            try:
                threads[tid] = int((_proc(pid, tid) / "schedstat").read_text().split()[1]) / 1e9
            except OSError:
                pass
    return waited


def run_queue_between(before: Mapping[str, Mapping[int, float]], after: Mapping[str, Mapping[int, float]]) -> dict[str, float]:
    """Each process' seconds in the run queue between two ``run_queue_seconds`` readings, over
    the threads alive at the second: one born between counts from its start, one gone by the
    second is left out (so a process whose threads come and go waited at least this long)."""
    return {
        name: sum(seconds - before.get(name, {}).get(tid, 0.0) for tid, seconds in threads.items())
        for name, threads in after.items()
        if name in before
    }


def proc_status(pid: int, field_name: str, tid: int | None = None) -> int:
    """A figure of /proc/<pid>/status, or of its thread ``tid``'s (VmHWM: peak resident set in
    kB, VmRSS: now; voluntary_ctxt_switches: the times it slept)."""
    for line in (_proc(pid, tid) / "status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pids: Mapping[str, int]) -> dict[str, float]:
    """Each live process' CPU seconds so far (a process gone is left out)."""
    used = {}
    for name, pid in pids.items():
        try:
            used[name] = proc_cpu_seconds(pid)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return used


def listening_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` (any address), from /proc/net/tcp{,6} and the
    processes' socket descriptors; None if none is, or it is not ours to see."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    return int(proc.name)
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
    return None


def _runs(pid: int, word: str) -> bool:
    """Whether ``pid``'s command line has ``word`` in it."""
    try:
        return word in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False


def _from_pid_file(stack_dir: Path, name: str) -> int | None:
    file, word = STACK[name]
    try:
        pid = int((stack_dir / file).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _runs(pid, word) else None  # a recycled pid is not the stack's


def kafka_jvm(pid: int) -> bool:
    """Whether ``pid`` is a broker's JVM (its command line runs ``kafka.Kafka``): what ``jcmd`` may
    be pointed at. jcmd signals its target (SIGQUIT), which ends a process that is not a JVM: the
    process on the broker's port may be another (docker-proxy, for a container's broker)."""
    return _runs(pid, STACK["kafka"][1])


def stack_pids(bootstrap: str, redis_url: str, prometheus_port: int, stack_dir: Path = ROOT / ".stack") -> dict[str, int]:
    """The broker, Redis and Prometheus this benchmark talks to: the process listening on each's
    port, else the pid file of the stack in ``stack_dir``. Those not found are left out."""
    ports = {
        "kafka": int(bootstrap.split(",")[0].rpartition(":")[2]),
        "redis": urlsplit(redis_url).port or 6379,
        "prometheus": prometheus_port,
    }
    found = {}
    for name, port in ports.items():
        pid = listening_pid(port) or _from_pid_file(stack_dir, name)
        if pid is not None:
            found[name] = pid
    return found


class PeakRss(threading.Thread):
    """The largest resident set of each process, sampled every ``interval`` s until stopped: for
    long-lived processes (the broker), whose VmHWM holds the peaks of earlier runs."""

    def __init__(self, pids: Mapping[str, int], interval: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.pids = dict(pids)
        self.interval = interval
        self.peak_kb: dict[str, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while True:
            for name, pid in self.pids.items():
                try:
                    self.peak_kb[name] = max(self.peak_kb.get(name, 0), proc_status(pid, "VmRSS"))
                except (FileNotFoundError, ProcessLookupError):
                    pass
            if self.stop.wait(self.interval):
                return

    def peak_mb(self) -> dict[str, float]:
        self.stop.set()
        self.join()
        return {name: kb / 1024 for name, kb in self.peak_kb.items()}
