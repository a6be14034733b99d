"""``ma-submit exec -t`` on the local backend gives the command a terminal of its own, as ``kubectl exec -t``
does (issue 29): run under a real pseudo-terminal, the command's stdin, stdout and stderr are a terminal (not
ours), it leads its own session on it, and its output still comes to our stdout (a pipe here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, Tuple

import pytest
from sdkutil import CLI_TIMEOUT, VENV_BIN
from test_inside_local import _running_job

pytestmark = pytest.mark.process

CHECK = (
    "import os, sys; "
    "print(os.ttyname(0), sys.stdin.isatty(), sys.stdout.isatty(), sys.stderr.isatty(), os.getsid(0) == os.getpid())"
)


@pytest.fixture
def terminal() -> Iterator[Tuple[int, str]]:
    """A real pseudo-terminal: the slave's fd (our command's stdin) and its name."""
    master, slave = os.openpty()
    yield slave, os.ttyname(slave)
    os.close(slave)
    os.close(master)


def exec_t(job_id: str, command: list[str], stdin: int, env: Dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [os.path.join(VENV_BIN, "ma-submit"), "exec", "-t", job_id, "--", *command],
        stdin=stdin, capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT,
    )  # fmt: skip


def test_exec_t_gives_the_command_a_terminal_of_its_own(
    tmp_path: Path, home: Path, cli_env: Dict[str, str], cleanup_jobs: None, terminal: Tuple[int, str]
) -> None:
    slave, ours = terminal
    job_id = _running_job(tmp_path, home, hosts=1)
    try:
        named = exec_t(job_id, ["tty"], slave, cli_env)
        assert named.returncode == 0, (named.stdout, named.stderr)
        (path,) = named.stdout.split()
        assert path.startswith("/dev/pts/") and path != ours, (path, ours)
        checked = exec_t(job_id, [sys.executable, "-c", CHECK], slave, cli_env)
        assert checked.returncode == 0, (checked.stdout, checked.stderr)
        name, *flags = checked.stdout.split()
        assert name.startswith("/dev/pts/") and name != ours
        assert flags == ["True", "True", "True", "True"], checked.stdout  # stdin, stdout, stderr; session leader
        failed = exec_t(job_id, [sys.executable, "-c", "import sys; sys.exit(3)"], slave, cli_env)
        assert failed.returncode == 3  # the command's own exit code
    finally:
        subprocess.run([os.path.join(VENV_BIN, "ma-submit"), "stop", job_id], env=cli_env, timeout=CLI_TIMEOUT,
                       capture_output=True)  # fmt: skip
