"""The access plan (surveil.runtime.access) and the client security settings
(surveil.runtime.config), without a broker: who may write and read what follows docs/contract.md's topic
table, the names in the ACLs are the names the code uses, and secrets go where they should and
nowhere else. tests/integration/test_access.py checks the same on the real broker and Redis."""

from __future__ import annotations

import dataclasses
import stat
from collections import defaultdict
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from surveil.events import topics
from surveil.runtime import access
from surveil.runtime.config import UNMETERED, Settings, kafka_client_config, redacted
from surveil.runtime.kafka import producer_config
from surveil.runtime.lag_exporter import GROUPS
from surveil.runtime.state import MemoryBackend, State

# docs/contract.md, "Topics": the producer of each topic; every service writes its own dead letters.
PRODUCERS = {
    topics.SHOE: access.SHOE_READER,
    topics.TABLE: access.TABLE_CONTROLLER,
    topics.SETTLEMENT: access.SETTLEMENT_SERVICE,
    topics.ALERTS: access.ANOMALY_DETECTION,
    topics.INPUTS: access.FLOOR_SIMULATOR,
    topics.ALERT_ACTIONS: access.CONSOLE,
}


def by_principal(grants: list[access.Grant]) -> dict[str, set[tuple[str, str, str, str]]]:
    found: dict[str, set[tuple[str, str, str, str]]] = defaultdict(set)
    for grant in grants:
        found[grant.principal].add((grant.operation, grant.resource, grant.name, grant.pattern))
    return found


def test_each_topic_is_written_by_its_producer_and_each_services_dead_letters_by_it_alone() -> None:
    writes = {
        (g.principal, g.name) for g in access.kafka_grants() if g.resource == "topic" and g.operation == "write" and g.pattern == "literal"
    }
    system = {(principal, topic) for principal, topic in writes if topic in topics.ALL_TOPICS}
    expected = {(producer, topic) for topic, producer in PRODUCERS.items()}
    expected |= {(service, topics.deadletter_topic(service)) for service in access.SERVICES if service != access.LAG_EXPORTER}
    assert {topic for _, topic in expected} == set(topics.ALL_TOPICS)
    assert system == expected
    # Nobody writes anything else but anomaly-detection, under its app id.
    assert {(p, t) for p, t in writes if t not in topics.ALL_TOPICS} == set()
    prefixed = [
        g for g in access.kafka_grants() if g.pattern == "prefixed" and g.resource == "topic" and g.operation in ("write", "create")
    ]
    assert {(g.principal, g.name) for g in prefixed} == {(access.ANOMALY_DETECTION, "anomaly-detection")}


def test_nobody_has_a_cluster_acl_or_all_operations() -> None:
    for grant in access.kafka_grants():
        assert grant.resource in ("topic", "group", "transactional_id"), grant
        assert grant.operation in ("read", "write", "create", "describe", "describe_configs"), grant
        assert grant.principal in access.KAFKA_PRINCIPALS and grant.principal != access.ADMIN, grant


def test_the_lag_exporter_and_the_floor_only_see_what_they_must() -> None:
    plan = by_principal(access.kafka_grants())
    # The console reads what it shows (no group: it reads from the start each time) and writes
    # only what was done about the alerts.
    assert plan[access.CONSOLE] == {
        *(("read", "topic", t, "literal") for t in (topics.SHOE, topics.TABLE, topics.SETTLEMENT, topics.ALERTS, topics.ALERT_ACTIONS)),
        ("write", "topic", topics.ALERT_ACTIONS, "literal"),
    }
    assert {op for op, *_ in plan[access.LAG_EXPORTER]} == {"describe"}
    assert {name for op, resource, name, _ in plan[access.LAG_EXPORTER] if resource == "group"} == set(GROUPS)
    assert plan[access.FLOOR_SIMULATOR] == {("write", "topic", topics.INPUTS, "literal")}


def test_the_auditor_reads_the_streams_an_export_reads_and_writes_nothing() -> None:
    from surveil.analysis.export import EXPORTED

    plan = by_principal(access.kafka_grants())
    assert plan[access.AUDITOR] == {("read", "topic", topic, "literal") for topic in EXPORTED}


