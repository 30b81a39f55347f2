#!/usr/bin/env bash
# The static checks CI runs before the tests: ruff (lint and format) over the whole tree, mypy
# strict over every package of services/surveil, and the layers contract (import-linter). Each
# prints what it finds; the script exits non-zero on the first that fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash ops/install.sh venv
echo "[lint] ruff check"
.venv/bin/ruff check .
echo "[lint] ruff format --check"
.venv/bin/ruff format --check .
echo "[lint] mypy (strict)"
.venv/bin/mypy
echo "[lint] lint-imports (the layers)"
.venv/bin/lint-imports --no-cache
