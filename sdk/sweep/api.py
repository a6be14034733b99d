"""The Python API for sweeps: ``Sweep(job, params={...}).submit()`` -> :class:`SweepHandle`.

Example::

    from malaunch.sdk import Job, Sweep
    job = Job.from_yaml("job.yaml")                       # args: ["--lr", "{lr}", "--batch", "{batch}"]
    sweep = Sweep(job, params={"lr": [1e-3, 3e-4], "batch": [32, 64]}, max_parallel=2,
                  metric={"name": "loss", "regex": r"loss=([0-9.]+)", "goal": "minimize"})
    print(sweep.plan().render())                          # every trial's plan; nothing starts
    handle = sweep.submit()                               # 4 trials, at most 2 running at once
    handle.wait()
    for row in handle.results():                          # best first
        print(row.index, row.params, row.state, row.metric)

spec -> plan -> execute as for a job: :func:`~malaunch.sdk.sweep.spec.expand` makes the trials' specs (pure),
:meth:`Sweep.plan` every trial's :class:`~malaunch.sdk.plan.SubmitPlan` (pure given the ids and the time), and
:meth:`Sweep.submit` writes the sweep's record (:mod:`malaunch.sdk.sweep.state`), submits the first
``max_parallel`` trials and leaves a detached driver to start the rest (:mod:`malaunch.sdk.sweep.run`). Each
trial is a normal job with its own id, status, logs and exit code.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from ..backends.base import Backend, make_job_id
from ..backends.registry import runs_here
from ..errors import ConfigError, MalaunchError, SpecError, WaitTimeout
from ..home import home_dir
from ..job import Job
from ..opening import get_backend
from ..plan import SubmitPlan
from ..spec.loader import read_job_data, spec_from_mapping
from ..spec.model import JobSpec
from ..status import JobState
from .logs import sweep_lines
from .results import TrialResult, rank_results, rows_of
from .run import SWEEP_ID_LABEL, TRIAL_LABEL, backend_for_record, is_done, start_driver, step, stop_sweep
from .spec import (
    Metric,
    Param,
    SweepSpec,
    Trial,
    describe_param,
    expand,
    in_trial,
    merge_params,
    metric_from_mapping,
    param_from_value,
    sweep_from_mapping,
)
from .state import (
    RECORD_VERSION,
    TRIAL_WAITING,
    SweepPaths,
    list_sweep_ids,
    read_record,
    resolve_sweep_id,
    save_record,
)

__all__ = [
    "Sweep",
    "SweepHandle",
    "SweepPlan",
    "TrialResult",
    "attach_sweep",
    "default_parallel",
    "list_sweeps",
    "rank_results",
]


def _plan_trial(impl: Backend, trial: Trial, now: float, *, check: bool) -> SubmitPlan:
    """One trial's plan (``check``: and the backend's check of it); a field found wrong names the trial and its
    values, as :func:`~malaunch.sdk.sweep.spec.expand` does (the caller adds the job file)."""
    assert trial.spec is not None
    try:
        plan = impl.plan(trial.spec, job_id=impl.new_job_id(trial.spec, now), now=now)
        if check:
            impl.check(plan)
    except SpecError as error:
        raise in_trial(error, trial.index, trial.params) from None
    return plan


def default_parallel(backend: str, spec: JobSpec, trials: int, cpus: Optional[int] = None) -> int:
    """Local: as many trials as the CPUs hold (one CPU per process a trial starts); cloud: every trial at once
    (the platform queues what does not fit)."""
    if not runs_here(backend):
        return max(trials, 1)
    per_trial = spec.resources.hosts * max(spec.resources.devices_per_host, 1)
    count = os.cpu_count() if cpus is None else cpus
    return max(1, min(trials, (count or 1) // per_trial))


@dataclass(frozen=True)
class SweepPlan:
    """Every trial's plan (pure); ``render`` is what ``ma-submit sweep --dry-run`` prints."""

    sweep_id: str
    sweep: SweepSpec
    max_parallel: int
    trials: Tuple[Trial, ...]
    plans: Tuple[SubmitPlan, ...]

    def to_json(self) -> Dict[str, Any]:
        """``{"id", "max_parallel", "sweep", "trials": [{"index", "params", "plan"}]}``."""
        return {
            "id": self.sweep_id,
            "max_parallel": self.max_parallel,
            "sweep": self.sweep.to_json(),
            "trials": [
                {"index": t.index, "params": dict(t.params), "plan": plan.to_json()}
                for t, plan in zip(self.trials, self.plans)
            ],
        }

    def render(self) -> str:
        """A header, then each trial's parameters and plan."""
        kind = "grid" if self.sweep.random is None else f"random: {self.sweep.random}, seed {self.sweep.seed}"
        lines = [
            f"sweep {self.sweep_id} (dry run: nothing was started): {len(self.trials)} trial(s), {kind}, "
            f"at most {self.max_parallel} at once",
        ]
        lines.extend(f"  param {describe_param(p)}" for p in self.sweep.params)
        for trial, plan in zip(self.trials, self.plans):
            lines.append("")
            lines.append(f"=== trial {trial.index}: {trial.params_text()}")
            lines.append(plan.render())
        return "\n".join(lines)