def test_the_groups_and_transactional_ids_are_the_ones_the_code_uses() -> None:
    from surveil.settlement.processor import SettlementProcessor
    from surveil.table_controller.processor import TableController

    plan = by_principal(access.kafka_grants("it-x."))
    for processor, principal in ((SettlementProcessor, access.SETTLEMENT_SERVICE), (TableController, access.TABLE_CONTROLLER)):
        # KafkaRunner: group <prefix><name>, transactional id <prefix><name>-<instance>.
        assert ("read", "group", f"it-x.{processor.name}", "literal") in plan[principal]
        assert ("write", "transactional_id", f"it-x.{processor.name}-", "prefixed") in plan[principal]
    # faust: app id <prefix>anomaly-detection is the group, the internal topics' and changelogs' prefix.
    assert ("read", "group", "it-x.anomaly-detection", "prefixed") in plan[access.ANOMALY_DETECTION]
    assert ("create", "topic", "it-x.anomaly-detection", "prefixed") in plan[access.ANOMALY_DETECTION]


def test_a_prefix_goes_in_front_of_every_name() -> None:
    plain, prefixed = access.kafka_grants(), access.kafka_grants("it-x.")
    assert [dataclasses.replace(g, name="it-x." + g.name) for g in plain] == prefixed


def test_each_redis_user_owns_exactly_its_services_namespace() -> None:
    # runtime/state.py: every key of a service is <namespace>:...
    for user, namespace in access.REDIS_NAMESPACES.items():
        assert State(MemoryBackend(), namespace).key("x", "y").startswith(f"{namespace}:")
        rules = access.redis_rules(user, "p:")
        assert [r for r in rules if r.startswith("~")] == [f"~p:{namespace}:*"]
        assert rules.index("-@all") < rules.index("+@read") < rules.index("-@dangerous"), "categories apply in order"
        assert "-scan" in rules and "-function" in rules and "+@all" not in rules
        assert "-@scripting" in rules and not [r for r in rules if r.startswith(("+eval", "+script", "+fcall"))], "no scripts"
    from surveil.settlement.ledger import NAMESPACE
    from surveil.shoe_reader.service import Acknowledged
    from surveil.table_controller.processor import TableController

    assert access.REDIS_NAMESPACES == {
        access.SETTLEMENT_SERVICE: NAMESPACE,
        access.TABLE_CONTROLLER: TableController.name,
        access.SHOE_READER: Acknowledged(None, "").key.partition(":")[0],  # type: ignore[arg-type]
    }
    assert access.redis_rules(access.ADMIN) == ["~*", "&*", "+@all"]


def test_the_redis_acl_file_holds_hashes_not_passwords() -> None:
    text = access.redis_acl_file({access.ADMIN: "secret-a", access.SETTLEMENT_SERVICE: "secret-s", access.TABLE_CONTROLLER: ""})
    assert "secret" not in text
    lines = text.splitlines()
    assert lines[0] == "user default on resetpass ~* &* +@all"  # no one logs in as default
    assert [line.split()[1] for line in lines] == ["default", access.ADMIN, access.SETTLEMENT_SERVICE]  # no password, no user


OPERATOR = {
    "KAFKA_BOOTSTRAP": "127.0.0.1:9092",
    "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "KAFKA_USERNAME": "admin",
    "KAFKA_PASSWORD": "pw-admin",
    "REDIS_URL": "redis://admin:r-admin@127.0.0.1:6379/0",
    "PATH": "/usr/bin",
    **{access.password_variable("kafka", p): f"pw-{p}" for p in access.KAFKA_PRINCIPALS},
    **{access.password_variable("redis", u): f"r-{u}" for u in access.REDIS_USERS},
}


