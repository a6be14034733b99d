#!/usr/bin/env bash
# mypy --strict over both import packages. The folders sdk/ and entrypoint/ are mapped to malaunch.sdk and
# malaunch.entrypoint by setuptools package-dir; mypy needs the same mapping, which a link farm provides.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
farm="$here/build/typecheck"
mkdir -p "$farm/malaunch"
ln -sfn "$here/sdk" "$farm/malaunch/sdk"
ln -sfn "$here/entrypoint" "$farm/malaunch/entrypoint"
cd "$farm"
exec mypy --config-file "$here/pyproject.toml" -p malaunch.entrypoint -p malaunch.sdk
