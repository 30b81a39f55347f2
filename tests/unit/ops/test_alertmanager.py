"""ops/alertmanager: the paging configuration, checked by Alertmanager's own ``amtool`` (``check-config``,
``config routes test``), and the runbooks the alerting rules point to.

amtool comes with Debian's ``prometheus-alertmanager`` package, which ops/install.sh installs.
Without it the amtool tests are skipped with a loud reason locally, and fail under CI (``CI``
set), where its absence means the install step is broken. The live path (Prometheus firing a
rule, Alertmanager posting it to the webhook): tests/integration/ops/test_paging.py.
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

ROOT = Path(__file__).resolve().parents[3]
ALERTMANAGER = ROOT / "ops" / "alertmanager"
CONFIGS = [ALERTMANAGER / "alertmanager.yml", ALERTMANAGER / "alertmanager-compose.yml"]
ALERT_RULES = ROOT / "ops" / "prometheus" / "rules" / "alerts.yml"
MONITORING = ROOT / "docs" / "monitoring.md"
RECEIVERS = {"console", "surveillance-critical", "surveillance", "platform-critical", "platform"}


@pytest.fixture(scope="module")
def amtool() -> str:
    found = shutil.which("amtool")
    if found:
        return found
    message = (
        "AMTOOL IS MISSING: the Alertmanager configurations were NOT checked. "
        "Install it with ops/install.sh (Debian's prometheus-alertmanager package)."
    )
    if os.environ.get("CI"):
        pytest.fail(message + " Under CI this is a failure: the install step did not run.", pytrace=False)
    warnings.warn(message, stacklevel=1)
    pytest.skip(message)


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load(ALERT_RULES)["groups"] for rule in group["rules"] if "alert" in rule]


def route(amtool: str, config: Path, labels: dict[str, str]) -> str:
    """The receiver Alertmanager picks for an alert with these labels."""
    done = subprocess.run(
        [amtool, "config", "routes", "test", f"--config.file={config}", *(f"{k}={v}" for k, v in labels.items())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# ---- amtool -----------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_amtool_check_config(amtool: str, config: Path) -> None:
    checked = subprocess.run([amtool, "check-config", str(config)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout and f"{len(RECEIVERS)} receivers" in checked.stdout, checked.stdout


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_pages_route_by_team_and_severity(amtool: str, config: Path) -> None:
    assert route(amtool, config, {"team": "surveillance", "severity": "critical", "table": "T07"}) == "surveillance-critical"
    assert route(amtool, config, {"team": "surveillance", "severity": "warning"}) == "surveillance"
    assert route(amtool, config, {"team": "platform", "severity": "critical"}) == "platform-critical"
    assert route(amtool, config, {"team": "platform", "severity": "warning"}) == "platform"
    assert route(amtool, config, {"alertname": "SomethingElse"}) == "console"  # nothing is dropped


def test_every_alerting_rule_reaches_the_receiver_of_its_team_and_severity(amtool: str) -> None:
    for rule in alert_rules():
        labels = {"alertname": rule["alert"], **rule["labels"]}
        suffix = "-critical" if labels["severity"] == "critical" else ""
        assert route(amtool, CONFIGS[0], labels) == labels["team"] + suffix, rule["alert"]


# ---- the receivers ----------------------------------------------------------------------------


def test_every_receiver_posts_to_the_console_with_the_bearer_token() -> None:
    for config in CONFIGS:
        receivers = {r["name"]: r for r in load(config)["receivers"]}
        assert set(receivers) == RECEIVERS
        for name, receiver in receivers.items():
            [hook] = receiver["webhook_configs"]
            assert hook["url"].endswith(":8088/api/alertmanager") and hook["send_resolved"] is True, name
            authorization = hook["http_config"]["authorization"]
            assert authorization["type"] == "Bearer" and "credentials" not in authorization, "the token is in a file, not here"
            assert authorization["credentials_file"], name


def test_the_compose_config_is_the_local_one_with_the_console_by_name_and_the_docker_secret() -> None:
    local, compose = (load(config) for config in CONFIGS)
    assert local["route"] == compose["route"] and local["global"] == compose["global"]
    hooks = [r["webhook_configs"][0] for r in local["receivers"]], [r["webhook_configs"][0] for r in compose["receivers"]]
    assert {h["url"] for h in hooks[0]} == {"http://127.0.0.1:8088/api/alertmanager"}  # CONSOLE_PORT: ops/stack.sh rewrites it
    assert {h["url"] for h in hooks[1]} == {"http://console:8088/api/alertmanager"}
    assert {h["http_config"]["authorization"]["credentials_file"] for h in hooks[0]} == {"../../.stack/secrets/alertmanager-webhook.token"}
    assert {h["http_config"]["authorization"]["credentials_file"] for h in hooks[1]} == {"/run/secrets/alertmanager-webhook-token"}


def test_compose_runs_alertmanager_with_its_config_the_secret_and_prometheus_sends_to_it() -> None:
    compose = load(ROOT / "docker-compose.yml")
    service = compose["services"]["alertmanager"]
    assert "--config.file=/etc/alertmanager/alertmanager-compose.yml" in service["command"]
    assert "--web.listen-address=:9093" in service["command"]
    assert "./ops/alertmanager:/etc/alertmanager:ro" in service["volumes"]
    assert service["secrets"] == ["alertmanager-webhook-token"]  # the file the console reads too
    assert compose["secrets"]["alertmanager-webhook-token"] == {"file": "${SECRETS_DIR}/alertmanager-webhook-token.secret"}
    assert compose["services"]["console"]["environment"]["ALERTMANAGER_WEBHOOK_TOKEN_FILE"] == "/run/secrets/alertmanager-webhook-token"
    prometheus = load(ROOT / "ops" / "prometheus" / "prometheus-compose.yml")
    assert prometheus["alerting"]["alertmanagers"] == [{"static_configs": [{"targets": ["alertmanager:9093"]}]}]
    local = load(ROOT / "ops" / "prometheus" / "prometheus.yml")  # ops/stack.sh writes the file with ALERTMANAGER_PORT
    assert local["alerting"]["alertmanagers"] == [{"file_sd_configs": [{"files": ["../../.stack/prometheus/alertmanagers.yml"]}]}]
    stack = (ROOT / "ops" / "stack.sh").read_text(encoding="utf-8")
    assert 'echo "- targets: [127.0.0.1:$ALERTMANAGER_PORT]" >"$PDIR/alertmanagers.yml"' in stack
    # The webhook's port is the console's (compose's CONSOLE_PORT, 8088 in .env).
    env = dict(line.split("=", 1) for line in (ROOT / ".env").read_text(encoding="utf-8").splitlines() if re.match(r"[A-Z_]+=", line))
    assert env.get("CONSOLE_PORT", "8088") == "8088"


# ---- runbooks ---------------------------------------------------------------------------------


def anchors(markdown: str) -> dict[str, str]:
    """Each heading's anchor, as GitHub makes it (lower case; spaces to dashes; punctuation but
    dashes and underscores dropped), to the heading's text."""
    found = {}
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found[slug] = heading.strip()
    return found


