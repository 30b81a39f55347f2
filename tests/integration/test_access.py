"""Access control on the real broker and Redis (docs/security.md): who gets in, and what each
principal may do. The rest of the integration suite shows that each service can do what it needs
as its own principal (its deployments run every service so); this module shows what they cannot.

Each test works on its own prefixes, with the ACLs and Redis users ``prefix_access`` makes for
them (``surveil.runtime.access.kafka_grants``, ``redis_rules``); a few check the stack's own,
unprefixed ones. Skipped where the broker or Redis does not authenticate (a testcontainer).
"""

from __future__ import annotations

import dataclasses
import os
import ssl
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import (
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from kafka.structs import OffsetAndMetadata

from surveil.events import topics
from surveil.runtime import access
from surveil.runtime.access import PrefixAccess
from surveil.runtime.config import Settings, kafka_client_config
from surveil.runtime.topic_admin import delete_topics

KAFKA_SECURED = bool(access.kafka_passwords()[access.ADMIN])
REDIS_SECURED = bool(access.redis_passwords()[access.ADMIN])
needs_kafka_auth = pytest.mark.skipif(not KAFKA_SECURED, reason="the broker asks for no authentication (no KAFKA_ADMIN_PASSWORD)")
needs_redis_auth = pytest.mark.skipif(not REDIS_SECURED, reason="Redis has no ACL users (no REDIS_ADMIN_PASSWORD)")

# Fail fast: a refused client must not wait out kafka-python's 30 s bootstrap or 60 s max_block.
FAST = {"bootstrap_timeout_ms": 8000, "request_timeout_ms": 8000, "reconnect_backoff_max_ms": 500}

# docs/contract.md's topic table: who writes what (and every service its own dead letters).
WRITES = {
    access.SHOE_READER: {topics.SHOE, topics.deadletter_topic(access.SHOE_READER)},
    access.TABLE_CONTROLLER: {topics.TABLE, topics.deadletter_topic(access.TABLE_CONTROLLER)},
    access.SETTLEMENT_SERVICE: {topics.SETTLEMENT, topics.deadletter_topic(access.SETTLEMENT_SERVICE)},
    access.ANOMALY_DETECTION: {topics.ALERTS, topics.deadletter_topic(access.ANOMALY_DETECTION)},
    access.LAG_EXPORTER: set(),
    access.FLOOR_SIMULATOR: {topics.INPUTS},
    access.AUDITOR: set(),
    access.CONSOLE: {topics.ALERT_ACTIONS},
}
# ... and who reads what.
READS = {
    access.SHOE_READER: {topics.SHOE},
    access.TABLE_CONTROLLER: {topics.SHOE, topics.INPUTS},
    access.SETTLEMENT_SERVICE: {topics.TABLE},
    access.ANOMALY_DETECTION: {topics.SHOE, topics.TABLE, topics.SETTLEMENT, *access.REFUSALS},
    access.LAG_EXPORTER: set(),
    access.FLOOR_SIMULATOR: set(),
    access.AUDITOR: {topics.SHOE, topics.TABLE, topics.SETTLEMENT},  # what an export reads
    access.CONSOLE: {topics.SHOE, topics.TABLE, topics.SETTLEMENT, topics.ALERTS, topics.ALERT_ACTIONS},
}


def produce_one(client: dict[str, Any], topic: str) -> Exception | None:
    """Send one record (no idempotence, no retry); the error, or None once it is acknowledged."""
    producer = KafkaProducer(**client, **FAST, acks=1, retries=0, enable_idempotence=False, max_block_ms=8000)
    try:
        producer.send(topic, key=b"T01", value=b"{}").get(timeout=15)
        return None
    except KafkaError as error:
        return error
    finally:
        producer.close(timeout=5)


def read_from_start(client: dict[str, Any], topic: str, seconds: float = 5) -> Exception | int:
    """Read a topic from the start without a group: the number of records read within
    ``seconds`` (kafka-python fetches nothing, silently, from a topic it may not read), or the
    error (a principal without any ACL on the topic may not even ask for its offsets)."""
    consumer = KafkaConsumer(**client, **FAST, group_id=None, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in range(int(os.environ.get("PARTITIONS", "6")))]
        consumer.end_offsets(partitions)
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        records = 0
        deadline = time.monotonic() + seconds
        while not records and time.monotonic() < deadline:
            records += sum(len(batch) for batch in consumer.poll(timeout_ms=500).values())
        return records
    except KafkaError as error:
        return error
    finally:
        consumer.close()


# --- who gets in -----------------------------------------------------------------------------


@needs_kafka_auth
def test_a_client_without_credentials_cannot_even_connect_to_read_the_alerts(kafka_bootstrap: str) -> None:
    started = time.monotonic()
    with pytest.raises(KafkaError):
        consumer = KafkaConsumer(topics.ALERTS, bootstrap_servers=kafka_bootstrap, security_protocol="PLAINTEXT", group_id=None, **FAST)
        try:
            consumer.poll(timeout_ms=3000)
        finally:
            consumer.close()
    assert time.monotonic() - started < 30


@needs_kafka_auth
def test_a_wrong_password_is_refused(kafka_bootstrap: str) -> None:
    client = {**kafka_client_config(kafka_bootstrap), "sasl_plain_username": access.SETTLEMENT_SERVICE, "sasl_plain_password": "not-it"}
    with pytest.raises(KafkaError):
        KafkaConsumer(**client, **FAST, group_id=None).close()


@needs_kafka_auth
def test_every_acl_of_the_plan_is_in_force_on_the_stack(kafka_bootstrap: str) -> None:
    """ops/stack.sh (and compose's kafka-init) ran ``access setup`` for the unprefixed names."""
    in_force = access.granted(kafka_client_config(kafka_bootstrap))
    missing = set(access.kafka_grants("")) - in_force
    assert not missing, sorted(map(str, missing))
    principals = {grant.principal for grant in in_force if not grant.name.startswith("it-")}
    assert principals <= set(access.KAFKA_PRINCIPALS), f"ACLs of principals nobody knows: {principals - set(access.KAFKA_PRINCIPALS)}"


@needs_kafka_auth
def test_an_authenticated_principal_without_an_acl_cannot_read_the_alerts(kafka_bootstrap: str) -> None:
    """The stack's own baccarat.alerts: the lag exporter logs in, and is refused the records."""
    settings = dataclasses.replace(Settings.from_env("test"), kafka_bootstrap=kafka_bootstrap)
    for principal in (access.LAG_EXPORTER, access.SETTLEMENT_SERVICE, access.FLOOR_SIMULATOR):
        client = access.as_principal(settings, principal).kafka_client()
        assert isinstance(read_from_start(client, topics.ALERTS), TopicAuthorizationFailedError), principal


# --- what each principal may do, on the test's own topics ------------------------------------


@needs_kafka_auth
def test_the_table_controller_cannot_write_the_shoe_topic(unique_topics: dict[str, str], prefix_access: PrefixAccess) -> None:
    client = prefix_access.kafka_client(access.TABLE_CONTROLLER)
    assert isinstance(produce_one(client, unique_topics[topics.SHOE]), TopicAuthorizationFailedError)
    assert produce_one(client, unique_topics[topics.TABLE]) is None  # its own topic: yes


@needs_kafka_auth
@pytest.mark.parametrize("principal", sorted(WRITES))
def test_each_principal_writes_only_its_own_topics(principal: str, unique_topics: dict[str, str], prefix_access: PrefixAccess) -> None:
    client = prefix_access.kafka_client(principal)
    outcome = {topic: produce_one(client, name) for topic, name in unique_topics.items()}
    written = {topic for topic, error in outcome.items() if error is None}
    assert written == WRITES[principal], outcome
    assert all(isinstance(error, TopicAuthorizationFailedError) for error in outcome.values() if error is not None), outcome


@needs_kafka_auth
@pytest.mark.parametrize("principal", sorted(READS))
def test_each_principal_reads_only_what_it_consumes(
    principal: str, kafka_bootstrap: str, unique_topics: dict[str, str], prefix_access: PrefixAccess
) -> None:
    seed = KafkaProducer(**kafka_client_config(kafka_bootstrap), acks="all")  # one record in each, as admin
    for name in unique_topics.values():
        seed.send(name, key=b"T01", value=b"{}")
    seed.flush(timeout=30)
    seed.close()
    client = prefix_access.kafka_client(principal)
    outcome = {
        topic: read_from_start(client, name, seconds=3 if topic not in READS[principal] else 20) for topic, name in unique_topics.items()
    }
    readable = {topic for topic, result in outcome.items() if isinstance(result, int) and result > 0}
    assert readable == READS[principal], outcome
    refused = [result for topic, result in outcome.items() if topic not in READS[principal]]
    assert all(result == 0 or isinstance(result, TopicAuthorizationFailedError) for result in refused), outcome


@needs_kafka_auth
def test_settlement_publishes_and_commits_its_offsets_in_one_transaction(
    kafka_bootstrap: str,
    unique_topics: dict[str, str],
    topic_prefix: str,
    prefix_access: PrefixAccess,
) -> None:
    client = prefix_access.kafka_client(access.SETTLEMENT_SERVICE)
    group = topic_prefix + "settlement"
    table = TopicPartition(unique_topics[topics.TABLE], 0)
    admin_producer = KafkaProducer(**kafka_client_config(kafka_bootstrap), acks="all")
    admin_producer.send(table.topic, partition=0, key=b"T01", value=b"{}").get(timeout=30)
    admin_producer.close()

    consumer = KafkaConsumer(
        **client,
        group_id=group,
        group_instance_id=f"{group}-it",
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    )
    producer = KafkaProducer(**client, acks="all", enable_idempotence=True, transactional_id=f"{topic_prefix}settlement-it")
    try:
        consumer.subscribe([table.topic])
        deadline = time.monotonic() + 60
        records: list[Any] = []
        while not records and time.monotonic() < deadline:
            records = [r for batch in consumer.poll(timeout_ms=500).values() for r in batch]
        assert records, "settlement could not read its input"
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(unique_topics[topics.SETTLEMENT], key=b"T01", value=b'{"settled": true}')
        producer.send_offsets_to_transaction({table: OffsetAndMetadata(records[-1].offset + 1, "", -1)}, consumer.group_metadata())
        producer.commit_transaction()
    finally:
        producer.close()
        consumer.close()

    admin = kafka_client_config(kafka_bootstrap)
    consumer = KafkaConsumer(
        **admin, group_id=None, isolation_level="read_committed", auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    consumer.subscribe([unique_topics[topics.SETTLEMENT]])
    assert [record.value for record in consumer] == [b'{"settled": true}']
    consumer.close()
    probe = KafkaConsumer(**admin, group_id=group, enable_auto_commit=False)
    try:
        assert probe.committed(table) == records[-1].offset + 1
    finally:
        probe.close()


@needs_kafka_auth
def test_a_service_cannot_take_another_services_transactional_id(
    unique_topics: dict[str, str], topic_prefix: str, prefix_access: PrefixAccess
) -> None:
    client = prefix_access.kafka_client(access.SETTLEMENT_SERVICE)
    producer = KafkaProducer(**client, **FAST, acks="all", enable_idempotence=True, transactional_id=f"{topic_prefix}table-controller-it")
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            producer.init_transactions()
    finally:
        producer.close(timeout=5)


@needs_kafka_auth
def test_anomaly_detection_creates_topics_under_its_app_id_only(
    kafka_bootstrap: str, topic_prefix: str, prefix_access: PrefixAccess
) -> None:
    client = prefix_access.kafka_client(access.ANOMALY_DETECTION)
    own, other = f"{topic_prefix}anomaly-detection-it-scratch", f"{topic_prefix}baccarat.scratch"
    admin = KafkaAdminClient(**client, **FAST)
    try:
        admin.create_topics({own: {"num_partitions": 1, "replication_factor": 1}})
        with pytest.raises(TopicAuthorizationFailedError):
            admin.create_topics({other: {"num_partitions": 1, "replication_factor": 1}})
    finally:
        admin.close()
        delete_topics(kafka_bootstrap, [own, other])


@needs_kafka_auth
def test_the_tls_listener_authenticates_over_tls_with_the_stacks_ca(kafka_bootstrap: str) -> None:
    tls = os.environ.get("KAFKA_TLS_BOOTSTRAP")
    if not tls or not os.environ.get("KAFKA_SSL_CAFILE"):
        pytest.skip("no TLS listener (KAFKA_TLS_BOOTSTRAP, KAFKA_SSL_CAFILE: ops/stack.sh sets them)")
    client = {
        **kafka_client_config(tls),
        "security_protocol": "SASL_SSL",
        "ssl_check_hostname": True,
        "ssl_cafile": os.environ["KAFKA_SSL_CAFILE"],
    }
    consumer = KafkaConsumer(**client, **FAST, group_id=None)
    try:
        assert topics.ALERTS in consumer.topics()
    finally:
        consumer.close()
    # Without the stack's CA the broker's certificate is not trusted.
    with pytest.raises((KafkaError, ssl.SSLError)):
        KafkaConsumer(**{**client, "ssl_cafile": None}, **FAST, group_id=None).close()


# --- Redis -----------------------------------------------------------------------------------


@needs_redis_auth
def test_a_service_redis_user_reads_and_writes_its_own_keys_only(
    redis_prefix: str, redis_client: redis.Redis, prefix_access: PrefixAccess
) -> None:
    redis_client.set(f"{redis_prefix}table-controller:table:T01", b"game state")
    settlement = redis.Redis.from_url(prefix_access.redis_url(access.SETTLEMENT_SERVICE))
    controller = redis.Redis.from_url(prefix_access.redis_url(access.TABLE_CONTROLLER))
    try:
        settlement.set(f"{redis_prefix}settlement:round:T01:R1", b"ledger")
        assert settlement.get(f"{redis_prefix}settlement:round:T01:R1") == b"ledger"
        assert controller.get(f"{redis_prefix}table-controller:table:T01") == b"game state"
        for client, foreign in (
            (settlement, f"{redis_prefix}table-controller:table:T01"),
            (controller, f"{redis_prefix}settlement:round:T01:R1"),
            (settlement, "settlement:round:T01:R1"),
        ):  # another deployment's (the stack's) namespace
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.get(foreign)
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.set(foreign, b"overwritten")
        for command in (("FLUSHALL",), ("KEYS", "*"), ("SCAN", "0"), ("CONFIG", "GET", "*"), ("ACL", "LIST"), ("FUNCTION", "FLUSH")):
            with pytest.raises(redis.exceptions.NoPermissionError):
                settlement.execute_command(*command)
        # What the state backend does in a commit: WATCH, MULTI/EXEC, MSET, DEL, HINCRBY, HSET.
        with settlement.pipeline(transaction=True) as pipe:
            pipe.watch(f"{redis_prefix}settlement:progress")
            pipe.multi()
            pipe.mset({f"{redis_prefix}settlement:a": 1, f"{redis_prefix}settlement:b": 2})
            pipe.delete(f"{redis_prefix}settlement:b")
            pipe.hincrby(f"{redis_prefix}settlement:c", "n", 3)
            pipe.hset(f"{redis_prefix}settlement:progress", mapping={"t:0": 1})
            pipe.execute()
        assert settlement.hget(f"{redis_prefix}settlement:c", "n") == b"3"
    finally:
        settlement.close()
        controller.close()
    assert redis_client.get(f"{redis_prefix}table-controller:table:T01") == b"game state"


@needs_redis_auth
@pytest.mark.parametrize("service", sorted(access.REDIS_NAMESPACES))
def test_a_service_redis_user_cannot_run_scripts_or_functions(service: str, redis_prefix: str, prefix_access: PrefixAccess) -> None:
    """A script or function runs alone in Redis: one that loops blocks every client. A service's
    user may run none, on its own keys or any."""
    key = f"{redis_prefix}{access.REDIS_NAMESPACES[service]}:k"
    client = redis.Redis.from_url(prefix_access.redis_url(service))
    try:
        assert client.set(key, b"1")  # its own keys: yes
        for command in (
            ("EVAL", "return 1", "1", key),
            ("EVAL_RO", "return 1", "1", key),
            ("EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "1", key),
            ("SCRIPT", "LOAD", "return 1"),
            ("SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"),
            ("FCALL", "f", "1", key),
            ("FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('f', function() return 1 end)"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.execute_command(*command)
    finally:
        client.close()


@needs_redis_auth
def test_the_stacks_service_users_and_the_default_user(redis_url: str) -> None:
    """The unprefixed users of ops/stack.sh: settlement cannot read the table-controller's keys;
    without credentials nothing is allowed, not even PING."""
    settlement = redis.Redis.from_url(
        access.redis_url_for(redis_url, access.SETTLEMENT_SERVICE, access.redis_passwords()[access.SETTLEMENT_SERVICE])
    )
    anonymous = redis.Redis.from_url(access.redis_url_for(redis_url, "default", "x").replace("default:x@", ""))
    try:
        assert settlement.get(f"settlement:it-probe-{uuid.uuid4().hex}") is None
        with pytest.raises(redis.exceptions.NoPermissionError):
            settlement.get("table-controller:table:T01")
        with pytest.raises(redis.exceptions.AuthenticationError):
            anonymous.ping()
        with pytest.raises(redis.exceptions.AuthenticationError):
            anonymous.get("settlement:anything")
    finally:
        settlement.close()
        anonymous.close()


# --- the environment a service gets ----------------------------------------------------------


@needs_kafka_auth
def test_a_service_process_gets_its_own_credentials_and_no_other_secret(service_env: Callable[..., dict[str, str]]) -> None:
    env = service_env(access.SETTLEMENT_SERVICE)
    assert env["KAFKA_USERNAME"] == access.SETTLEMENT_SERVICE
    assert env["KAFKA_PASSWORD"] == access.kafka_passwords()[access.SETTLEMENT_SERVICE]
    assert not set(env) & access.SECRET_VARIABLES
    assert os.environ["KAFKA_PASSWORD"] not in env.values()  # the admin's
    if REDIS_SECURED:
        assert "://" in env["REDIS_URL"] and "admin" not in env["REDIS_URL"].split("@")[0]
    assert "REDIS_URL" not in service_env(access.LAG_EXPORTER)
