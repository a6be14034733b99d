"""Shims started as a cluster starts them, one per emulated host: own process, the platform's variables, no SDK.

Host *i* has the loopback address ``127.0.0.<i+1>``; host 0's shim serves the job's coordinator on a free port.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from malaunch.entrypoint.run.procs import proctree
from malaunch.sdk.backends.local.hostnet import NetnsNetwork
from shimutil import SCRIPTS, free_port, marked_env

__all__ = ["Hosts"]


class Hosts:
    """A job of ``count`` emulated hosts; every shim is this test's own child (its own session)."""

    def __init__(self, tmp: Path, count: int, extra: Mapping[str, str], script: str = "hosts_job.py",
                 args: tuple[str, ...] = (), netns: bool = False,
                 consoles: Mapping[int, int] = {},
                 per_host: Mapping[int, Mapping[str, str]] = {}) -> None:  # fmt: skip
        """``consoles``: host index -> a descriptor (a pipe the test reads) to take the place of that host's
        ``host<i>.<run>.out`` as its shim's stdout and stderr; ``per_host``: host index -> variables of that host
        alone (a folder of its own)."""
        self.tmp, self.count, self.script, self.args = tmp, count, script, args
        self.per_host = {index: dict(extra) for index, extra in per_host.items()}
        self.consoles = dict(consoles)
        self.port = free_port()
        self.secret = os.urandom(16).hex()
        self.network: Optional[NetnsNetwork] = None
        self.addresses = tuple(f"127.0.0.{i + 1}" for i in range(count))
        if netns:  # a namespace per host (root): msrun needs hosts that do not share addresses
            self.network = NetnsNetwork(f"hc{os.urandom(3).hex()}", count)
            self.network.setup()
            self.addresses = self.network.addresses()
        base = {"MA_NUM_HOSTS": str(count), "VC_WORKER_HOSTS": ",".join(self.addresses),
                "MA_VJ_NAME": "coord-job", "MALAUNCH_COORDINATOR_PORT": str(self.port),
                "MALAUNCH_JOB_SECRET": self.secret, "MALAUNCH_GRACE_PERIOD": "3", "MALAUNCH_HEARTBEAT_TIMEOUT": "3",
                "MALAUNCH_HOST_WAIT": "4", "MALAUNCH_RESTART_BACKOFF": "0.5", "HOSTS_JOB_DIR": str(tmp)}  # fmt: skip
        self.env = marked_env({**base, **extra})
        self.mark = self.env["MALAUNCH_TEST_MARK"]
        self.procs: Dict[int, subprocess.Popen[bytes]] = {}
        self.starts: Dict[int, int] = {}

    def start(self, index: int) -> subprocess.Popen[bytes]:
        run = self.starts.get(index, 0)
        self.starts[index] = run + 1
        env = {**self.env, "VC_TASK_INDEX": str(index), "MALAUNCH_LOG_DIR": str(self.tmp / f"h{index}"),
               "MA_CURRENT_HOST_IP": self.addresses[index], **self.per_host.get(index, {})}
        with open(self.tmp / f"host{index}.{run}.out", "wb") as file:
            out = self.consoles.get(index, file.fileno())
            argv: Sequence[str] = [sys.executable, "-m", "malaunch.entrypoint", str(SCRIPTS / self.script), *self.args]
            if self.network is not None:
                argv = self.network.wrap(index, argv)
            proc = subprocess.Popen(list(argv), env=env, cwd=str(self.tmp), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        self.procs[index] = proc
        return proc

    def start_all(self) -> Hosts:
        for index in range(self.count):
            self.start(index)
        return self

    def started(self) -> Hosts:
        """Start every host and return once each has started attempt 0."""
        self.start_all()
        for index in range(self.count):
            self.wait_started(index, 0)
        return self

    def wait(self, index: int, timeout: float = 90.0) -> int:
        return self.procs[index].wait(timeout)

    def wait_started(self, host: int, attempt: int, timeout: float = 60.0) -> None:
        path = self.tmp / f"started-h{host}-a{attempt}"
        deadline = time.monotonic() + timeout
        while not path.exists():
            assert time.monotonic() < deadline, f"host {host} never started attempt {attempt}"
            time.sleep(0.05)

    def wait_listening(self, timeout: float = 60.0) -> None:
        """Return once a socket of this network namespace listens on the coordinator's port (read from
        /proc/net/tcp, so the wait itself opens no connection the coordinator would log)."""
        wanted = f":{self.port:04X}"
        deadline = time.monotonic() + timeout
        while True:
            for table in ("/proc/net/tcp", "/proc/net/tcp6"):
                with contextlib.suppress(OSError), open(table, encoding="ascii") as handle:
                    for row in handle.read().splitlines()[1:]:
                        fields = row.split()
                        if fields[1].endswith(wanted) and fields[3] == "0A":  # 0A: LISTEN
                            return
            assert time.monotonic() < deadline, f"nothing listens on port {self.port} after {timeout} s"
            time.sleep(0.05)

    def console(self, index: int, run: int = -1) -> str:
        runs = sorted(self.tmp.glob(f"host{index}.*.out"), key=lambda p: int(p.name.split(".")[1]))
        return runs[run].read_text(errors="replace")

    def report(self, index: int) -> Dict[str, Any]:
        data: Dict[str, Any] = json.loads((self.tmp / f"h{index}" / "report.json").read_text())
        return data

    def signal_tree(self, index: int, sig: int) -> None:
        """Signal host ``index``'s shim and every process under it that carries this job's mark (a host's
        failure as a cluster sees it: the whole pod killed, or frozen)."""
        root = self.procs[index].pid
        pids = [root] + [info.pid for info in proctree.descendants(root)]
        for pid in pids:
            environ = proctree.read_environ(pid)
            if environ is not None and proctree.env_has(environ, "MALAUNCH_TEST_MARK", self.mark):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)

    def signal_host(self, index: int, sig: int) -> None:
        """Signal host ``index``'s shim (the test's own child: proven by the Popen that holds it)."""
        self.procs[index].send_signal(sig)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    proc.send_signal(sig)
                proc.wait(10)
        from shimutil import assert_nothing_left

        try:
            assert_nothing_left(self.mark, within=20.0)
        finally:
            if self.network is not None:
                self.network.teardown()


def lines(text: str, needle: str) -> List[str]:
    return [line for line in text.splitlines() if needle in line]


def job_causes(report: Mapping[str, Any]) -> List[Optional[Dict[str, Any]]]:
    return [attempt.get("job_cause") for attempt in report["attempts"]]
