"""One unit of a MindSpore recovery run: ``python -m malaunch.entrypoint._recovery_unit UNIT.json``.

Runs the one-process plan in the unit file with ``run_plan`` and writes its ``RunResult`` where the file says
(see :mod:`._recovery_run`). It asks the kernel for SIGTERM should its parent, the shim, die first. Nothing
in the package imports this module, so ``-m`` runs it fresh.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import List

from . import proctree
from ._recovery_run import read_json, result_json, write_json
from .errors import EntrypointError, exit_code_for
from .plan import LaunchPlan
from .supervisor import run_plan

__all__ = ["unit_main"]

def unit_main(argv: List[str]) -> int:
    """One unit: run the one-process plan in ``argv[0]`` with ``run_plan``; write its result; exit with its code."""
    proctree.set_parent_death_signal(signal.SIGTERM)
    data = read_json(argv[0]) if argv else None
    if data is None:
        sys.stderr.write(f"malaunch.entrypoint._recovery_unit: cannot read the unit file {argv[:1]!r}\n")
        return 3
    try:
        result_file, plan = str(data["result_file"]), LaunchPlan.from_json(data["plan"])
    except (KeyError, TypeError, ValueError) as error:
        sys.stderr.write(f"malaunch.entrypoint._recovery_unit: damaged unit file {argv[0]!r}: {error}\n")
        return 3
    try:
        result = run_plan(plan, os.environ)
    except EntrypointError as error:
        sys.stderr.write(f"ma-entrypoint: error: {error}\n")
        return exit_code_for(error)
    write_json(result_file, result_json(result))
    return result.exit_code


if __name__ == "__main__":
    sys.exit(unit_main(sys.argv[1:]))
