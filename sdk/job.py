"""The Python API: ``Job(...)`` / ``Job.from_yaml(path)`` -> ``.submit()`` -> :class:`JobHandle`.

Example::

    from malaunch.sdk import Job
    job = Job.from_yaml("templates/torchrun-ddp/job.yaml", run_method="torchrun")
    print(job.plan().render())            # what would be submitted (pure; nothing starts)
    handle = job.submit()                 # starts the job; returns at once
    for line in handle.logs(follow=True):
        print(line)
    print(handle.wait().exit_code)
    for row in handle.checkpoints().rows:   # the job's checkpoints (a checkpoint: section)
        print(row.name, row.step, row.state)
    again = Job.from_yaml("job.yaml", resume_from=f"{handle.id}")   # a new job from its newest complete one

``Job(**fields)`` takes the job file's keys (nested sections as mappings or as the dataclasses in
:mod:`malaunch.sdk.spec`) and validates them exactly as a job file is validated; relative paths are
relative to the current directory. ``ma-submit`` is a thin layer over this class.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Mapping, Optional, Sequence

from .backends.base import Backend, JobHandle
from .errors import JobNotFound
from .opening import get_backend, job_owner
from .plan import SubmitPlan
from .spec.loader import LAUNCHER_ENV, load_job_file, spec_from_mapping
from .spec.model import JobSpec
from .spec.trials import check_trial_variables

__all__ = ["Job", "attach"]


class Job:
    """A job ready to plan or submit; wraps a validated :class:`JobSpec`.

    ``plan`` and ``submit`` take an optional ``backend`` instance (e.g. ``LocalBackend(home=...)``); by default
    the backend named by ``spec.backend`` is created.
    """

    def __init__(self, spec: Optional[JobSpec] = None, /, **fields: Any) -> None:
        if spec is not None and fields:
            raise TypeError("give either a JobSpec or job fields, not both (use Job(spec).with_options(...))")
        self.spec: JobSpec = spec if spec is not None else spec_from_mapping(fields, base_dir=os.getcwd())

    def __repr__(self) -> str:
        return f"Job(name={self.spec.name!r}, run_method={self.spec.run_method!r}, backend={self.spec.backend!r})"

    @classmethod
    def from_yaml(cls, path: str, **overrides: Any) -> Job:
        """Load a job file; ``overrides`` replace top-level fields (e.g. ``run_method="torchrun"``)."""
        job = cls(load_job_file(path))
        return job.with_options(**overrides) if overrides else job

    def with_options(self, **changes: Any) -> Job:
        """A copy with top-level fields replaced (validated again); ``None`` values are ignored."""
        given = {key: value for key, value in changes.items() if value is not None}
        if not given:
            return self
        data = self.spec.to_dict()
        data.update(given)
        return Job(spec_from_mapping(data))

    def with_overrides(
        self,
        *,
        name: Optional[str] = None,
        hosts: Optional[int] = None,
        devices_per_host: Optional[int] = None,
        env: Optional[Mapping[str, str]] = None,
        extra_args: Sequence[str] = (),
    ) -> Job:
        """A copy with command-line style overrides: ``env`` entries replace the file's (a launcher variable
        replaces its ``launcher:`` field), ``extra_args`` are appended to ``args``; validated again."""
        if name is None and hosts is None and devices_per_host is None and not env and not extra_args:
            return self
        data = self.spec.to_dict()
        if name is not None:
            data["name"] = name
        if hosts is not None:
            data["resources"]["hosts"] = hosts
        if devices_per_host is not None:
            data["resources"]["devices_per_host"] = devices_per_host
        for key, value in (env or {}).items():
            target = LAUNCHER_ENV.get(key, "")
            if target.startswith("launcher."):
                data["launcher"].pop(target.split(".", 1)[1])  # the command line wins over the file
            elif target:
                data.pop(target)
            data["env"][key] = value
        check_trial_variables(env or {})
        data["args"] = [*data["args"], *extra_args]
        return Job(spec_from_mapping(data))

    def _backend(self, backend: Optional[Backend]) -> Backend:
        return backend if backend is not None else get_backend(self.spec.backend)

    def plan(
        self,
        *,
        job_id: Optional[str] = None,
        now: Optional[float] = None,
        backend: Optional[Backend] = None,
        check: bool = False,
        dry: bool = False,
    ) -> SubmitPlan:
        """What ``submit`` would do; pure given ``job_id`` and ``now`` (generated when omitted) and once
        ``resume_from`` (if any) is resolved (:meth:`~malaunch.sdk.backends.Backend.resolve_resume`: the other job
        must have ended with a complete checkpoint, else :class:`~malaunch.sdk.errors.SpecError`). With ``check``
        also what ``submit`` checks on this machine first (``code_dir``, ``boot_file``; ``Backend.check``). With
        ``dry`` (a dry run: the plan is shown, never executed) a ``resume_from`` whose check would ask the
        platform's API is shown unresolved instead (:meth:`~malaunch.sdk.backends.Backend.resume_unresolved`)."""
        impl = self._backend(backend)
        spec = impl.resolve_resume(self.spec, dry=dry)  # resume_from: the whole id, its checkpoint proven complete
        when = time.time() if now is None else now
        ident = job_id if job_id is not None else impl.new_job_id(spec, when)
        plan = impl.plan(spec, job_id=ident, now=when)
        if check:
            found = impl.check(plan)
            if found:
                plan = dataclasses.replace(plan, notes=plan.notes + tuple(found))
        return plan

    def submit(self, backend: Optional[Backend] = None, *, plan: Optional[SubmitPlan] = None) -> JobHandle:
        """Submit the job; returns as soon as it exists (follow it with the handle).

        ``plan``: a plan made by :meth:`plan` (e.g. one whose notes were shown first); default a new one.
        """
        impl = self._backend(backend)
        return impl.submit(self.spec) if plan is None else impl.execute(plan)


def attach(job_id: str, backend: Optional[str] = None, **options: Any) -> JobHandle:
    """A handle for a job submitted earlier (possibly by another process); ``job_id`` may be a unique prefix.

    Without ``backend`` the job finds its backend as ``ma-submit`` finds it (:func:`~malaunch.sdk.backends.backend_for`:
    the job index, the id's format, else local). ``options`` create the backend (e.g. ``home=`` for local).
    """
    name, ident = job_owner(job_id, backend)
    impl = get_backend(name, **options)
    try:
        return impl.handle(impl.resolve_id(ident))
    except JobNotFound:
        return impl.handle(ident)  # nothing is checked until the handle is used
