"""Access control: the principals, what each may do on Kafka (ACLs) and in Redis (ACL users).

docs/security.md explains it for operators. In short:

- Kafka authenticates every client with SASL/SCRAM-SHA-256 (over TLS where configured) and
  authorizes it with KRaft's StandardAuthorizer: nothing is allowed that an ACL below does not
  allow. ``admin`` is the broker's super user (the inter-broker and controller connections,
  ops/stack.sh, kafka-init, the tests); every other principal has the ACLs of ``kafka_grants``:
  it writes its own topic (and its own dead-letter topic), reads what it consumes, uses its own
  consumer group and transactional ids, and nothing else.
- Redis has one ACL user per service that keeps state (``redis_rules``): its keys only
  (``<REDIS_PREFIX><namespace>:*``), data commands only. ``admin`` may do everything; no one can
  log in as ``default`` (it has no password, and no ``nopass``), so a client without credentials
  can do nothing, PING included (``DEFAULT_USER_RULES``).

Passwords come from environment variables, one per principal: ``KAFKA_<NAME>_PASSWORD`` and
``REDIS_<NAME>_PASSWORD`` (``kafka_passwords``, ``redis_passwords``). A service itself reads only
its own, as ``KAFKA_USERNAME`` / ``KAFKA_PASSWORD`` and inside ``REDIS_URL``
(``surveil.runtime.config``).

    python -m surveil.runtime.access setup [--prefix P]    SCRAM credentials and ACLs (as admin)
    python -m surveil.runtime.access acls [--prefix P]     the ACLs, one a line, as kafka-acls shows them
    python -m surveil.runtime.access redis-acl [--prefix P]  Redis' ACL file (hashed passwords)
    python -m surveil.runtime.access secrets DIR           compose's secrets directory (passwords, Redis' ACL file)

Every name takes the deployment's prefix (``TOPIC_PREFIX`` for Kafka, ``REDIS_PREFIX`` for
Redis), so deployments sharing a broker and a Redis (the integration tests run one per test) are
kept apart by the same rules.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from ..events.topics import ALERT_ACTIONS, ALERTS, INPUTS, SETTLEMENT, SHOE, TABLE, deadletter_topic
from .config import secret

ADMIN = "admin"
SHOE_READER = "shoe-reader"
TABLE_CONTROLLER = "table-controller"
SETTLEMENT_SERVICE = "settlement"
ANOMALY_DETECTION = "anomaly-detection"  # also the faust app id: its group and internal topics' prefix
LAG_EXPORTER = "lag-exporter"
FLOOR_SIMULATOR = "floor-simulator"  # the simulator's live mode, or the floor's device gateway: baccarat.inputs
AUDITOR = "auditor"  # reads the recorded evidence: `surveil export`, the console's auditor
CONSOLE = "console"  # the surveillance room's web console: reads the floor and the alerts, writes baccarat.alert-actions

SERVICES = (SHOE_READER, TABLE_CONTROLLER, SETTLEMENT_SERVICE, ANOMALY_DETECTION, LAG_EXPORTER)
KAFKA_PRINCIPALS = (ADMIN, *SERVICES, FLOOR_SIMULATOR, AUDITOR, CONSOLE)
# Redis users: the services that keep state there, and the key namespace each owns
# (runtime/state.py: every key is <REDIS_PREFIX><namespace>:...).
# The shoe-reader keeps the sequence numbers it acknowledged per table (a replayed line is refused).
REDIS_NAMESPACES = {SHOE_READER: "shoe-reader", TABLE_CONTROLLER: "table-controller", SETTLEMENT_SERVICE: "settlement"}
REDIS_USERS = (ADMIN, *REDIS_NAMESPACES)
# The dead letters the detectors read: those of the services that check device signatures.
REFUSALS = (deadletter_topic(SHOE_READER), deadletter_topic(TABLE_CONTROLLER))

SCRAM_MECHANISM = "SCRAM-SHA-256"


def kafka_passwords(env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Each Kafka principal's password from the environment, or from the file its ``_FILE``
    variable names (a Docker secret); '' where neither is set. Spelled out, so that a search for
    the variable finds where it is read."""
    return {
        ADMIN: secret(env.get("KAFKA_ADMIN_PASSWORD"), env.get("KAFKA_ADMIN_PASSWORD_FILE")),
        SHOE_READER: secret(env.get("KAFKA_SHOE_READER_PASSWORD"), env.get("KAFKA_SHOE_READER_PASSWORD_FILE")),
        TABLE_CONTROLLER: secret(env.get("KAFKA_TABLE_CONTROLLER_PASSWORD"), env.get("KAFKA_TABLE_CONTROLLER_PASSWORD_FILE")),
        SETTLEMENT_SERVICE: secret(env.get("KAFKA_SETTLEMENT_PASSWORD"), env.get("KAFKA_SETTLEMENT_PASSWORD_FILE")),
        ANOMALY_DETECTION: secret(env.get("KAFKA_ANOMALY_DETECTION_PASSWORD"), env.get("KAFKA_ANOMALY_DETECTION_PASSWORD_FILE")),
        LAG_EXPORTER: secret(env.get("KAFKA_LAG_EXPORTER_PASSWORD"), env.get("KAFKA_LAG_EXPORTER_PASSWORD_FILE")),
        FLOOR_SIMULATOR: secret(env.get("KAFKA_FLOOR_SIMULATOR_PASSWORD"), env.get("KAFKA_FLOOR_SIMULATOR_PASSWORD_FILE")),
        AUDITOR: secret(env.get("KAFKA_AUDITOR_PASSWORD"), env.get("KAFKA_AUDITOR_PASSWORD_FILE")),
        CONSOLE: secret(env.get("KAFKA_CONSOLE_PASSWORD"), env.get("KAFKA_CONSOLE_PASSWORD_FILE")),
    }


