"""The local backend (default): runs every emulated host of a job on this machine, through the real shim.

Example::

    from malaunch.sdk.backends.local import LocalBackend
    backend = LocalBackend(home="/tmp/ma")              # default: $MALAUNCH_HOME, else ~/.malaunch
    handle = backend.submit(spec)                       # plan (pure) + execute
    handle.wait(); print(handle.status().exit_code)

``execute`` prepares ``<home>/jobs/<job id>/`` (code snapshot, rank table, ``plan.json``, ``state.json``) and
starts the detached job runner (:mod:`malaunch.sdk.backends.local.runner`); every other call reads the job
directory only, so it works from any process. Hosts get loopback addresses, or network namespaces when
msrun spans several hosts (see :mod:`malaunch.sdk.backends.local.hostnet`).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional

from ...errors import BackendError, ConfigError, JobNotFound, SpecError
from ...failures import failure_from_report
from ...plan import SubmitPlan
from ...spec import JobSpec
from ...status import HostState, HostStatus, JobState, JobStatus
from ..base import Backend, JobHandle
from ..logtail import follow_files, read_files
from .hostnet import LOOPBACK, NETNS, HostNetwork, LoopbackNetwork, NetnsNetwork, network_from_json
from .jobdir import (
    JobPaths,
    is_job_process,
    job_processes,
    kill_processes,
    read_json,
    signal_job_process,
    write_json_atomic,
)
from .plan import LocalRequest, plan_local

__all__ = ["NETWORK_MODES", "LocalBackend", "create_backend"]

NETWORK_MODES = ("auto", LOOPBACK, NETNS)
RUNNER_MODULE = "malaunch.sdk.backends.local.runner"
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_SNAPSHOT_IGNORE = (".git", "__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache", ".ruff_cache")


def _free_port(taken: List[int]) -> int:
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("0.0.0.0", 0))
            port = int(sock.getsockname()[1])
        if port not in taken and port + 1 not in taken and port - 1 not in taken:
            return port
    raise BackendError("could not find a free TCP port; set launcher.master_port / msrun_master_port")


class LocalBackend(Backend):
    """Emulates a ModelArts job on this machine: one detached runner, one shim per emulated host."""

    name = "local"

    def __init__(
        self,
        home: Optional[str] = None,
        *,
        python: str = sys.executable,
        network: str = "auto",
        environ: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        raw = home or self.environ.get("MALAUNCH_HOME") or os.path.join("~", ".malaunch")
        self.home = os.path.abspath(os.path.expanduser(raw))
        self.python = python
        if network not in NETWORK_MODES:
            raise ConfigError("unknown local network mode", network, f"use one of: {', '.join(NETWORK_MODES)}")
        self.network_mode = network
        self._runners: Dict[str, subprocess.Popen[bytes]] = {}

    # -- planning (pure) -------------------------------------------------------------------------------
    def network_for(self, spec: JobSpec, job_id: str) -> HostNetwork:
        """The host network a job gets: netns for msrun across hosts (or when asked), else loopback."""
        hosts = spec.resources.hosts
        mode = self.network_mode
        if mode == "auto":
            mode = NETNS if spec.run_method == "msrun" and hosts > 1 else LOOPBACK
        return NetnsNetwork(job_id, hosts) if mode == NETNS else LoopbackNetwork(job_id, hosts)

    def plan(self, spec: JobSpec, *, job_id: str, now: float) -> SubmitPlan:
        request, notes = plan_local(
            spec, job_id=job_id, home=self.home, python=self.python, network=self.network_for(spec, job_id)
        )
        return SubmitPlan(backend=self.name, job_id=job_id, created_at=now, spec=spec, request=request, notes=notes)

    # -- execution ---------------------------------------------------------------------------------------
    def _check_inputs(self, spec: JobSpec, request: LocalRequest) -> None:
        if not os.path.isdir(spec.code_dir):
            raise SpecError("code_dir", "is not an existing folder", spec.code_dir, "give the folder with your code")
        boot = os.path.join(spec.code_dir, os.path.normpath(spec.boot_file))
        if not os.path.isfile(boot):
            raise SpecError("boot_file", f"no such file in code_dir ({boot})", spec.boot_file, "check the path")
        for item in spec.inputs:
            if item.path is not None and not os.path.exists(item.path):
                raise SpecError(f"inputs.{item.name}.path", "does not exist", item.path, "check the path")
        if request.network.get("kind") == NETNS:
            NetnsNetwork.check_available(spec.resources.hosts)

    def _snapshot(self, request: LocalRequest) -> None:
        home_in_code = os.path.commonpath([self.home, request.code_src]) == request.code_src
        home = self.home

        def ignore(folder: str, names: List[str]) -> List[str]:
            skipped = list(shutil.ignore_patterns(*_SNAPSHOT_IGNORE)(folder, names))
            if home_in_code:
                skipped += [n for n in names if os.path.abspath(os.path.join(folder, n)) == home]
            return skipped

        shutil.copytree(request.code_src, request.code_dest, symlinks=True, ignore=ignore)

    def execute(self, plan: SubmitPlan) -> JobHandle:
        request = plan.request
        if not isinstance(request, LocalRequest):
            raise BackendError(f"the local backend cannot execute a {type(request).__name__} plan; plan it locally")
        self._check_inputs(plan.spec, request)
        taken: List[int] = []
        ports: Dict[str, int] = {}
        for name in request.auto_ports:
            ports[name] = _free_port(taken)
            taken.append(ports[name])
        request = request.with_ports(ports)
        paths = JobPaths(self.home, plan.job_id)
        try:
            os.makedirs(os.path.dirname(paths.job_dir), exist_ok=True)
            os.mkdir(paths.job_dir)
        except FileExistsError:
            raise BackendError(f"job directory {paths.job_dir} already exists; submit again for a new id") from None
        except OSError as exc:
            raise BackendError(f"cannot create {paths.job_dir} ({exc.strerror}); set MALAUNCH_HOME") from None
        try:
            self._prepare(plan, request, paths)
            self._start_runner(paths)
        except BaseException as exc:
            shutil.rmtree(paths.job_dir, ignore_errors=True)
            if isinstance(exc, OSError):
                raise BackendError(f"cannot prepare job {plan.job_id}: {exc}; check MALAUNCH_HOME") from None
            raise
        return JobHandle(self, plan.job_id)

    def _prepare(self, plan: SubmitPlan, request: LocalRequest, paths: JobPaths) -> None:
        self._snapshot(request)
        for folder in request.dirs:
            os.makedirs(folder, exist_ok=True)
        for path, text in request.files.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        data = plan.to_json()
        data["request"] = request.to_json()
        write_json_atomic(paths.plan_file, data)
        hosts = [
            {"index": h.index, "address": h.address, "state": "PENDING", "pid": None, "exit_code": None,
             "started_at": None, "ended_at": None, "log_file": h.console_log}
            for h in request.hosts
        ]  # fmt: skip
        state = {
            "version": 1, "job_id": plan.job_id, "name": plan.spec.name, "state": "PENDING", "exit_code": None,
            "message": "", "created_at": plan.created_at, "started_at": None, "ended_at": None,
            "runner_pid": None, "first_failure": None, "hosts": hosts,
        }  # fmt: skip
        write_json_atomic(paths.state_file, state)

    def _start_runner(self, paths: JobPaths) -> None:
        env = dict(self.environ)
        env["MALAUNCH_JOB_ID"] = paths.job_id
        with open(paths.runner_log, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", RUNNER_MODULE, paths.job_dir],
                env=env,
                cwd=paths.job_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._runners[paths.job_id] = proc
        with open(os.path.join(paths.job_dir, "runner.pid"), "w", encoding="utf-8") as handle:
            handle.write(f"{proc.pid}\n")

    # -- management ----------------------------------------------------------------------------------------
    def _paths(self, job_id: str) -> JobPaths:
        paths = JobPaths(self.home, job_id)
        if not _JOB_ID.match(job_id) or not os.path.isdir(paths.job_dir):
            raise JobNotFound(job_id, self.name, f"see 'ma-submit list' (MALAUNCH_HOME={self.home})")
        return paths

    def _runner_pid(self, paths: JobPaths, state: Mapping[str, Any]) -> Optional[int]:
        proc = self._runners.get(paths.job_id)
        if proc is not None:
            proc.poll()  # reap our own child so it does not linger as a zombie
        pid = state.get("runner_pid")
        if isinstance(pid, int):
            return pid
        try:
            with open(os.path.join(paths.job_dir, "runner.pid"), encoding="utf-8") as handle:
                return int(handle.read().strip())
        except (OSError, ValueError):
            return None

    def _status_of(self, paths: JobPaths) -> JobStatus:
        state = read_json(paths.state_file)
        if state is None:
            return JobStatus(id=paths.job_id, backend=self.name, state=JobState.PENDING, location=paths.job_dir)
        job_state = JobState.parse(state.get("state"))
        message = str(state.get("message") or "")
        if not job_state.is_terminal:
            runner = self._runner_pid(paths, state)
            if runner is not None and not is_job_process(runner, paths.job_id):
                left = job_processes(paths.job_id)
                job_state = JobState.UNKNOWN if left else JobState.FAILED
                message = (
                    f"the job runner (pid {runner}) ended without recording the result"
                    + (f"; processes {left} still run: stop them with 'ma-submit stop {paths.job_id}'" if left else "")
                    + f"; see {paths.runner_log}"
                )
        hosts = tuple(
            HostStatus(
                index=int(h.get("index", i)), address=str(h.get("address", "")),
                state=HostState.parse(h.get("state")), pid=h.get("pid"), exit_code=h.get("exit_code"),
                started_at=h.get("started_at"), ended_at=h.get("ended_at"), log_file=h.get("log_file"),
                detail=str(h.get("detail") or ""),
            )
            for i, h in enumerate(state.get("hosts") or [])
        )  # fmt: skip
        return JobStatus(
            id=paths.job_id, backend=self.name, state=job_state, exit_code=state.get("exit_code"), message=message,
            raw_state=str(state.get("state")), name=str(state.get("name") or ""),
            created_at=state.get("created_at"), started_at=state.get("started_at"), ended_at=state.get("ended_at"),
            hosts=hosts, location=paths.job_dir, failure_class=_failure_class(paths, job_state, state),
        )  # fmt: skip

    def status(self, job_id: str) -> JobStatus:
        return self._status_of(self._paths(job_id))

    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        paths = self._paths(job_id)
        plan = read_json(paths.plan_file) or {}
        count = len(plan.get("request", {}).get("hosts", [])) or 1
        files = [(f"[host {i}] ", paths.console_log(i)) for i in range(count)]
        if not follow:
            return read_files(files)
        return follow_files(files, lambda: self._status_of(paths).is_terminal)

    def stop(self, job_id: str) -> JobStatus:
        paths = self._paths(job_id)
        status = self._status_of(paths)
        plan = read_json(paths.plan_file) or {}
        grace = float(plan.get("request", {}).get("grace_period", 30.0))
        state = read_json(paths.state_file) or {}
        runner = self._runner_pid(paths, state)
        if runner is not None and not status.is_terminal and signal_job_process(runner, job_id, signal.SIGTERM):
            deadline = time.monotonic() + grace + 30.0
            while is_job_process(runner, job_id) and time.monotonic() < deadline:
                self._runner_pid(paths, state)
                time.sleep(0.05)
        left = kill_processes(lambda: job_processes(job_id, exclude=(os.getpid(),)), grace=grace, job_id=job_id)
        if left:
            raise BackendError(f"job {job_id}: processes {left} survived SIGKILL; check them with 'ps -p'")
        network = plan.get("request", {}).get("network")
        if isinstance(network, dict):
            network_from_json(network).teardown()
        final = read_json(paths.state_file) or state
        if not JobState.parse(final.get("state")).is_terminal:
            final.update(state="STOPPED", exit_code=128 + signal.SIGTERM, ended_at=time.time())
            final["message"] = (final.get("message") or "") + " stopped after the runner was gone"
            for host in final.get("hosts") or []:
                if host.get("state") == "RUNNING":
                    host["state"] = "EXITED"
            write_json_atomic(paths.state_file, final)
        return self._status_of(paths)

    def list(self) -> List[JobStatus]:
        root = os.path.join(self.home, "jobs")
        try:
            names = os.listdir(root)
        except OSError:
            return []
        found = []
        for name in names:
            if _JOB_ID.match(name) and os.path.isdir(os.path.join(root, name)):
                found.append(self._status_of(JobPaths(self.home, name)))
        return sorted(found, key=lambda s: (s.created_at or 0.0, s.id), reverse=True)


def _failure_class(paths: JobPaths, job_state: JobState, state: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """A failed job's class, from the first failing host's shim report (else its exit code and console log)."""
    first = state.get("first_failure")
    if job_state is not JobState.FAILED or not isinstance(first, Mapping):
        return None
    code = first.get("exit_code")
    host = first.get("host")
    if not isinstance(code, int):
        return None
    if not isinstance(host, int):
        return failure_from_report(None, code)
    host_dir = os.path.join(paths.job_dir, "hosts", str(host))
    report = read_json(os.path.join(host_dir, "report.json"))
    return failure_from_report(report, code, os.path.join(host_dir, "console.log"))


def create_backend(**options: Any) -> LocalBackend:
    """Registry factory: ``get_backend("local", home=..., network=...)``."""
    return LocalBackend(**options)
