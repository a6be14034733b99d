"""Runs a plan in a process of its own, as the shim does: ``driver.py PLAN_JSON RESULT_JSON``.

Exits with the run's exit code and writes ``{"exit_code", "shim_signal", "root_cause"}`` to RESULT_JSON, so
tests can signal a real shim process (SIGTERM, SIGINT, SIGKILL) and see what it did.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from malaunch.entrypoint.launchers.running import run_plan
from procutil import plan_from_json


def main() -> int:
    with open(sys.argv[1]) as handle:
        plan = plan_from_json(json.load(handle))
    result = run_plan(plan, dict(os.environ))
    cause = result.root_cause._asdict() if result.root_cause else None
    with open(sys.argv[2], "w") as handle:
        json.dump({"exit_code": result.exit_code, "shim_signal": result.shim_signal, "root_cause": cause}, handle)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
