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

import contextlib
import itertools
import os
import re
import signal
import sys
import time

from malaunch.entrypoint.public import Name

from ...errors import BackendError, ConfigError, JobNotFound, JobStateUnknown, SpecError
from ...home import home_dir, one_by_prefix, write_json_atomic
from ...status import JobState, JobStatus
from ..base import Backend, JobHandle, UnknownWatch, check_code
from .hostnet import LOOPBACK, NETNS, HostNetwork, LoopbackNetwork, NetnsNetwork, network_from_json
from .jobdir import (
    JobPaths,
    is_job_process,
    job_processes,
    kill_processes,
    pid_alive,
    read_json,
    runner_pid,
    signal_job_process,
)
from .pending import pending_reason
from .state import SLACK_BYTES, StateReading, StateWriter, job_status, new_state, read_state

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import AbstractSet, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

    from ...plan import SubmitPlan
    from ...spec.model import JobSpec
    from ..base import PruneResult
    from ..codefiles import CodeFile
    from ..inside import ExecResult, JobEvent, UsageReport
    from ..listing import ListPage, ListQuery
    from .plan import LocalRequest

# Planning, the code snapshot and starting the runner (submit), and looking inside a job (events, usage, exec) import
# what they need when they run: the verbs that read a job (status, list, logs, stop) are started often.

__all__ = ["NETWORK_MODES", "LocalBackend", "create_backend"]

NETWORK_MODES = ("auto", LOOPBACK, NETNS)
RUNNER_MODULE = "malaunch.sdk.backends.local.runner"
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
# A process caught inside exec (just after Popen returned) shows an empty /proc/<pid>/environ for a moment.
_EXEC_SETTLE = 0.5
#: A code snapshot above this size gets a warning (every submit copies it).
SNAPSHOT_WARN_BYTES = 100 * 1024 * 1024


def snapshot_notes(code_dir: str, files: List[CodeFile]) -> Tuple[str, ...]:
    """The snapshot's size as a note, plus a warning naming the biggest folders when it is big."""
    from ..codefiles import IGNORE_FILE

    total = sum(item.size for item in files)
    from ...units import size_text

    notes = [f"code snapshot: {len(files)} file(s), {size_text(total)} from {code_dir} (excludes: {IGNORE_FILE})"]
    if total > SNAPSHOT_WARN_BYTES:
        sizes: Dict[str, int] = {}
        for item in files:
            top = item.relpath.split("/", 1)[0]
            sizes[top] = sizes.get(top, 0) + item.size
        biggest = sorted(sizes.items(), key=lambda pair: -pair[1])[:3]
        named = ", ".join(f"{name} ({size_text(size)})" for name, size in biggest)
        notes.append(
            f"warning: every submit copies {size_text(total)} of code (biggest: {named}); list data folders in "
            f"{os.path.join(code_dir, IGNORE_FILE)} (gitignore syntax) to leave them out"
        )
    return tuple(notes)


def _free_port(taken: List[int]) -> int:
    import socket

    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("0.0.0.0", 0))
            port = int(sock.getsockname()[1])
        if port not in taken and port + 1 not in taken and port - 1 not in taken:
            return port
    raise BackendError("could not find a free TCP port; set launcher.master_port / msrun_master_port")


def _still_ours(pid: int, job_id: str) -> bool:
    """Whether live ``pid`` is the job's, looking again for up to :data:`_EXEC_SETTLE` s before saying no (the
    state is never declared lost because a process was read in the middle of its exec)."""
    deadline = time.monotonic() + _EXEC_SETTLE
    while True:
        if is_job_process(pid, job_id):
            return True
        if not pid_alive(pid) or time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def spawn_runner(paths: JobPaths, environ: Mapping[str, str], secret: str) -> subprocess.Popen[bytes]:
    """Start the job's detached runner with ``environ`` (the job id and ``secret`` added; the secret is in its
    environment only, never in a file) and record its pid. When its pid cannot be recorded (a full disk, a
    Ctrl-C), the runner and whatever it started are killed and the runner reaped before the error goes on: the
    caller never got the process, so it could not undo it."""
    import subprocess

    env = dict(environ)
    env["MALAUNCH_JOB_ID"] = paths.job_id
    env[Name.MALAUNCH_JOB_SECRET] = secret
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
    try:
        with open(paths.runner_pid_file, "w", encoding="utf-8") as handle:
            handle.write(f"{proc.pid}\n")
    except BaseException:
        _end_runner(proc, paths.job_id)
        raise
    return proc


