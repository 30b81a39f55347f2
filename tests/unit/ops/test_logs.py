"""The libraries' logs go through structlog as JSON, like the project's own (runtime/logs.py): a
process that configured its logs, whose kafka-python and aiokafka clients fail to reach a broker,
writes nothing on stderr but JSON lines with the service's name. (faust's worker, which sets up
logging again when it starts: tests/integration/ops/test_record_headers.py reads the live
service's log.)"""

from __future__ import annotations

import json
import subprocess
import sys

from support.processes import free_port

PROBE = """
import asyncio, sys
from surveil.runtime import logs
log = logs.configure("probe")
log.info("ours", table="T07")
from kafka import KafkaAdminClient
from kafka.errors import KafkaError
try:
    KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=1000, bootstrap_timeout_ms=1500)
except KafkaError:
    pass
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError as AIOKafkaError
async def aio():
    producer = AIOKafkaProducer(bootstrap_servers=sys.argv[1], request_timeout_ms=1000)
    try:
        await producer.start()
    except AIOKafkaError:
        pass
    finally:
        await producer.stop()
asyncio.run(aio())
"""


def test_kafka_python_and_aiokafka_log_json_lines_with_the_service() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=120, check=False
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]  # fails on any line that is not JSON
    assert done.returncode == 0 and lines, done.stderr
    assert all(line["service"] == "probe" and line["level"] and line["timestamp"].endswith("Z") for line in lines)
    assert lines[0] == {"service": "probe", "table": "T07", "event": "ours", "level": "info", "timestamp": lines[0]["timestamp"]}
    loggers = {line.get("logger", "").split(".")[0] for line in lines}
    assert {"kafka", "aiokafka"} <= loggers, loggers
    refused = [line for line in lines if line.get("logger", "").startswith("kafka.") and "ECONNREFUSED" in line["event"]]
    assert refused and {line["level"] for line in refused} <= {"error", "warning"}
