#!/usr/bin/env bash
# The local stack on 127.0.0.1: Kafka (KRaft, one node), Redis, Prometheus. State, logs and pid
# files live under .stack/ (git-ignored); the programs come from ops/install.sh.
#
#   ops/stack.sh up                          start what is not running, wait until each answers
#   ops/stack.sh down [--wipe]               stop all three; --wipe also deletes their data
#   ops/stack.sh status                      one line each; exit 0 only when all three run
#   ops/stack.sh kill-kafka [--graceful]     SIGKILL the broker (SIGTERM with --graceful)
#   ops/stack.sh restart-kafka [--graceful]  kill-kafka, start it again, wait until it serves
#
# Env: KAFKA_PORT (9092), KAFKA_CONTROLLER_PORT (9093), REDIS_PORT (6379), PROMETHEUS_PORT
# (9090), PARTITIONS (6: the one partition count of every topic in surveil.runtime.topics).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-9093}
REDIS_PORT=${REDIS_PORT:-6379}
PROMETHEUS_PORT=${PROMETHEUS_PORT:-9090}
PARTITIONS=${PARTITIONS:-6}
KAFKA_READY_TIMEOUT=${KAFKA_READY_TIMEOUT:-120} # seconds; a cold JVM on 2 cores needs ~10
STOP_TIMEOUT=${STOP_TIMEOUT:-30}                # seconds between SIGTERM and SIGKILL

KDIR=$ROOT/.stack/kafka
RDIR=$ROOT/.stack/redis
PDIR=$ROOT/.stack/prometheus
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
  command -v redis-server >/dev/null && command -v prometheus >/dev/null ||
    die "redis-server or prometheus missing: run ops/install.sh"
}

# --- Kafka -----------------------------------------------------------------------------------

kafka_properties() {
  mkdir -p "$KDIR/data"
  cat >"$KDIR/server.properties" <<EOF
# Written by ops/stack.sh on every start; edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$KDIR/data
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

kafka_start() {
  local pid t0
  if pid=$(live_pid "$KDIR/kafka.pid" kafka.Kafka); then
    say "kafka: already running (pid $pid)"
  else
    port_free_or_die "$KAFKA_PORT" kafka
    port_free_or_die "$KAFKA_CONTROLLER_PORT" "kafka controller"
    kafka_properties
    if [[ ! -f $KDIR/data/meta.properties ]]; then
      local cluster
      cluster=$(java "${JAVA_OPTS[@]}" -cp "$KDIR/libs/*" kafka.tools.StorageTool random-uuid)
      say "kafka: formatting $KDIR/data (cluster $cluster)"
      java "${JAVA_OPTS[@]}" -cp "$KDIR/libs/*" kafka.tools.StorageTool format \
        -t "$cluster" -c "$KDIR/server.properties" >>"$KDIR/kafka.log" 2>&1 ||
        die "kafka: storage format failed, see $KDIR/kafka.log"
    fi
    say "kafka: starting on 127.0.0.1:$KAFKA_PORT (controller :$KAFKA_CONTROLLER_PORT), log $KDIR/kafka.log"
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
  "$PY" -m surveil.runtime.topics create --bootstrap "127.0.0.1:$KAFKA_PORT" --partitions "$PARTITIONS" |
    sed 's/^/[stack] kafka: /' ||
    die "kafka: topics are not as wanted (another PARTITIONS earlier? ops/stack.sh down --wipe starts afresh)"
}

kafka_stop() {
  local pid
  if pid=$(live_pid "$KDIR/kafka.pid" kafka.Kafka); then
    stop_pid kafka "$pid" "$1" "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"
    rm -f "$KDIR/kafka.pid"
  else
    say "kafka: not running"
  fi
}

# --- Redis -----------------------------------------------------------------------------------

redis_start() {
  local pid
  if pid=$(live_pid "$RDIR/redis.pid" redis-server); then
    say "redis: already running (pid $pid)"
  else
    port_free_or_die "$REDIS_PORT" redis
    mkdir -p "$RDIR"
    say "redis: starting on 127.0.0.1:$REDIS_PORT (append-only file in $RDIR), log $RDIR/redis.log"
    # No config file: Debian's /etc/redis/redis.conf belongs to the system service.
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$RDIR" \
      --appendonly yes --appendfsync everysec \
      --daemonize yes --pidfile "$RDIR/redis.pid" --logfile "$RDIR/redis.log" ||
      die "redis-server would not start, see $RDIR/redis.log"
  fi
  for _ in {1..100}; do
    [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]] && { say "redis: PING answered"; return; }
    sleep 0.1
  done
  die "redis did not answer PING within 10 s, see $RDIR/redis.log"
}

redis_stop() {
  local pid
  if pid=$(live_pid "$RDIR/redis.pid" redis-server); then
    stop_pid redis "$pid" TERM "$REDIS_PORT" # Redis flushes the append-only file on SIGTERM
    rm -f "$RDIR/redis.pid"
  else
    say "redis: not running"
  fi
}

# --- Prometheus ------------------------------------------------------------------------------

prometheus_start() {
  local pid
  if pid=$(live_pid "$PDIR/prometheus.pid" prometheus); then
    say "prometheus: already running (pid $pid)"
  else
    port_free_or_die "$PROMETHEUS_PORT" prometheus
    mkdir -p "$PDIR"
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
  return $ok
}

signal_of() { [[ ${1:-} == --graceful ]] && echo TERM || echo KILL; }

cmd=${1:-}
shift || true
case $cmd in
  up)
    ensure_installed
    redis_start
    prometheus_start
    kafka_start
    kafka_topics
    say "up: kafka 127.0.0.1:$KAFKA_PORT, redis://127.0.0.1:$REDIS_PORT/0, prometheus http://127.0.0.1:$PROMETHEUS_PORT"
    ;;
  down)
    kafka_stop TERM
    redis_stop
    prometheus_stop
    if [[ ${1:-} == --wipe ]]; then
      say "wiping the data in .stack/ (the Kafka jars stay)"
      rm -rf "$KDIR/data" "$KDIR/server.properties" "$KDIR"/kafka.log* "$RDIR" "$PDIR"
    fi
    ;;
  status) status ;;
  kill-kafka) kafka_stop "$(signal_of "${1:-}")" ;;
  restart-kafka)
    kafka_stop "$(signal_of "${1:-}")"
    kafka_start
    ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac
