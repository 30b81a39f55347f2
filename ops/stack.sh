#!/usr/bin/env bash
# The local stack on 127.0.0.1: Kafka (KRaft, one node), Redis, Prometheus, Alertmanager. State,
# logs and pid files live under .stack/ (git-ignored); the programs come from ops/install.sh.
#
#   ops/stack.sh up                          start what is not running, wait until each answers
#   ops/stack.sh down [--wipe]               stop all four; --wipe also deletes their data
#   ops/stack.sh status                      one line each; exit 0 only when all four run
#   ops/stack.sh kill-kafka [--graceful]     SIGKILL the broker (SIGTERM with --graceful)
#   ops/stack.sh restart-kafka [--graceful]  kill-kafka, start it again, wait until it serves
#   ops/stack.sh restart-redis [--graceful]  SIGKILL Redis (SIGTERM with --graceful), start it again
#   ops/stack.sh env [PRINCIPAL]             print the exports of an admin shell (every password),
#                                            or of one service: eval "$(ops/stack.sh env settlement)"
#   ops/stack.sh rotate PRINCIPAL            a new password for PRINCIPAL (Kafka, and Redis if it has
#                                            a user there), in force at once; restart its service
#
# Env: KAFKA_PORT (9092), KAFKA_CONTROLLER_PORT (9093), KAFKA_TLS_PORT (KAFKA_PORT + 2; 0: none),
# REDIS_PORT (6379), PROMETHEUS_PORT (9090), ALERTMANAGER_PORT (9095), CONSOLE_PORT (8088: where
# Alertmanager posts its pages), PARTITIONS (6: the one partition count of every topic in
# surveil.runtime.topic_admin), EVIDENCE_RETENTION_DAYS (180) and DEADLETTER_RETENTION_DAYS (30):
# the topics' retention, set when they are created and altered when they differ.
#
# Secured, always (docs/security.md): Kafka takes SASL/SCRAM-SHA-256 only (127.0.0.1:KAFKA_PORT
# in plaintext, 127.0.0.1:KAFKA_TLS_PORT over TLS with a CA of its own) and authorizes with ACLs
# (StandardAuthorizer, super user admin); Redis has one ACL user per service, and no one logs in
# as its default user. The passwords are generated once into .stack/secrets/ (git-ignored, 0700),
# with the TLS CA and certificate, and Alertmanager's token for the console's webhook
# (alertmanager-webhook.token); .stack/secrets/stack.env is the environment of an admin shell
# (ops/test.sh sources it; `ops/stack.sh env NAME` gives a service only its own credentials),
# ALERTMANAGER_WEBHOOK_TOKEN included.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-9093}
# Next to KAFKA_PORT, so that a private stack on other ports (KAFKA_PORT=39092 ...) does not take
# the default stack's TLS port.
KAFKA_TLS_PORT=${KAFKA_TLS_PORT:-$((KAFKA_PORT + 2))}
REDIS_PORT=${REDIS_PORT:-6379}
PROMETHEUS_PORT=${PROMETHEUS_PORT:-9090}
# 9095: Alertmanager's own default (9093) and 9094 are Kafka's controller and TLS ports here.
ALERTMANAGER_PORT=${ALERTMANAGER_PORT:-9095}
CONSOLE_PORT=${CONSOLE_PORT:-8088}
PARTITIONS=${PARTITIONS:-6}
KAFKA_READY_TIMEOUT=${KAFKA_READY_TIMEOUT:-120} # seconds; a cold JVM on 2 cores needs ~10
STOP_TIMEOUT=${STOP_TIMEOUT:-30}                # seconds between SIGTERM and SIGKILL

KDIR=$ROOT/.stack/kafka
RDIR=$ROOT/.stack/redis
PDIR=$ROOT/.stack/prometheus
ADIR=$ROOT/.stack/alertmanager
SDIR=$ROOT/.stack/secrets
PY=$ROOT/.venv/bin/python
JAVA_OPTS=(-Xmx1g -Xms256m -XX:+UseG1GC -Djava.awt.headless=true
  -Dlog4j2.configurationFile="$ROOT/ops/kafka/log4j2.yaml" -Dkafka.logs.dir="$KDIR")

