"""The detectors' worker process ends when its worker stops, whatever threads are left: faust's
consumer thread is no daemon, and one whose Kafka client wedged never ends (the interpreter then
waited on it for good, and the stopped worker was never restarted)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

STUCK = """
import threading, time
from surveil.anomaly_detection.service import exit_after
threading.Thread(target=lambda: time.sleep(3600)).start()  # no daemon, never ends
def run():
    {body}
exit_after(run)
"""


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ("raise RuntimeError('the worker crashed')", 1, "RuntimeError: the worker crashed"),
        ("raise SystemExit(3)", 3, ""),
        ("raise SystemExit('refusing to start')", 1, "refusing to start"),
        ("pass", 0, ""),
    ],
)
def test_the_process_ends_with_the_workers_status_despite_a_thread_that_never_ends(body: str, status: int, said: str) -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(STUCK).format(body=body)], capture_output=True, text=True, timeout=60)
    assert done.returncode == status, done.stderr
    assert said in done.stderr
