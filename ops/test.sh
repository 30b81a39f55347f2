#!/usr/bin/env bash
# THE test command: installs what is missing, starts the local stack, runs pytest against it,
# stops the stack whatever happened (unless it ran before), and exits with pytest's exit code
# (5, "no tests collected", is a failure too). Arguments go to pytest: ops/test.sh -k kafka -x
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

export KAFKA_BOOTSTRAP=127.0.0.1:${KAFKA_PORT:-9092}
export REDIS_URL=redis://127.0.0.1:${REDIS_PORT:-6379}/0
echo "[test] pytest $* (KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP REDIS_URL=$REDIS_URL)"
status=0
.venv/bin/pytest "$@" || status=$?
echo "[test] pytest exited with $status after $((SECONDS - t0)) s in all"
exit "$status"
