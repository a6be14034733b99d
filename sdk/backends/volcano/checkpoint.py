"""The checkpoint folder of a Volcano job: a PersistentVolumeClaim (``checkpoint.volume``) on every pod.

A pod's own filesystem goes with the pod, and Volcano's ``RestartJob`` (the ``PodFailed``/``PodEvicted``
policies, ``volcano.max_retry``) deletes every pod of the job and makes new ones; only a volume outlives that.
So a job with a ``checkpoint:`` section must name a claim, which is mounted at :data:`MOUNT_PATH` in the one task's
pod template (so on every pod, host 0 to the last), and every rank gets ``MALAUNCH_CHECKPOINT_DIR`` =
``<MOUNT_PATH>/<job name>``. The folder is keyed by the Volcano Job's name, which a ``RestartJob`` keeps (the same
Job object) and a new submit never reuses (it carries the submit's time and a random token): a restarted job finds
its own checkpoints, another job sees them only when asked to (``--resume-from``: :func:`resume_source`).
A dry run asks the cluster nothing: the old job is shown as given, its place :data:`UNRESOLVED`
(:func:`unresolved_ref`), which submit resolves (the job ended, on the same claim, its whole id); a plan that still
shows it is never created (:func:`executable`).

Pure functions of the spec, the job name and, for resuming, the old job's manifest as the API returns it.
"""

from __future__ import annotations

import posixpath
from typing import Any, Dict, List, Mapping, Optional, Tuple

from malaunch.entrypoint.public import Name

from ...errors import ConfigError, SpecError
from ...spec.model import JobSpec
from ...spec.resume import ResumeRef, parse_resume, require_resolved

__all__ = [
    "MOUNT_PATH",
    "UNRESOLVED",
    "VOLUME_NAME",
    "check_checkpoint",
    "checkpoint_dir",
    "checkpoint_env",
    "checkpoint_note",
    "checkpoint_volume",
    "claim_of",
    "executable",
    "listing_refused",
    "missing_mount",
    "resume_dir",
    "resume_claim",
    "resume_ref",
    "resume_source",
    "unresolved_ref",
]

#: Where the checkpoint claim is mounted in every pod; the job's folder is ``<MOUNT_PATH>/<job name>``.
MOUNT_PATH = "/home/ma-user/checkpoints"
#: The name of the checkpoint volume in the pod template (how :func:`claim_of` finds it in a job's manifest).
VOLUME_NAME = "malaunch-checkpoints"
#: A dry run's place of the old job's checkpoints: submit asks the cluster and puts the old job's whole id instead.
UNRESOLVED = "volcano://{resolved-at-submit}"


def check_checkpoint(spec: JobSpec) -> None:
    """Refuse a ``checkpoint:`` section without ``volume``: nothing else outlives a ``RestartJob``.

    Raises:
        SpecError: the section is there and names no claim.
    """
    if spec.checkpoint is not None and spec.checkpoint.volume is None:
        raise SpecError(
            "checkpoint.volume",
            "is required on the volcano backend (a pod's own disk does not survive a RestartJob)",
            None,
            "add checkpoint: {volume: <a PersistentVolumeClaim, ReadWriteMany for several hosts>}",
        )


def checkpoint_dir(job_name: str) -> str:
    """``MALAUNCH_CHECKPOINT_DIR`` of job ``job_name``: its own folder on the claim."""
    return posixpath.join(MOUNT_PATH, job_name)


def checkpoint_env(spec: JobSpec, job_name: str) -> Dict[str, str]:
    """The checkpoint variables of the container (none without a ``checkpoint:`` section)."""
    if spec.checkpoint is None:
        return {}
    env = {
        Name.MALAUNCH_CHECKPOINT_DIR: checkpoint_dir(job_name),
        Name.MALAUNCH_CHECKPOINT_KEEP: str(spec.checkpoint.keep),
    }
    if spec.resume_from is not None:  # checked (ended, the same claim) by resume_check before the plan
        ref = parse_resume(spec.resume_from)
        env[Name.MALAUNCH_RESUME_SOURCE] = resume_dir(ref.job_id, ref.name)
    return env


def checkpoint_note(spec: JobSpec, job_name: str) -> str:
    """The plan's line saying where the checkpoints go (a job with a ``checkpoint:`` section)."""
    assert spec.checkpoint is not None
    shared = ", which must be ReadWriteMany: every host's ranks write there" if spec.resources.hosts > 1 else ""
    resumes = ""
    if spec.resume_from is not None:
        ref = parse_resume(spec.resume_from)
        resumes = f"; attempt 0 resumes from {resume_dir(ref.job_id, ref.name)} (job {ref.job_id}'s, same volume)"
        if ref.location == UNRESOLVED:
            resumes += (f"; resume_from is not resolved in a dry run (no call to the cluster): submit checks that "
                        f"job {ref.job_id} has ended and kept its checkpoints on volume {spec.checkpoint.volume}, "
                        "and names it by its whole id")  # fmt: skip
    return (f"checkpoints in {checkpoint_dir(job_name)} on volume {spec.checkpoint.volume}{shared}; kept across "
            f"the job's restarts (RestartJob too){resumes}")  # fmt: skip


def checkpoint_volume(spec: JobSpec) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """The pod template's volume and the container's mount of the claim; ``(None, None)`` without one."""
    if spec.checkpoint is None or spec.checkpoint.volume is None:
        return None, None
    volume = {"name": VOLUME_NAME, "persistentVolumeClaim": {"claimName": spec.checkpoint.volume}}
    return volume, {"name": VOLUME_NAME, "mountPath": MOUNT_PATH}


