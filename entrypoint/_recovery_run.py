"""Run a MindSpore recovery plan: every process under its own ``run_plan``, a failed one relaunched alone.

``run_plan`` ends the whole group when one process fails, which is right for every other method and wrong
here, where the others must keep running while one worker is started again. So each process of the plan
(scheduler, workers) becomes a *unit*: a child ``python -m malaunch.entrypoint._recovery_unit UNIT.json`` that
runs a one-process plan with ``run_plan`` (logs, prefixes, signal forwarding, teardown, no orphans, exactly as
for any rank) and writes its ``RunResult`` next to the unit file. Units run in separate processes rather
than threads because ``run_plan`` reaps orphaned children of its own process, which could take another
thread's child.

Contract of :func:`run_recovery`:

1. All units start at once. A unit that exits 0 is done; the run succeeds when every unit is done.
2. A unit that fails is classified (:mod:`.failure_class`); if ``restart_on`` accepts it and fewer than the
   budget of relaunches were made on this host, the same process is started again after ``delay`` seconds
   (:func:`~.ms_recovery.relaunch_spec`: same ``MS_NODE_ID`` and ``MS_RECOVERY_PATH``); the others keep running.
3. Otherwise every unit gets SIGTERM (each tears its process down with the grace period), then SIGKILL after
   ``grace + 10`` s; the result is the failed unit's.
4. SIGTERM/SIGINT/SIGHUP to the shim end every unit the same way: 128+signal. A unit gets SIGTERM should the
   shim die (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from . import proctree
from .atomicfile import write_atomic
from .errors import LaunchError
from .ms_recovery import relaunch_spec
from .plan import LaunchPlan, ProcessSpec
from .report import Failure, RunResult
from .restarts import Attempt, RestartOutcome, RestartPolicy, classify_result, describe_failure, should_restart

__all__ = ["DEFAULT_RELAUNCHES", "UNIT_MODULE", "read_json", "result_json", "run_recovery", "write_json"]

UNIT_MODULE = "malaunch.entrypoint._recovery_unit"
#: Relaunches per host when ``MA_MAX_RESTARTS`` is unset: MS_ENABLE_RECOVERY=1 asks for relaunches.
DEFAULT_RELAUNCHES = 3
_TICK = 0.1
_KILL_MARGIN = 10.0


def write_json(path: str, data: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(data))


def read_json(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def result_json(result: RunResult) -> Dict[str, Any]:
    cause = result.root_cause._asdict() if result.root_cause is not None else None
    return {"exit_code": result.exit_code, "shim_signal": result.shim_signal, "duration": result.duration,
            "root_cause": cause}  # fmt: skip


def _result_from(data: Optional[Mapping[str, Any]], code: int, duration: float) -> RunResult:
    """A unit's result from its file; without one (the unit died), its exit code alone."""
    if data is None:
        return RunResult(code, None, None, duration)
    cause = data.get("root_cause")
    failure = None
    if isinstance(cause, dict):
        try:
            failure = Failure(**{**cause, "tail": tuple(str(line) for line in cause.get("tail") or ())})
        except TypeError:
            failure = None
    signum = data.get("shim_signal")
    return RunResult(int(data.get("exit_code", code)), failure, signum if isinstance(signum, int) else None, duration)


@dataclass
class _Unit:
    spec: ProcessSpec
    relaunch: int
    proc: subprocess.Popen[bytes]
    result_file: str
    started: float


