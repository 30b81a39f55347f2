#!/usr/bin/env bash
# THE test command: installs what is missing, starts the local stack, runs pytest against it,
# stops the stack whatever happened (unless it ran before), and exits with pytest's exit code
# (5, "no tests collected", is a failure too). Arguments go to pytest: ops/test.sh -k kafka -x
#
# The stack is secured (docs/security.md): pytest runs as the operator, with the admin's
# credentials and every principal's password from .stack/secrets/stack.env; the fixtures give
# each service they start only its own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t0=$SECONDS

echo "[test] ops/install.sh"
bash ops/install.sh
echo "[test] ops/stack.sh up"
# Stop the stack on any exit from here on (pytest failing, Ctrl-C, a failed `up` half-way),
# unless it was running before: then it is someone else's on this machine, and stays up.
if bash ops/stack.sh status >/dev/null; then
  echo "[test] the stack was already running: it stays up afterwards"
else
  trap 'echo "[test] ops/stack.sh down"; bash ops/stack.sh down || true' EXIT
fi
bash ops/stack.sh up

# KAFKA_BOOTSTRAP, KAFKA_USERNAME=admin, KAFKA_PASSWORD, ..., REDIS_URL (as Redis' admin), and
# KAFKA_<NAME>_PASSWORD / REDIS_<NAME>_PASSWORD of every principal.
set -a
# shellcheck disable=SC1091
. .stack/secrets/stack.env
set +a
echo "[test] pytest $* (KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP as $KAFKA_USERNAME, REDIS_URL=$(sed -E 's#(//[^:/]+):[^@]*@#\1:***@#' <<<"$REDIS_URL"))"
status=0
.venv/bin/pytest "$@" || status=$?
echo "[test] pytest exited with $status after $((SECONDS - t0)) s in all"
exit "$status"
