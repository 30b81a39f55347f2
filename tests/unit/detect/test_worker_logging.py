"""The detectors' faust worker leaves the root logger at the level it is run with. faust's own
worker, at WARNING or above, set it to DEBUG for its terminal spinner: every library's debug line
(aiokafka's for every request and fetch) was then made into a record that no handler wrote."""

from __future__ import annotations

import logging

import pytest

from surveil.anomaly_detection.transport import App


@pytest.mark.parametrize("level", [logging.INFO, logging.WARNING, logging.ERROR])
def test_the_worker_keeps_the_root_logger_at_its_level(level: int) -> None:
    app = App("worker-logging-test", broker="kafka://127.0.0.1:1", web_enabled=False)
    worker = app.Worker(loglevel=level, quiet=True)  # as the worker command makes it
    root = logging.Logger("root-under-test")
    root.addHandler(logging.StreamHandler())
    root.setLevel(level)
    worker.on_setup_root_logger(root, level)
    assert root.level == level
    assert not root.isEnabledFor(logging.DEBUG)