def redis_passwords(env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Each Redis user's password from the environment ('' where unset)."""
    return {
        ADMIN: env.get("REDIS_ADMIN_PASSWORD", ""),
        SHOE_READER: env.get("REDIS_SHOE_READER_PASSWORD", ""),
        TABLE_CONTROLLER: env.get("REDIS_TABLE_CONTROLLER_PASSWORD", ""),
        SETTLEMENT_SERVICE: env.get("REDIS_SETTLEMENT_PASSWORD", ""),
    }


def secrets_file(system: str, principal: str) -> str:
    """The file of a password in a secrets directory: ``kafka-settlement.password``."""
    return f"{system}-{principal}.password"


def make_secrets(folder: Path) -> list[str]:
    """The secrets directory of a compose deployment (docs/security.md, "Compose"): a password per
    Kafka principal and Redis user, Grafana's admin's and the console's two secrets
    (``CONSOLE_SECRETS``), each made when missing (48 hex digits),
    and ``redis-users.acl``, Redis' users with those passwords hashed, written afresh. The
    directory is ``0700``, which keeps the host's users out; the files ``0644``, so that the
    container each is mounted into reads it whatever its user. Returns the files it made."""
    import secrets as random

    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    wanted = [secrets_file("kafka", p) for p in KAFKA_PRINCIPALS] + [secrets_file("redis", u) for u in REDIS_USERS]
    made = []
    for name in [*wanted, "grafana-admin.password", *map(console_secret_file, CONSOLE_SECRETS)]:
        path = folder / name
        if not path.exists():
            path.write_text(random.token_hex(24) + "\n", encoding="utf-8")
            made.append(name)
        path.chmod(0o644)
    passwords = {user: (folder / secrets_file("redis", user)).read_text(encoding="utf-8").strip() for user in REDIS_USERS}
    acl = folder / "redis-users.acl"
    acl.write_text(redis_acl_file(passwords), encoding="utf-8")
    acl.chmod(0o644)
    return made


def console_secret_file(variable: str) -> str:
    """The file of one of the console's secrets: ``console-secret-key.secret``."""
    return variable.lower().replace("_", "-") + ".secret"


def password_variable(system: str, principal: str) -> str:
    """``password_variable("kafka", "shoe-reader") == "KAFKA_SHOE_READER_PASSWORD"``."""
    return f"{system.upper()}_{principal.upper().replace('-', '_')}_PASSWORD"


# --- Kafka -----------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Grant:
    """One ALLOW ACL: ``principal`` may do ``operation`` on the resource (``kafka-acls`` terms)."""

    principal: str  # the SCRAM user name; the ACL's principal is User:<principal>
    resource: str  # "topic", "group" or "transactional_id"
    name: str
    pattern: str  # "literal" or "prefixed"
    operation: str  # "read", "write", "create", "describe", "describe_configs"

    def __str__(self) -> str:
        return f"User:{self.principal} may {self.operation.upper()} {self.resource} {self.name}{'*' if self.pattern == 'prefixed' else ''}"


def kafka_grants(prefix: str = "") -> list[Grant]:
    """Every ACL of the deployment whose topics, groups and transactional ids start with
    ``prefix`` (``TOPIC_PREFIX``). READ and WRITE imply DESCRIBE on the broker; WRITE on a topic
    also lets an idempotent producer in (KIP-679), so nobody needs a cluster-wide ACL."""
    grants: list[Grant] = []

    def allow(principal: str, resource: str, name: str, *operations: str, prefixed: bool = False) -> None:
        grants.extend(Grant(principal, resource, prefix + name, "prefixed" if prefixed else "literal", op) for op in operations)

    def runner(service: str, reads: Iterable[str], writes: Iterable[str]) -> None:
        """A KafkaRunner service: group <prefix><service>, transactional id <prefix><service>-<instance>."""
        for topic in reads:
            allow(service, "topic", topic, "read")
        for topic in (*writes, deadletter_topic(service)):
            allow(service, "topic", topic, "write")
        allow(service, "group", service, "read")
        allow(service, "transactional_id", f"{service}-", "write", prefixed=True)

    # The shoe-reader publishes (idempotently, no group); after a restart it reads the tail of
    # its own topic to learn the last line it published per table.
    allow(SHOE_READER, "topic", SHOE, "write", "read")
    allow(SHOE_READER, "topic", deadletter_topic(SHOE_READER), "write")
    runner(TABLE_CONTROLLER, reads=(SHOE, INPUTS), writes=(TABLE,))
    runner(SETTLEMENT_SERVICE, reads=(TABLE,), writes=(SETTLEMENT,))
    # faust: group = app id; its internal topics and changelogs (which it creates) and any
    # transactional id all start with the app id.
    # It reads the dead letters of the services that check device signatures too: a device
    # message refused for its signature is an alert.
    for topic in (SHOE, TABLE, SETTLEMENT, *REFUSALS):
        allow(ANOMALY_DETECTION, "topic", topic, "read")
    for topic in (ALERTS, deadletter_topic(ANOMALY_DETECTION)):
        allow(ANOMALY_DETECTION, "topic", topic, "write")
    allow(ANOMALY_DETECTION, "topic", ANOMALY_DETECTION, "read", "write", "create", "describe_configs", prefixed=True)
    allow(ANOMALY_DETECTION, "group", ANOMALY_DETECTION, "read", prefixed=True)
    allow(ANOMALY_DETECTION, "transactional_id", ANOMALY_DETECTION, "write", prefixed=True)
    # The lag exporter reads the groups' committed offsets and the topics' end offsets: DESCRIBE
    # only, no record.
    for group in (TABLE_CONTROLLER, SETTLEMENT_SERVICE, ANOMALY_DETECTION):
        allow(LAG_EXPORTER, "group", group, "describe")
    for topic in (SHOE, INPUTS, TABLE, SETTLEMENT, *REFUSALS):  # anomaly-detection reads two services' dead letters
        allow(LAG_EXPORTER, "topic", topic, "describe")
    allow(LAG_EXPORTER, "topic", ANOMALY_DETECTION, "describe", prefixed=True)
    # The floor's devices (dealer console, bet sensors: their gateway, or the simulator).
    allow(FLOOR_SIMULATOR, "topic", INPUTS, "write")
    # The auditor exports the streams the detectors watch (analysis/export.py): READ, no group
    # (its consumer is assigned its partitions and commits nothing), never a write.
    for topic in (SHOE, TABLE, SETTLEMENT):
        allow(AUDITOR, "topic", topic, "read")
    # The console rebuilds the floor, the alerts and their handling from the topics on every
    # start (partitions assigned, no consumer group), and alone writes what was done about an
    # alert. It writes no dead letters: what it cannot read, the service that consumes that
    # topic already refused; it skips and counts it.
    for topic in (SHOE, TABLE, SETTLEMENT, ALERTS, ALERT_ACTIONS):
        allow(CONSOLE, "topic", topic, "read")
    allow(CONSOLE, "topic", ALERT_ACTIONS, "write")
    return grants


def _acl(grant: Grant) -> Any:
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourceType

    return ACL(
        principal=f"User:{grant.principal}",
        host="*",
        operation=ACLOperation[grant.operation.upper()],
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(ResourceType[grant.resource.upper()], grant.name, ACLResourcePatternType[grant.pattern.upper()]),
    )


def _grant(acl: Any) -> Grant:
    return Grant(
        acl.principal.removeprefix("User:"),
        acl.resource_pattern.resource_type.name.lower(),
        acl.resource_pattern.resource_name,
        acl.resource_pattern.pattern_type.name.lower(),
        acl.operation.name.lower(),
    )


def _admin(client: Mapping[str, Any]) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(**client, client_id="surveil-access")


def granted(client: Mapping[str, Any]) -> set[Grant]:
    """Every ALLOW ACL on the broker (as far as ``Grant`` can say it)."""
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter, ResourceType

    admin = _admin(client)
    try:
        every = ACLFilter(
            None, None, ACLOperation.ANY, ACLPermissionType.ALLOW, ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)
        )
        acls, error = admin.describe_acls(every)
        if error.errno:  # NoError's errno is 0
            raise error(f"describe_acls: {error}")
        return {_grant(acl) for acl in acls if acl.operation.name.lower() in {"read", "write", "create", "describe", "describe_configs"}}
    finally:
        admin.close()


