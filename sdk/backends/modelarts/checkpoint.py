"""The checkpoint folder of a ModelArts job: an output channel the platform uploads to OBS.

A job with a ``checkpoint:`` section gets one more output channel, :data:`CHANNEL`: the container's folder
:data:`LOCAL_DIR` (``MALAUNCH_CHECKPOINT_DIR``), uploaded by the platform while the job runs (the response
model's ``mode`` ``upload_periodically``, every ``period`` 30 s) to ``checkpoint.obs_path``, else
``<modelarts.obs_dir>/<job id>/checkpoints/``. ``access_method`` is ``env``: the platform names the folder in a
variable, so the script's argument list stays as the job file gives it.

What comes back after a restart: malaunch's own restarts (the shim's, inside the container) and the platform's
in-place restarts keep the container's disk, so the folder is there. A job retry of the platform
(``modelarts.job_retry_num``: ``fault-tolerance/job-retry-num``) makes new containers: the create body has no field
that downloads an output channel back before the start (``Output`` carries ``name``, ``description``,
``local_dir``, ``access_method`` and ``remote`` only; the console's "predownload" is not in the API's models), so
the new containers start with an empty folder. Each host of a job has its own container and so its own
folder; the platform uploads each to the same OBS folder, and a save that counts the parts of every rank of the
job (:func:`malaunch.entrypoint.checkpoint.save`) completes only where all of them are: :func:`hosts_note`.
:func:`retry_note` says so in the plan, and a new job resumes
from the uploaded checkpoints with ``--resume-from``: the old job's OBS folder as an input channel
(:func:`resume_channel`), which the platform downloads before the start.

A dry run asks no API: the old job's OBS folder is shown as :data:`UNRESOLVED` (:func:`unresolved_ref`), which
submit resolves from the old job's details; a plan that still shows it is never sent (:func:`executable`).

Pure functions of the spec, the job id and, for resuming, the old job as the API returns it.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Optional, Tuple

from malaunch.entrypoint.public import Name

from ...errors import ConfigError, SpecError
from ...spec.model import JobSpec
from ...spec.resume import ResumeRef, parse_resume, require_resolved
from .options import modelarts_options
from .phases import status_from_job

__all__ = [
    "CHANNEL",
    "LOCAL_DIR",
    "RESUME_CHANNEL",
    "RESUME_DIR",
    "UNRESOLVED",
    "add_input",
    "checkpoint_env",
    "checkpoint_notes",
    "checkpoint_output",
    "checkpoint_url",
    "checkpoint_url_of",
    "ended_resume_channel",
    "executable",
    "hosts_note",
    "resume_channel",
    "resume_channel_at",
    "resume_of",
    "resume_ref",
    "retry_note",
    "unresolved_ref",
]

#: The output channel of the checkpoint folder, and the folder in the container (``MALAUNCH_CHECKPOINT_DIR``).
CHANNEL = "malaunch_checkpoints"
LOCAL_DIR = "/home/ma-user/modelarts/outputs/malaunch_checkpoints"
#: The input channel that brings another job's checkpoints in (``--resume-from``), and its folder.
RESUME_CHANNEL = "malaunch_resume"
RESUME_DIR = "/home/ma-user/modelarts/inputs/malaunch_resume"
#: A dry run's OBS folder of the old job's checkpoints: submit reads it from that job's details.
UNRESOLVED = "obs://{resolved-at-submit}/"


def _folder(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def checkpoint_url(spec: JobSpec, job_id: str) -> str:
    """The OBS folder the checkpoints are uploaded to: ``checkpoint.obs_path``, else under ``modelarts.obs_dir``.

    Raises:
        SpecError: neither is given (the body needs ``modelarts.obs_dir`` for its logs anyway).
    """
    assert spec.checkpoint is not None
    if spec.checkpoint.obs_path is not None:
        return _folder(spec.checkpoint.obs_path)
    section = modelarts_options(spec)
    obs_dir = section.obs_dir if section is not None else None
    if obs_dir is None:
        raise SpecError("modelarts.obs_dir", "is required for the modelarts backend", None,
                        "add modelarts: {obs_dir: obs://bucket/prefix/}")  # fmt: skip
    return f"{_folder(obs_dir)}{job_id}/checkpoints/"


def checkpoint_output(spec: JobSpec, job_id: str) -> Dict[str, Any]:
    """The create body's output channel of the checkpoint folder (see the module docstring).

    Raises:
        SpecError: no OBS folder for it, or an output of the job file already uses the channel's name.
    """
    for index, item in enumerate(spec.outputs):
        if item.name == CHANNEL:
            raise SpecError(f"outputs[{index}].name", "is the checkpoint folder's channel on ModelArts", item.name,
                            "rename this output")  # fmt: skip
    return {"name": CHANNEL, "local_dir": LOCAL_DIR, "access_method": "env",
            "remote": {"obs": {"obs_url": checkpoint_url(spec, job_id)}}}  # fmt: skip


def checkpoint_env(spec: JobSpec) -> Dict[str, str]:
    """The checkpoint variables of the job's ``environments`` (none without a ``checkpoint:`` section)."""
    if spec.checkpoint is None:
        return {}
    env = {Name.MALAUNCH_CHECKPOINT_DIR: LOCAL_DIR, Name.MALAUNCH_CHECKPOINT_KEEP: str(spec.checkpoint.keep)}
    resume = resume_of(spec)
    if resume is not None:
        env[Name.MALAUNCH_RESUME_SOURCE] = resume[1]
    return env


