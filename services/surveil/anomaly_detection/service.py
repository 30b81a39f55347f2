"""Runs the faust worker of the anomaly-detection service, with its /metrics endpoint."""

from __future__ import annotations

import gc
import os
import sys
import traceback
from collections.abc import Callable

import mode.loop

from ..events import topics
from ..runtime import logs, metrics
from ..runtime.topic_admin import create_topics, partition_counts


def main() -> None:
    mode.loop.use("uvloop")  # before faust makes its loop: libuv's, where a wake costs less CPU than on asyncio's
    from .app import CO_PARTITIONED, FACTS, SIGNER, UNCHAINED_ALERTS, app, settings

    logs.configure(settings.service, settings.log_level)
    if SIGNER is None:  # an unsigned alert proves nothing: docs/security.md, "Alert proof"
        raise SystemExit("refusing to start without the detectors' alert-signing key: ALERT_SIGNING_KEY (surveil keys alert-signing)")
    # A record is read on its key's partition among PARTITIONS, or refused: with another count on
    # the broker, most events would be dead letters. And a partition's checkpoint goes to that
    # partition of the alerts topic, where its tables' alerts must be. (Checked first: the internal
    # topics are made with PARTITIONS.)
    counts = partition_counts(settings.kafka_bootstrap, [*CO_PARTITIONED, settings.topic(topics.ALERTS)])
    if wrong := {name: count for name, count in counts.items() if count != settings.partitions}:
        found = ", ".join(f"{name} has {count}" for name, count in sorted(wrong.items()))
        raise SystemExit(
            f"refusing to start: PARTITIONS is {settings.partitions}, but {found}: a table's events are on the partition its id hashes to"
        )
    # The internal topics exist before the worker subscribes: one that faust creates on its first
    # send joins the subscription only at the next metadata refresh, five minutes on, and the
    # rebalance that this causes left the worker's streams stalled for good.
    create_topics(settings.kafka_bootstrap, [settings.topic(name) for name in (FACTS, UNCHAINED_ALERTS)], settings.partitions)
    metrics.serve(settings.metrics_port)
    # What start-up made (modules, functions, types: some 105,000 objects) lives as long as the
    # worker: out of the cyclic collector's walks, where each full collection would go over it again
    # with the event loop waiting (docs/performance.md, "The detectors' worker").
    gc.collect()
    gc.freeze()
    # --quiet: no banner on stdout; the logs say what it would (JSON, runtime/logs.py).
    sys.argv = [sys.argv[0], "--quiet", "worker", "--loglevel", settings.log_level.lower(), "--without-web"]
    exit_after(app.main)


def exit_after(run: Callable[[], object]) -> None:
    """Runs ``run``, then ends the process with its status, whatever threads are left. faust's
    consumer thread is no daemon: when its Kafka client wedged (why the worker stopped), the thread
    never ends, and the interpreter waited on it for good instead of exiting to be restarted."""
    try:
        run()
        status = 0
    except SystemExit as exited:
        if exited.code is None or isinstance(exited.code, int):
            status = exited.code or 0
        else:  # a message: printed, status 1, as the interpreter does
            print(exited.code, file=sys.stderr)
            status = 1
    except BaseException:  # noqa: BLE001 - reported as the interpreter would, then the exit
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
