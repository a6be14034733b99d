"""A real shim's console, for the cloud fakes' logs (issue 39): the shim runs a small job on this machine whose
rank 1 SIGKILLs itself after step 3 of attempt 0; attempt 1 runs 6 of 6 steps. Its stdout and stderr go to one file,
as a container's do, so the log holds the ranks' lines, the shim's own and its progress and recovery lines in the
order they were written; the records the shim kept in its log folder are the truth to compare with.

``python tests/sdk/shim_console.py --write FILE`` writes such a console, its log folder shown as ``/job/logs`` and
the host's name as ``worker-0`` (``tests/sdk/data/shim-console-restart.log``, the cloud status goldens' input)."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from shimutil import SCRIPTS, die_with_the_test, marked_env, write_v10_table

__all__ = ["ShimConsole", "restarted_console"]


class ShimConsole(NamedTuple):
    console: bytes  # the shim's stdout and stderr, as a container's log holds them
    log_dir: Path  # its MALAUNCH_LOG_DIR: progress.d/ and recovery.json


def restarted_console(folder: Path) -> ShimConsole:
    """Run the job in ``folder`` (see the module's docstring)."""
    write_v10_table(folder / "table.json", servers=1, devices=2)
    env = marked_env({"RANK_TABLE_FILE": str(folder / "table.json"), "MALAUNCH_GRACE_PERIOD": "3",
                      "MALAUNCH_LOG_DIR": str(folder / "logs"), "MALAUNCH_RESTART_BACKOFF": "0.2",
                      "STEP_PACE": "0.05", "STEP_PRINT": "1", "MA_MAX_RESTARTS": "1", "FAIL_RANK": "1",
                      "FAIL_STEP": "3"})  # fmt: skip
    with open(folder / "console.log", "wb") as out:
        done = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", str(SCRIPTS / "progress_steps.py"), "6",
                               "6"], env=env, cwd=str(folder), stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=240, preexec_fn=die_with_the_test())  # fmt: skip
    console = (folder / "console.log").read_bytes()
    assert done.returncode == 0, console.decode(errors="replace")
    return ShimConsole(console, folder / "logs")


def main() -> None:
    parser = argparse.ArgumentParser(description="Write a real shim's console (see the module's docstring).")
    parser.add_argument("--write", required=True, type=Path, help="the file to write")
    target = parser.parse_args().write
    with tempfile.TemporaryDirectory() as folder:
        run = restarted_console(Path(folder))
        text = run.console.decode().replace(str(run.log_dir), "/job/logs")
    target.write_text(text.replace(f"host={socket.gethostname()} ", "host=worker-0 ")
                      .replace(f"on host {socket.gethostname()} ", "on host worker-0 "))  # fmt: skip


if __name__ == "__main__":
    main()