say() { printf '[stack] %s\n' "$*"; }
die() { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# A process counts as alive unless it is gone or a zombie (an orphan nobody reaped yet).
alive() { [[ -r /proc/$1/stat ]] && [[ $(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1) != Z ]]; }

# Prints the pid in pid file $1 if that process is alive and its command line contains $2 (a
# recycled pid is not ours); otherwise removes the stale file and fails.
live_pid() {
  local file=$1 pattern=$2 pid
  [[ -f $file ]] || return 1
  pid=$(<"$file")
  if [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$pattern"; then
    echo "$pid"
    return 0
  fi
  rm -f "$file"
  return 1
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Refuse to start on a port something else holds: we would report that other thing as ready.
port_free_or_die() {
  if port_open "$1"; then die "$2: port $1 is taken by a process this stack did not start (ss -ltnp 'sport = :$1')"; fi
}

# Start "$@" detached in its own session (a Ctrl-C or a test runner's process group kill must
# not reach it), output appended to $2, its pid written to $1.
spawn() {
  local pidfile=$1 log=$2
  shift 2
  rm -f "$pidfile"
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" </dev/null >>"$log" 2>&1 &
  for _ in {1..50}; do [[ -s $pidfile ]] && return 0; sleep 0.1; done
  die "could not start $1 (see $log)"
}

# Stops pid $2 (name $1) with signal $3, then SIGKILL if it outlives STOP_TIMEOUT; then waits
# until its ports ($4...) are closed: a killed JVM turns zombie before its threads let go of them.
stop_pid() {
  local name=$1 pid=$2 sig=$3 t0 port
  shift 3
  t0=$(now)
  say "$name: stopping pid $pid (SIG$sig)"
  kill -s "$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then
    say "$name: still running after ${STOP_TIMEOUT} s, SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.1; done
  fi
  for port; do
    for ((i = 0; i < 100; i++)); do port_open "$port" || break; sleep 0.1; done
  done
  say "$name: stopped in $(since "$t0") s"
}

ensure_installed() {
  [[ -x $PY ]] || bash ops/install.sh venv
  [[ -f $KDIR/libs/.pom.sha256 ]] || bash ops/install.sh kafka
  command -v redis-server >/dev/null && command -v prometheus >/dev/null && command -v openssl >/dev/null &&
    command -v prometheus-alertmanager >/dev/null ||
    die "redis-server, prometheus, prometheus-alertmanager or openssl missing: run ops/install.sh"
}

# --- secrets ---------------------------------------------------------------------------------

# Principals with a SCRAM credential on the broker, and Redis users (surveil.runtime.access).
KAFKA_PRINCIPALS=(admin shoe-reader table-controller settlement anomaly-detection lag-exporter floor-simulator auditor console)
REDIS_USERS=(admin shoe-reader table-controller settlement)

# KAFKA_SHOE_READER_PASSWORD, REDIS_ADMIN_PASSWORD, ...: the variables surveil.runtime.access reads.
password_variable() { local name=${2^^}; echo "${1^^}_${name//-/_}_PASSWORD"; }

# Generates what is missing (a password is made once and kept: the broker's SCRAM credentials and
# the data formatted with them depend on it), then writes stack.env and exports it.
secrets() {
  (umask 077 && mkdir -p "$SDIR")
  chmod 700 "$SDIR"
  local name file
  for name in "${KAFKA_PRINCIPALS[@]}"; do
    file=$SDIR/kafka-$name.password
    [[ -s $file ]] || (umask 077 && openssl rand -hex 24 >"$file")
  done
  for name in "${REDIS_USERS[@]}"; do
    file=$SDIR/redis-$name.password
    [[ -s $file ]] || (umask 077 && openssl rand -hex 24 >"$file")
  done
  # The console's session-cookie key.
  file=$SDIR/console-session.key
  [[ -s $file ]] || (umask 077 && openssl rand -hex 32 >"$file")
  # The bearer token of Alertmanager's webhook to the console (no newline: it is sent as it is).
  file=$SDIR/alertmanager-webhook.token
  [[ -s $file ]] || (umask 077 && openssl rand -hex 32 | tr -d '\n' >"$file")
  ((KAFKA_TLS_PORT == 0)) || tls_certificates
  local admin_kafka admin_redis
  admin_kafka=$(<"$SDIR/kafka-admin.password")
  admin_redis=$(<"$SDIR/redis-admin.password")
  {
    echo "# Written by ops/stack.sh on every start: an admin's environment for the local stack."
    echo "# Every password of .stack/secrets/ is in it; a service gets only its own (ops/stack.sh env NAME)."
    echo "KAFKA_BOOTSTRAP=127.0.0.1:$KAFKA_PORT"
    echo "KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT"
    echo "KAFKA_SASL_MECHANISM=SCRAM-SHA-256"
    echo "KAFKA_USERNAME=admin"
    echo "KAFKA_PASSWORD=$admin_kafka"
    if ((KAFKA_TLS_PORT != 0)); then
      echo "KAFKA_TLS_BOOTSTRAP=127.0.0.1:$KAFKA_TLS_PORT"
      echo "KAFKA_SSL_CAFILE=$SDIR/tls/ca.pem"
    fi
    echo "REDIS_URL=redis://admin:$admin_redis@127.0.0.1:$REDIS_PORT/0"
    for name in "${KAFKA_PRINCIPALS[@]}"; do echo "$(password_variable kafka "$name")=$(<"$SDIR/kafka-$name.password")"; done
    for name in "${REDIS_USERS[@]}"; do echo "$(password_variable redis "$name")=$(<"$SDIR/redis-$name.password")"; done
    echo "CONSOLE_SECRET_KEY=$(<"$SDIR/console-session.key")"
    echo "ALERTMANAGER_WEBHOOK_TOKEN=$(<"$SDIR/alertmanager-webhook.token")"
    echo "ALERTMANAGER_URL=http://127.0.0.1:$ALERTMANAGER_PORT"
  } >"$SDIR/stack.env.partial"
  chmod 600 "$SDIR/stack.env.partial"
  mv "$SDIR/stack.env.partial" "$SDIR/stack.env"
  set -a
  # shellcheck disable=SC1091
  . "$SDIR/stack.env"
  set +a
}

# A CA of the stack's own and the broker's certificate (localhost, 127.0.0.1) for the TLS
# listener, made when missing or within 30 days of expiring (ops/tls/certs.sh). Clients trust the
# CA through KAFKA_SSL_CAFILE.
tls_certificates() {
  bash "$ROOT/ops/tls/certs.sh" "$SDIR/tls" localhost 127.0.0.1 | sed 's/^\[tls\]/[stack] tls:/' ||
    die "could not make the TLS certificates (or KAFKA_TLS_PORT=0 for no TLS listener)"
}

# `env`: an admin shell's exports (no argument), or one principal's: its Kafka user and, if it
# has one, its Redis user; no other password.
print_env() {
  [[ -f $SDIR/stack.env ]] || die "no $SDIR/stack.env yet: ops/stack.sh up first"
  if [[ -z ${1:-} ]]; then
    grep -v '^#' "$SDIR/stack.env" | sed 's/^/export /'
    return
  fi
  local name=$1
  [[ " ${KAFKA_PRINCIPALS[*]} " == *" $name "* ]] || die "no principal $name (${KAFKA_PRINCIPALS[*]})"
  grep -E '^KAFKA_(BOOTSTRAP|SECURITY_PROTOCOL|SASL_MECHANISM|SSL_CAFILE)=' "$SDIR/stack.env" | sed 's/^/export /'
  echo "export KAFKA_USERNAME=$name"
  echo "export KAFKA_PASSWORD=$(<"$SDIR/kafka-$name.password")"
  if [[ $name == console ]]; then
    grep -E '^(CONSOLE_SECRET_KEY|ALERTMANAGER_WEBHOOK_TOKEN)=' "$SDIR/stack.env" | sed 's/^/export /'
  fi
  if [[ -s $SDIR/redis-$name.password ]]; then
    echo "export REDIS_URL=redis://$name:$(<"$SDIR/redis-$name.password")@127.0.0.1:$REDIS_PORT/0"
  else
    echo "unset REDIS_URL"
  fi
}

# `rotate NAME`: new passwords for a principal, stored on the running broker and Redis (logged in
# with the old ones), then in .stack/secrets. The admin's: the broker restarts (its own logins
# use it). Processes logged in with the old password keep their connections; restart them.
rotate() {
  local name=${1:?ops/stack.sh rotate PRINCIPAL} kafka_file redis_file variable new
  [[ " ${KAFKA_PRINCIPALS[*]} " == *" $name "* ]] || die "no principal $name (${KAFKA_PRINCIPALS[*]})"
  status >/dev/null || die "rotate needs the stack running (ops/stack.sh up)"
  secrets
  kafka_file=$SDIR/kafka-$name.password
  variable=$(password_variable kafka "$name")
  new=$(openssl rand -hex 24)
  say "kafka: a new SCRAM credential for $name"
  env "$variable=$new" "$PY" -m surveil.runtime.access setup --prefix "" | sed 's/^/[stack] kafka: /' ||
    die "kafka: could not store the new credential; $kafka_file still holds the old password"
  (umask 077 && echo "$new" >"$kafka_file")
  redis_file=$SDIR/redis-$name.password
  if [[ -s $redis_file ]]; then
    local old_admin=$REDIS_ADMIN_PASSWORD
    (umask 077 && openssl rand -hex 24 >"$redis_file")
    secrets
    (umask 077 && "$PY" -m surveil.runtime.access redis-acl --prefix "" >"$RDIR/users.acl")
    REDIS_AUTH=$old_admin redis_apply_users ||
      die "redis: ACL SETUSER failed; the new password is in $redis_file, the old one is still in force"
    say "redis: a new password for $name"
  fi
  secrets
  if [[ $name == admin ]]; then
    say "kafka: restarting the broker: its own logins use the admin's password"
    kafka_stop TERM
    kafka_start
  fi
  say "rotated $name: restart what runs as $name (its new credentials: ops/stack.sh env $name)"
}

# --- Kafka -----------------------------------------------------------------------------------

kafka_properties() {
  local admin listeners advertised tls=""
  admin=$(<"$SDIR/kafka-admin.password")
  listeners=CLIENT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
  advertised=CLIENT://127.0.0.1:$KAFKA_PORT
  if ((KAFKA_TLS_PORT != 0)); then
    listeners+=,TLS://127.0.0.1:$KAFKA_TLS_PORT
    advertised+=,TLS://127.0.0.1:$KAFKA_TLS_PORT
    tls="listener.name.tls.ssl.keystore.type=PEM
listener.name.tls.ssl.keystore.location=$SDIR/tls/broker-keystore.pem
listener.name.tls.sasl.enabled.mechanisms=SCRAM-SHA-256
listener.name.tls.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
  fi
  mkdir -p "$KDIR/data"
  (umask 077 && : >"$KDIR/server.properties") # it holds the admin's password
  cat >"$KDIR/server.properties" <<EOF
# Written by ops/stack.sh on every start; edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
controller.listener.names=CONTROLLER
# CLIENT: SASL/SCRAM in plaintext (loopback only); TLS: the same over TLS; CONTROLLER: KRaft,
# where the broker logs in to its own controller as admin (SASL/PLAIN, a static user: the
# controller needs it before it has read the SCRAM credentials from the metadata log).
listeners=$listeners
advertised.listeners=$advertised
listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,TLS:SASL_SSL,CONTROLLER:SASL_PLAINTEXT
inter.broker.listener.name=CLIENT
sasl.enabled.mechanisms=SCRAM-SHA-256
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256
listener.name.client.sasl.enabled.mechanisms=SCRAM-SHA-256
listener.name.client.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin";
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$admin" user_admin="$admin";
$tls
# Nothing is allowed that an ACL does not allow (surveil.runtime.access); admin may do anything.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
allow.everyone.if.no.acl.found=false
log.dirs=$KDIR/data
# The largest record batch: surveil.events.topics.MAX_RECORD_BYTES, which dead letters fit under.
message.max.bytes=1048576
# One node: every internal topic has a single replica. Auto-created topics get the shared
# partition count, so a topic a client creates by accident still co-partitions.
num.partitions=$PARTITIONS
default.replication.factor=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# After a kill -9 the controller keeps the dead incarnation's registration until its session
# expires (9 s by default) before the restarted broker may register again: keep that short.
broker.session.timeout.ms=3000
broker.heartbeat.interval.ms=500
# Tests start consumer groups all the time: do not make each first join wait 3 s.
group.initial.rebalance.delay.ms=0
EOF
}

# The broker's data is formatted with the admin's SCRAM credential (KRaft keeps credentials in
# its metadata log; the admin then stores everyone else's). The stamp says it was.
SCRAM_STAMP=.surveil-scram-admin

kafka_start() {
  local pid t0
  if pid=$(live_pid "$KDIR/kafka.pid" kafka.Kafka) && ! grep -q '^authorizer.class.name=' "$KDIR/server.properties" 2>/dev/null; then
    say "kafka: running without authentication (started by an ops/stack.sh before the stack was secured): restarting it"
    kafka_stop TERM
  fi
  if pid=$(live_pid "$KDIR/kafka.pid" kafka.Kafka); then
    say "kafka: already running (pid $pid)"
  else
    port_free_or_die "$KAFKA_PORT" kafka
    port_free_or_die "$KAFKA_CONTROLLER_PORT" "kafka controller"
    ((KAFKA_TLS_PORT == 0)) || port_free_or_die "$KAFKA_TLS_PORT" "kafka (TLS)"
    if [[ -f $KDIR/data/meta.properties && ! -f $KDIR/data/$SCRAM_STAMP ]]; then
      say "kafka: $KDIR/data was formatted without SCRAM credentials (before the stack was secured): formatting it afresh; its topics are gone"
      rm -rf "$KDIR/data"
    fi
    kafka_properties
    if [[ ! -f $KDIR/data/meta.properties ]]; then
      local cluster
      cluster=$(java "${JAVA_OPTS[@]}" -cp "$KDIR/libs/*" kafka.tools.StorageTool random-uuid)
      say "kafka: formatting $KDIR/data (cluster $cluster) with the admin's SCRAM credential"
      java "${JAVA_OPTS[@]}" -cp "$KDIR/libs/*" kafka.tools.StorageTool format \
        -t "$cluster" -c "$KDIR/server.properties" \
        --add-scram "SCRAM-SHA-256=[name=admin,password=$(<"$SDIR/kafka-admin.password")]" >>"$KDIR/kafka.log" 2>&1 ||
        die "kafka: storage format failed, see $KDIR/kafka.log"
      date -u +%FT%TZ >"$KDIR/data/$SCRAM_STAMP"
    fi
    say "kafka: starting on 127.0.0.1:$KAFKA_PORT (SASL), :$KAFKA_TLS_PORT (SASL over TLS; 0: none), controller :$KAFKA_CONTROLLER_PORT, log $KDIR/kafka.log"
    t0=$(now)
    spawn "$KDIR/kafka.pid" "$KDIR/kafka.log" java "${JAVA_OPTS[@]}" -cp "$KDIR/libs/*" kafka.Kafka "$KDIR/server.properties"
    pid=$(<"$KDIR/kafka.pid")
  fi
  if ! "$PY" ops/kafka_ready.py --bootstrap "127.0.0.1:$KAFKA_PORT" --timeout "$KAFKA_READY_TIMEOUT" --pid "$pid" |
    sed 's/^/[stack] kafka: /'; then
    tail -n 20 "$KDIR/kafka.log" | sed 's/^/    /' >&2
    die "kafka did not become ready; the log is $KDIR/kafka.log (last lines above)"
  fi
  [[ -z ${t0:-} ]] || say "kafka: broker started in $(since "$t0") s (JVM start to first produce/consume round trip)"
}

kafka_topics() {
  say "kafka: creating the topics with $PARTITIONS partitions"
  "$PY" -m surveil.runtime.topic_admin create --bootstrap "127.0.0.1:$KAFKA_PORT" --partitions "$PARTITIONS" |
    sed 's/^/[stack] kafka: /' ||
    die "kafka: topics are not as wanted (another PARTITIONS earlier? ops/stack.sh down --wipe starts afresh)"
}

# Every principal's SCRAM credential (from .stack/secrets) and the ACLs, as admin; idempotent.
kafka_access() {
  "$PY" -m surveil.runtime.access setup --prefix "" | sed 's/^/[stack] kafka: /' ||
    die "kafka: could not store the credentials or the ACLs"
}

kafka_stop() {
  local pid
  if pid=$(live_pid "$KDIR/kafka.pid" kafka.Kafka); then
    stop_pid kafka "$pid" "$1" "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" $( ((KAFKA_TLS_PORT == 0)) || echo "$KAFKA_TLS_PORT")
    rm -f "$KDIR/kafka.pid"
  else
    say "kafka: not running"
  fi
}

# --- Redis -----------------------------------------------------------------------------------

redis_admin() { REDISCLI_AUTH=${REDIS_AUTH:-$REDIS_ADMIN_PASSWORD} redis-cli -h 127.0.0.1 -p "$REDIS_PORT" --user admin "$@"; }

# Puts the users of users.acl in force in the running Redis, one ACL SETUSER each: not ACL LOAD,
# which would also drop the users a test session made for its own prefix (access.PrefixAccess).
# REDIS_AUTH: the admin's password Redis knows now, when it is not the one in the file (rotate).
redis_apply_users() {
  local line tokens
  # The admin last: once its password changed, the old one logs in no more.
  while read -r line; do
    read -ra tokens <<<"$line" # no pathname expansion of ~* or &*
    [[ ${tokens[0]:-} == user ]] || continue
    [[ $(redis_admin acl setuser "${tokens[1]}" reset "${tokens[@]:2}" 2>&1) == OK ]] || return 1
  done < <(grep -v '^user admin ' "$RDIR/users.acl"; grep '^user admin ' "$RDIR/users.acl")
}

redis_start() {
  local pid
  mkdir -p "$RDIR"
  # The users (surveil.runtime.access): passwords from .stack/secrets, stored hashed.
  (umask 077 && "$PY" -m surveil.runtime.access redis-acl --prefix "" >"$RDIR/users.acl.partial") ||
    die "redis: could not write the ACL file"
  mv "$RDIR/users.acl.partial" "$RDIR/users.acl"
  if pid=$(live_pid "$RDIR/redis.pid" redis-server) &&
    [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" config get aclfile 2>/dev/null | tail -n 1) != *users.acl ]] &&
    [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" acl whoami 2>/dev/null) == default ]]; then
    say "redis: running with an all-powerful default user (started before the stack was secured): restarting it"
    redis_stop
  fi
  if pid=$(live_pid "$RDIR/redis.pid" redis-server); then
    say "redis: already running (pid $pid); setting its users"
    redis_apply_users || die "redis: ACL SETUSER as admin failed (redis-admin.password changed? ops/stack.sh down, then up)"
  else
    port_free_or_die "$REDIS_PORT" redis
    say "redis: starting on 127.0.0.1:$REDIS_PORT (append-only file in $RDIR, users in $RDIR/users.acl), log $RDIR/redis.log"
    # No config file: Debian's /etc/redis/redis.conf belongs to the system service.
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$RDIR" \
      --appendonly yes --appendfsync everysec --aclfile "$RDIR/users.acl" \
      --daemonize yes --pidfile "$RDIR/redis.pid" --logfile "$RDIR/redis.log" ||
      die "redis-server would not start, see $RDIR/redis.log"
  fi
  for _ in {1..100}; do
    # Without credentials: NOAUTH (PONG from a Redis started before the stack was secured).
    [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) =~ ^(PONG|NOAUTH) ]] && { say "redis: PING answered"; return; }
    sleep 0.1
  done
  die "redis did not answer PING within 10 s, see $RDIR/redis.log"
}

redis_stop() { # [SIGNAL]
  local pid
  if pid=$(live_pid "$RDIR/redis.pid" redis-server); then
    # Redis flushes the append-only file on SIGTERM; after a SIGKILL it has what it wrote to the
    # file before answering each client (the page cache keeps it; a power loss would not).
    stop_pid redis "$pid" "${1:-TERM}" "$REDIS_PORT"
    rm -f "$RDIR/redis.pid"
  else
    say "redis: not running"
  fi
}

# --- Prometheus ------------------------------------------------------------------------------

prometheus_start() {
  local pid
  mkdir -p "$PDIR"
  # Where the rules' alerts go (ops/prometheus/prometheus.yml reads this file, and rereads it
  # when it changes).
  echo "- targets: [127.0.0.1:$ALERTMANAGER_PORT]" >"$PDIR/alertmanagers.yml"
  if pid=$(live_pid "$PDIR/prometheus.pid" prometheus); then
    say "prometheus: already running (pid $pid); reloading its configuration and rules"
    curl -fsS -o /dev/null -X POST "http://127.0.0.1:$PROMETHEUS_PORT/-/reload" || die "prometheus: reload failed, see $PDIR/prometheus.log"
  else
    port_free_or_die "$PROMETHEUS_PORT" prometheus
    say "prometheus: starting on 127.0.0.1:$PROMETHEUS_PORT (ops/prometheus/prometheus.yml), log $PDIR/prometheus.log"
    spawn "$PDIR/prometheus.pid" "$PDIR/prometheus.log" prometheus \
      --config.file="$ROOT/ops/prometheus/prometheus.yml" \
      --storage.tsdb.path="$PDIR/data" \
      --web.listen-address="127.0.0.1:$PROMETHEUS_PORT" \
      --web.enable-lifecycle # lets a rules edit be applied with POST /-/reload
  fi
  for _ in {1..300}; do
    curl -fsS -o /dev/null "http://127.0.0.1:$PROMETHEUS_PORT/-/ready" 2>/dev/null && { say "prometheus: /-/ready answered"; return; }
    sleep 0.1
  done
  die "prometheus not ready within 30 s, see $PDIR/prometheus.log"
}

prometheus_stop() {
  local pid
  if pid=$(live_pid "$PDIR/prometheus.pid" prometheus); then
    stop_pid prometheus "$pid" TERM "$PROMETHEUS_PORT"
    rm -f "$PDIR/prometheus.pid"
  else
    say "prometheus: not running"
  fi
}

# --- Alertmanager ----------------------------------------------------------------------------

# Its configuration is ops/alertmanager/alertmanager.yml with the console on CONSOLE_PORT and the
# token's absolute path; written on every start, reloaded when it changed.
alertmanager_config() {
  mkdir -p "$ADIR"
  sed -e "s#http://127.0.0.1:8088/#http://127.0.0.1:$CONSOLE_PORT/#" \
    -e "s#credentials_file: .*alertmanager-webhook.token#credentials_file: $SDIR/alertmanager-webhook.token#" \
    "$ROOT/ops/alertmanager/alertmanager.yml" >"$ADIR/alertmanager.yml.partial"
  amtool check-config "$ADIR/alertmanager.yml.partial" >/dev/null || die "alertmanager: $ADIR/alertmanager.yml.partial is not valid (amtool check-config)"
  mv "$ADIR/alertmanager.yml.partial" "$ADIR/alertmanager.yml"
}

alertmanager_start() {
  local pid
  alertmanager_config
  if pid=$(live_pid "$ADIR/alertmanager.pid" prometheus-alertmanager); then
    say "alertmanager: already running (pid $pid); reloading its configuration"
    curl -fsS -o /dev/null -X POST "http://127.0.0.1:$ALERTMANAGER_PORT/-/reload" || die "alertmanager: reload failed, see $ADIR/alertmanager.log"
  else
    port_free_or_die "$ALERTMANAGER_PORT" alertmanager
    say "alertmanager: starting on 127.0.0.1:$ALERTMANAGER_PORT (pages to the console on :$CONSOLE_PORT), log $ADIR/alertmanager.log"
    # --cluster.listen-address= : one instance, no gossip port.
    spawn "$ADIR/alertmanager.pid" "$ADIR/alertmanager.log" prometheus-alertmanager \
      --config.file="$ADIR/alertmanager.yml" \
      --storage.path="$ADIR/data" \
      --web.listen-address="127.0.0.1:$ALERTMANAGER_PORT" \
      --cluster.listen-address=
  fi
  for _ in {1..300}; do
    curl -fsS -o /dev/null "http://127.0.0.1:$ALERTMANAGER_PORT/-/ready" 2>/dev/null && { say "alertmanager: /-/ready answered"; return; }
    sleep 0.1
  done
  die "alertmanager not ready within 30 s, see $ADIR/alertmanager.log"
}

alertmanager_stop() {
  local pid
  if pid=$(live_pid "$ADIR/alertmanager.pid" prometheus-alertmanager); then
    stop_pid alertmanager "$pid" TERM "$ALERTMANAGER_PORT"
    rm -f "$ADIR/alertmanager.pid"
  else
    say "alertmanager: not running"
  fi
}

# --- commands --------------------------------------------------------------------------------

status() {
  local ok=0 pid
  check() { # name pidfile pattern port
    if pid=$(live_pid "$2" "$3") && port_open "$4"; then
      say "$1: running (pid $pid, 127.0.0.1:$4)"
    else
      say "$1: not running"
      ok=1
    fi
  }
  check kafka "$KDIR/kafka.pid" kafka.Kafka "$KAFKA_PORT"
  check redis "$RDIR/redis.pid" redis-server "$REDIS_PORT"
  check prometheus "$PDIR/prometheus.pid" prometheus "$PROMETHEUS_PORT"
  check alertmanager "$ADIR/alertmanager.pid" prometheus-alertmanager "$ALERTMANAGER_PORT"
  return $ok
}

signal_of() { [[ ${1:-} == --graceful ]] && echo TERM || echo KILL; }

cmd=${1:-}
shift || true
case $cmd in
  up)
    ensure_installed
    secrets
    redis_start
    alertmanager_start
    prometheus_start
    kafka_start
    kafka_topics
    kafka_access
    say "up: kafka 127.0.0.1:$KAFKA_PORT (SASL/SCRAM), redis://127.0.0.1:$REDIS_PORT/0 (ACL users), prometheus http://127.0.0.1:$PROMETHEUS_PORT, alertmanager http://127.0.0.1:$ALERTMANAGER_PORT"
    say "credentials: .stack/secrets/stack.env (an admin's environment); one service's: ops/stack.sh env NAME"
    ;;
  down)
    kafka_stop TERM
    redis_stop
    prometheus_stop
    alertmanager_stop
    if [[ ${1:-} == --wipe ]]; then
      say "wiping the data in .stack/ (the Kafka jars and the secrets stay)"
      rm -rf "$KDIR/data" "$KDIR/server.properties" "$KDIR"/kafka.log* "$RDIR" "$PDIR" "$ADIR"
    fi
    ;;
  status) status ;;
  kill-kafka) kafka_stop "$(signal_of "${1:-}")" ;;
  restart-kafka)
    kafka_stop "$(signal_of "${1:-}")"
    secrets
    kafka_start
    ;;
  restart-redis)
    redis_stop "$(signal_of "${1:-}")"
    secrets
    redis_start
    ;;
  env) print_env "${1:-}" ;;
  rotate) rotate "${1:-}" ;;
  *)
    sed -n '2,29p' "$0" >&2
    exit 2
    ;;
esac