class _Coordinator:
    def __init__(
        self, plan: LaunchPlan, env: Mapping[str, str], policy: RestartPolicy, delay: float, say: Callable[[str], None]
    ) -> None:
        self.plan = plan
        self.env = env
        self.policy = policy
        self.delay = delay
        self.say = say
        self.budget = policy.max_restarts if policy.max_restarts > 0 else DEFAULT_RELAUNCHES
        self.units: List[_Unit] = []
        self.pending: List[Tuple[float, ProcessSpec, int]] = []  # (due, spec, relaunch number)
        self.attempts: List[Attempt] = []
        self.relaunches = 0
        self.signum: Optional[int] = None
        self.wake = threading.Event()

    def on_signal(self, signum: int, frame: object) -> None:
        del frame
        if self.signum is None:
            self.signum = signum
        self.wake.set()

    def start(self, spec: ProcessSpec, relaunch: int) -> None:
        unit_dir = os.path.join(self.plan.log_dir, "units")
        name = f"{spec.name}-{relaunch}"
        unit_file = os.path.join(unit_dir, f"{name}.json")
        result_file = os.path.join(unit_dir, f"{name}.result.json")
        rank_logs = {spec.rank: spec.log_file} if spec.rank is not None else {}
        unit_plan = self.plan._replace(processes=(spec,), rank_logs=rank_logs, notes=(), files={})
        with contextlib.suppress(OSError):
            os.unlink(result_file)
        try:
            write_json(unit_file, {"plan": unit_plan.to_json(), "result_file": result_file})
            proc = subprocess.Popen(
                [sys.executable, "-m", UNIT_MODULE, unit_file],
                env=dict(self.env),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as error:
            raise LaunchError(
                f"cannot start {spec.name} (recovery unit {unit_file!r}): {error.strerror or error}; "
                "check that the log directory is writable and the interpreter can run"
            ) from None
        self.units.append(_Unit(spec, relaunch, proc, result_file, time.monotonic()))

    def _live(self) -> List[proctree.ProcKey]:
        """The units still running (a unit that ended is reaped here, so its pid names nothing else)."""
        keys = []
        for unit in self.units:
            info = proctree.read_info(unit.proc.pid) if unit.proc.poll() is None else None
            if info is not None:
                keys.append(proctree.ProcKey(info.pid, info.start))
        return keys

    def stop_all(self) -> None:
        """SIGTERM every unit (each tears its process down), SIGKILL after grace + margin: the kill loop."""
        proctree.kill_loop(self._live, self.plan.grace_period + _KILL_MARGIN)
        for unit in self.units:
            unit.proc.wait()

    def finished(self, unit: _Unit, code: int) -> Optional[RunResult]:
        """Handle a unit's end; returns the run's final result when the run must end now."""
        self.units.remove(unit)
        result = _result_from(read_json(unit.result_file), code, time.monotonic() - unit.started)
        if code == 0 and result.exit_code == 0:
            return None
        kind = classify_result(result)
        again = (
            kind is not None
            and self.relaunches < self.budget
            and self.signum is None
            and should_restart(self.policy, kind, result.exit_code)
        )
        log_dir = os.path.dirname(unit.spec.log_file)
        self.attempts.append(Attempt(len(self.attempts), result, kind, again, log_dir))
        self.say(f"{unit.spec.name} failed: {describe_failure(result)}")
        if not again or kind is None:
            return result
        self.relaunches += 1
        self.say(
            f"{unit.spec.name} failed ({kind.kind}): relaunch {self.relaunches} of {self.budget} with "
            f"MS_NODE_ID={unit.spec.env.get('MS_NODE_ID', 'sched')} in {self.delay:g}s"
        )
        number = unit.relaunch + 1
        self.pending.append((time.monotonic() + self.delay, relaunch_spec(unit.spec, number), number))
        return None

    def run(self, started: float) -> RestartOutcome:
        for spec in self.plan.processes:
            self.start(spec, 0)
        failed: Optional[RunResult] = None
        while self.signum is None and failed is None and (self.units or self.pending):
            for unit in list(self.units):
                code = unit.proc.poll()
                if code is not None:
                    failed = self.finished(unit, code)
                    if failed is not None:
                        break
            now = time.monotonic()
            for item in [p for p in self.pending if p[0] <= now and failed is None and self.signum is None]:
                self.pending.remove(item)
                self.start(item[1], item[2])
            self.wake.wait(_TICK)
        self.pending.clear()
        self.stop_all()
        duration = time.monotonic() - started
        if self.signum is not None:
            final = RunResult(128 + self.signum, None, self.signum, duration)
        elif failed is not None:
            final = failed._replace(duration=duration)
        else:
            final = RunResult(0, None, None, duration)
        return RestartOutcome(final, tuple(self.attempts), self.policy)


def run_recovery(
    plan: LaunchPlan,
    base_env: Mapping[str, str],
    policy: RestartPolicy,
    delay: float,
    say: Callable[[str], None],
) -> RestartOutcome:
    """Run a recovery plan (:func:`~.ms_recovery.plan_with_recovery`) to its end."""
    started = time.monotonic()
    coordinator = _Coordinator(plan, base_env, policy, delay, say)
    with proctree.stop_signal_handlers(coordinator.on_signal):
        try:
            return coordinator.run(started)
        except BaseException:
            coordinator.stop_all()
            raise
