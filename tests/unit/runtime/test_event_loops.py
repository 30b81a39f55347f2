"""The services with an event loop run on uvloop's (libuv): a wake costs it less CPU than asyncio's
own loop (docs/performance.md). Each service's ``main`` runs in a fresh interpreter, its broker,
Redis and metrics calls replaced, up to the point where its loop runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from surveil.runtime.alert_keys import generate

DETECTORS = """
from surveil.anomaly_detection import service
from surveil.anomaly_detection.app import app, settings
service.partition_counts = lambda bootstrap, names: {name: settings.partitions for name in names}
service.create_topics = lambda *args: None
service.metrics.serve = lambda port: None
app.main = lambda: print("loop", type(app.loop).__module__)
service.main()
"""

SHOE_READER = """
import asyncio
from unittest import mock
from surveil.shoe_reader import service

async def run_tcp(*args):
    print("loop", type(asyncio.get_running_loop()).__module__)

with (
    mock.patch.object(service, "Publisher"),
    mock.patch.object(service, "published_sequences", return_value={}),
    mock.patch.object(service.Acknowledged, "load", return_value={}),
    mock.patch.object(service, "keys_from_env"),
    mock.patch.object(service.metrics, "serve"),
    mock.patch.object(service, "_run_tcp", run_tcp),
):
    service.main()
"""


def loop_of(program: str, env: dict[str, str]) -> str:
    ran = subprocess.run([sys.executable, "-c", program], env=os.environ | env, capture_output=True, text=True, timeout=60)
    lines = [line for line in ran.stdout.splitlines() if line.startswith("loop ")]
    assert lines, ran.stderr[-2000:]
    return lines[-1].removeprefix("loop ")


def test_the_detectors_worker_runs_on_uvloop(tmp_path: Path) -> None:
    generate(tmp_path / "keys")
    assert loop_of(DETECTORS, {"ALERT_SIGNING_KEY": str(tmp_path / "keys" / "alert-signing.key")}) == "uvloop"


def test_the_shoe_reader_serves_its_shoes_on_uvloop() -> None:
    assert loop_of(SHOE_READER, {}) == "uvloop"