def _end_runner(proc: subprocess.Popen[bytes], job_id: str) -> None:
    """Kill and reap runner ``proc`` (our unreaped child, so its pid is still its own), then whatever of the job
    it started (proven by job id)."""
    with contextlib.suppress(OSError):
        proc.kill()
    proc.wait()
    kill_processes(lambda: job_processes(job_id), grace=0.0, job_id=job_id)


def _request_json(paths: JobPaths) -> Dict[str, Any]:
    """The ``request`` of the job's ``plan.json``, or {} when it is missing or damaged."""
    request = (read_json(paths.plan_file) or {}).get("request")
    return request if isinstance(request, dict) else {}


class LocalBackend(Backend):
    """Emulates a ModelArts job on this machine: one detached runner, one shim per emulated host."""

    name = "local"
    home: str

    def __init__(
        self,
        home: Optional[str] = None,
        *,
        python: str = sys.executable,
        network: str = "auto",
        environ: Optional[Mapping[str, str]] = None,
        capacity: Optional[str] = None,
    ) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.capacity_setting = capacity  # local.capacity of the profile (MALAUNCH_LOCAL_CAPACITY beats it)
        self.home = home_dir(self.environ, home)
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
        from ...plan import SubmitPlan  # planning only: reading a job's state does not load it
        from .plan import plan_local

        request, notes = plan_local(
            spec, job_id=job_id, home=self.home, python=self.python, network=self.network_for(spec, job_id)
        )
        return SubmitPlan(backend=self.name, job_id=job_id, created_at=now, spec=spec, request=request, notes=notes)

    # -- execution ---------------------------------------------------------------------------------------
    def check(self, plan: SubmitPlan) -> Tuple[str, ...]:
        """What ``execute`` checks on this machine before it starts anything (also run by ``--dry-run``).

        Returns a note with the code snapshot's size, and a warning when it is big.
        """
        spec = plan.spec
        check_code(spec)
        self._check_fits(spec)
        if spec.notify:
            from ...notify.check import check_targets_here

            check_targets_here(spec, self.environ)
        for item in spec.inputs:
            if item.path is not None and not os.path.exists(item.path):
                raise SpecError(f"inputs.{item.name}.path", "does not exist", item.path, "check the path")
        from .plan import LocalRequest

        request = plan.request
        if not isinstance(request, LocalRequest):
            return ()
        if request.network.get("kind") == NETNS:
            NetnsNetwork.check_available(spec.resources.hosts)
        return snapshot_notes(request.code_src, self._snapshot_files(request))

    def _check_fits(self, spec: JobSpec) -> None:
        """A job larger than the whole machine is refused (it would wait forever)."""
        from .queue.capacity import machine_capacity

        capacity = machine_capacity(self.environ, self.capacity_setting)
        need = capacity.need_of(spec.resources.hosts, spec.resources.devices_per_host)
        if need > capacity.devices:
            raise ConfigError(
                f"resources: the job takes {need} devices (hosts x devices_per_host), more than this machine has "
                f"({capacity.devices}: {capacity.source})", need,
                "make the job smaller, or set MALAUNCH_LOCAL_CAPACITY (local.capacity) if the machine has more",
            )  # fmt: skip

    def _snapshot_files(self, request: LocalRequest) -> List[CodeFile]:
        """The files of ``code_dir`` the snapshot takes (``.malaunchignore`` applied; never the jobs' home)."""
        from ..codefiles import select_code_files

        files = select_code_files(request.code_src, hashes=False)
        home = self.home
        return [f for f in files if os.path.commonpath([home, os.path.abspath(f.path)]) != home]

    def _snapshot(self, request: LocalRequest, files: List[CodeFile]) -> None:
        import shutil

        os.makedirs(request.code_dest, exist_ok=True)
        for item in files:
            target = os.path.join(request.code_dest, *item.relpath.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(item.path, target)

    def execute(self, plan: SubmitPlan) -> JobHandle:
        from .plan import LocalRequest

        request = plan.request
        if not isinstance(request, LocalRequest):
            raise BackendError(f"the local backend cannot execute a {type(request).__name__} plan; plan it locally")
        self.check(plan)
        files = self._snapshot_files(request)
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
        import shutil

        try:
            self._prepare(plan, request, paths, files)
            self._start_or_queue(plan.spec, paths)
        except BaseException as exc:
            self._undo_start(paths, request)
            shutil.rmtree(paths.job_dir, ignore_errors=True)
            if isinstance(exc, OSError):
                raise BackendError(f"cannot prepare job {plan.job_id}: {exc}; check MALAUNCH_HOME") from None
            raise
        with contextlib.suppress(OSError):  # keep_for of earlier jobs: never a reason for this submit to fail
            self.expire(time.time())
        return JobHandle(self, plan.job_id)

    def _prepare(self, plan: SubmitPlan, request: LocalRequest, paths: JobPaths, files: List[CodeFile]) -> None:
        hosts = [{"index": h.index, "address": h.address, "log_file": h.console_log} for h in request.hosts]
        write_json_atomic(
            paths.state_file,
            new_state(plan.job_id, plan.spec.name, plan.created_at, hosts, plan.spec.keep_for),
            slack=SLACK_BYTES,
        )
        open(paths.use_lock, "ab").close()  # readers share it, deleters take it alone (retention)
        self._snapshot(request, files)
        for folder in request.dirs:
            os.makedirs(folder, exist_ok=True)
        for path, text in request.files.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        data = plan.to_json()
        data["request"] = request.to_json()
        write_json_atomic(paths.plan_file, data)

    def _start_runner(self, paths: JobPaths, secret: str) -> None:
        self._runners[paths.job_id] = spawn_runner(paths, self.environ, secret)

    def _start_or_queue(self, spec: JobSpec, paths: JobPaths) -> None:
        """Start the job's runner now when it fits and nothing waits, else queue it (:mod:`.queue`): all under the
        queue's lock, so two submits never start more than the machine holds."""
        from ...plan import new_job_secret
        from .queue.capacity import machine_capacity
        from .queue.scheduler import ENV_FILE, ensure_scheduler, used_devices
        from .queue.store import QueueStore, plan_queue

        store = QueueStore(self.home)
        machine = machine_capacity(self.environ, self.capacity_setting)
        need, capacity = machine.need_of(spec.resources.hosts, spec.resources.devices_per_host), machine.devices
        with store.locked():
            waiting = store.entries()
            if not waiting and need <= capacity - used_devices(self.home, ()):
                self._start_runner(paths, new_job_secret())
                store.mark_running(paths.job_id, need)
                return
            entry = None
            try:
                write_json_atomic(os.path.join(paths.job_dir, ENV_FILE), dict(self.environ))  # 0600, gone at start
                entry = store.add(paths.job_id, need, spec.priority)
                store.write_capacity(capacity)
                entries = store.entries()
                used = used_devices(self.home, [e.job_id for e in entries])
                store.write_reasons(plan_queue(entries, capacity, used)[1])
                ensure_scheduler(self.home, self.environ)
            except BaseException:
                # Out of the queue before its lock goes: no scheduler may start a job whose submit failed. A
                # scheduler started here finds the queue empty and exits by itself (it serves every job).
                if entry is not None:
                    store.remove(store.entry_name(entry))
                raise

    def _queued(self) -> bool:
        """Whether any job waits in the queue (a look at one folder: the everyday verbs import nothing more)."""
        try:
            return any(name[:1].isdigit() for name in os.listdir(os.path.join(self.home, "queue")))
        except OSError:
            return False

    def _take_over(self) -> None:
        """Jobs wait and no scheduler runs (it was killed): start one (cheap when nothing waits)."""
        if not self._queued():
            return
        from .queue.store import QueueStore

        store = QueueStore(self.home)
        if not store.entries() and not store.entries(starting=True):
            return
        from .queue.scheduler import ensure_scheduler

        with store.locked():
            ensure_scheduler(self.home, self.environ)

    def _unqueue(self, paths: JobPaths) -> bool:
        """Take a waiting job out of the queue and record it STOPPED; False when it is not waiting."""
        if not self._queued():
            return False
        from .queue.scheduler import ENV_FILE
        from .queue.store import QueueStore

        store = QueueStore(self.home)
        if store.find(paths.job_id) is None:
            return False
        with store.locked():
            found = store.find(paths.job_id)
            if found is None or job_processes(paths.job_id):
                return False  # started meanwhile: stopped as a running job
            store.remove(found[1])
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(paths.job_dir, ENV_FILE))
            final = read_state(paths.state_file).data
            if final is not None and not JobState(final["state"]).is_terminal:
                final.update(state="STOPPED", exit_code=128 + signal.SIGTERM, ended_at=time.time(),
                             message="stopped while it waited in the local queue (it never started)")  # fmt: skip
                StateWriter(paths).save_final(final)
        return True

    def _undo_start(self, paths: JobPaths, request: LocalRequest) -> None:
        """A submit that fails after its runner started (the runner's pid file could not be written, a Ctrl-C):
        the runner, whatever it started and its network are gone, and the runner reaped, before the submit says
        it failed. The runner is our unreaped child, so its pid is still its own; the rest is proven by job id."""
        proc = self._runners.pop(paths.job_id, None)
        if proc is None:
            return
        _end_runner(proc, paths.job_id)
        with contextlib.suppress(KeyError, TypeError, ValueError, BackendError):
            network_from_json(dict(request.network)).teardown()

    # -- management ----------------------------------------------------------------------------------------
    def _job_names(self) -> List[str]:
        root = JobPaths.jobs_root(self.home)
        try:
            names = os.listdir(root)
        except OSError:
            return []
        return sorted(n for n in names if _JOB_ID.match(n) and os.path.isdir(os.path.join(root, n)))

    def resolve_id(self, job_id: str) -> str:
        """``job_id`` itself, or the one job whose id starts with it."""
        if _JOB_ID.match(job_id) and os.path.isdir(JobPaths(self.home, job_id).job_dir):
            return job_id
        found = one_by_prefix(job_id, self._job_names(), "job") if _JOB_ID.match(job_id) else None
        if found is not None:
            return found
        raise JobNotFound(job_id, self.name, f"see 'ma-submit list' (MALAUNCH_HOME={self.home})")

    def _paths(self, job_id: str) -> JobPaths:
        return JobPaths(self.home, self.resolve_id(job_id))

    def _runner_pid(self, paths: JobPaths, state: Mapping[str, Any]) -> Optional[int]:
        proc = self._runners.get(paths.job_id)
        if proc is not None:
            proc.poll()  # reap our own child so it does not linger as a zombie
        return runner_pid(paths, state)

    def _status_of(self, paths: JobPaths, reading: Optional[StateReading] = None) -> JobStatus:
        reading = read_state(paths.state_file) if reading is None else reading
        runner = self._runner_pid(paths, reading.data or {})
        status = job_status(
            paths, reading, backend=self.name, runner_pid=runner, is_ours=lambda pid: _still_ours(pid, paths.job_id)
        )
        if status.state is JobState.FAILED:
            status = status._replace(failure_class=_failure_class(paths, status.state, reading.data or {}))
        if status.started_at is not None:
            from .progress import job_progress

            progress, recovery = job_progress(paths, len(status.hosts))
            status = status._replace(progress=progress, recovery=recovery)
        if status.is_terminal and runner is not None:
            self._let_runner_exit(paths, runner)
        reason = pending_reason(status, paths)
        if status.state is JobState.PENDING and runner is None and self._queued():
            from .queue.store import QueueStore

            reason = QueueStore(self.home).reason(paths.job_id) or reason
        return status._replace(pending_reason=reason) if reason else status

    def _let_runner_exit(self, paths: JobPaths, runner: int) -> None:
        """The runner records the end, then exits: give it a moment, so an ended job has nothing left running."""
        deadline = time.monotonic() + _EXEC_SETTLE
        while is_job_process(runner, paths.job_id) and time.monotonic() < deadline:
            self._runner_pid(paths, {})  # reaps it when it is our own child
            time.sleep(0.01)

    def status(self, job_id: str) -> JobStatus:
        self._take_over()
        return self._status_of(self._paths(job_id))

    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        paths = self._paths(job_id)
        reading = read_state(paths.state_file)
        count = len(reading.data["hosts"]) if reading.data is not None else 0
        if not count:
            hosts = _request_json(paths).get("hosts")
            count = len(hosts) if isinstance(hosts, list) else 1
        files = [(f"[host {i}] ", paths.console_log(i)) for i in range(count)]
        if not follow:
            from .consolelog import merged_lines  # only what reads the logs: status, list and stop do not

            return _while_reading(paths, itertools.chain(merged_lines(files), _cut_short(paths, count)))
        return _while_reading(paths, self._follow(paths, files))

    def _follow(self, paths: JobPaths, files: List[Tuple[str, str]]) -> Iterator[str]:
        watch = UnknownWatch()

        def ended() -> bool:
            status = self._status_of(paths)
            return status.is_terminal or watch.gave_up(status)

        from ..filewatch import ChangeWatch  # only a follower needs these
        from ..logtail import follow_files

        with ChangeWatch([path for _, path in files] + [paths.state_file]) as changes:
            yield from follow_files(files, ended, watch=changes)
        status = self._status_of(paths)
        if not status.is_terminal:
            raise JobStateUnknown(paths.job_id, status.message)
        yield from _cut_short(paths, len(files))

    def stop(self, job_id: str) -> JobStatus:
        paths = self._paths(job_id)
        job_id = paths.job_id  # the full id when a prefix was given
        if self._unqueue(paths):
            return self._status_of(paths)
        status = self._status_of(paths)
        request = _request_json(paths)
        grace = request.get("grace_period", 30.0)
        grace = float(grace) if isinstance(grace, (int, float)) and 0 <= grace < 3600 else 30.0
        reading = read_state(paths.state_file)
        state = reading.data or {}
        runner = self._runner_pid(paths, state)
        if runner is not None and not status.is_terminal and signal_job_process(runner, job_id, signal.SIGTERM):
            deadline = time.monotonic() + grace + 30.0
            while is_job_process(runner, job_id) and time.monotonic() < deadline:
                self._runner_pid(paths, state)
                time.sleep(0.05)
        left = kill_processes(lambda: job_processes(job_id, exclude=(os.getpid(),)), grace=grace, job_id=job_id)
        if left:
            raise BackendError(f"job {job_id}: processes {left} survived SIGKILL; check them with 'ps -p'")
        network = request.get("network")
        if isinstance(network, dict):
            with contextlib.suppress(KeyError, TypeError, ValueError):
                network_from_json(network).teardown()
        final = read_state(paths.state_file).data
        if final is not None and not JobState(final["state"]).is_terminal:
            final.update(state="STOPPED", exit_code=128 + signal.SIGTERM, ended_at=time.time())
            final["message"] = "; ".join(filter(None, [final["message"], "stopped after the runner was gone"]))
            for host in final["hosts"]:
                if host["state"] == "RUNNING":
                    host["state"] = "EXITED"
            StateWriter(paths).save_final(final)
        return self._status_of(paths)

    def _check_home(self) -> None:
        """A home that cannot hold jobs (a file, or a path under one) is an error, not an empty list; one that does
        not exist yet holds no jobs."""
        import stat

        path = self.home
        while True:
            try:
                info = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                if os.path.dirname(path) == path:
                    return
                path = os.path.dirname(path)
                continue
            except OSError as exc:
                raise ConfigError(f"the jobs' home cannot be read ({exc.strerror})", self.home,
                                  "set MALAUNCH_HOME to a folder of yours") from None  # fmt: skip
            if stat.S_ISDIR(info.st_mode):
                return
            where = "is a file" if path == self.home else f"is under the file {path}"
            raise ConfigError(f"the jobs' home {where}, not a folder", self.home, "set MALAUNCH_HOME to a folder")

    def list(self) -> List[JobStatus]:
        """Every job, newest first, from the history index as ``ma-submit list`` reads it (:meth:`list_page`): an
        ended job with a row is not read again. Nothing is removed (``keep_for`` is applied by the commands)."""
        from ..listing import ListQuery
        from .history import History

        self._check_home()
        self._take_over()
        history = History(self.home)
        snap = history.snapshot(self._read_for_history)
        page = snap.page(ListQuery(limit=0), time.time())
        history.settle(snap)
        return list(page.statuses)

    def events(self, job_id: str) -> List[JobEvent]:
        from .inside import local_events

        return local_events(self._paths(job_id))

    def usage(self, job_id: str) -> UsageReport:
        from .inside import local_usage

        return local_usage(self.status(job_id))

    def exec(
        self, job_id: str, command: Sequence[str], *, host: int = 0, tty: bool = False, capture: bool = True,
        stdin: Optional[bytes] = None,
    ) -> ExecResult:  # fmt: skip
        """In the host's namespace, folder and variables; ``tty``: on a terminal of its own (a pseudo-terminal)."""
        from .inside import local_exec

        paths = self._paths(job_id)
        return local_exec(paths, self._status_of(paths), command, host=host, environ=self.environ,
                          python=self.python, capture=capture, stdin=stdin, tty=tty)  # fmt: skip

    def lose_host(self, job_id: str, host: int) -> JobStatus:
        """Play the platform losing host ``host``'s machine for good: its shim and everything under it are killed
        and it is not started again; an elastic job goes on without it (:mod:`.hostops`). Returns once done."""
        from .hostops import ask_runner

        paths = self._paths(job_id)
        ask_runner(paths, self._status_of(paths), host, "lose", lambda: self._host_state(paths, host) != "RUNNING")
        return self._status_of(paths)

    def restore_host(self, job_id: str, host: int) -> JobStatus:
        """Play the platform giving lost host ``host`` a machine again: its shim starts and joins the job."""
        from .hostops import ask_runner

        paths = self._paths(job_id)
        ask_runner(paths, self._status_of(paths), host, "restore", lambda: self._host_state(paths, host) == "RUNNING")
        return self._status_of(paths)

    @staticmethod
    def _host_state(paths: JobPaths, host: int) -> str:
        hosts = (read_state(paths.state_file).data or {}).get("hosts") or []
        return str(hosts[host]["state"]) if 0 <= host < len(hosts) else ""

    def delete(self, job_id: str) -> str:
        paths = self._paths(job_id)
        self._unqueue(paths)  # a waiting job goes at once
        status = self._status_of(paths)
        left = job_processes(paths.job_id)
        if left or not (status.is_terminal or status.state is JobState.UNKNOWN):
            raise ConfigError(
                f"job {paths.job_id} is {status.state.value} (processes {left or 'starting'})",
                paths.job_id,
                f"stop it first: 'ma-submit stop {paths.job_id}'",
            )
        from .retention import prune_lock, remove_jobs

        try:
            with prune_lock(self.home):
                _, refused, _ = remove_jobs(self.home, [paths.job_id], dry_run=False, busy=set(), strict=True)
        except OSError as exc:
            raise BackendError(f"cannot delete {paths.job_dir}: {exc.strerror or exc}; check its permissions") from None
        if refused:
            raise ConfigError(f"job {paths.job_id} is in use", paths.job_id, refused[0][1])
        return paths.job_id

    # -- history and retention (list_page, prune, keep_for) -----------------------------------------------
    def _read_for_history(self, name: str) -> Tuple[JobStatus, Optional[float]]:
        paths = JobPaths(self.home, name)
        reading = read_state(paths.state_file)
        keep_for = reading.data.get("keep_for") if reading.data is not None else None
        return self._status_of(paths, reading), keep_for

    def list_page(self, query: ListQuery, *, now: float) -> ListPage:
        """From the history index (:mod:`.history`): only jobs without a row are read; ``keep_for`` applied."""
        from .history import History
        from .retention import expire_due

        self._check_home()
        self._take_over()
        history = History(self.home)
        snap = history.snapshot(self._read_for_history)
        page = snap.page(query, now, gone=expire_due(self.home, snap, now))
        history.settle(snap)
        return page._replace(notes=tuple(snap.notes))

    def expire(self, now: float) -> List[str]:
        """Remove the ended jobs whose ``keep_for`` has passed (skipped while a prune runs); returns their ids."""
        from .history import History
        from .retention import expire_due

        return sorted(expire_due(self.home, History(self.home).snapshot(self._read_for_history), now))

    def prune(
        self,
        older_than: float,
        *,
        now: Optional[float] = None,
        states: AbstractSet[str] = frozenset(),
        keep: int = 0,
        dry_run: bool = False,
    ) -> PruneResult:
        """As :meth:`Backend.prune`, from the history index, holding the home's prune lock (:mod:`.retention`)."""
        from .retention import prune_home

        self._check_home()
        when = time.time() if now is None else now
        return prune_home(self.home, self._read_for_history, older_than, now=when, states=states, keep=keep,
                          dry_run=dry_run)  # fmt: skip


