"""Running a sweep: one scheduling step over the record, the objective read from a trial's output, the driver.

:func:`step` is the whole scheduler. Under the sweep's lock it (1) refreshes every submitted trial that has not
ended from its backend (reading the objective once a trial ends), (2) with ``stop_on_failure`` stops the sweep
at the first failed trial, (3) submits waiting trials while fewer than ``max_parallel`` run, and (4) saves the
record. It is idempotent and safe from any process: the detached driver (``python -m malaunch.sdk.sweep.run
HOME SWEEP_ID``) calls it until the sweep is done, and ``wait``/following call it too, so a sweep goes on even
when its driver was killed. A trial that cannot be submitted is recorded as failed with the reason; the others
go on (the first trial of a sweep raises instead, so that a wrong setting is one error, not N failed trials).
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

from ..backends.base import Backend
from ..backends.lineprefix import parse_line
from ..errors import JobNotFound, MalaunchError
from ..failures import TAIL_LINES
from ..opening import open_backend
from ..spec.loader import spec_from_mapping
from ..status import JobState, JobStatus
from .state import TRIAL_SKIPPED, TRIAL_WAITING, SweepPaths, read_record, save_record, sweep_lock

__all__ = [
    "DRIVER_VARIABLE",
    "SWEEP_ID_LABEL",
    "TRIAL_LABEL",
    "UNKNOWN_GIVE_UP",
    "backend_for_record",
    "is_done",
    "main",
    "metric_from_lines",
    "start_driver",
    "step",
    "stop_sweep",
]

#: The Volcano label (and the driver's environment variable) that names a trial's sweep.
SWEEP_ID_LABEL = "malaunch.io/sweep-id"
TRIAL_LABEL = "malaunch.io/trial-index"
DRIVER_VARIABLE = "MALAUNCH_SWEEP_DRIVER"
DRIVER_POLL = 0.5
#: Seconds a trial may stay UNKNOWN before the sweep stops waiting for it.
UNKNOWN_GIVE_UP = 30.0


def backend_for_record(record: Mapping[str, Any]) -> Backend:
    """The backend a sweep's trials run on, made the way ``ma-submit`` makes it (with the sweep's home and the
    profile it was submitted with)."""
    home, profile = record.get("home"), record.get("profile")
    return open_backend(str(record["backend"]), str(home) if home else None, str(profile) if profile else None)


def _root_host(status: JobStatus) -> int:
    """The host whose output holds the objective: the first host that failed, else host 0 (rank 0's host)."""
    failed = [h for h in status.hosts if h.exit_code not in (None, 0)]
    if status.state is JobState.FAILED and failed:
        first = min(failed, key=lambda h: (h.ended_at if h.ended_at is not None else float("inf"), h.index))
        return first.index
    return 0


def metric_from_lines(lines: Iterable[str], regex: str, host: int = 0) -> Optional[float]:
    """The last match of ``regex`` in the text of host ``host``'s lines (rank 0's and no other rank's when the host
    names its ranks), as a number.

    Group 1 is the value when the regex has a group, else the whole match; a match that is no number is skipped.
    """
    pattern = re.compile(regex)
    own = [parsed for parsed in map(parse_line, lines) if parsed.host in (None, host)]  # None: a backend naming none
    if any(parsed.rank == 0 for parsed in own):
        own = [parsed for parsed in own if parsed.rank in (0, None)]
    found: Optional[float] = None
    for line in (parsed.text for parsed in own):
        for match in pattern.finditer(line):
            text = match.group(1) if pattern.groups else match.group(0)
            try:
                found = float(text)
            except (TypeError, ValueError):
                continue
    return found


def _read_metric(backend: Backend, job_id: str, status: JobStatus, regex: str) -> Optional[float]:
    try:
        lines = list(backend.logs(job_id, follow=False))
    except MalaunchError:
        return None
    return metric_from_lines(lines[-50 * TAIL_LINES :], regex, _root_host(status))


def _take_status(trial: Dict[str, Any], status: JobStatus) -> None:
    """Record the job's ``status`` in ``trial``: its state, exit code, times, message and failure class."""
    trial.update(
        state=status.state.value,
        exit_code=status.exit_code,
        started_at=status.started_at,
        ended_at=status.ended_at,
        message=status.message,
        failure_class=None if status.failure_class is None else dict(status.failure_class),
    )


def _refresh(backend: Backend, record: Dict[str, Any], trial: Dict[str, Any]) -> None:
    try:
        status = backend.status(str(trial["job_id"]))
    except JobNotFound as error:
        if trial.get("submitting"):  # its submitter died before the platform created it (we hold the lock)
            _forget_intent(trial)
        else:
            trial["message"] = str(error)
        return
    except MalaunchError as error:
        trial["message"] = str(error)
        return
    trial.pop("submitting", None)
    _take_status(trial, status)
    if status.state is JobState.UNKNOWN:
        trial.setdefault("unknown_since", time.time())
        if _given_up(trial, time.time()):
            trial["message"] = f"its state stayed unknown ({status.message}); see 'ma-submit status {trial['job_id']}'"
    else:
        trial.pop("unknown_since", None)
    metric = record.get("metric")
    if status.is_terminal and isinstance(metric, dict) and trial.get("metric") is None:
        trial["metric"] = _read_metric(backend, str(trial["job_id"]), status, str(metric["regex"]))


def _given_up(trial: Mapping[str, Any], now: float) -> bool:
    """A trial whose state stayed UNKNOWN (a damaged record) for :data:`UNKNOWN_GIVE_UP` s: settled, so the sweep
    never waits for it forever; ``ma-submit status JOB_ID`` tells more."""
    since = trial.get("unknown_since")
    return (
        trial["state"] == JobState.UNKNOWN.value and isinstance(since, (int, float)) and now - since >= UNKNOWN_GIVE_UP
    )


def _running(record: Mapping[str, Any]) -> List[Dict[str, Any]]:
    now = time.time()
    return [
        t
        for t in record["trials"]
        if t.get("job_id") and not JobState.parse(t["state"]).is_terminal and not _given_up(t, now)
    ]


def _submit(backend: Backend, paths: SweepPaths, record: Dict[str, Any], trial: Dict[str, Any], now: float) -> None:
    spec = spec_from_mapping(trial["spec"])
    plan = backend.plan(spec, job_id=backend.new_job_id(spec, now), now=now)
    plan = backend.label(plan, {SWEEP_ID_LABEL: str(record["id"]), TRIAL_LABEL: str(trial["index"])})
    plan = backend.share_code(plan, upload=not record.get("code_shared"))
    record["code_shared"] = True
    # The intent first: a driver killed between the platform's create and the next save leaves a trial
    # that names its job (so 'sweep status' shows it and 'sweep stop' stops it), not an untracked job.
    trial.update(job_id=plan.job_id, state=JobState.PENDING.value, submitted_at=now, message="", submitting=True)
    save_record(paths, record)
    try:
        handle = backend.execute(plan)
    except BaseException:
        _forget_intent(trial)
        raise
    trial.pop("submitting", None)
    trial.update(job_id=handle.id, state=JobState.PENDING.value, submitted_at=now, message="")


def _forget_intent(trial: Dict[str, Any]) -> None:
    """A trial whose job was never created is waiting again."""
    for key in ("submitting", "submitted_at"):
        trial.pop(key, None)
    trial.update(job_id=None, state=TRIAL_WAITING, message="")


def _skip_waiting(record: Dict[str, Any], reason: str) -> None:
    for trial in record["trials"]:
        if trial["state"] == TRIAL_WAITING:
            trial.update(state=TRIAL_SKIPPED, message=reason)


def is_done(record: Mapping[str, Any]) -> bool:
    """True when no trial runs or waits any more."""
    now = time.time()
    return all(
        t["state"] == TRIAL_SKIPPED or JobState.parse(t["state"]).is_terminal or _given_up(t, now)
        for t in record["trials"]
    )


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back until the block is done, so that a trial is never made without being recorded;
    a Ctrl-C that came meanwhile is raised right after. Only the main thread can do this (elsewhere: no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: List[int] = []
    # A handler, not a blocked signal mask: a mask would be inherited by the trials' processes started here.
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    if came:
        raise KeyboardInterrupt


def step(backend: Backend, paths: SweepPaths, *, clock: Any = time.time) -> Dict[str, Any]:
    """One scheduling step (see the module docstring); returns the saved record."""
    with _interrupts_deferred(), sweep_lock(paths):
        record = read_record(paths)
        for trial in _running(record):
            _refresh(backend, record, trial)
        failed = [t for t in record["trials"] if t["state"] == JobState.FAILED.value]
        if record.get("stop_on_failure") and failed and not record.get("stopped"):
            record["stopped"] = f"stop_on_failure: trial {failed[0]['index']} failed"
            save_record(paths, record)
            for trial in _running(record):
                _stop_trial(backend, record, trial)
        if record.get("stopped"):
            _skip_waiting(record, str(record["stopped"]))
        waiting = [t for t in record["trials"] if t["state"] == TRIAL_WAITING]
        free = int(record["max_parallel"]) - len(_running(record))
        for trial in waiting[: max(free, 0)]:
            try:
                _submit(backend, paths, record, trial, clock())
            except MalaunchError as error:
                if not any(t.get("job_id") for t in record["trials"]):
                    record["stopped"] = f"trial {trial['index']} could not be submitted: {error}"
                    _skip_waiting(record, str(record["stopped"]))
                    save_record(paths, record)
                    raise
                trial.update(state=JobState.FAILED.value, message=f"could not be submitted: {error}")
            save_record(paths, record)  # every submitted trial is on disk before the next one is made
        save_record(paths, record)
        return record


def _stop_trial(backend: Backend, record: Dict[str, Any], trial: Dict[str, Any]) -> None:
    try:
        status = backend.stop(str(trial["job_id"]))
    except JobNotFound as error:
        if trial.get("submitting"):  # never created: it will not be now
            trial.pop("submitting", None)
            trial.update(job_id=None, state=TRIAL_SKIPPED, message=str(record.get("stopped") or "stopped"))
        else:
            trial["message"] = f"could not be stopped: {error}"
        return
    except MalaunchError as error:
        trial["message"] = f"could not be stopped: {error}"
        return
    _take_status(trial, status)


def stop_sweep(backend: Backend, paths: SweepPaths, reason: str = "stopped by the user") -> Dict[str, Any]:
    """Stop the sweep: no trial starts any more, every running trial is stopped (idempotent). A sweep that has
    ended (every trial ended or skipped, checked with the backend) is left as it is: nothing is said stopped."""
    with sweep_lock(paths):
        record = read_record(paths)
        if is_done(record):
            return record
        running = _running(record)
        for trial in running:
            _refresh(backend, record, trial)
        if is_done(record):  # it ended since the driver last looked: its states are saved, nothing else
            save_record(paths, record)
            return record
        if not record.get("stopped"):
            record["stopped"] = reason
        _skip_waiting(record, str(record["stopped"]))
        save_record(paths, record)  # the driver sees it at its next step and ends
        for trial in _running(record):
            _stop_trial(backend, record, trial)
        save_record(paths, record)
        return record


def start_driver(paths: SweepPaths, environ: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start the detached driver (its own session, so Ctrl-C on the submitter does not reach it)."""
    env = {key: value for key, value in environ.items() if key != "MALAUNCH_JOB_ID"}
    env[DRIVER_VARIABLE] = paths.sweep_id
    with open(paths.driver_log, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "malaunch.sdk.sweep.run", paths.home, paths.sweep_id],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=paths.folder,
        )
    return proc


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The driver: step until the sweep is done (or stopped and nothing of it runs)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        sys.stderr.write("usage: python -m malaunch.sdk.sweep.run HOME SWEEP_ID\n")
        return 2
    paths = SweepPaths(args[0], args[1])
    try:
        record = read_record(paths)
        backend = backend_for_record(record)
        while True:
            record = step(backend, paths)
            if is_done(record):
                return 0
            time.sleep(DRIVER_POLL)
    except MalaunchError as error:
        sys.stderr.write(f"sweep driver {paths.sweep_id}: {error}\n")
        return 3


if __name__ == "__main__":
    sys.exit(main())
