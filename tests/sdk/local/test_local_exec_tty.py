"""``ma-submit exec -t`` on the local backend gives the command a terminal of its own, as ``kubectl exec -t``
does (issue 29): run under a real pseudo-terminal, the command's stdin, stdout and stderr are a terminal (not
ours), it leads its own session on it, and its output still comes to our stdout (a pipe here)."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios
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


RESIZED = """
import os, signal, sys, time
def show(*_):
    size = os.get_terminal_size(0)
    print(f"size {size.lines}x{size.columns}", flush=True)
    if _:
        sys.exit(0)
signal.signal(signal.SIGWINCH, show)
show()
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    time.sleep(0.05)
sys.exit(9)
"""


def _set_size(fd: int, lines: int, columns: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))


def _take_as_controlling_terminal() -> None:  # ma-submit's session leads on our pty, as in a terminal window
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_exec_t_passes_a_window_resize_on(
    tmp_path: Path, home: Path, cli_env: Dict[str, str], cleanup_jobs: None
) -> None:
    """A terminal window resized (its size set on our pty, which sends SIGWINCH to ma-submit's session): the
    command on its own terminal sees the new size and gets its SIGWINCH too."""
    master, slave = os.openpty()
    _set_size(master, 24, 80)
    job_id = _running_job(tmp_path, home, hosts=1)
    proc = subprocess.Popen(
        [os.path.join(VENV_BIN, "ma-submit"), "exec", "-t", job_id, "--", sys.executable, "-c", RESIZED],
        stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env, start_new_session=True,
        preexec_fn=_take_as_controlling_terminal,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode().strip()
        assert first == "size 24x80", (first, proc.stderr.read() if proc.stderr else "")
        _set_size(master, 40, 132)  # the kernel sends SIGWINCH to the terminal's foreground process group
        assert proc.stdout.readline().decode().strip() == "size 40x132"
        assert proc.wait(timeout=CLI_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(slave)
        os.close(master)
        subprocess.run([os.path.join(VENV_BIN, "ma-submit"), "stop", job_id], env=cli_env, timeout=CLI_TIMEOUT,
                       capture_output=True)  # fmt: skip
