#!/usr/bin/env bash
# The start of the kafka service of docker-compose.yml (mounted into the apache/kafka image, run
# as its command): what the image's own start (/etc/kafka/docker/run) cannot do, then that start.
#
# 1. The broker's SASL login configurations (JAAS), which hold the admin's password. The image
#    turns KAFKA_* variables into broker properties but drops any value with a '=' in it, which
#    every JAAS line has; so they go into /mnt/shared/config/server.properties, which the image
#    reads first and appends the KAFKA_* properties to.
# 2. An empty data volume is formatted with the admin's SCRAM credential (kafka-storage.sh
#    format --add-scram): KRaft keeps credentials in its metadata log, and the admin, the broker's
#    super user, stores everyone else's (kafka-init: python -m surveil.runtime.access setup). The
#    image would format it without; it finds it formatted and goes on. Eligible leader replicas
#    are off (docs/faults.md, "The broker killed -9").
#
# Environment (docker-compose.yml): SCRAM_ADMIN_PASSWORD_FILE (the admin's password, a Docker
# secret), CLIENT_SECURITY_PROTOCOL (SASL_PLAINTEXT or SASL_SSL: the INTERNAL and EXTERNAL
# listeners'), and the KAFKA_* settings and CLUSTER_ID the image reads. docs/security.md explains
# the whole.
set -euo pipefail
: "${SCRAM_ADMIN_PASSWORD_FILE:?the file of the password of the admin, the secret kafka-admin-password in compose}"
SCRAM_ADMIN_PASSWORD=$(<"$SCRAM_ADMIN_PASSWORD_FILE")
: "${CLUSTER_ID:?}"
data=${KAFKA_LOG_DIRS:-/var/lib/kafka/data}
scram='org.apache.kafka.common.security.scram.ScramLoginModule required'
plain='org.apache.kafka.common.security.plain.PlainLoginModule required'
admin="username=\"admin\" password=\"$SCRAM_ADMIN_PASSWORD\""

umask 077
mkdir -p /mnt/shared/config
cat >/mnt/shared/config/server.properties <<EOF
# Written by ops/kafka/compose-start.sh at every start of the container.
# INTERNAL (the services; also the broker's own connections to itself, as admin) and EXTERNAL
# (clients on the host): SCRAM-SHA-256. CONTROLLER: the broker logs in to its controller as admin
# with SASL/PLAIN, a static user (the controller needs it before it reads the metadata log).
listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-256
listener.name.internal.scram-sha-256.sasl.jaas.config=$scram $admin;
listener.name.external.sasl.enabled.mechanisms=SCRAM-SHA-256
listener.name.external.scram-sha-256.sasl.jaas.config=$scram;
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=$plain $admin user_admin="$SCRAM_ADMIN_PASSWORD";
EOF

# The health check's client configuration (kafka-broker-api-versions.sh --command-config).
{
  echo "security.protocol=${CLIENT_SECURITY_PROTOCOL:-SASL_PLAINTEXT}"
  echo "sasl.mechanism=SCRAM-SHA-256"
  echo "sasl.jaas.config=$scram $admin;"
  if [[ ${CLIENT_SECURITY_PROTOCOL:-} == SASL_SSL ]]; then
    echo "ssl.truststore.type=PEM"
    echo "ssl.truststore.location=/run/secrets/kafka-ca"
  fi
} >/tmp/admin-client.properties

if [[ ! -f $data/meta.properties ]]; then
  # Only what formatting checks; the broker's full configuration is the image's.
  format=$(mktemp)
  cat >"$format" <<EOF
process.roles=$KAFKA_PROCESS_ROLES
node.id=$KAFKA_NODE_ID
controller.quorum.voters=$KAFKA_CONTROLLER_QUORUM_VOTERS
controller.listener.names=$KAFKA_CONTROLLER_LISTENER_NAMES
listeners=$KAFKA_LISTENERS
advertised.listeners=$KAFKA_ADVERTISED_LISTENERS
listener.security.protocol.map=$KAFKA_LISTENER_SECURITY_PROTOCOL_MAP
inter.broker.listener.name=$KAFKA_INTER_BROKER_LISTENER_NAME
log.dirs=$data
EOF
  echo "===> Formatting $data (cluster $CLUSTER_ID) with the admin's SCRAM credential"
  /opt/kafka/bin/kafka-storage.sh format --cluster-id "$CLUSTER_ID" -c "$format" \
    --add-scram "SCRAM-SHA-256=[name=admin,password=$SCRAM_ADMIN_PASSWORD]"
  rm -f "$format"
fi

exec /etc/kafka/docker/run