def test_a_service_environment_holds_its_own_credentials_and_no_other_secret() -> None:
    env = access.service_env(access.SETTLEMENT_SERVICE, OPERATOR)
    assert env["KAFKA_USERNAME"] == "settlement" and env["KAFKA_PASSWORD"] == "pw-settlement"
    assert env["REDIS_URL"] == "redis://settlement:r-settlement@127.0.0.1:6379/0"
    assert env["PATH"] == "/usr/bin" and env["KAFKA_BOOTSTRAP"] == "127.0.0.1:9092"
    assert not set(env) & access.SECRET_VARIABLES
    assert not [v for v in env.values() if "admin" in v]
    lag = access.service_env(access.LAG_EXPORTER, OPERATOR)
    assert "REDIS_URL" not in lag, "no Redis user of its own: no Redis at all"
    # A broker without authentication: the environment as it is.
    assert access.service_env(access.SETTLEMENT_SERVICE, {"KAFKA_BOOTSTRAP": "b"}) == {"KAFKA_BOOTSTRAP": "b"}


def test_redis_url_for_keeps_the_address_and_quotes_the_credentials() -> None:
    assert (
        access.redis_url_for("redis://127.0.0.1:6379/0", "it-x:settlement", "p@ss") == "redis://it-x%3Asettlement:p%40ss@127.0.0.1:6379/0"
    )
    assert access.redis_url_for("redis://admin:x@redis:6379/2", "settlement", "y") == "redis://settlement:y@redis:6379/2"


def test_settings_read_the_client_security_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KAFKA_SECURITY_PROTOCOL", "KAFKA_USERNAME", "KAFKA_PASSWORD", "KAFKA_SASL_MECHANISM", "KAFKA_SSL_CAFILE"):
        monkeypatch.delenv(name, raising=False)
    assert Settings.from_env("x").kafka_client()["security_protocol"] == "PLAINTEXT"  # no credentials: none sent
    monkeypatch.setenv("KAFKA_USERNAME", "settlement")
    monkeypatch.setenv("KAFKA_PASSWORD", "pw")
    client = Settings.from_env("x").kafka_client()
    assert client["security_protocol"] == "SASL_PLAINTEXT" and client["sasl_mechanism"] == "SCRAM-SHA-256"
    assert (client["sasl_plain_username"], client["sasl_plain_password"]) == ("settlement", "pw")
    assert "pw" not in repr(Settings.from_env("x"))
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("KAFKA_SSL_CAFILE", "/etc/surveil/tls/ca.pem")
    client = kafka_client_config("kafka:9092")
    assert (
        client["bootstrap_servers"] == "kafka:9092" and client["ssl_cafile"] == "/etc/surveil/tls/ca.pem" and client["ssl_check_hostname"]
    )
    monkeypatch.delenv("KAFKA_USERNAME")
    with pytest.raises(ValueError, match="KAFKA_USERNAME"):
        Settings.from_env("x").kafka_client()


def test_the_producers_linger_is_a_setting_with_a_default_and_nothing_below_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_LINGER_MS", raising=False)
    assert producer_config(Settings.from_env("shoe-reader"))["linger_ms"] == 5
    monkeypatch.setenv("KAFKA_LINGER_MS", "0")
    assert producer_config(Settings.from_env("shoe-reader"))["linger_ms"] == 0
    monkeypatch.setenv("KAFKA_LINGER_MS", "20")
    assert producer_config(Settings.from_env("table-controller"))["linger_ms"] == 20
    for wrong in ("-1", "5ms", "²", ""):
        monkeypatch.setenv("KAFKA_LINGER_MS", wrong)
        with pytest.raises(ValueError, match="KAFKA_LINGER_MS"):
            Settings.from_env("shoe-reader")


def test_the_long_running_clients_keep_no_kafka_python_metrics() -> None:
    # Nothing reads them, and they cost a client 10 - 20 % of its CPU (docs/performance.md).
    assert producer_config(Settings.from_env("shoe-reader"))["metrics_enabled"] is False
    assert set(UNMETERED) <= set(KafkaConsumer.DEFAULT_CONFIG) & set(KafkaProducer.DEFAULT_CONFIG)


