"""malaunch.sdk: job specs, ``ma-submit`` and the backends.

Public names (``__all__`` is explicit and tested)::

    Job, attach                                    the Python API (malaunch.sdk.job)
    Sweep, SweepHandle, attach_sweep               sweeps: one job, many trials (malaunch.sdk.sweep)
    JobSpec, Resources, LauncherOptions, DataSpec  the job spec (malaunch.sdk.spec)
    load_job_file, spec_from_mapping               job files -> JobSpec (malaunch.sdk.spec.loader)
    Backend, JobHandle, get_backend                backends (malaunch.sdk.backends, malaunch.sdk.opening)
    JobEvent, UsageReport, HostUsage, ExecResult   inside a job: handle.events(), .usage(), .exec()
    SubmitPlan, JobState, JobStatus, HostStatus    plans and states
    MalaunchError, ConfigError, SpecError, ...     errors (malaunch.sdk.errors)
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any, List

if TYPE_CHECKING:
    from .backends.base import Backend, JobHandle
    from .backends.events import JobEvent
    from .backends.inside import ExecResult, HostUsage, UsageReport
    from .backends.registry import available_backends
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
    from .opening import get_backend
    from .plan import SubmitPlan
    from .spec.loader import load_job_file, spec_from_mapping
    from .spec.model import DataSpec, JobSpec, LauncherOptions, Resources
    from .status import HostState, HostStatus, JobState, JobStatus
    from .sweep.api import Sweep, SweepHandle, attach_sweep

_ERRORS = (
    "BackendError", "BackendNotAvailable", "ConfigError", "ExecElsewhere", "JobNotFound", "JobNotRunning",
    "MalaunchError", "SpecError", "SweepNotFound", "WaitTimeout",
)  # fmt: skip
#: Where each public name lives. Each is imported on first use, so that ``ma-submit`` (``malaunch.sdk.cli``, a
#: subpackage: importing it runs this module) loads only what its verb needs: no sweeps, YAML or job API for
#: ``list``, ``status``, ``logs``, ``stop`` and ``--help``.
_HOMES = {
    **dict.fromkeys(("Backend", "JobHandle"), "backends.base"),
    "available_backends": "backends.registry",
    "get_backend": "opening",
    "JobEvent": "backends.events",
    **dict.fromkeys(("ExecResult", "HostUsage", "UsageReport"), "backends.inside"),
    **dict.fromkeys(_ERRORS, "errors"),
    **dict.fromkeys(("Job", "attach"), "job"),
    "SubmitPlan": "plan",
    **dict.fromkeys(("load_job_file", "spec_from_mapping"), "spec.loader"),
    **dict.fromkeys(("DataSpec", "JobSpec", "LauncherOptions", "Resources"), "spec.model"),
    **dict.fromkeys(("HostState", "HostStatus", "JobState", "JobStatus"), "status"),
    **dict.fromkeys(("Sweep", "SweepHandle", "attach_sweep"), "sweep.api"),
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (a submodule too, as when all were imported here)."""
    home = _HOMES.get(name)
    if home is None:
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(_HOMES)


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
