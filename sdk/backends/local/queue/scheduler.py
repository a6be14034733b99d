"""The local queue's one scheduler: ``python -m malaunch.sdk.backends.local.queue.scheduler HOME``.

It holds ``scheduler.lock`` for its life, and every quarter second, holding the queue's lock: puts back what a
killed scheduler left half-started, rebuilds a damaged entry from its job's plan (:func:`repair`), counts the
devices the running jobs take, starts the waiting jobs that fit
in order (:func:`~.store.plan_queue`) and writes why the others wait. It exits when the queue is empty, letting
its lock go while it still holds the queue's (so a job queued meanwhile finds no scheduler and starts one).

A queued job's runner gets the environment its ``ma-submit`` had (``<job dir>/queued-env.json``, mode 0600,
removed once the runner started) and a new job secret, never written to disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Dict, Iterable, Mapping, Optional, Set

from malaunch.entrypoint.public import read_info

from ....home import write_json_atomic
from ....plan import new_job_secret
from ....status import JobState
from ..jobdir import JobPaths, is_job_process, job_processes, pid_alive, read_json, runner_pid
from ..spawn import spawn_runner
from ..state import StateWriter, read_state
from .capacity import job_need, machine_capacity
from .store import QueueEntry, QueueStore, plan_queue

__all__ = ["ENV_FILE", "SCHEDULER_MODULE", "ensure_scheduler", "main", "repair", "schedule_once", "used_devices"]

SCHEDULER_MODULE = "malaunch.sdk.backends.local.queue.scheduler"
ENV_FILE = "queued-env.json"
_TICK = 0.25
_FRESH = 5.0  # seconds a runner just started counts as running before its environment can be read


def _runs(paths: JobPaths, pid: Optional[int]) -> bool:
    """The job's runner still runs: proven by its job id, or alive and started a moment ago (a process caught in
    its exec shows no environment yet)."""
    if is_job_process(pid, paths.job_id):
        return True
    try:
        fresh = time.time() - os.stat(paths.runner_pid_file).st_mtime < _FRESH
    except OSError:
        fresh = False
    return fresh and pid_alive(pid)


def used_devices(home: str, queued: Iterable[str]) -> int:
    """The devices the started, unended jobs of ``home`` take: those noted as started (``running/``) whose runner
    still runs; an ended one's note is dropped here."""
    waiting: Set[str] = set(queued)
    store = QueueStore(home)
    used = 0
    for name, need in store.running().items():
        if name in waiting:
            continue
        paths = JobPaths(home, name)
        data = read_state(paths.state_file).data
        ended = data is None or data["state"] not in ("PENDING", "RUNNING")
        if not ended and data is not None and _runs(paths, runner_pid(paths, data)):
            used += need
        else:
            store.forget_running(name)  # ended, or its runner is gone: it takes nothing any more
    return used


def start_entry(home: str, entry: QueueEntry, store: QueueStore) -> None:
    """Start ``entry``'s job runner with the environment its submitter had; the entry is gone after."""
    paths = JobPaths(home, entry.job_id)
    claimed = store.claim(entry)
    env_path = os.path.join(paths.job_dir, ENV_FILE)
    try:
        with open(env_path, encoding="utf-8") as handle:
            env: Dict[str, str] = {str(k): str(v) for k, v in json.load(handle).items()}
    except (OSError, ValueError, AttributeError):
        env = dict(os.environ)
    if os.path.isdir(paths.job_dir):
        spawn_runner(paths, env, new_job_secret())
        store.mark_running(entry.job_id, entry.need)
    for path in (env_path, claimed):
        store.remove(path)


def _recover(home: str, store: QueueStore) -> None:
    """Entries a killed scheduler left half-started: done when a process of the job runs, else put back."""
    for entry in store.entries(starting=True):
        if job_processes(entry.job_id):
            store.remove(store.entry_name(entry, ".starting"))
            store.remove(os.path.join(JobPaths(home, entry.job_id).job_dir, ENV_FILE))
        else:
            store.put_back(entry)