def apply_grants(client: Mapping[str, Any], grants: Iterable[Grant], timeout_s: float = 30.0) -> None:
    """Create the ACLs (those that exist already are left as they are) and wait until the broker
    enforces them: a service started right after must not be refused."""
    wanted = set(grants)
    admin = _admin(client)
    try:
        result = admin.create_acls([_acl(grant) for grant in sorted(wanted)])
        if result["failed"]:
            raise RuntimeError(f"{len(result['failed'])} ACLs not created, e.g. {result['failed'][0]}")
    finally:
        admin.close()
    deadline = time.monotonic() + timeout_s
    while not wanted <= granted(client):
        if time.monotonic() > deadline:
            raise TimeoutError(f"ACLs not in force after {timeout_s} s: {sorted(map(str, wanted - granted(client)))[:5]}")
        time.sleep(0.1)


def revoke_grants(client: Mapping[str, Any], grants: Iterable[Grant]) -> None:
    """Delete exactly these ACLs."""
    acls = [_acl(grant) for grant in sorted(set(grants))]
    if not acls:
        return
    admin = _admin(client)
    try:
        admin.delete_acls(acls)
    finally:
        admin.close()


def upsert_scram_users(client: Mapping[str, Any], passwords: Mapping[str, str]) -> list[str]:
    """Create or update the SCRAM credential of each principal with a password. Returns their names."""
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    upserts = [
        UserScramCredentialUpsertion(name, ScramMechanism.SCRAM_SHA_256, password, iterations=8192)
        for name, password in passwords.items()
        if password
    ]
    if not upserts:
        return []
    admin = _admin(client)
    try:
        errors = {user: error for user, error in admin.alter_user_scram_credentials(upserts).items() if error}
    finally:
        admin.close()
    if errors:
        raise RuntimeError(f"SCRAM credentials not stored: {errors}")
    return [upsert.user for upsert in upserts]


