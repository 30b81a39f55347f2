"""What the detectors' unit tests share."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop of the test's own, closed after it."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()
