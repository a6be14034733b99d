"""Helpers for tests that run the real shim: a marked environment and a check that nothing is left running."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set

from malaunch.entrypoint.run.procs import proctree

SCRIPTS = Path(__file__).resolve().parent / "scripts"
MARK = "MALAUNCH_TEST_MARK"

_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def die_with_the_test() -> Callable[[], None]:
    """A ``preexec_fn`` that gives the child ``PR_SET_PDEATHSIG`` = SIGKILL: should this test process die (pytest
    killed mid-test), the kernel kills the child, stopped (SIGSTOP) or not, and a shim's watchdog then ends its
    job. The child exits at once if the test process is already gone. Use it only from the main thread (the
    signal comes when the thread that started the child ends)."""
    parent = os.getpid()

    def preexec() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(137)

    return preexec


def marked_env(extra: Mapping[str, str]) -> Dict[str, str]:
    """The test's environment plus a unique marker every descendant inherits, and the venv first on PATH."""
    env = dict(os.environ)
    env.pop("MA_RUN_METHOD", None)
    env[MARK] = uuid.uuid4().hex
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(extra)
    return env


def marked_pids(mark: str, variable: str = MARK) -> List[int]:
    """Live (non-zombie) processes whose environment carries ``<variable>=mark`` (default MALAUNCH_TEST_MARK)."""
    return sorted(key.pid for key in proctree.pids_with_env(variable, mark))


def assert_nothing_left(mark: str, within: float = 15.0, variable: str = MARK) -> None:
    """Wait up to ``within`` seconds for every marked process to be gone; kill and fail if some remain."""
    deadline = time.monotonic() + within
    while True:
        left = marked_pids(mark, variable)
        if not left:
            return
        if time.monotonic() > deadline:
            for key in proctree.pids_with_env(variable, mark):
                proctree.signal_proven(key, signal.SIGKILL)
            raise AssertionError(f"processes left running after the job: {left}")
        time.sleep(0.1)


def shim(
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    timeout: float = 240,
    stdin: Optional[int] = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m malaunch.entrypoint ARGS`` to completion and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "malaunch.entrypoint", *args],
        env=dict(env),
        cwd=str(cwd),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=stdin,
        preexec_fn=die_with_the_test(),
    )


