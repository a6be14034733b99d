#!/usr/bin/env bash
# The project's one test command (README "Run the tests"; .ci/run calls exactly this).
# Builds the venv from nothing when needed (scripts/setup.sh), then: ruff, mypy (strict), pytest.
# Extra arguments go to pytest. The tests run in 6 worker processes (pytest-xdist): much of their time is spent
# waiting on real processes, so 6 workers pay on 2 cores (a quiet whole run: 12 min 26 s at -n 6 against 13 min 32 s
# at -n 4, one after the other, the same tree); `-n 0` runs them in this one process, `-m "not slow"`
# leaves out the end-to-end tests of seconds each. The longest tests come first (tests/conftest.py) and a worker
# that runs out takes half of the queue of the busiest (worksteal): tests of seconds to minutes, known only roughly
# in advance, end together instead of one worker finishing alone.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh
venv="${MALAUNCH_VENV:-$here/.venv}"
export PATH="$venv/bin:$PATH"

echo "==> ruff"
ruff check sdk entrypoint tests bench
echo "==> mypy (strict)"
# While mypy runs (one process, one core), the tests are collected once beside it, nothing run and nothing printed,
# with bytecode writing on: pytest keeps each test module as it rewrote it for its assertions in tests/**/__pycache__
# (git ignores it), and every xdist worker then loads those instead of rewriting 220 modules itself (with
# PYTHONDONTWRITEBYTECODE set, as on the project's machines, each worker did: about 6 s of CPU each, before any test).
# The order stays ruff, mypy, tests, and so does the exit code: a mypy failure ends the run with mypy's code before
# any test, and the collection's own result is not looked at (the real run collects again and reports what it finds).
env -u PYTHONDONTWRITEBYTECODE python -m pytest -q -p no:cacheprovider --collect-only -n 0 "$@" > /dev/null 2>&1 &
collecting=$!
typed=0
bash scripts/typecheck.sh || typed=$?
wait "$collecting" || true  # a few seconds at most, mostly over before mypy is
[ "$typed" = 0 ] || exit "$typed"
echo "==> pytest"
exec python -m pytest -q -p no:cacheprovider -n 6 --dist worksteal "$@"