# --- Redis -----------------------------------------------------------------------------------

# A service's commands: reading and writing keys, MULTI/EXEC/WATCH, the connection's own (AUTH,
# HELLO, PING, SELECT, CLIENT SETINFO). Not: anything @dangerous (FLUSHALL, KEYS, CONFIG, ...),
# @scripting (EVAL, FCALL, FUNCTION, SCRIPT: a script runs alone, and one that loops blocks Redis
# for every client), SCAN and RANDOMKEY (they would list other services' key names).
SERVICE_COMMANDS = (
    "-@all",
    "+@read",
    "+@write",
    "+@transaction",
    "+@connection",
    "-@dangerous",
    "-@scripting",
    "-function",
    "-scan",
    "-randomkey",
)


def redis_rules(user: str, prefix: str = "") -> list[str]:
    """The ACL rules of a Redis user, without its password: ``ACL SETUSER <name> reset on
    <password rule> <these>``. A service's keys are ``<prefix><namespace>:*``."""
    if user == ADMIN:
        return ["~*", "&*", "+@all"]
    namespace = REDIS_NAMESPACES[user]
    return [f"~{prefix}{namespace}:*", "resetchannels", *SERVICE_COMMANDS]


# No one logs in as ``default`` (no password, no ``nopass``: a client without credentials gets
# NOAUTH for everything). It keeps every right because Redis replays its append-only file as the
# default user and, up to redis/redis#14545, re-checks each MULTI/EXEC there against that user's
# ACL: a default user limited to PING made Redis drop every transaction of the ledger and the
# runners' progress when it restarted (silently, "NOPERM" in its log only).
DEFAULT_USER_RULES = ["resetpass", "~*", "&*", "+@all"]