def _while_reading(paths: JobPaths, lines: Iterator[str]) -> Iterator[str]:
    """``lines``, holding the job's use lock while they are read (prune and delete leave the job alone)."""
    from .retention import reading

    with reading(paths):
        yield from lines


def _cut_short(paths: JobPaths, count: int) -> Iterator[str]:
    """After the consoles: what the rank logs kept beyond them, when the job's disk was full (the console copy
    and the logs share it, and the console may lose the race for the last free bytes)."""
    reading = read_state(paths.state_file)
    if reading.data is None or not reading.data.get("disk_full"):
        return
    from .consolelog import missing_lines  # a full disk only

    for index in range(count):
        rank_logs = (read_json(paths.report_file(index)) or {}).get("rank_logs")
        if isinstance(rank_logs, dict):
            logs = {int(rank): path for rank, path in rank_logs.items()
                    if str(rank).isdigit() and isinstance(path, str)}  # fmt: skip
            yield from missing_lines(f"[host {index}] ", paths.console_log(index), logs)


def _failure_class(paths: JobPaths, job_state: JobState, state: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """A failed job's class, from the first failing host's shim report (else its exit code and console log)."""
    first = state.get("first_failure")
    if job_state is not JobState.FAILED or not isinstance(first, dict):
        return None
    code = first.get("exit_code")
    host = first.get("host")
    if not isinstance(code, int):
        return None
    from ...failures import failure_from_report  # only a failed job's status classifies its failure

    if not isinstance(host, int):
        return failure_from_report(None, code)
    return failure_from_report(read_json(paths.report_file(host)), code, paths.console_log(host))


def create_backend(**options: Any) -> LocalBackend:
    """Registry factory: ``get_backend("local", home=..., network=...)``."""
    return LocalBackend(**options)
