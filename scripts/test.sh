#!/usr/bin/env bash
# The project's one test command (README "Run the tests"; .ci/run calls exactly this).
# Builds the venv from nothing when needed (scripts/setup.sh), then: ruff, mypy (strict), pytest.
# Extra arguments go to pytest.
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
exec python -m pytest -q -p no:cacheprovider "$@"
