"""The local job runner: ``python -m malaunch.sdk.backends.local.runner <job dir>``.

Started by ``LocalBackend.execute`` in its own session with no terminal, so the submitter can die without
harming the job. Contract:

1. Reads ``plan.json``; owns ``state.json`` from then on (atomic rewrites on every change).
2. Sets up the host network, starts every host's shim in its own session with its output appended to
   ``hosts/<i>/console.log``, and reaps them (it is a child subreaper, so orphaned ranks come back to it).
3. When a host's shim fails, the others get SIGTERM (their shims tear their ranks down); the job's exit code
   and line are decided from every host's end recorded, never from the order they were reaped in
   (:mod:`.jobend`: a death that says a peer failed never outranks one that does not). After
   ``grace_period + 10`` s stragglers get SIGKILL. The runner never
   coordinates the hosts: their shims do that themselves, as in a cluster (the job's coordinator,
   :mod:`malaunch.entrypoint.run.hosts`); the runner only plays the platform.
   A host's shim killed by a signal from outside (the pod died) in a multi-host job that may restart
   (``launcher.max_restarts``) is started again after :data:`REPLACE_AFTER` seconds, at most ``max_restarts``
   times per job, as a platform replaces a pod: its shim joins the job's coordinator again and the hosts go on
   together. Without restarts, or past them, the host's death fails the job as above, except in an elastic job
   (``launcher.min_hosts``): there a host killed and not replaced is lost, and the others' shims decide
   whether the job goes on without it.
   A host can also be lost for good, or brought back, on request (:mod:`.hostops`, as a platform loses a
   machine and gets one back): a lost host is killed with everything under it and not started again until
   a ``restore``; it never ends the job by itself (its ``lost_at`` is recorded in ``state.json``).
4. SIGTERM/SIGINT to the runner (``ma-submit stop``) tear all hosts down the same way; the job ends STOPPED.
5. Before recording the end, every process still carrying ``MALAUNCH_JOB_ID=<id>`` is killed, and the network
   is torn down, so an ended job has nothing left running.
6. A host's exit code and root cause are its shim's own report when it wrote one (else its wait status).
7. Writing the state never kills the runner: a failed write (full disk) is recorded as soon as a write works
   again (see :class:`~malaunch.sdk.backends.local.state.StateWriter`); a full disk is noted in the state
   once. The runner is the shims' parent: a host whose report could not be written has its wait status as
   its result, and the end is recorded even on a full disk (the reserve, else ``state.json``'s own slack).
   Every ~50 ms the consoles' growth is noted for ``logs`` merged by time (:mod:`.consolelog`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional

from malaunch.entrypoint.public import Name, set_subreaper

from .consolelog import ConsoleIndex
from .hostnet import network_from_json
from .hostops import kill_host_tree, take_requests
from .jobdir import JobPaths, job_processes, kill_processes, read_json, signal_job_process
from .jobend import HostEnd, job_failure
from .plan import HostCommand, LocalRequest, host_environment, with_secret
from .spawn import start_detached
from .state import StateWriter, disk_space_note, note_history, read_host_report, read_state

__all__ = ["REPLACE_AFTER", "STOP_EXIT_CODE", "main"]

STOP_EXIT_CODE = 128 + signal.SIGTERM
_KILL_MARGIN = 10.0
#: Seconds before a killed host's shim is started again (a platform replacing a pod takes a moment too).
REPLACE_AFTER = 1.0
_TICK = 0.05
_DISK_CHECK = 1.0


def _become_subreaper() -> None:
    set_subreaper()  # None when unsupported: leftovers are still found through their environment


def _exit_code(wait_status: int) -> int:
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


def _killed(wait_status: int) -> str:
    """``killed by SIGKILL`` when a wait status says a signal ended the process, else ""."""
    if not os.WIFSIGNALED(wait_status):
        return ""
    number = os.WTERMSIG(wait_status)
    try:
        return f"killed by {signal.Signals(number).name}"
    except ValueError:
        return f"killed by signal {number}"


class Runner:
    """Runs the hosts of one job and records what happens in ``state.json``."""

    def __init__(self, paths: JobPaths, request: LocalRequest, state: Dict[str, Any], max_restarts: int = 0) -> None:
        self.paths = paths
        self.request = request
        self.state = state
        self.max_restarts = max_restarts  # launcher.max_restarts: hosts killed from outside that are replaced
        self.network = network_from_json(dict(request.network))
        self.pids: Dict[int, int] = {}  # pid -> host index
        # Keep every Popen referenced: an unreferenced one is polled by subprocess's cleanup on the next Popen()
        # and could steal a host's exit status from our waitpid(-1).
        self.procs: List[subprocess.Popen[bytes]] = []
        self.stop_requested = False  # set by the signal handler (nothing else happens in the handler)
        self.stopped = False  # the stop actually cut hosts short (or came before any host started)
        self.stop_signal = 0
        self.teardown_at: Optional[float] = None  # monotonic time the hosts were told to stop
        self.killed = False
        self.replacing: Dict[int, float] = {}  # host index -> when its new shim starts
        self.replaced = 0
        self.writer = StateWriter(paths)
        self.index = ConsoleIndex([host.console_log for host in request.hosts])
        self.disk_checked = 0.0
        self.lost_output: Dict[int, str] = {}  # host index -> the log files its shim could not write to the end
        self.lost: Dict[int, str] = {}  # host index -> why it is lost for good (not started again, never a failure)
        self.ends: List[HostEnd] = []  # each failed host's end, as recorded (the job's failure is decided from them)

    # -- state -----------------------------------------------------------------------------------------
    def save(self) -> None:
        self.writer.save(self.state)

    def watch_outputs(self) -> None:
        """Note the consoles' growth; once a second, whether the job's disk is full (kept once found)."""
        self.index.note(time.time())
        now = time.monotonic()
        if now - self.disk_checked >= _DISK_CHECK:
            self.disk_checked = now
            if not self.state.get("disk_full"):
                note = disk_space_note(self.paths.job_dir)
                if note:
                    self.state["disk_full"] = note
                    self.save()

    def host(self, index: int) -> Dict[str, Any]:
        hosts: List[Dict[str, Any]] = self.state["hosts"]
        return hosts[index]

    def running(self) -> List[int]:
        return [pid for pid, index in self.pids.items() if self.host(index)["state"] == "RUNNING"]

    # -- signals ---------------------------------------------------------------------------------------
    def on_signal(self, signum: int, frame: object) -> None:
        del frame
        self.stop_requested = True
        self.stop_signal = signum

    # -- life cycle ------------------------------------------------------------------------------------
    def start_host(self, host: HostCommand, why: str = "") -> bool:
        """Start host ``host``'s shim; ``why``: what this start is (a replacement, a return), for its history."""
        record = self.host(host.index)
        env = host_environment(os.environ, host.env, sys.executable)
        env = with_secret(env, os.environ.get(Name.MALAUNCH_JOB_SECRET))  # LocalBackend.execute gave it to us
        try:
            os.makedirs(os.path.dirname(host.console_log), exist_ok=True)
            proc = start_detached(host.argv, env, host.cwd, host.console_log)
        except OSError as exc:
            record.update(state="EXITED", exit_code=127, ended_at=time.time(), error=str(exc))
            self.fail(HostEnd(host.index, record["address"], 127, str(exc), None, host.console_log,
                              said=f"host {host.index} could not start: {exc}"))  # fmt: skip
            return False
        self.procs.append(proc)
        self.pids[proc.pid] = host.index
        now = time.time()
        record.update(state="RUNNING", pid=proc.pid, started_at=now)
        note_history(record, "started", now, pid=proc.pid, detail=why)
        return True

    def fail(self, end: HostEnd) -> None:
        """A host's shim failed: the job's failure is decided again from every end recorded (:func:`job_failure`;
        ``first_failure`` names it), and the hosts still running are stopped."""
        self.ends.append(end)
        decided = job_failure(self.ends)
        if decided is not None:
            host, code, message = decided
            self.state.update(first_failure={"host": host, "exit_code": code}, message=message)
        self.begin_teardown()

    def begin_teardown(self) -> None:
        if self.teardown_at is not None:
            return
        self.teardown_at = time.monotonic()
        for pid in self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def reap(self) -> bool:
        changed = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return changed
            if pid == 0:
                return changed
            index = self.pids.get(pid)
            if index is None:
                continue  # an orphaned rank re-parented to us
            code = _exit_code(status)
            killed = _killed(status)
            if index in self.lost:  # lost for good on request: the platform took its machine
                self.host(index).update(state="EXITED", exit_code=code, ended_at=time.time(), pid=None)
                changed = True
                continue
            if os.WIFSIGNALED(status) and self._may_replace(index):
                self.replaced += 1
                self.replacing[index] = time.monotonic() + REPLACE_AFTER
                record = self.host(index)
                said = (f"its shim (pid {pid}) was {killed} (exit {code}): the platform starts it again in "
                        f"{REPLACE_AFTER:g} s, replacement {self.replaced} of {self.max_restarts}")  # fmt: skip
                note_history(record, "killed", time.time(), pid=pid, exit_code=code, signal=os.WTERMSIG(status),
                             detail=said)  # fmt: skip
                record.update(state="PENDING", pid=None, detail=said)
                changed = True
                continue
            report = read_host_report(self.request.hosts[index].report_file)
            detail = f"its shim (pid {pid}) was {killed}" if killed else ""
            by_runner = bool(killed and self.killed) or (self.teardown_at is not None and code == STOP_EXIT_CODE)
            if killed and self.killed:  # by this runner, as the job ended
                detail += " as the job ended: it had not stopped within the grace period"
            if report is not None:  # one truth per host: the shim's own account wins over its wait status
                code, detail = report.exit_code, report.detail
                if report.lost_output:
                    self.lost_output[index] = report.lost_output
            if os.WIFSIGNALED(status) and self._elastic() and self.teardown_at is None and not self.stop_requested:
                self._mark_lost(index, f"lost: its shim (pid {pid}) was {killed} (exit {code}) and not replaced; the "
                                "job goes on without it while launcher.min_hosts remain", pid, code,
                                os.WTERMSIG(status))  # fmt: skip
                self.host(index).update(state="EXITED", exit_code=code, ended_at=time.time(), pid=None)
                changed = True
                continue
            self.host(index).update(state="EXITED", exit_code=code, ended_at=time.time(), detail=detail)
            changed = True
            if code != 0 and not self.stopped:
                self.fail(HostEnd(index, self.host(index)["address"], code, detail, report,
                                  self.request.hosts[index].console_log, by_runner))  # fmt: skip

    def _may_replace(self, index: int) -> bool:
        """A host killed from outside is replaced (multi-host jobs with restarts left, nothing ending)."""
        del index
        return (len(self.request.hosts) > 1 and self.teardown_at is None and not self.stop_requested
                and self.replaced < self.max_restarts)  # fmt: skip

    def _elastic(self) -> bool:
        """An elastic torchrun job (``launcher.min_hosts``): its shims go on without a lost host."""
        return Name.MALAUNCH_MIN_HOSTS in self.request.hosts[0].env

    def _mark_lost(self, index: int, why: str, pid: Optional[int] = None, code: Optional[int] = None,
                   signum: Optional[int] = None) -> None:  # fmt: skip
        self.lost[index] = why
        now = time.time()
        note_history(self.host(index), "lost", now, pid=pid, exit_code=code, signal=signum, detail=why)
        self.host(index).update(lost_at=now, detail=why)

    def host_requests(self) -> bool:
        """Act on the requests to lose a host for good or bring one back (:mod:`.hostops`); True when any."""
        taken, refused = take_requests(self.paths, len(self.request.hosts))
        for line in refused:
            sys.stderr.write(f"local_runner: {line}\n")
        for index, action in taken:
            if self.teardown_at is not None or self.stop_requested:
                sys.stderr.write(f"local_runner: {action} host {index} ignored: the job is ending\n")
            elif action == "lose":
                self.lose(index)
            else:
                self.restore(index)
        return bool(taken)

    def lose(self, index: int) -> None:
        """Host ``index``'s machine is gone: kill its shim and everything under it; never start it again."""
        if index in self.lost:
            return
        self._mark_lost(index, "lost for good on request (its machine is gone; restore_host brings one back)")
        self.replacing.pop(index, None)
        record = self.host(index)
        if record["state"] == "RUNNING" and record["pid"] is not None:
            kill_host_tree(int(record["pid"]), self.request.job_id)  # reaped as lost (see reap)
        elif record["state"] == "PENDING":
            record.update(state="EXITED", ended_at=time.time(), pid=None)

    def restore(self, index: int) -> None:
        """A machine for lost host ``index`` is back: start its shim again (it joins the job's coordinator)."""
        record = self.host(index)
        if index not in self.lost or record["state"] == "RUNNING":
            why = "it is not lost" if index not in self.lost else "its killed shim is not reaped yet; ask again"
            sys.stderr.write(f"local_runner: restore host {index} ignored: {why}\n")
            return
        del self.lost[index]
        self.pids = {pid: i for pid, i in self.pids.items() if i != index}
        now = time.time()
        note_history(record, "back", now, detail="a machine is back for it: its shim is started again and joins "
                     "the job")  # fmt: skip
        record.update(detail="back: started again after it was lost", exit_code=None, ended_at=None, restored_at=now)
        self.start_host(self.request.hosts[index], "back after it was lost")

    def replace_due(self) -> None:
        now = time.monotonic()
        for index, when in list(self.replacing.items()):
            if now >= when and self.teardown_at is None and not self.stop_requested:
                del self.replacing[index]
                self.pids = {pid: i for pid, i in self.pids.items() if i != index}
                if self.start_host(self.request.hosts[index], "a replacement: its shim before was killed"):
                    self.save()

    def record_stop(self) -> None:
        self.stopped = True
        self.state["message"] = f"stopped on request (signal {self.stop_signal})"

    def reap_quietly(self) -> None:
        self.reap()

    def kill_stragglers(self) -> None:
        # a RUNNING host's pid is this runner's child not reaped yet (reap, on this thread, marks it ended as it
        # reaps it): alive or a zombie it holds its group's number, so the number names no one else's group
        for pid in self.running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for pid in job_processes(self.request.job_id, exclude=(os.getpid(),)):
            signal_job_process(pid, self.request.job_id, signal.SIGKILL)
        self.killed = True

    def run(self) -> int:
        self.writer.make_reserve()
        self.state.update(state="RUNNING", runner_pid=os.getpid(), started_at=time.time())
        self.save()
        try:
            self.network.setup()
        except Exception as exc:
            self.state["message"] = f"network setup failed: {exc}"
            self.state["first_failure"] = {"host": None, "exit_code": 3}
            return self.finish()
        for host in self.request.hosts:
            if self.stop_requested or self.teardown_at is not None:
                break
            self.start_host(host)
        if self.stop_requested and not self.pids:
            self.record_stop()
        self.save()
        grace = self.request.grace_period
        while self.running() or (self.replacing and self.teardown_at is None):
            self.replace_due()
            if self.host_requests():
                self.save()
            if self.stop_requested and not self.stopped:
                self.record_stop()
                self.begin_teardown()
                self.save()
            if self.reap():
                self.save()
            self.watch_outputs()
            if (
                self.teardown_at is not None
                and not self.killed
                and time.monotonic() - self.teardown_at > grace + _KILL_MARGIN
            ):
                self.kill_stragglers()
            time.sleep(_TICK)
        return self.finish()

    def finish(self) -> int:
        self.reap()
        self.index.note(time.time())
        self.index.close()
        note = disk_space_note(self.paths.job_dir)
        if note and not self.state.get("disk_full"):
            self.state["disk_full"] = note
        if self.lost_output:  # where each log stopped: the shims' reports say it (their room was set aside)
            lost = "; ".join(f"host {index}: {text}" for index, text in sorted(self.lost_output.items()))
            self.state["disk_full"] = "; ".join(filter(None, [self.state.get("disk_full"), lost]))
        left = kill_processes(
            lambda: job_processes(self.request.job_id, exclude=(os.getpid(),)),
            grace=2.0,
            deadline=10.0,
            reap=self.reap_quietly,
            job_id=self.request.job_id,
        )
        self.network.teardown()
        failure = self.state.get("first_failure")
        if self.stopped:
            self.state.update(state="STOPPED", exit_code=STOP_EXIT_CODE)
        elif failure is not None:
            self.state.update(state="FAILED", exit_code=int(failure["exit_code"]))
        else:
            self.state.update(state="SUCCEEDED", exit_code=0, message="")
        if left:
            self.state["message"] = f"{self.state.get('message', '')}; processes {left} could not be killed".strip("; ")
        self.state["ended_at"] = time.time()
        self.writer.save_final(self.state)  # the reserve (or the file's slack) makes room for it on a full disk
        return 0


