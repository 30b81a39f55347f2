"""ops/prometheus: the scrape configs, the recording and alerting rules, and their unit tests, checked
by Prometheus' own ``promtool`` (``check config``, ``check rules``, ``test rules``).

promtool comes with Debian's ``prometheus`` package, which ops/install.sh installs. Without it the
promtool tests are skipped with a loud reason locally, and fail under CI (``CI`` set), where its
absence means the install step is broken.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from surveil.cli import SERVICES
from surveil.runtime import lag_exporter
from surveil.runtime.config import DEFAULT_METRICS_PORTS

ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS = ROOT / "ops" / "prometheus"
CONFIGS = [PROMETHEUS / "prometheus.yml", PROMETHEUS / "prometheus-compose.yml"]
RULE_FILES = sorted((PROMETHEUS / "rules").glob("*.yml"))
RULE_TESTS = sorted((PROMETHEUS / "tests").glob("*.yml"))

# Every scraped job and its /metrics port.
PORTS = DEFAULT_METRICS_PORTS


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found:
        return found
    message = (
        "PROMTOOL IS MISSING: the Prometheus rules and configs were NOT checked. "
        "Install it with ops/install.sh (Debian's prometheus package)."
    )
    if os.environ.get("CI"):
        pytest.fail(message + " Under CI this is a failure: the install step did not run.", pytrace=False)
    warnings.warn(message, stacklevel=1)
    pytest.skip(message)


def run(promtool: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120)


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def rules() -> list[dict[str, Any]]:
    return [rule for path in RULE_FILES for group in load(path)["groups"] for rule in group["rules"]]


# ---- promtool ---------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_promtool_check_config(promtool: str, config: Path) -> None:
    checked = run(promtool, "check", "config", config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(RULE_FILES)} rule files found" in checked.stdout


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(promtool: str, rule_file: Path) -> None:
    checked = run(promtool, "check", "rules", rule_file)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout and "WARNING" not in checked.stdout + checked.stderr, checked.stdout + checked.stderr


@pytest.mark.parametrize("rule_test", RULE_TESTS, ids=lambda p: p.name)
def test_promtool_test_rules(promtool: str, rule_test: Path) -> None:
    tested = run(promtool, "test", "rules", rule_test)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


# ---- every rule is tested ---------------------------------------------------------------------


def test_there_are_rules_and_tests() -> None:
    assert {p.name for p in RULE_FILES} == {"recording.yml", "alerts.yml"}
    assert RULE_TESTS


def test_every_alert_is_seen_firing_and_seen_quiet_in_a_rule_test() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for path in RULE_TESTS:
        for test in load(path)["tests"]:
            for case in test.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    alerts = {rule["alert"] for rule in rules() if "alert" in rule}
    assert alerts == {
        "SurveilCriticalAlert",
        "SurveilTableSilent",
        "SurveilConsumerLagHigh",
        "SurveilConsumerLagUnknown",
        "SurveilDeadLetters",
        "SurveilDetectorsOutputsDropped",
        "SurveilServiceDown",
    }
    assert alerts - firing == set(), "alerts no test sees firing"
    assert alerts - quiet == set(), "alerts no test sees quiet"
    assert firing | quiet <= alerts, "tests of alerts that do not exist"


def test_every_recording_rule_is_evaluated_in_a_rule_test() -> None:
    tested: set[str] = set()
    for path in RULE_TESTS:
        for test in load(path)["tests"]:
            for case in test.get("promql_expr_test", []):
                if case.get("exp_samples"):
                    tested.update(re.findall(r"[a-z_]*:[a-z0-9_]+:[a-z0-9_]+", case["expr"]))
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    assert recorded - tested == set(), "recording rules no test evaluates"


def test_every_alert_says_how_urgent_whom_it_is_for_and_what_to_do() -> None:
    for rule in rules():
        if "alert" in rule:
            assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
            assert rule["labels"]["team"] in {"surveillance", "platform"}, rule["alert"]
            assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]


def test_recording_rule_names_follow_level_metric_operations() -> None:
    for rule in rules():
        if "record" in rule:
            assert re.fullmatch(r"[a-z_]+:surveil_[a-z0-9_]+:[a-z0-9_]+", rule["record"]), rule["record"]


# ---- what is scraped --------------------------------------------------------------------------


def scrape_jobs(config: Path) -> dict[str, dict[str, Any]]:
    return {job["job_name"]: job for job in load(config)["scrape_configs"]}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_service_is_scraped_on_its_port_with_job_and_service_labels(config: Path) -> None:
    jobs = scrape_jobs(config)
    assert set(jobs) == set(PORTS) == set(SERVICES), "a service (surveil serve NAME) is not scraped, or a job serves nothing"
    for name, job in jobs.items():
        [target] = job["static_configs"]
        [address] = target["targets"]
        assert address.rsplit(":", 1)[1] == str(PORTS[name]), name
        assert target["labels"] == {"service": name}
        # The runtime's metrics carry `service` themselves (the same name): keep it, do not
        # rename it to exported_service.
        assert job["honor_labels"] is True


def test_the_compose_config_is_the_local_one_with_service_host_names() -> None:
    local, compose = (load(config) for config in CONFIGS)
    assert local["rule_files"] == compose["rule_files"] == ["rules/recording.yml", "rules/alerts.yml"]
    assert local["global"] == compose["global"]
    for (name, job), (compose_name, compose_job) in zip(scrape_jobs(CONFIGS[0]).items(), scrape_jobs(CONFIGS[1]).items()):
        assert name == compose_name
        assert job["static_configs"][0]["targets"] == [f"127.0.0.1:{PORTS[name]}"]
        assert compose_job["static_configs"][0]["targets"] == [f"{name}:{PORTS[name]}"]
        strip = lambda j: {**j, "static_configs": [{**j["static_configs"][0], "targets": []}]}  # noqa: E731
        assert strip(job) == strip(compose_job)


def test_the_lag_exporter_watches_each_consumer_group_on_what_it_consumes() -> None:
    from surveil.settlement.processor import SettlementProcessor
    from surveil.table_controller.processor import TableController

    assert lag_exporter.GROUPS[SettlementProcessor.name] == SettlementProcessor.consumes
    assert lag_exporter.GROUPS[TableController.name] == TableController.consumes
    # anomaly-detection (faust, app id "anomaly-detection"): the three streams and its facts topic.
    app = (ROOT / "services" / "surveil" / "anomaly_detection" / "app.py").read_text()
    assert "settings.topic(SERVICE)" in app and 'SERVICE = "anomaly-detection"' in app
    assert 'FACTS = f"{SERVICE}-facts"' in app and "settings.topic(FACTS)" in app
    assert set(lag_exporter.GROUPS) == {"settlement", "table-controller", "anomaly-detection"}