def test_every_alerting_rule_has_a_runbook_section_of_its_own() -> None:
    sections = anchors(MONITORING.read_text(encoding="utf-8"))
    rules = alert_rules()
    assert rules
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        page, _, anchor = url.partition("#")
        assert page == "docs/monitoring.md" and (ROOT / page).is_file(), url
        assert anchor in sections, f"{rule['alert']}: no heading #{anchor} in docs/monitoring.md"
        assert sections[anchor].split()[0] == rule["alert"], f"{rule['alert']} points to the section of {sections[anchor]}"
    assert len({rule["annotations"]["runbook_url"] for rule in rules}) == len(rules)


def test_each_runbook_says_what_it_means_what_to_check_and_what_to_do() -> None:
    text = MONITORING.read_text(encoding="utf-8")
    for rule in alert_rules():
        start = text.index(f"\n### {rule['alert']}")
        section = text[start : text.find("\n#", start + 1)]
        for part in ("**What it means**", "**What to check**", "**What to do**"):
            assert part in section, f"{rule['alert']}: no {part}"


def test_the_anchor_reading_is_githubs() -> None:
    assert anchors("## Paging: Alertmanager, routes\n### SurveilCriticalAlert\n") == {
        "paging-alertmanager-routes": "Paging: Alertmanager, routes",
        "surveilcriticalalert": "SurveilCriticalAlert",
    }
