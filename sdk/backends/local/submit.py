"""Submitting a local job: its plan (pure), the checks of this machine ``--dry-run`` runs too, and ``execute``:
the job's folder prepared (state, code snapshot, files, ``plan.json``) and its runner started, or the job queued
when the machine is busy (:mod:`.queue`).

Imported by the backend only when a job is planned or submitted: the verbs that read a job never load it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from typing import TYPE_CHECKING, Dict, List, Tuple

from ...errors import BackendError, ConfigError, SpecError
from ...home import write_json_atomic
from ...notify.check import check_targets_here
from ...plan import SubmitPlan, new_job_secret
from ...units import size_text
from ..base import check_code
from ..codefiles import IGNORE_FILE, select_code_files
from .hostnet import LOOPBACK, NETNS, HostNetwork, LoopbackNetwork, NetnsNetwork, network_from_json
from .jobdir import JobPaths
from .plan import LocalRequest, plan_local
from .queue.capacity import machine_capacity
from .queue.scheduler import ENV_FILE, ensure_scheduler, used_devices
from .queue.store import QueueStore, plan_queue
from .spawn import end_runner, spawn_runner
from .state import SLACK_BYTES, new_state

if TYPE_CHECKING:
    from ...spec.model import JobSpec
    from ..codefiles import CodeFile
    from .setup import LocalSetup

__all__ = ["SNAPSHOT_WARN_BYTES", "Submitter", "snapshot_notes"]

#: A code snapshot above this size gets a warning (every submit copies it).
SNAPSHOT_WARN_BYTES = 100 * 1024 * 1024


class Submitter:
    """Plans, checks and submits the local backend's jobs (``name``: the backend's, for the plan)."""

    def __init__(self, setup: LocalSetup, name: str) -> None:
        self.setup = setup
        self.name = name
        self.home = setup.home

    # -- planning (pure) -------------------------------------------------------------------------------
    def network_for(self, spec: JobSpec, job_id: str) -> HostNetwork:
        """The host network a job gets: netns for msrun across hosts (or when asked), else loopback."""
        hosts = spec.resources.hosts
        mode = self.setup.network_mode
        if mode == "auto":
            mode = NETNS if spec.run_method == "msrun" and hosts > 1 else LOOPBACK
        return NetnsNetwork(job_id, hosts) if mode == NETNS else LoopbackNetwork(job_id, hosts)

    def plan(self, spec: JobSpec, *, job_id: str, now: float) -> SubmitPlan:
        request, notes = plan_local(
            spec, job_id=job_id, home=self.home, python=self.setup.python, network=self.network_for(spec, job_id)
        )
        return SubmitPlan(backend=self.name, job_id=job_id, created_at=now, spec=spec, request=request, notes=notes)

    # -- this machine's checks -----------------------------------------------------------------------------
    def check(self, plan: SubmitPlan) -> Tuple[str, ...]:
        """What ``execute`` checks on this machine before it starts anything (also run by ``--dry-run``).

        Returns a note with the code snapshot's size, and a warning when it is big.
        """
        spec = plan.spec
        check_code(spec)
        self._check_fits(spec)
        if spec.notify:
            check_targets_here(spec, self.setup.environ)
        for item in spec.inputs:
            if item.path is not None and not os.path.exists(item.path):
                raise SpecError(f"inputs.{item.name}.path", "does not exist", item.path, "check the path")
        request = plan.request
        if not isinstance(request, LocalRequest):
            return ()
        if request.network.get("kind") == NETNS:
            NetnsNetwork.check_available(spec.resources.hosts)
        return snapshot_notes(request.code_src, self._snapshot_files(request))

    def _check_fits(self, spec: JobSpec) -> None:
        """A job larger than the whole machine is refused (it would wait forever)."""
        capacity = machine_capacity(self.setup.environ, self.setup.capacity_setting)
        need = capacity.need_of(spec.resources.hosts, spec.resources.devices_per_host)
        if need > capacity.devices:
            raise ConfigError(
                f"resources: the job takes {need} devices (hosts x devices_per_host), more than this machine has "
                f"({capacity.devices}: {capacity.source})", need,
                "make the job smaller, or set MALAUNCH_LOCAL_CAPACITY (local.capacity) if the machine has more",
            )  # fmt: skip

    def _snapshot_files(self, request: LocalRequest) -> List[CodeFile]:
        """The files of ``code_dir`` the snapshot takes (``.malaunchignore`` applied; never the jobs' home)."""
        files = select_code_files(request.code_src, hashes=False)
        home = self.home
        return [f for f in files if os.path.commonpath([home, os.path.abspath(f.path)]) != home]

    # -- execution ---------------------------------------------------------------------------------------
    def execute(self, plan: SubmitPlan) -> None:
        """Prepare the job's folder and start its runner, or queue it; on any failure nothing is left."""
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
        try:
            self._prepare(plan, request, paths, files)
            self._start_or_queue(plan.spec, paths)
        except BaseException as exc:
            self._undo_start(paths, request)
            shutil.rmtree(paths.job_dir, ignore_errors=True)
            if isinstance(exc, OSError):
                raise BackendError(f"cannot prepare job {plan.job_id}: {exc}; check MALAUNCH_HOME") from None
            raise

    def _prepare(self, plan: SubmitPlan, request: LocalRequest, paths: JobPaths, files: List[CodeFile]) -> None:
        hosts = [{"index": h.index, "address": h.address, "log_file": h.console_log} for h in request.hosts]
        write_json_atomic(
            paths.state_file,
            new_state(plan.job_id, plan.spec.name, plan.created_at, hosts, plan.spec.keep_for),
            slack=SLACK_BYTES,
        )
        open(paths.use_lock, "ab").close()  # readers share it, deleters take it alone (retention)
        os.makedirs(request.code_dest, exist_ok=True)
        for item in files:
            target = os.path.join(request.code_dest, *item.relpath.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(item.path, target)
        for folder in request.dirs:
            os.makedirs(folder, exist_ok=True)
        for path, text in request.files.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        data = plan.to_json()
        data["request"] = request.to_json()
        write_json_atomic(paths.plan_file, data)

    def _start_or_queue(self, spec: JobSpec, paths: JobPaths) -> None:
        """Start the job's runner now when it fits and nothing waits, else queue it (:mod:`.queue`): all under the
        queue's lock, so two submits never start more than the machine holds."""
        environ = self.setup.environ
        store = QueueStore(self.home)
        machine = machine_capacity(environ, self.setup.capacity_setting)
        need, capacity = machine.need_of(spec.resources.hosts, spec.resources.devices_per_host), machine.devices
        with store.locked():
            waiting = store.entries()
            if not waiting and need <= capacity - used_devices(self.home, ()):
                self.setup.runners[paths.job_id] = spawn_runner(paths, environ, new_job_secret())
                store.mark_running(paths.job_id, need)
                return
            entry = None
            try:
                write_json_atomic(os.path.join(paths.job_dir, ENV_FILE), dict(environ))  # 0600, gone at start
                entry = store.add(paths.job_id, need, spec.priority)
                store.write_capacity(capacity)
                entries = store.entries()
                used = used_devices(self.home, [e.job_id for e in entries])
                store.write_reasons(plan_queue(entries, capacity, used)[1])
                ensure_scheduler(self.home, environ)
            except BaseException:
                # Out of the queue before its lock goes: no scheduler may start a job whose submit failed. A
                # scheduler started here finds the queue empty and exits by itself (it serves every job).
                if entry is not None:
                    store.remove(store.entry_name(entry))
                raise

    def _undo_start(self, paths: JobPaths, request: LocalRequest) -> None:
        """A submit that fails after its runner started (the runner's pid file could not be written, a Ctrl-C):
        the runner, whatever it started and its network are gone, and the runner reaped, before the submit says
        it failed. The runner is our unreaped child, so its pid is still its own; the rest is proven by job id."""
        proc = self.setup.runners.pop(paths.job_id, None)
        if proc is None:
            return
        end_runner(proc, paths.job_id)
        with contextlib.suppress(KeyError, TypeError, ValueError, BackendError):
            network_from_json(dict(request.network)).teardown()


def snapshot_notes(code_dir: str, files: List[CodeFile]) -> Tuple[str, ...]:
    """The snapshot's size as a note, plus a warning naming the biggest folders when it is big."""
    total = sum(item.size for item in files)
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
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("0.0.0.0", 0))
            port = int(sock.getsockname()[1])
        if port not in taken and port + 1 not in taken and port - 1 not in taken:
            return port
    raise BackendError("could not find a free TCP port; set launcher.master_port / msrun_master_port")
