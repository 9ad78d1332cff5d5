#!/usr/bin/env bash
# The whole test suite against real servers: start what the tests need, run pytest, stop them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
export PATH="$VENV/bin:$PATH"
exec "$VENV/bin/python" -m pytest "$@"
