"""malaunch.sdk: job specs, ``ma-submit`` and the backends.

Public names (``__all__`` is explicit and tested)::

    Job, attach                                    the Python API (malaunch.sdk.job)
    Sweep, SweepHandle, attach_sweep               sweeps: one job, many trials (malaunch.sdk.sweep)
    JobSpec, Resources, LauncherOptions, DataSpec  the job spec (malaunch.sdk.spec)
    load_job_file, spec_from_mapping               job files -> JobSpec (malaunch.sdk.spec.loader)
    Backend, JobHandle, get_backend                backends (malaunch.sdk.backends)
    JobEvent, UsageReport, HostUsage, ExecResult   inside a job: handle.events(), .usage(), .exec()
    SubmitPlan, JobState, JobStatus, HostStatus    plans and states
    MalaunchError, ConfigError, SpecError, ...     errors (malaunch.sdk.errors)
"""

from __future__ import annotations

from .backends import Backend, JobHandle, available_backends, get_backend
from .backends.inside import ExecResult, HostUsage, JobEvent, UsageReport
from .errors import (
    BackendError,
    BackendNotAvailable,
    ConfigError,
    ExecElsewhere,
    JobNotFound,
    JobNotRunning,
    MalaunchError,
    SpecError,
    SweepNotFound,
    WaitTimeout,
)
from .job import Job, attach
from .plan import SubmitPlan
from .spec.loader import load_job_file, spec_from_mapping
from .spec.model import DataSpec, JobSpec, LauncherOptions, Resources
from .status import HostState, HostStatus, JobState, JobStatus
from .sweep.api import Sweep, SweepHandle, attach_sweep

__all__ = [
    "Backend",
    "BackendError",
    "BackendNotAvailable",
    "ConfigError",
    "DataSpec",
    "ExecElsewhere",
    "ExecResult",
    "HostState",
    "HostStatus",
    "HostUsage",
    "Job",
    "JobEvent",
    "JobHandle",
    "JobNotFound",
    "JobNotRunning",
    "JobSpec",
    "JobState",
    "JobStatus",
    "LauncherOptions",
    "MalaunchError",
    "Resources",
    "SpecError",
    "SubmitPlan",
    "Sweep",
    "SweepHandle",
    "SweepNotFound",
    "UsageReport",
    "WaitTimeout",
    "attach",
    "attach_sweep",
    "available_backends",
    "get_backend",
    "load_job_file",
    "spec_from_mapping",
]
