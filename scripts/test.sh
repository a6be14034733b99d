#!/usr/bin/env bash
# The project's one test command (README "Run the tests"; .ci/run calls exactly this).
# Builds the venv from nothing when needed (scripts/setup.sh), then: ruff, mypy (strict), pytest.
# Extra arguments go to pytest. The tests run in 4 worker processes (pytest-xdist): much of their time is spent
# waiting on real processes, so 4 workers pay on 2 cores; `-n 0` runs them in this one process, `-m "not slow"`
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
bash scripts/typecheck.sh
echo "==> pytest"
exec python -m pytest -q -p no:cacheprovider -n 4 --dist worksteal "$@"
