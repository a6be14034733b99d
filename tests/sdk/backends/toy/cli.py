"""``ma-submit`` with the toy backend: its one registry line, then ``ma-submit``'s own entry, in this process.

Run as ``python -m toy.cli ARGS`` with this folder's parent on ``PYTHONPATH`` (:func:`toy_ma_submit` does).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from malaunch.sdk.backends.registry import BACKEND_MODULES

__all__ = ["toy_ma_submit"]

PARENT = str(Path(__file__).resolve().parents[1])


def toy_ma_submit(args: List[str], env: Dict[str, str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``ma-submit ARGS`` in a new process whose registry has the toy's line."""
    path = os.pathsep.join(filter(None, [PARENT, env.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "toy.cli", *args], env={**env, "PYTHONPATH": path}, capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


if __name__ == "__main__":
    from toy import LINE

    BACKEND_MODULES[LINE[0]] = LINE[1]
    from malaunch.sdk.cli.entry import main

    main(sys.argv[1:])
