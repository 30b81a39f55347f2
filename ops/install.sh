#!/usr/bin/env bash
# Installs what the stack and the tests need, and is quick when it is all there already.
#
#   ops/install.sh              everything: apt packages, the venv, the Kafka jars
#   ops/install.sh venv kafka   only the parts named (apt | venv | kafka)
#
# apt:   redis-server, prometheus (+ promtool), prometheus-alertmanager (+ amtool) and openssl from
#        Debian, only when missing.
# venv:  .venv with `pip install -e '.[test]'`, redone only when pyproject.toml changed
#        (the stamp .venv/.pyproject.sha256 holds the hash of the one last installed).
# kafka: the broker's jars from Maven Central into .stack/kafka/libs, fetched only when the
#        stamp .stack/kafka/libs/.pom.sha256 (written after a complete fetch) does not match
#        ops/kafka/pom.xml.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

say() { printf '[install] %s\n' "$*"; }

install_apt() {
  local missing=()
  command -v redis-server >/dev/null || missing+=(redis-server)
  command -v openssl >/dev/null || missing+=(openssl) # the stack's secrets and TLS certificates
  if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then missing+=(prometheus); fi
  if ! command -v prometheus-alertmanager >/dev/null || ! command -v amtool >/dev/null; then missing+=(prometheus-alertmanager); fi
  # The incident report's browser test; DejaVu has the suit symbols.
  command -v chromium >/dev/null || missing+=(chromium fonts-dejavu-core)
  if ((${#missing[@]} == 0)); then
    say "apt: redis-server, prometheus, promtool, prometheus-alertmanager, amtool, openssl and chromium are installed"
    return
  fi
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  say "apt: installing ${missing[*]} (apt-get update first)"
  "${sudo[@]}" apt-get update -q
  # --no-install-recommends: prometheus recommends exporters we do not want running.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  # Debian starts the package's own Alertmanager on :9093, the stack's Kafka controller port;
  # the stack runs its own (ops/stack.sh).
  if [[ " ${missing[*]} " == *" prometheus-alertmanager "* && -d /run/systemd/system ]]; then
    "${sudo[@]}" systemctl disable --now prometheus-alertmanager || true
  fi
}

install_venv() {
  local stamp=.venv/.pyproject.sha256 want
  want=$(sha256sum pyproject.toml | cut -d' ' -f1)
  if [[ ! -x .venv/bin/python ]]; then
    say "venv: creating .venv with $(python3 --version)"
    python3 -m venv .venv
  fi
  if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
    say "venv: .venv is up to date with pyproject.toml"
    return
  fi
  say "venv: pip install -e '.[test]' (a minute on a fresh machine)"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
  echo "$want" >"$stamp"
  say "venv: installed"
}

install_kafka() {
  local libs=.stack/kafka/libs want
  want=$(sha256sum ops/kafka/pom.xml | cut -d' ' -f1)
  if [[ -f $libs/.pom.sha256 && $(<"$libs/.pom.sha256") == "$want" ]]; then
    say "kafka: jars present in $libs ($(ls "$libs" | wc -l) files)"
    return
  fi
  say "kafka: fetching the broker's jars with Maven into $libs (~20 s)"
  # Fetch into a scratch folder and swap it in whole, so an interrupted fetch is never taken
  # for a complete one.
  local tmp=.stack/kafka/libs.partial
  rm -rf "$tmp" && mkdir -p "$tmp"
  # Maven's output is kept for when it fails (even -q -B prints stray colour codes otherwise).
  if ! mvn -q -B -f ops/kafka/pom.xml dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$ROOT/$tmp" >.stack/kafka/mvn.log 2>&1; then
    cat .stack/kafka/mvn.log >&2
    echo "[install] kafka: Maven failed (above, and in .stack/kafka/mvn.log)" >&2
    exit 1
  fi
  echo "$want" >"$tmp/.pom.sha256"
  rm -rf "$libs" && mv "$tmp" "$libs"
  say "kafka: $(ls "$libs" | wc -l) jars in $libs"
}

parts=("$@")
((${#parts[@]})) || parts=(apt venv kafka)
for part in "${parts[@]}"; do
  case $part in
    apt | venv | kafka) "install_$part" ;;
    *) echo "usage: $0 [apt] [venv] [kafka]" >&2; exit 2 ;;
  esac
done