def _whole(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _rebuilt(paths: JobPaths, seq: int, total: int) -> Optional[QueueEntry]:
    """The entry of ``paths``' job as its plan gives it (None: the plan cannot be read)."""
    spec = (read_json(paths.plan_file) or {}).get("spec")
    resources = spec.get("resources") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(resources, dict):
        return None
    hosts, per_host = _whole(resources.get("hosts")), _whole(resources.get("devices_per_host"))
    priority = _whole(spec.get("priority") or 0)
    if hosts is None or per_host is None or priority is None:
        return None
    return QueueEntry(paths.job_id, min(job_need(hosts, per_host), total), priority, seq, time.time())


def repair(home: str, store: QueueStore, total: int) -> None:
    """Entry files that cannot be read (cut short by a full disk or a crash): rebuilt in their place (the name
    gives the order and the id) from the job's plan (its hosts, devices per host and priority; at most ``total``
    devices), else removed, and the job, when its folder is there, recorded FAILED saying why (it can never start
    without its plan). One line each on the scheduler's output (``scheduler.log``). Call with the queue's lock held."""
    for path, seq, job_id in store.damaged():
        paths = JobPaths(home, job_id)
        entry = _rebuilt(paths, seq, total)
        if entry is not None:
            store.rewrite(entry, path)  # a starting one is then looked at as any other (_recover)
            print(f"queue: {path} was damaged; rebuilt from {paths.plan_file}", flush=True)
            continue
        store.remove(path)
        final = read_state(paths.state_file).data
        if final is not None and not JobState(final["state"]).is_terminal:
            final.update(state="FAILED", ended_at=time.time(), message=f"its queue entry {path} was damaged and its "
                         "plan.json cannot be read, so it never started; submit the job file again")  # fmt: skip
            StateWriter(paths).save_final(final)
        print(f"queue: {path} was damaged and {paths.plan_file} cannot be read: job {job_id} ended", flush=True)


def schedule_once(home: str, store: QueueStore, environ: Mapping[str, str], capacity: Optional[str] = None) -> int:
    """One pass (call with the queue's lock held): start what fits, say why the rest waits; jobs left waiting."""
    recorded = store.capacity()
    total = recorded if recorded is not None and capacity is None else machine_capacity(environ, capacity).devices
    repair(home, store, total)
    _recover(home, store)
    entries = [entry for entry in store.entries() if os.path.isdir(JobPaths(home, entry.job_id).job_dir)
               or not store.remove(store.entry_name(entry))]  # fmt: skip
    if not entries:
        store.write_reasons({})
        return 0
    start, reasons = plan_queue(entries, total, used_devices(home, [entry.job_id for entry in entries]))
    for entry in start:
        start_entry(home, entry, store)
    store.write_reasons(reasons)
    return len(entries) - len(start)


def ensure_scheduler(home: str, environ: Mapping[str, str]) -> bool:
    """Start a scheduler when jobs wait and none runs (call with the queue's lock held); True when started."""
    store = QueueStore(home)
    if not store.entries() and not store.entries(starting=True) and not store.damaged():
        return False
    if store.scheduler_running():
        return False
    log = os.path.join(store.root, "scheduler.log")
    with open(log, "ab") as handle:
        subprocess.Popen([sys.executable, "-m", SCHEDULER_MODULE, home], env=dict(environ), stdin=subprocess.DEVNULL,
                         stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, cwd=store.root)  # fmt: skip
    return True


def run(home: str, environ: Mapping[str, str]) -> int:
    """The scheduler's loop (see the module's docstring); 0 once the queue is empty."""
    store = QueueStore(home)
    with contextlib.ExitStack() as held:
        if not held.enter_context(store.scheduler_lock()):
            return 0  # another scheduler runs
        info = read_info(os.getpid())
        write_json_atomic(os.path.join(store.root, "scheduler.json"),
                          {"pid": os.getpid(), "start": info.start if info is not None else None})  # fmt: skip
        while True:
            with store.locked():
                if schedule_once(home, store, environ) == 0 and not store.entries() and not store.damaged():
                    held.close()  # let go while the queue's lock is still held (see the module's docstring)
                    return 0
            time.sleep(_TICK)


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write(f"usage: python -m {SCHEDULER_MODULE} HOME\n")
        return 2
    return run(os.path.abspath(args[0]), os.environ)


if __name__ == "__main__":
    sys.exit(main())