def redis_acl_file(passwords: Mapping[str, str], prefix: str = "") -> str:
    """Redis' ACL file (``--aclfile``) for these users, passwords as SHA-256 (``#<hex>``): the
    file never holds one in clear. Users without a password are left out."""
    lines = [f"user default on {' '.join(DEFAULT_USER_RULES)}"]
    for user, password in passwords.items():
        if password:
            digest = hashlib.sha256(password.encode()).hexdigest()
            lines.append(f"user {user} on #{digest} {' '.join(redis_rules(user, prefix))}")
    return "\n".join(lines) + "\n"


def redis_url_for(url: str, user: str, password: str) -> str:
    """``url`` (``redis://host:port/db``, with or without credentials) as ``user``."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"))


def set_redis_user(client: Any, user: str, password: str, rules: Iterable[str]) -> None:
    """Create or replace a Redis user, with ``client`` logged in as admin."""
    client.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rules)


# --- the environment of a service process ----------------------------------------------------

# The console's own secrets (surveil.console.config): its session-cookie key and the token
# Alertmanager's webhook presents.
CONSOLE_SECRETS = ("CONSOLE_SECRET_KEY", "ALERTMANAGER_WEBHOOK_TOKEN")
SECRET_VARIABLES = frozenset(
    name
    for variable in [password_variable("kafka", p) for p in KAFKA_PRINCIPALS]
    + [password_variable("redis", u) for u in REDIS_USERS]
    + [*CONSOLE_SECRETS]
    for name in (variable, variable + "_FILE")
)


def service_env(service: str, base: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment a process of ``service`` runs with, made from an operator's (``base``,
    which holds every principal's password, ops/stack.sh's .stack/secrets/stack.env): its own
    Kafka credentials as KAFKA_USERNAME / KAFKA_PASSWORD, its Redis user in REDIS_URL, and no
    other principal's secret. Without passwords in ``base`` (a broker without authentication),
    ``base`` as it is."""
    env = {name: value for name, value in base.items() if name not in SECRET_VARIABLES}
    if service == CONSOLE:
        env |= {name: base[name] for name in CONSOLE_SECRETS if name in base}
    password = kafka_passwords(base).get(service)
    if not password:
        return dict(base)
    env |= {
        "KAFKA_USERNAME": service,
        "KAFKA_PASSWORD": password,
        "KAFKA_SECURITY_PROTOCOL": base.get("KAFKA_SECURITY_PROTOCOL") or "SASL_PLAINTEXT",
    }
    redis_password = redis_passwords(base).get(service)
    if redis_password and base.get("REDIS_URL"):
        env["REDIS_URL"] = redis_url_for(base["REDIS_URL"], service, redis_password)
    elif "REDIS_URL" in env:
        del env["REDIS_URL"]  # the admin's: a service without a Redis user of its own gets none
    return env