def max_restarts(plan: Mapping[str, Any]) -> int:
    """The job's ``launcher.max_restarts`` as its validated spec in ``plan.json`` holds it (0 when not set)."""
    spec = plan.get("spec")
    launcher = spec.get("launcher") if isinstance(spec, dict) else None
    value = launcher.get("max_restarts") if isinstance(launcher, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def main(argv: Optional[List[str]] = None) -> int:
    """Run the job in ``argv[0]`` (a job directory); returns 0 once the end is recorded."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m malaunch.sdk.backends.local.runner JOB_DIR\n")
        return 2
    job_dir = os.path.abspath(args[0])
    paths = JobPaths(os.path.dirname(os.path.dirname(job_dir)), os.path.basename(job_dir))
    plan = read_json(paths.plan_file)
    reading = read_state(paths.state_file)
    if plan is None or reading.data is None:
        sys.stderr.write(f"local_runner: {job_dir}: plan.json unreadable or {reading.problem}\n")
        return 2
    state = reading.data
    request = LocalRequest.from_json(plan["request"])
    _become_subreaper()
    runner = Runner(paths, request, state, max_restarts(plan))
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, runner.on_signal)
    try:
        return runner.run()
    except BaseException as exc:
        # A bug or a full disk: never leave the hosts running without a runner. The traceback goes to runner.log.
        runner.stopped = True
        runner.state["message"] = f"the job runner failed: {exc!r}; see {paths.runner_log}"
        runner.kill_stragglers()
        with contextlib.suppress(Exception):
            runner.finish()
        raise


if __name__ == "__main__":
    _code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_code)  # the end is recorded: leave at once rather than linger in interpreter shutdown
