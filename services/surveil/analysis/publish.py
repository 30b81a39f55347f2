"""Replay through the real pipeline: a recorded log published into the topics, at the original
pace times ``speed`` or as fast as the broker takes it, so the live services and dashboards see
it as they would see live tables."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from ..runtime.kafka import Publisher
from .replay import BadLine, read_events


def publish_log(
    lines: Iterator[bytes],
    publisher: Publisher,
    speed: float | None,
    bad: Callable[[BadLine], None],
) -> int:
    """Publish every contract event of ``lines`` to its topic, keyed by table. ``speed`` None: as
    fast as possible; else the gaps between events' times, divided by ``speed``."""
    published = 0
    first: float | None = None
    started = time.perf_counter()
    for _, event in read_events(enumerate(lines, start=1), bad):
        if speed:
            moment = event.time.timestamp()
            first = moment if first is None else first
            ahead = (moment - first) / speed - (time.perf_counter() - started)
            if ahead > 0:
                time.sleep(ahead)
        publisher.publish(event)
        published += 1
    publisher.flush()
    return published