def _templates(manifest: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    tasks = (manifest.get("spec") or {}).get("tasks") or []
    return [task.get("template") or {} for task in tasks if isinstance(task, Mapping)]


def missing_mount(manifest: Mapping[str, Any]) -> Optional[str]:
    """The first task whose pod template lacks the checkpoint volume or its mount (an adapted template that lost
    the ``checkpoint_volume`` placeholders), or None when every task has both."""
    for task, template in zip((manifest.get("spec") or {}).get("tasks") or [], _templates(manifest)):
        pod = template.get("spec") or {}
        volumes = [v for v in pod.get("volumes") or [] if isinstance(v, Mapping) and v.get("name") == VOLUME_NAME]
        mounted = all(
            any(m.get("name") == VOLUME_NAME and m.get("mountPath") == MOUNT_PATH for m in c.get("volumeMounts") or [])
            for c in pod.get("containers") or []
        )
        if not volumes or not mounted:
            return str(task.get("name"))
    return None


def claim_of(manifest: Mapping[str, Any]) -> Optional[str]:
    """The checkpoint claim a job's manifest mounts (None: the job had no ``checkpoint.volume``)."""
    for template in _templates(manifest):
        for volume in (template.get("spec") or {}).get("volumes") or []:
            if isinstance(volume, Mapping) and volume.get("name") == VOLUME_NAME:
                claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                return str(claim) if claim else None
    return None


def resume_dir(job_id: str, name: Optional[str] = None) -> str:
    """The folder a job resumes from when it resumes from job ``job_id`` (``<namespace>/<name>`` or ``<name>``):
    that job's folder on the claim, or its checkpoint ``name`` there. Pure; :func:`resume_source` checks first."""
    folder = checkpoint_dir(job_id.rpartition("/")[2])
    return posixpath.join(folder, name) if name else folder


def resume_claim(spec: JobSpec) -> str:
    """The claim a job that resumes from another mounts (the old job's folder must be on it). Pure.

    Raises:
        SpecError: the new job mounts no claim.
    """
    check_checkpoint(spec)
    if spec.checkpoint is None or spec.checkpoint.volume is None:
        raise SpecError("checkpoint", "is required to resume from another job (its folder is on the volume)", None,
                        "add checkpoint: {volume: <the old job's PersistentVolumeClaim>}")  # fmt: skip
    return spec.checkpoint.volume


def unresolved_ref(spec: JobSpec, ref: ResumeRef) -> ResumeRef:
    """A dry run's ``ref``: its job and checkpoint as given, its place :data:`UNRESOLVED` (no call to the cluster),
    once the new job is proven to mount a claim (:func:`resume_claim`)."""
    resume_claim(spec)
    return ResumeRef(ref.job_id, ref.name, UNRESOLVED)


def executable(spec: JobSpec) -> JobSpec:
    """``spec``, whose plan may be created on the cluster: not a dry run's with ``resume_from`` unresolved
    (:data:`UNRESOLVED`; :func:`~malaunch.sdk.spec.resume.require_resolved` raises ``SpecError``)."""
    require_resolved(spec.resume_from, UNRESOLVED)
    return spec


def resume_source(spec: JobSpec, old_job: Mapping[str, Any], name: Optional[str] = None) -> str:
    """Where a new job resumes from an ended job's checkpoints (``--resume-from OLD[:NAME]``): the old job's folder
    on the same claim, which the new job mounts at the same place (or its checkpoint ``name`` in it).

    Raises:
        SpecError: the new job mounts no claim.
        ConfigError: the old job kept no checkpoints on a claim, or on another claim than the new job mounts.
    """
    volume = resume_claim(spec)
    old_name = str((old_job.get("metadata") or {}).get("name") or "")
    claim = claim_of(old_job)
    if claim is None:
        raise ConfigError(f"--resume-from: job {old_name} kept no checkpoints on a volume (it had no "
                          "checkpoint: section)", None, "resume from a job that had checkpoint.volume")  # fmt: skip
    if claim != volume:
        raise ConfigError(f"--resume-from: job {old_name} kept its checkpoints on volume {claim}, this job "
                          f"mounts {volume}", None, f"set checkpoint.volume: {claim}")  # fmt: skip
    return resume_dir(old_name, name)


def resume_ref(spec: JobSpec, old_job: Mapping[str, Any], ref: ResumeRef) -> ResumeRef:
    """``ref`` naming the ended ``old_job`` (as the API returns it) by its whole id ``<namespace>/<name>``, once
    :func:`resume_source` has proven that ``spec`` reaches its folder (the plan then gives that folder as
    ``MALAUNCH_RESUME_SOURCE``; whether the checkpoint is complete is the shim's to check at start: the volume is
    the cluster's, not this machine's).

    Raises:
        SpecError, ConfigError: as :func:`resume_source`.
    """
    resume_source(spec, old_job, ref.name)
    meta = old_job.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    return ResumeRef(f"{namespace}/{name}" if namespace else name, ref.name)


def listing_refused(job_id: str) -> ConfigError:
    """Why ``ma-submit checkpoints`` cannot list a Volcano job's checkpoints: they are on a volume of the cluster,
    not on this machine; it says how to list them from inside the job."""
    return ConfigError(f"the checkpoints of Volcano job {job_id} are on the cluster's volume, which this machine "
                       "cannot read", job_id, f"list them from inside while it runs: ma-submit exec {job_id} -- sh "
                       "-c 'ls -la \"$MALAUNCH_CHECKPOINT_DIR\"/*'")  # fmt: skip
