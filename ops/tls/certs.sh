#!/usr/bin/env bash
# A CA and a certificate for the Kafka broker's TLS listeners, made with openssl: for the local
# stack (ops/stack.sh, into .stack/secrets/tls) and for docker-compose.yml (into this folder,
# ops/tls, which compose mounts; docs/security.md). Nothing is made when the certificates there
# are valid for 30 more days and name the same hosts; otherwise both are made afresh.
#
#   ops/tls/certs.sh DIR HOST...      e.g. ops/tls/certs.sh ops/tls kafka localhost
#
# Writes into DIR: ca.pem (clients trust it: KAFKA_SSL_CAFILE), ca.key, broker.pem (the
# certificate, subjectAltName = the HOSTs, an IP address as an IP), broker.key, and
# broker-keystore.pem (key + certificate + CA: what Kafka reads with ssl.keystore.type=PEM).
# The keys are mode 600: in compose the broker reads broker-keystore.pem as uid 1000 (appuser).
set -euo pipefail
dir=${1:?usage: $0 DIR HOST...}
shift
(($#)) || { echo "usage: $0 DIR HOST..." >&2; exit 2; }
command -v openssl >/dev/null || { echo "$0: openssl is missing" >&2; exit 1; }

names=()
for host in "$@"; do
  if [[ $host =~ ^[0-9.]+$ || $host == *:* ]]; then names+=("IP:$host"); else names+=("DNS:$host"); fi
done
san=$(IFS=,; echo "${names[*]}")
valid=$((30 * 86400))

if [[ -s $dir/broker-keystore.pem && -s $dir/ca.pem && -s $dir/broker.san && $(<"$dir/broker.san") == "$san" ]] &&
  openssl x509 -checkend "$valid" -noout -in "$dir/broker.pem" >/dev/null 2>&1 &&
  openssl x509 -checkend "$valid" -noout -in "$dir/ca.pem" >/dev/null 2>&1; then
  exit 0
fi

echo "[tls] making a CA and the broker's certificate ($san) in $dir"
(umask 077 && mkdir -p "$dir")
openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=surveil Kafka CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$dir/broker.key" -out "$dir/broker.csr" 2>/dev/null
openssl x509 -req -in "$dir/broker.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 825 \
  -extfile <(printf '%s\n' "subjectAltName=$san" "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth") \
  -out "$dir/broker.pem" 2>/dev/null
cat "$dir/broker.key" "$dir/broker.pem" "$dir/ca.pem" >"$dir/broker-keystore.pem"
chmod 600 "$dir/ca.key" "$dir/broker.key" "$dir/broker-keystore.pem"
chmod 644 "$dir/ca.pem" "$dir/broker.pem"
echo "$san" >"$dir/broker.san"
rm -f "$dir/broker.csr" "$dir/ca.srl"