class Sweep:
    """A job and its sweep section, ready to plan or submit (see the module docstring).

    ``params`` maps names to a list of values or ``{"choice"|"uniform"|"log_uniform": [...]}``; the other
    keywords are the fields of the ``sweep:`` section and replace the ones given in ``sweep``.
    """

    def __init__(
        self,
        job: Union[Job, JobSpec],
        params: Union[Mapping[str, Any], Sequence[Param]] = (),
        *,
        random: Optional[int] = None,
        seed: Optional[int] = None,
        max_parallel: Optional[int] = None,
        stop_on_failure: Optional[bool] = None,
        metric: Union[Metric, Mapping[str, str], None] = None,
        sweep: Optional[SweepSpec] = None,
    ) -> None:
        self.spec: JobSpec = job.spec if isinstance(job, Job) else job
        base = sweep if sweep is not None else SweepSpec(params=())
        given = (
            tuple(params)
            if not isinstance(params, Mapping)
            else tuple(param_from_value(name, raw, f"params.{name}") for name, raw in params.items())
        )
        changes: Dict[str, Any] = {"params": merge_params(base.params, given)}
        if not changes["params"]:
            raise SpecError(
                "sweep.params",
                "is empty: no sweep: section with params and no --param",
                None,
                "add 'sweep: {params: {lr: [0.1, 0.01]}}' to the job file, or --param lr=0.1,0.01",
            )
        for key, value in (
            ("random", random),
            ("seed", seed),
            ("max_parallel", max_parallel),
            ("stop_on_failure", stop_on_failure),
        ):
            if value is not None:
                changes[key] = value
        if metric is not None:
            changes["metric"] = metric if isinstance(metric, Metric) else metric_from_mapping(metric)
        self.sweep: SweepSpec = sweep_from_mapping(dataclasses.replace(base, **changes).to_json())
        expand(self.spec, self.sweep)  # every mistake of the sweep is reported here, before anything is planned

    def __repr__(self) -> str:
        return f"Sweep(name={self.spec.name!r}, params={[p.name for p in self.sweep.params]!r})"

    @classmethod
    def from_yaml(cls, path: str, **overrides: Any) -> Sweep:
        """A job file with a ``sweep:`` section (or without one: give ``params``); ``overrides`` as in ``Sweep``."""
        data, base_dir = read_job_data(path)
        try:
            return cls.from_data(data, base_dir, **overrides)
        except SpecError as error:
            raise error.with_source(path) from None

    @classmethod
    def from_data(cls, data: object, base_dir: Optional[str] = None, **overrides: Any) -> Sweep:
        """As :meth:`from_yaml`, from a job file's parsed data (paths relative to ``base_dir``)."""
        raw_sweep: object = None
        job_data = data
        if isinstance(data, Mapping) and "sweep" in data:
            job_data = {k: v for k, v in data.items() if k != "sweep"}
            raw_sweep = data["sweep"]
        spec = spec_from_mapping(job_data, base_dir)
        section = None if raw_sweep is None else sweep_from_mapping(raw_sweep)
        return cls(spec, sweep=section, **overrides)

    def trials(self, sweep_id: str = "") -> List[Trial]:
        """The trials' specs (pure)."""
        return expand(self.spec, self.sweep, sweep_id)

    def _backend(self, backend: Optional[Backend]) -> Backend:
        return backend if backend is not None else get_backend(self.spec.backend)

    def new_id(self, now: float) -> str:
        """A fresh sweep id: ``<name>-sweep-<time>-<token>``."""
        return make_job_id(f"{self.spec.name}-sweep", now, secrets.token_hex(3))

    def plan(
        self, *, backend: Optional[Backend] = None, sweep_id: Optional[str] = None, now: Optional[float] = None,
        dry: bool = False,
    ) -> SweepPlan:  # fmt: skip
        """Every trial's plan, with the job ids the backend would make; nothing starts. ``dry``: a
        ``resume_from`` whose check would ask the platform's API is shown unresolved (``Job.plan``)."""
        impl = self._backend(backend)
        self.spec = impl.resolve_resume(self.spec, dry=dry)  # every trial starts from the same checkpoint
        when = time.time() if now is None else now
        ident = sweep_id if sweep_id is not None else self.new_id(when)
        trials = self.trials(ident)
        plans: List[SubmitPlan] = []
        for trial in trials:
            plan = _plan_trial(impl, trial, when, check=not plans)
            plans.append(impl.label(plan, {SWEEP_ID_LABEL: ident, TRIAL_LABEL: str(trial.index)}))
        parallel = self.sweep.max_parallel or default_parallel(impl.name, self.spec, len(trials))
        return SweepPlan(ident, self.sweep, parallel, tuple(trials), tuple(plans))

    def submit(
        self, backend: Optional[Backend] = None, *, home: Optional[str] = None, driver: bool = True,
        profile: Optional[str] = None,
    ) -> SweepHandle:  # fmt: skip
        """Record the sweep, submit the first trials and (``driver``) start the detached driver for the rest.

        ``home``: where the record goes (default: a local backend's home, else ``$MALAUNCH_HOME``). Without
        ``driver`` the remaining trials start only while ``wait`` or ``step`` is called. ``profile``: the profile
        the backend was made with, recorded so that the driver makes it the same way.
        """
        impl = self._backend(backend)
        self.spec = impl.resolve_resume(self.spec)
        where = home_dir(os.environ, home or impl.home)
        now = time.time()
        ident = self.new_id(now)
        trials = self.trials(ident)
        if trials:
            _plan_trial(impl, trials[0], now, check=True)
        paths = SweepPaths(str(where), ident)
        record = {
            "version": RECORD_VERSION,
            "id": ident,
            "name": self.spec.name,
            "backend": impl.name,
            "home": paths.home,
            "created_at": now,
            "sweep": self.sweep.to_json(),
            "param_names": [p.name for p in self.sweep.params],
            "max_parallel": self.sweep.max_parallel or default_parallel(impl.name, self.spec, len(trials)),
            "stop_on_failure": self.sweep.stop_on_failure,
            "metric": None if self.sweep.metric is None else self.sweep.metric.to_json(),
            "stopped": None,
            "code_shared": False,
            **({"profile": profile} if profile else {}),
            "trials": [
                {
                    "index": t.index,
                    "params": dict(t.params),
                    "spec": t.spec.to_dict() if t.spec else {},
                    "state": TRIAL_WAITING,
                    "job_id": None,
                    "exit_code": None,
                    "metric": None,
                    "message": "",
                }
                for t in trials
            ],
        }
        try:
            os.makedirs(paths.folder)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the sweep folder {paths.folder} ({exc.strerror})",
                paths.folder,
                "set MALAUNCH_HOME to a writable folder",
            ) from None
        save_record(paths, record)
        handle = SweepHandle(paths, impl)
        state = step(impl, paths)
        if driver and not is_done(state) and any(t["state"] == TRIAL_WAITING for t in state["trials"]):
            handle.driver = start_driver(paths, os.environ)
        return handle