def start_shim(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> subprocess.Popen[str]:
    """Start the shim in the background (its own session, like a container's PID 1 would be)."""
    return subprocess.Popen(
        [sys.executable, "-m", "malaunch.entrypoint", *args],
        env=dict(env),
        cwd=str(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=die_with_the_test(),
    )


def pidfds_of(holder: int, pid: int) -> Set[str]:
    """The fds of ``holder`` that are pidfds for ``pid`` (their fdinfo says ``Pid: <pid>``)."""
    folder = Path(f"/proc/{holder}/fdinfo")
    try:
        names = os.listdir(folder)
    except OSError:
        return set()
    found = set()
    for name in names:
        try:
            text = (folder / name).read_text()
        except OSError:
            continue
        if f"\nPid:\t{pid}\n" in f"\n{text}":
            found.add(name)
    return found


def launcher_workers(shim: int) -> Dict[int, int]:
    """``rank -> pid`` of the live workers of the shim's launchers (torchrun, msrun): its children's children with a
    rank in their environment, msrun's scheduler not counted; what the shim's worker watch looks for."""
    table = proctree.snapshot()
    launchers = {info.pid for info in table.values() if info.ppid == shim}
    found = {}
    for info in table.values():
        environ = proctree.read_environ(info.pid) if info.ppid in launchers and not info.zombie else None
        if not environ or proctree.env_value(environ, "MS_ROLE") == b"MS_SCHED":
            continue
        for name in ("MS_NODE_ID", "RANK_ID", "RANK"):
            raw = proctree.env_value(environ, name)
            if raw is not None and raw.strip().isdigit():
                found[int(raw)] = info.pid
                break
    return found


def wait_watched(shim: subprocess.Popen[Any], workers: int, within: float = 120.0) -> None:
    """Return once the shim's worker watch holds a pidfd for ``workers`` workers of its launchers. Call it after
    the workers said they are ready: they have exec'd long before, so a pidfd the shim holds for one is the
    watch's own, kept (a scan drops at once only the pidfd of a process that is not a worker yet)."""
    deadline = time.monotonic() + within
    while True:
        found = launcher_workers(shim.pid)
        watched = sorted(pid for pid in found.values() if pidfds_of(shim.pid, pid))
        if len(watched) >= workers:
            return
        assert shim.poll() is None, f"the shim ended (code {shim.returncode}) before its watch saw {workers} workers"
        assert time.monotonic() < deadline, f"the shim's watch holds {watched} of the workers {found} after {within} s"
        time.sleep(0.01)


def wait_reaped(pid: int, within: float = 120.0) -> None:
    """Return once ``pid`` is gone, not even a zombie: its parent (a launcher) has reaped it."""
    deadline = time.monotonic() + within
    while proctree.read_info(pid) is not None:
        assert time.monotonic() < deadline, f"process {pid} was not reaped within {within} s"
        time.sleep(0.01)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def v10_table(servers: int, devices: int, *, subnet: str = "127.0.0", status: str = "completed") -> Dict[str, Any]:
    """A v1.0 rank table: server i is ``<subnet>.<i+1>`` with ``devices`` devices, ranks in server order."""
    return {
        "version": "1.0",
        "status": status,
        "server_count": str(servers),
        "server_list": [
            {
                "server_id": f"{subnet}.{s + 1}",
                "device": [
                    {"device_id": str(d), "device_ip": f"192.168.{s}.{d}", "rank_id": str(s * devices + d)}
                    for d in range(devices)
                ],
                "host_nic_ip": "reserve",
            }
            for s in range(servers)
        ],
    }


def write_v10_table(path: Path, servers: int, devices: int, status: str = "completed") -> None:
    """Write :func:`v10_table` (loopback server ids) to ``path``."""
    path.write_text(json.dumps(v10_table(servers, devices, status=status)))


def torchrun_host_env(index: int, *, gpus: int, port: int, job: str, log_dir: Path, coordinator: int) -> Dict[str, str]:
    """Marked environment of emulated host ``index`` of a 2-host torchrun job on loopback (``coordinator``: the
    port of the hosts' coordinator, the same for both hosts)."""
    return marked_env(
        {"MA_RUN_METHOD": "torchrun", "MA_NUM_HOSTS": "2", "MA_NUM_GPUS": str(gpus), "VC_TASK_INDEX": str(index),
         "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.1", "MA_VJ_NAME": job, "MA_TORCHRUN_MASTER_PORT": str(port),
         "MALAUNCH_LOG_DIR": str(log_dir), "MALAUNCH_COORDINATOR_PORT": str(coordinator)}
    )  # fmt: skip


def start_sleeping_fan_out(tmp_path: Path, grace: str) -> tuple[subprocess.Popen[str], Dict[str, str]]:
    """Start a 2-rank rank-table fan-out whose ranks sleep; return once both ranks are running."""
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_GRACE_PERIOD": grace})
    proc = start_shim([str(SCRIPTS / "dump_env.py"), str(tmp_path), "--sleep", "120"], env, tmp_path)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("rank-*.json"))) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    return proc, env


CGROUP_MOUNTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/freezer")


def job_cgroups(owner: int) -> Set[Path]:
    """The job cgroups (``malaunch-<token>...``, at most one level below a mount) that the shim with pid ``owner``
    made (its token starts with its pid) and that exist now. Only a test's own: other jobs may run on the host."""
    found: Set[Path] = set()
    for mount in CGROUP_MOUNTS:
        found.update(Path(mount).glob(f"malaunch-{owner}-*"))
        found.update(Path(mount).glob(f"*/malaunch-{owner}-*"))
    return found
