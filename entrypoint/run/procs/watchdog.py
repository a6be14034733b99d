"""The watchdog: a separate program that ends the job's processes if the shim dies without saying "done".

Started by :func:`malaunch.entrypoint.run.procs.reaper.start_watchdog` as
``python -I -S -c BOOT PACKAGE_DIR FD TOKEN GRACE`` (:mod:`.bareboot`) in a session of its own, without the job's
token in its environment and with a command line of its own (``pkill -f ma-entrypoint`` does not match it, and its
``comm`` is ``malaunch-wdog``). It reads lines from the pipe ``FD``:

- ``pg <pgid> <start>``: a process group the shim started, with its leader's start time (``proc``'s clock): the
  group is signalled only while that leader lives (:mod:`.pgroups`);
- ``cg <path>``: the job's cgroup: its members are ended as well, and it is removed;
- ``grace <seconds>``: the run's grace period, in place of ``GRACE`` (a watchdog started before the shim planned
  had the default);
- ``proc <pid> <start>``: a process of the job (found by the shim as its descendant, e.g. a daemon that left
  its session and cleared its environment, which no token scan can find);
- ``done``: the run ended normally; exit without touching anything.

Two stages, so that the one that runs beside the ranks costs little: this one listens and keeps the lines as they
came, with ``os``, ``sys`` and ``signal`` alone (no ``typing``, no ``/proc`` code: about a third of the whole
program's start-up CPU). End of file without ``done`` means the shim is gone: this process becomes the second stage
(``exec`` of :mod:`.watchdog_end`, given the lines in a memory file), which imports the process-tree code and ends
the job: every announced group (while proven) and process, every member of the cgroups and every process carrying
``MALAUNCH_SHIM_TOKEN=TOKEN`` get SIGTERM, then SIGKILL after the grace; then the cgroups are removed. The second
stage keeps this one's scheduling priority and starts in a few tens of milliseconds of CPU, so on cores the ranks
keep busy it still acts within its grace (:mod:`.guards`).
"""

from __future__ import annotations

import os
import signal
import sys

from .bareboot import bare_argv

__all__ = ["main", "name_self"]

_IGNORED = ("SIGINT", "SIGHUP", "SIGTSTP", "SIGTTIN", "SIGTTOU")
_NAME = b"malaunch-wdog"


def name_self(name: bytes) -> None:
    """Set this process's ``comm`` (what ``ps`` and ``pkill`` without ``-f`` see), best effort: written to
    ``/proc/self/comm`` (the main thread's name is the process's), so the watchdog loads no ctypes for a
    ``prctl``."""
    try:
        fd = os.open("/proc/self/comm", os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.write(fd, name[:15])
    except OSError:
        pass
    finally:
        os.close(fd)


def _listen(read_fd: int) -> bytes | None:
    """Read the pipe until a ``done`` line (None) or its end: then every line the shim wrote, as it wrote them."""
    said = b""
    while True:
        try:
            chunk = os.read(read_fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            return said
        complete = said.rfind(b"\n") + 1  # what chunk adds starts a line here
        said += chunk
        if any(line.split() == [b"done"] for line in said[complete:].split(b"\n")[:-1]):
            return None


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _replay(said: bytes) -> int:
    """A descriptor the second stage reads ``said`` from, to its end: a memory file, or where the kernel has none
    (before Linux 3.17) a pipe that a child of this process fills."""
    try:
        fd = os.memfd_create("malaunch-wdog-said", 0)  # kept across the exec
    except (AttributeError, OSError):
        fd, write_fd = os.pipe()
        os.set_inheritable(fd, True)
        if os.fork() == 0:
            os.close(fd)
            _write_all(write_fd, said)
            os._exit(0)
        os.close(write_fd)
        return fd
    _write_all(fd, said)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def main(argv: list[str]) -> int:
    """Listen (see the module docstring): 0 once the shim said "done"; else this process becomes the second stage."""
    read_fd, token, grace = int(argv[0]), argv[1], argv[2]
    for name in _IGNORED:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    name_self(_NAME)
    said = _listen(read_fd)
    if said is None:
        return 0
    os.close(read_fd)
    command = bare_argv("run.procs.watchdog_end", [str(_replay(said)), token, grace])
    os.execv(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
