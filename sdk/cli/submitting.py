"""What ``ma-submit submit`` does (and ``ma-submit JOB.yaml``, the same): check a job file, print its plan with
``--dry-run``, else submit it and follow it to its end (:func:`malaunch.sdk.follow.follow_job`) unless ``--detach``.

The verb's definition (its options and help) is :mod:`.submit`; this module, the work, loads the job API (the
loader with PyYAML, the spec, the plan, following a job), so the verbs table (:mod:`.verbs`) names it apart and the
group imports it only when the verb runs: ``ma-submit submit --help`` loads none of it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple

from ..backends.registry import runs_here
from ..errors import SpecError
from ..follow import follow_job
from ..job import Job
from ..profiles.apply import load_job, render_origins
from ..status import exit_code_of
from .echo import echo, echo_json, note
from .exits import EXIT_INTERRUPTED
from .profile_option import chosen_profile
from .profile_use import open_with, selected_profile

if TYPE_CHECKING:
    from ..backends.base import JobHandle

__all__ = ["job_for", "submit_job"]


def job_for(job_file: str, backend: Optional[str], run_method: Optional[str]) -> Tuple[Job, Optional[str]]:
    """The job of ``job_file`` with the command line's ``backend`` and ``run_method``, the profile in use filling
    what the job file leaves out; and the block ``--dry-run`` prints about where the values came from (None
    when no profile is in use)."""
    profile = selected_profile(chosen_profile())
    if profile is None:
        return Job.from_yaml(job_file, run_method=run_method, backend=backend), None
    spec, rows = load_job(job_file, profile, backend, os.environ)
    return Job(spec).with_options(run_method=run_method, backend=backend), render_origins(profile, rows)


def _follow(handle: JobHandle, output: str) -> int:
    json_mode = output == "json"
    try:
        for event in follow_job(handle):
            if event.kind == "log":
                echo(event.text, err=json_mode)
            elif event.kind == "progress":
                note(event.text)
            elif event.status is not None:  # "end" always carries the final status
                note(event.text)
                if json_mode:
                    echo_json(event.status.to_json())
                return exit_code_of(event.status)
    except KeyboardInterrupt:
        note(f"stopped following; job {handle.id} keeps running: 'ma-submit stop {handle.id}' ends it")
        return EXIT_INTERRUPTED
    return exit_code_of(handle.status())  # pragma: no cover - follow_job always ends with an "end" event


#: The fields a variable is set from that an option of submit sets too.
_FIELD_OPTIONS = {"resources.hosts": "--hosts", "resources.devices_per_host": "--devices-per-host",
                  "run_method": "--run-method"}  # fmt: skip


def _named_option(error: SpecError, options: Mapping[str, str]) -> SpecError:
    """``error`` naming the command-line option that set its field (``--hosts``), not the job file;
    ``options``: field -> option, for the options given."""
    option = options.get(error.field)
    if option is None:
        return error
    if option == "--resume-from":  # its hint says what to do about the other job (wait for it, which name)
        return SpecError(option, error.problem, error.value, error.hint)
    if not option.startswith("--env"):
        return SpecError(option, error.problem, error.value, f"give another {option}")
    field = error.hint[len("set ") : -len(" instead")] if error.hint.endswith(" instead") else ""
    if not field:  # remove it (a variable the backend or the sweep sets itself), or another value
        return SpecError(option, error.problem, error.value,
                         error.hint if error.hint.startswith("remove") else f"give another {option}")  # fmt: skip
    flag = _FIELD_OPTIONS.get(field)
    return SpecError(option, f"is set by the backend from {field}, not by env", error.value,
                     f"set {field} instead" + (f" (or give {flag})" if flag else ""))  # fmt: skip


def _parse_env(pairs: Tuple[str, ...]) -> Dict[str, str]:
    env: Dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SpecError("--env", "must be NAME=VALUE", pair, "e.g. --env OMP_NUM_THREADS=4")
        env[name] = value
    return env



def submit_job(
    run_method: Optional[str],
    backend: Optional[str],
    name: Optional[str],
    hosts: Optional[int],
    devices_per_host: Optional[int],
    env_pairs: Tuple[str, ...],
    resume_from: Optional[str],
    detach: bool,
    dry_run: bool,
    output: str,
    job_file: str,
    script_args: Tuple[str, ...],
) -> int:
    """What ``ma-submit submit`` does with the options :data:`.submit.submit_cmd` parsed: the job of ``job_file``
    with the options applied, planned and checked; printed (``dry_run``), or submitted and followed to its end
    (unless ``detach``); the exit code."""
    env = _parse_env(env_pairs)
    given = {"run_method": run_method, "name": name, "resources.hosts": hosts}
    given["resources.devices_per_host"] = devices_per_host
    options = {k: "--" + k.rsplit(".", 1)[-1].replace("_", "-") for k, value in given.items() if value is not None}
    options.update({f"env.{key}": f"--env {key}" for key in env})
    if resume_from is not None:
        options["resume_from"] = "--resume-from"
    try:
        job, origins = job_for(job_file, backend, run_method)
        job = job.with_overrides(
            name=name, hosts=hosts, devices_per_host=devices_per_host, env=env, extra_args=script_args
        ).with_options(resume_from=resume_from)
        impl = open_with(job.spec.backend, chosen_profile())
        try:
            plan = job.plan(check=True, backend=impl, dry=dry_run)
        except SpecError as error:  # a job-file field found wrong while planning: named with the file, as loading does
            raise (error if error.field in options else error.with_source(job_file)) from None
    except SpecError as error:
        raise _named_option(error, options) from None
    if dry_run:
        echo(plan.render_json() if output == "json" else plan.render())
        if origins is not None:  # where the values came from, when a profile is in use (stdout stays the plan)
            echo(origins, err=True)
        return 0
    for warning in (text for text in plan.notes if text.startswith("warning:")):
        note(warning)
    handle = job.submit(impl, plan=plan)
    status = handle.status()
    if output == "json" and detach:
        echo_json({"id": handle.id, "state": status.state.value})
        return 0
    if detach:
        echo(handle.id)
        note(f"submitted; follow with 'ma-submit logs -f {handle.id}', status with 'ma-submit status {handle.id}'")
        return 0
    spec = job.spec
    note(
        f"submitted job {handle.id} ({spec.backend}: {spec.resources.hosts} host(s) x "
        f"{spec.resources.devices_per_host} device(s), {spec.run_method}); "
        f"{'job dir ' if runs_here(spec.backend) else ''}{status.location}"
    )
    return _follow(handle, output)