class SweepHandle:
    """A submitted sweep: ``trials``, ``status()``, ``wait()``, ``stop()``, ``results()``, ``logs()``.

    Every call reads the record again, so a handle made in another process (:func:`attach_sweep`) behaves the
    same as the one ``submit`` returned.
    """

    def __init__(self, paths: SweepPaths, backend: Optional[Backend] = None) -> None:
        self.paths = paths
        self.id = paths.sweep_id
        self.driver: Optional[subprocess.Popen[bytes]] = None  # the driver this process started, if any
        self._backend = backend

    def __repr__(self) -> str:
        return f"SweepHandle(id={self.id!r})"

    @property
    def backend(self) -> Backend:
        """The backend of the trials (made from the record when the handle was attached)."""
        if self._backend is None:
            self._backend = backend_for_record(self.record())
        return self._backend

    def record(self) -> Dict[str, Any]:
        """The record as it is on disk."""
        return read_record(self.paths)

    @property
    def trials(self) -> List[TrialResult]:
        """The trials in index order, as last recorded."""
        return rows_of(self.record())

    def step(self) -> Dict[str, Any]:
        """Refresh the trials and start waiting ones where a slot is free (what the driver does)."""
        if self.driver is not None:
            self.driver.poll()  # reap our own driver once it has ended
        return step(self.backend, self.paths)

    def results(self) -> List[TrialResult]:
        """The trials, best first by the objective (then by index); refreshed first."""
        record = self.step()
        metric = record.get("metric")
        goal = metric.get("goal") if isinstance(metric, dict) else None
        return rank_results(rows_of(record), goal)

    def is_done(self) -> bool:
        """True once no trial runs or waits."""
        return is_done(self.step())

    def wait(self, timeout: Optional[float] = None, *, poll_interval: float = 0.5) -> List[TrialResult]:
        """Block until every trial has ended (or was skipped); returns :meth:`results`.

        Raises:
            WaitTimeout: ``timeout`` passed first; the trials keep running.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self.step()
            if is_done(record):
                return self.results()
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(self.id, float(timeout or 0), "RUNNING", kind="sweep")
            time.sleep(poll_interval)

    def stop(self) -> List[TrialResult]:
        """Stop every running trial and start no more; idempotent."""
        record = stop_sweep(self.backend, self.paths)
        return rows_of(record)

    def logs(self, trial: Optional[int] = None, *, follow: bool = False) -> Iterator[str]:
        """Every submitted trial's output, ``[trial N] `` before each line (only trial ``trial`` if given); with
        ``follow`` until the sweep is done (:mod:`malaunch.sdk.sweep.logs`)."""
        return sweep_lines(self.backend, self.step if follow else self.record, trial=trial, follow=follow)

    def exit_code(self) -> int:
        """0 when every trial succeeded, else the first failed trial's exit code (1 when it has none)."""
        rows = self.trials
        bad = [r for r in rows if r.state != JobState.SUCCEEDED.value]
        if not bad:
            return 0
        failed = [r for r in bad if r.state == JobState.FAILED.value] or bad
        code = failed[0].exit_code
        return code if code not in (None, 0) else 1


def attach_sweep(sweep_id: str, *, home: Optional[str] = None, backend: Optional[Backend] = None) -> SweepHandle:
    """A handle for a sweep submitted earlier (a unique prefix of its id is enough)."""
    where = home_dir(os.environ, home)
    return SweepHandle(SweepPaths(where, resolve_sweep_id(where, sweep_id)), backend)


def list_sweeps(home: Optional[str] = None) -> List[Dict[str, Any]]:
    """The sweeps under ``home``, newest first: their records (a damaged one as ``{"id", "error"}``)."""
    where = home_dir(os.environ, home)
    found: List[Dict[str, Any]] = []
    for ident in list_sweep_ids(where):
        try:
            found.append(read_record(SweepPaths(where, ident)))
        except MalaunchError as error:  # a damaged record is listed as a line, never raised
            found.append({"id": ident, "error": str(error), "created_at": 0.0, "trials": []})
    return sorted(found, key=lambda r: (r.get("created_at") or 0.0, r["id"]), reverse=True)