@pytest.mark.parametrize(
    ("name", "default", "least", "most"),
    [
        ("KAFKA_GATHER_MS", 20, 0, 10_000),  # the transactional services' gathering between transactions
        ("COMMIT_INTERVAL_MS", 1000, 1, None),  # the detectors' commits
        ("FETCH_GATHER_MS", 10, 0, 10_000),  # the detectors' fetches gathering while records keep coming
    ],
)
def test_a_setting_in_milliseconds_has_a_default_and_nothing_outside_its_bounds(
    monkeypatch: pytest.MonkeyPatch, name: str, default: int, least: int, most: int | None
) -> None:
    field = name.lower()
    monkeypatch.delenv(name, raising=False)
    assert getattr(Settings.from_env("settlement"), field) == default
    for bound in (least, most or 3_600_000):
        monkeypatch.setenv(name, str(bound))
        assert getattr(Settings.from_env("anomaly-detection"), field) == bound
    for wrong in (str(least - 1), *([str(most + 1)] if most else []), "20ms", "0.5", ""):
        monkeypatch.setenv(name, wrong)
        with pytest.raises(ValueError, match=name):
            Settings.from_env("settlement")


def test_faust_gets_the_same_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    import faust

    settings = Settings.from_env("x")
    plain = dataclasses.replace(settings, kafka_security_protocol="PLAINTEXT")
    assert plain.faust_credentials() is None
    sasl = dataclasses.replace(settings, kafka_security_protocol="SASL_PLAINTEXT", kafka_username="anomaly-detection", kafka_password="pw")
    credentials = sasl.faust_credentials()
    assert isinstance(credentials, faust.SASLCredentials)
    assert (credentials.username, credentials.password, credentials.mechanism.value) == ("anomaly-detection", "pw", "SCRAM-SHA-256")
    assert credentials.ssl_context is None
    tls = dataclasses.replace(sasl, kafka_security_protocol="SASL_SSL").faust_credentials()
    assert tls.protocol.value == "SASL_SSL" and tls.ssl_context is not None


def test_a_redis_password_never_reaches_a_log_line() -> None:
    settings = dataclasses.replace(Settings.from_env("x"), redis_url="redis://settlement:s3cret@redis:6379/0")
    assert "s3cret" not in repr(settings)
    assert settings.redis_url_redacted == "redis://settlement:***@redis:6379/0"
    assert redacted("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_passwords_may_come_from_files_docker_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kafka").write_text("k-secret\n")
    (tmp_path / "redis").write_text("r s@cret\n")
    for name in ("KAFKA_PASSWORD", "KAFKA_SECURITY_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAFKA_USERNAME", "settlement")
    monkeypatch.setenv("KAFKA_PASSWORD_FILE", str(tmp_path / "kafka"))
    monkeypatch.setenv("REDIS_URL", "redis://settlement@redis:6379/0")
    monkeypatch.setenv("REDIS_PASSWORD_FILE", str(tmp_path / "redis"))
    settings = Settings.from_env("settlement")
    assert settings.kafka_client()["sasl_plain_password"] == "k-secret"
    assert settings.redis_url == "redis://settlement:r%20s%40cret@redis:6379/0"
    assert "s@cret" not in repr(settings) and "s%40cret" not in repr(settings) and "cret" not in settings.redis_url_redacted
    monkeypatch.delenv("KAFKA_SETTLEMENT_PASSWORD", raising=False)  # a variable would win over the file
    monkeypatch.setenv("KAFKA_SETTLEMENT_PASSWORD_FILE", str(tmp_path / "kafka"))
    assert access.kafka_passwords()[access.SETTLEMENT_SERVICE] == "k-secret"
    assert "KAFKA_SETTLEMENT_PASSWORD_FILE" in access.SECRET_VARIABLES  # no other service's file either


def test_access_secrets_makes_a_private_directory_of_passwords_and_the_redis_acl_file(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    assert access.main(["secrets", str(folder)]) == 0
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    passwords = {path.name: path.read_text().strip() for path in folder.glob("*.password")}
    assert set(passwords) == {f"kafka-{p}.password" for p in access.KAFKA_PRINCIPALS} | {
        f"redis-{u}.password" for u in access.REDIS_USERS
    } | {"grafana-admin.password"}
    assert len(set(passwords.values())) == len(passwords) and all(len(p) == 48 for p in passwords.values())
    acl = (folder / "redis-users.acl").read_text()
    assert not [p for p in passwords.values() if p in acl], "the ACL file holds hashes, not passwords"
    assert access.main(["secrets", str(folder)]) == 0  # again: the passwords stay
    assert {path.name: path.read_text().strip() for path in folder.glob("*.password")} == passwords
