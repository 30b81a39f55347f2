"""A firing critical rule reaches the console's webhook: a real Prometheus (the project's rules,
evaluated every second) scrapes the anomaly-detection metrics of this process, where the service's
own ``metrics.alert_raised`` counted a critical finding at a table; it sends the firing
``SurveilCriticalAlert`` to a real Alertmanager running the project's routes and receivers
(ops/alertmanager/alertmanager.yml, the webhook's address and token file pointed at this test);
Alertmanager posts the page, with the bearer token, to a webhook receiver of the test's own, which
records it.

Prometheus and Alertmanager are Debian's (ops/install.sh). Without them the test is skipped with a
loud reason locally, and fails under CI, where their absence means the install step is broken.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.processes import Launched, answering, free_port
from surveil.anomaly_detection import metrics
from surveil.core.findings import AlertCode, Finding
from surveil.detect.alerts import Context, raise_alert
from surveil.runtime.metrics import serve

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "ops" / "prometheus" / "rules"
ALERTMANAGER_CONFIG = ROOT / "ops" / "alertmanager" / "alertmanager.yml"


def program(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    message = f"{name.upper()} IS MISSING: paging was NOT tested. Install it with ops/install.sh."
    if os.environ.get("CI"):
        pytest.fail(message + " Under CI this is a failure: the install step did not run.", pytrace=False)
    warnings.warn(message, stacklevel=1)
    pytest.skip(message)


class Webhook:
    """The console's side, as little of it as records what Alertmanager posts."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        received = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((self.path, dict(self.headers), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


def start(command: list[str], log: Path, ready: str) -> Launched:
    """``command`` in the background, once its ``ready`` URL answers."""
    process = Launched(command, None, log)
    try:
        process.wait_ready(answering(ready, timeout=2), command[0], "not ready", pause=0.2, logs=log.read_text)
    except TimeoutError:
        process.kill()
        raise
    return process


def test_a_firing_critical_rule_reaches_the_console_webhook_with_its_token(tmp_path: Path, webhook: Webhook) -> None:
    prometheus, alertmanager = program("prometheus"), program("prometheus-alertmanager")
    table = f"T-{uuid.uuid4().hex[:6]}"  # this test's own: other tests' alerts may be in this process's metrics too
    finding = Finding(AlertCode.CARD_MISMATCH, "Art. 5", "A hand's card differs from what the shoe read.", {})
    metrics.alert_raised(raise_alert(finding, Context(table, "round:paging"), datetime.now(UTC)))
    exporter = serve(0, "127.0.0.1")  # what anomaly-detection's /metrics serves
    token = secrets.token_hex(16)
    (tmp_path / "token").write_text(token)

    # The project's routes and receivers, the console's address and the token file this test's.
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    for receiver in config["receivers"]:
        for hook in receiver["webhook_configs"]:
            hook["url"] = f"http://127.0.0.1:{webhook.port}/api/alertmanager"
            hook["http_config"]["authorization"]["credentials_file"] = str(tmp_path / "token")
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(config))
    am_port, prom_port = free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES / "recording.yml"), str(RULES / "alerts.yml")],
                "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
                "scrape_configs": [
                    {
                        "job_name": "anomaly-detection",
                        "honor_labels": True,
                        "static_configs": [
                            {"targets": [f"127.0.0.1:{exporter.server_address[1]}"], "labels": {"service": "anomaly-detection"}}
                        ],
                    }
                ],
            }
        )
    )
    processes = []
    try:
        processes.append(
            start(
                [
                    alertmanager,
                    f"--config.file={tmp_path / 'alertmanager.yml'}",
                    f"--storage.path={tmp_path / 'am-data'}",
                    f"--web.listen-address=127.0.0.1:{am_port}",
                    "--cluster.listen-address=",
                ],
                tmp_path / "alertmanager.log",
                f"http://127.0.0.1:{am_port}/-/ready",
            )
        )
        processes.append(
            start(
                [
                    prometheus,
                    f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'prom-data'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                ],
                tmp_path / "prometheus.log",
                f"http://127.0.0.1:{prom_port}/-/ready",
            )
        )
        deadline = time.monotonic() + 90
        ours: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        while not ours and time.monotonic() < deadline:
            time.sleep(0.5)
            ours = [post for post in list(webhook.posts) if post[2].get("groupLabels", {}).get("table") == table]
        logs = "\n".join((tmp_path / f"{name}.log").read_text()[-3000:] for name in ("prometheus", "alertmanager"))
        assert ours, f"no page for {table}; posts: {webhook.posts}\n{logs}"
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        exporter.shutdown()

    path, headers, page = ours[0]
    assert path == "/api/alertmanager"
    assert headers["Authorization"] == f"Bearer {token}"
    assert page["version"] == "4" and page["status"] == "firing" and page["receiver"] == "surveillance-critical"
    assert page["groupLabels"] == {"alertname": "SurveilCriticalAlert", "table": table, "rule": "CARD_MISMATCH"}
    [alert] = page["alerts"]
    assert {k: alert["labels"][k] for k in ("alertname", "table", "rule", "severity", "team")} == {
        "alertname": "SurveilCriticalAlert",
        "table": table,
        "rule": "CARD_MISMATCH",
        "severity": "critical",
        "team": "surveillance",
    }
    assert alert["annotations"]["summary"] == f"Table {table}: critical alert CARD_MISMATCH, 1 in the last 5 minutes"
    assert alert["annotations"]["runbook_url"] == "docs/monitoring.md#surveilcriticalalert"
