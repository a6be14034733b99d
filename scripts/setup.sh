#!/usr/bin/env bash
# Build (or refresh) the project venv with everything the tests and the templates need:
# malaunch (editable) with its test extras, torch 2.13.0 (CPU build, torchrun + gloo), mindspore 2.10.0 with
# numpy<2 (msrun on CPU), moto's S3 server, huaweicloudsdkcore and huaweicloudsdkmodelarts (cross-checks).
# Idempotent and quick when nothing changed. The venv is .venv, or $MALAUNCH_VENV.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
venv="${MALAUNCH_VENV:-$here/.venv}"
python="${PYTHON:-python3}"
stamp="$venv/.malaunch-deps"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/python" ]; then
  echo "==> creating venv $venv"
  "$python" -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> installing malaunch[test], torch==2.13.0, mindspore==2.10.0, numpy<2 into $venv (a few minutes the first time)"
  log="$venv/pip-install.log"
  # --no-compile, then compileall on every core: pip writes the bytecode of each installed file one by one (18,000
  # files, 51 s of CPU here, torch and mindspore most of it); the same files compiled in parallel take half the time
  # on 2 cores. The bytecode is the same (compileall, as pip uses it). Like pip, a file that this Python cannot
  # compile (torch ships one in 3.12 syntax) is left without; compileall's list of them goes to the log.
  if ! { "$venv/bin/python" -m pip install --upgrade pip &&
         "$venv/bin/python" -m pip install --no-compile -e ".[test,kubernetes]" "torch==2.13.0" "mindspore==2.10.0" \
           "numpy<2" "moto[server]>=5" "huaweicloudsdkcore" "huaweicloudsdkmodelarts"; } > "$log" 2>&1; then
    tail -n 40 "$log"
    echo "pip install failed; full log: $log" >&2
    exit 1
  fi
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$venv/bin/python" -m compileall -q -j 0 "$site" >> "$log" 2>&1 || echo "(some files did not compile, as with pip)" >> "$log"
  echo "$want" > "$stamp"
fi
# Bytecode for the package, as a pip-installed wheel has it: an editable install has none, and with
# PYTHONDONTWRITEBYTECODE set (as on these machines) every start of the shim would compile it from source.
"$venv/bin/python" -m compileall -q sdk entrypoint
# Headless Chromium and its driver from the distribution (Debian: chromium, chromium-driver), which the page's
# browser tests drive through Selenium (tests/sdk/ui). Nothing to do, and nothing printed, once both are there.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  as_root=""
  [ "$(id -u)" = 0 ] || as_root="sudo -n"
  if command -v apt-get >/dev/null 2>&1; then
    echo "==> installing chromium and chromium-driver (apt-get) for the browser tests"
    log="$venv/apt-install.log"
    if ! { $as_root apt-get update -q && DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -q --no-install-recommends \
             chromium chromium-driver; } > "$log" 2>&1; then
      tail -n 20 "$log"
      echo "apt-get install chromium chromium-driver failed; full log: $log" >&2
      exit 1
    fi
  else
    echo "chromium and chromedriver are missing and there is no apt-get: install them for tests/sdk/ui" >&2
    exit 1
  fi
fi