def as_principal(settings: Any, principal: str, env: Mapping[str, str] = os.environ) -> Any:
    """``settings`` (a ``config.Settings``) logged in as ``principal`` with its password from
    ``env``; unchanged when ``env`` has none (a broker without authentication)."""
    password = kafka_passwords(env).get(principal)
    if not password:
        return settings
    protocol = settings.kafka_security_protocol if settings.kafka_security_protocol.startswith("SASL_") else "SASL_PLAINTEXT"
    return dataclasses.replace(settings, kafka_username=principal, kafka_password=password, kafka_security_protocol=protocol)


class PrefixAccess:
    """The principals' rights in one prefixed deployment on a shared broker and Redis (an
    integration test's, a benchmark's): the ACLs of ``kafka_grants(topic_prefix)``, and Redis
    users of its own, ``<redis_prefix><service>``, whose keys are under ``redis_prefix``. Made on
    the first ``env`` call, taken away by ``close``. The operator's environment (``env``, the
    admin's credentials and every password) says whether the broker and Redis authenticate at
    all; when they do not, ``env`` changes nothing."""

    def __init__(self, bootstrap: str, redis_url: str, topic_prefix: str, redis_prefix: str, env: Mapping[str, str] = os.environ) -> None:
        from .config import kafka_client_config

        self.redis_url_admin = redis_url
        self.topic_prefix, self.redis_prefix = topic_prefix, redis_prefix
        self.base = dict(env)
        self.client = kafka_client_config(bootstrap)
        self.kafka = any(kafka_passwords(env).values())
        self.redis = bool(redis_passwords(env)[ADMIN])
        self.grants: list[Grant] = []
        self.redis_users: dict[str, str] = {}  # service -> password

    def env(self, service: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a ``service`` process in this deployment: ``base`` (default: the
        operator's) with the service's own credentials in place of the operator's."""
        env = service_env(service, self.base if base is None else base)
        self._grant()
        if self.redis and service in REDIS_NAMESPACES:
            env["REDIS_URL"] = self.redis_url(service)
        return env

    def redis_user(self, service: str) -> str:
        return f"{self.redis_prefix}{service}"

    def _redis_password(self, service: str) -> str:
        if service not in self.redis_users:
            import secrets

            import redis

            password = secrets.token_hex(16)
            client = redis.Redis.from_url(self.redis_url_admin)
            try:
                set_redis_user(client, self.redis_user(service), password, redis_rules(service, self.redis_prefix))
            finally:
                client.close()
            self.redis_users[service] = password
        return self.redis_users[service]

    def settings(self, settings: Any, principal: str) -> Any:
        """``settings`` as ``principal`` (the ACLs of this prefix granted first)."""
        self._grant()
        return as_principal(settings, principal, self.base)

    def kafka_client(self, principal: str) -> dict[str, Any]:
        """kafka-python's keyword arguments as ``principal`` (the ACLs of this prefix granted first)."""
        from .config import Settings

        settings = Settings.from_env(principal)
        settings = as_principal(dataclasses.replace(settings, kafka_bootstrap=self.client["bootstrap_servers"]), principal, self.base)
        self._grant()
        return settings.kafka_client()  # type: ignore[no-any-return]

    def redis_url(self, service: str) -> str:
        """``REDIS_URL`` of ``service``'s Redis user in this deployment."""
        return redis_url_for(self.redis_url_admin, self.redis_user(service), self._redis_password(service))

    def _grant(self) -> None:
        if self.kafka and not self.grants:
            self.grants = kafka_grants(self.topic_prefix)
            apply_grants(self.client, self.grants)

    def close(self) -> None:
        if self.grants:
            revoke_grants(self.client, self.grants)
            self.grants = []
        if self.redis_users:
            import redis

            client = redis.Redis.from_url(self.redis_url_admin)
            try:
                client.execute_command("ACL", "DELUSER", *map(self.redis_user, self.redis_users))  # type: ignore[no-untyped-call]
            finally:
                client.close()
            self.redis_users = {}


# --- the command line ------------------------------------------------------------------------


def _setup(prefix: str) -> int:
    """Every principal's SCRAM credential, then the ACLs; the admin's own credential last, and
    only when it changes (KAFKA_ADMIN_PASSWORD other than the KAFKA_PASSWORD this logs in with:
    a rotation), since from then on the old password no longer logs in."""
    from .config import Settings

    settings = Settings.from_env(ADMIN)
    client = settings.kafka_client()
    passwords = kafka_passwords()
    others = {name: password for name, password in passwords.items() if name != ADMIN}
    users = upsert_scram_users(client, others)
    print(f"SCRAM credentials ({SCRAM_MECHANISM}) stored for {', '.join(users) or 'nobody (no KAFKA_<NAME>_PASSWORD set)'}")
    missing = [p for p, password in passwords.items() if not password]
    if missing:
        print(f"WARNING: no password for {', '.join(missing)}: those principals cannot log in", file=sys.stderr)
    grants = kafka_grants(prefix)
    apply_grants(client, grants)
    print(f"{len(grants)} ACLs in force for the principals of prefix {prefix!r}")
    if passwords[ADMIN] and settings.kafka_username == ADMIN and passwords[ADMIN] != settings.kafka_password:
        upsert_scram_users(client, {ADMIN: passwords[ADMIN]})
        print("the admin's SCRAM credential changed: log in with KAFKA_ADMIN_PASSWORD from now on (the broker too)")
    return 0


def _lines(grants: Iterable[Grant]) -> Iterator[str]:
    for grant in sorted(grants):
        yield str(grant)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m surveil.runtime.access", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    setup = sub.add_parser("setup", help="store every principal's SCRAM credential and create the ACLs (as admin)")
    setup.add_argument("--prefix", default=os.environ.get("TOPIC_PREFIX", ""), help="TOPIC_PREFIX of the deployment")
    acls = sub.add_parser("acls", help="print the ACLs, one a line")
    acls.add_argument("--prefix", default=os.environ.get("TOPIC_PREFIX", ""))
    redis_acl = sub.add_parser("redis-acl", help="print Redis' ACL file, passwords from REDIS_<NAME>_PASSWORD")
    redis_acl.add_argument("--prefix", default=os.environ.get("REDIS_PREFIX", ""), help="REDIS_PREFIX of the deployment")
    secrets = sub.add_parser("secrets", help="make the passwords missing in DIR and its redis-users.acl (compose's secrets)")
    secrets.add_argument("folder", type=Path, metavar="DIR")
    args = parser.parse_args(argv)
    if args.command == "secrets":
        made = make_secrets(args.folder)
        print(f"{args.folder}: {len(made)} passwords made ({', '.join(made) or 'none missing'}); redis-users.acl written")
        return 0
    if args.command == "setup":
        return _setup(args.prefix)
    if args.command == "acls":
        print("\n".join(_lines(kafka_grants(args.prefix))))
        return 0
    sys.stdout.write(redis_acl_file(redis_passwords(), args.prefix))
    return 0


if __name__ == "__main__":
    sys.exit(main())