def checkpoint_notes(spec: JobSpec, job_id: str) -> List[str]:
    """The plan's lines on the checkpoint folder: what a retry finds, a job of several hosts, where it resumes."""
    if spec.checkpoint is None:
        return []
    notes = [retry_note(spec, job_id)]
    if spec.resources.hosts > 1:
        notes.append(hosts_note(spec))
    resume = resume_of(spec)
    if resume is not None:
        ref, url = parse_resume(spec.resume_from), resume[0]["remote"]["obs"]["obs_url"]
        notes.append(f"attempt 0 resumes from {resume[1]}: input channel {RESUME_CHANNEL} downloads job "
                     f"{ref.job_id}'s checkpoints ({url}) before the start")  # fmt: skip
        if url == UNRESOLVED:
            notes.append(f"resume_from is not resolved in a dry run (no API call): submit reads job {ref.job_id}'s "
                         f"details, checks that it ended, and puts the OBS folder it uploaded its checkpoints to "
                         f"in place of {UNRESOLVED}")  # fmt: skip
    return notes


def retry_note(spec: JobSpec, job_id: str) -> str:
    """The plan's one line on what a platform retry finds (``warning:``: submit prints it too)."""
    return (f"warning: checkpoints are uploaded to {checkpoint_url(spec, job_id)}, but a platform job retry "
            "(modelarts.job_retry_num) starts with an empty folder: the ModelArts API cannot download it back "
            "(malaunch's own restarts keep it); resume in a new job with --resume-from")  # fmt: skip


def hosts_note(spec: JobSpec) -> str:
    """The plan's line for a job of several hosts: each host's folder is its own (see docs/modelarts.md)."""
    return (f"each of the {spec.resources.hosts} hosts has its own checkpoint folder (all uploaded to the same OBS "
            "folder): a save completes on every host through the job's coordinator once the hosts hold every "
            "rank's part (docs/recovery.md#one-folder-per-node)")  # fmt: skip


