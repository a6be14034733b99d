#!/usr/bin/env bash
# The project's one test command (README "Run the tests"; .ci/run calls exactly this).
# On a fresh machine it builds its own venv with every test dependency: the package and its test extras,
# torch 2.13.0 (CPU build, for torchrun + gloo) and mindspore 2.10.0 with numpy<2 (for msrun on CPU).
# Then: ruff, mypy (strict), pytest. Extra arguments go to pytest.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
venv="${MALAUNCH_VENV:-$here/.venv}"
python="${PYTHON:-python3}"

stamp="$venv/.malaunch-deps"
want="$(cat pyproject.toml scripts/test.sh | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/python" ]; then
  echo "==> creating venv $venv"
  "$python" -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> installing malaunch[test], torch==2.13.0, mindspore==2.10.0, numpy<2 into $venv"
  log="$venv/pip-install.log"
  if ! { "$venv/bin/python" -m pip install --upgrade pip &&
         "$venv/bin/python" -m pip install -e ".[test,kubernetes]" "torch==2.13.0" "mindspore==2.10.0" "numpy<2" \
           "moto[server]>=5" "huaweicloudsdkcore"; } > "$log" 2>&1; then
    tail -n 40 "$log"
    echo "pip install failed; full log: $log" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
export PATH="$venv/bin:$PATH"

echo "==> ruff"
ruff check sdk entrypoint tests bench
echo "==> mypy (strict)"
bash scripts/typecheck.sh
echo "==> pytest"
exec python -m pytest -q -p no:cacheprovider "$@"