def _outputs_of(job: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    outputs = (job.get("algorithm") or {}).get("outputs") or []
    return [item for item in outputs if isinstance(item, Mapping)]


def checkpoint_url_of(job: Mapping[str, Any]) -> Optional[str]:
    """The OBS folder a job's checkpoints were uploaded to, from the job as the API returns it (None: it had no
    checkpoint channel)."""
    for item in _outputs_of(job):
        if item.get("name") == CHANNEL:
            url = ((item.get("remote") or {}).get("obs") or {}).get("obs_url")
            return str(url) if url else None
    return None


def resume_channel_at(url: str, name: Optional[str] = None) -> Tuple[Dict[str, Any], str]:
    """The input channel that downloads the OBS folder ``url`` before the start, and the folder in the container to
    resume from (its checkpoint ``name`` in it, or the folder whose newest complete checkpoint is meant). Pure."""
    channel = {"name": RESUME_CHANNEL, "local_dir": RESUME_DIR, "access_method": "env",
               "remote": {"obs": {"obs_url": _folder(url)}}}  # fmt: skip
    return channel, (f"{RESUME_DIR}/{name}" if name else RESUME_DIR)


def resume_channel(old_job: Mapping[str, Any], name: Optional[str] = None) -> Tuple[Dict[str, Any], str]:
    """``--resume-from OLD[:NAME]``: the input channel that downloads the old job's checkpoint folder (the same
    OBS path it was uploaded to) before the new job starts, and the folder in the container to resume from (its
    checkpoint ``name`` in it, or the folder whose newest complete checkpoint is meant).

    Raises:
        ConfigError: the old job kept no checkpoints on OBS.
    """
    old_name = str((old_job.get("metadata") or {}).get("name") or "")
    url = checkpoint_url_of(old_job)
    if url is None:
        raise ConfigError(f"--resume-from: job {old_name} uploaded no checkpoints (it had no checkpoint: section)",
                          None, "resume from a job that ran with a checkpoint: section")  # fmt: skip
    return resume_channel_at(url, name)


def add_input(body: Mapping[str, Any], channel: Mapping[str, Any]) -> Dict[str, Any]:
    """A copy of the create ``body`` with the input ``channel`` added (the resume channel of a new job).

    Raises:
        SpecError: an input of the job already uses the channel's name.
    """
    out: Dict[str, Any] = copy.deepcopy(dict(body))
    inputs = out["algorithm"].setdefault("inputs", [])
    if any(item.get("name") == channel.get("name") for item in inputs):
        raise SpecError("inputs", f"uses the name {channel.get('name')}, the channel that brings checkpoints in",
                        channel.get("name"), "rename that input")  # fmt: skip
    inputs.append(dict(channel))
    return out


def resume_of(spec: JobSpec) -> Optional[Tuple[Dict[str, Any], str]]:
    """The resume input channel and folder of ``spec`` (None: it resumes from nothing), from its resolved
    ``resume_from`` (``JOB_ID[:NAME]@obs://...``: :func:`resume_ref` put the old job's OBS folder there). Pure.

    Raises:
        SpecError: ``resume_from`` was not resolved (no OBS folder after ``@``).
    """
    if spec.resume_from is None:
        return None
    ref = parse_resume(spec.resume_from)
    if ref.location is None or not ref.location.startswith("obs://"):
        raise SpecError("resume_from", "names no OBS folder yet: the modelarts backend finds it in the old job's "
                        "details before the plan", spec.resume_from, "plan and submit it through Job(...) or "
                        "ma-submit (Backend.resolve_resume), which look it up")  # fmt: skip
    return resume_channel_at(ref.location, ref.name)


def unresolved_ref(ref: ResumeRef) -> ResumeRef:
    """A dry run's ``ref``: its job and checkpoint as given, its OBS folder :data:`UNRESOLVED` (no API call)."""
    return ResumeRef(ref.job_id, ref.name, UNRESOLVED)


def executable(spec: JobSpec) -> JobSpec:
    """``spec``, whose plan may be sent to the API: not a dry run's with ``resume_from`` unresolved (:data:`UNRESOLVED`;
    :func:`~malaunch.sdk.spec.resume.require_resolved` raises ``SpecError``)."""
    require_resolved(spec.resume_from, UNRESOLVED)
    return spec


def resume_ref(job: Mapping[str, Any], job_id: str, ref: ResumeRef) -> ResumeRef:
    """``ref`` naming job ``job_id`` (its details ``job``, as the API gives them) and, as its location, the OBS
    folder its checkpoints were uploaded to, once it has ended (the plan reads it back: :func:`resume_of`).

    Raises:
        ConfigError: the job has not ended, or uploaded no checkpoints.
    """
    channel, _ = ended_resume_channel(job, job_id, ref.name)
    return ResumeRef(job_id, ref.name, str(channel["remote"]["obs"]["obs_url"]))


def ended_resume_channel(job: Mapping[str, Any], job_id: str, name: Optional[str] = None) -> Tuple[Dict[str, Any], str]:
    """:func:`resume_channel` of ``job`` (its details as the API gives them) once it has ended.

    Raises:
        ConfigError: the job has not ended, or uploaded no checkpoints.
    """
    status = status_from_job(job)
    if not status.is_terminal:
        raise ConfigError(f"--resume-from: job {job_id} is {status.state.value}", None,
                          f"wait for it to end, or stop it first: 'ma-submit stop {job_id}'")  # fmt: skip
    return resume_channel(job, name)
