"""What the spec and the loader ask the ModelArts backend without loading it: its ``modelarts:`` section
(:class:`ModelArtsOptions`, checked when made; its keys; how it is read). Its id format is in :mod:`.ids`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Protocol, Tuple

from ...errors import SpecError
from ...spec.checks import check_int, check_text, fail

__all__ = [
    "KEYS",
    "MODELARTS_JOB_RETRY_BOUNDS",
    "OPTIONAL",
    "OPTIONS",
    "SCHEMA",
    "SHAPE",
    "ModelArtsOptions",
    "modelarts_options",
    "prepare_options",
]

#: ``modelarts.job_retry_num``: the platform's bounds of ``fault-tolerance/job-retry-num``.
MODELARTS_JOB_RETRY_BOUNDS = (1, 128)
_OBS_DIR = re.compile(r"obs://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?\Z")


@dataclass(frozen=True)
class ModelArtsOptions:
    """What only the ModelArts backend needs: ``obs_dir`` (``obs://bucket/prefix/``) receives code and logs;
    ``engine_name`` + ``engine_version`` pick a preset engine when the job has no ``image``."""

    obs_dir: Optional[str] = None
    engine_name: Optional[str] = None
    engine_version: Optional[str] = None
    # The job file's ``ssh: {key_pair_names: [...]}``: the job gets the platform's SSH endpoint (ma-submit exec).
    ssh_key_pair_names: Tuple[str, ...] = ()
    # The platform's own job restarts (the level above malaunch's, docs/recovery.md#escalation): as many as
    # ``job_retry_num`` (1-128) after a fault; ``job_unconditional_retry``: whatever the cause.
    job_retry_num: Optional[int] = None
    job_unconditional_retry: bool = False

    def __post_init__(self) -> None:
        _check_modelarts(self, "modelarts")

    def to_dict(self) -> Dict[str, Any]:
        """YAML-shaped data."""
        data = dataclasses.asdict(self)
        names = data.pop("ssh_key_pair_names")
        if names:
            data["ssh"] = {"key_pair_names": list(names)}
        return data


def _check_modelarts(opts: ModelArtsOptions, prefix: str) -> None:
    check_text(f"{prefix}.obs_dir", opts.obs_dir, optional=True)
    if opts.obs_dir is not None and not _OBS_DIR.match(opts.obs_dir):
        raise fail(f"{prefix}.obs_dir", "must be an OBS folder URL like obs://bucket/prefix/", opts.obs_dir)
    check_text(f"{prefix}.engine_name", opts.engine_name, optional=True)
    check_text(f"{prefix}.engine_version", opts.engine_version, optional=True)
    for position, name in enumerate(opts.ssh_key_pair_names):
        check_text(f"{prefix}.ssh.key_pair_names[{position}]", name, optional=False)
    if opts.job_retry_num is not None:
        check_int(f"{prefix}.job_retry_num", opts.job_retry_num, *MODELARTS_JOB_RETRY_BOUNDS)
    if not isinstance(opts.job_unconditional_retry, bool):
        raise fail(f"{prefix}.job_unconditional_retry", "must be true or false", opts.job_unconditional_retry)
    if opts.job_unconditional_retry and opts.job_retry_num is None:
        raise fail(f"{prefix}.job_unconditional_retry", "needs modelarts.job_retry_num (how many restarts)",
                   opts.job_unconditional_retry, "set job_retry_num too, e.g. job_retry_num: 3")  # fmt: skip
    if (opts.engine_name is None) != (opts.engine_version is None):
        given = "engine_name" if opts.engine_name is not None else "engine_version"
        raise fail(f"{prefix}.{given}", "needs both engine_name and engine_version", getattr(opts, given))


#: The ``modelarts:`` section's dataclass (``JobSpec.modelarts``), and the keys a job file may give in it.
OPTIONS = ModelArtsOptions
KEYS: Tuple[str, ...] = ("obs_dir", "engine_name", "engine_version", "ssh", "job_retry_num", "job_unconditional_retry")
#: ``JobSpec.modelarts`` is None when the job file has no ``modelarts:`` section.
OPTIONAL = True
#: What the section must be (the error when ``JobSpec.modelarts`` is given something else).
SHAPE = "a mapping with obs_dir, engine_name, engine_version"


#: The ``modelarts:`` section's piece of the job file's JSON schema (``properties.modelarts``; ``$defs`` of its own
#: would go to the root), from which both copies of the schema are made (:mod:`malaunch.sdk.spec.schema`).
SCHEMA: Dict[str, Any] = {
    "description": "Settings only the ModelArts backend reads (docs/modelarts.md).",
    "type": ["object", "null"],
    "additionalProperties": False,
    "properties": {
        "obs_dir": {
            "description": "OBS folder for the code and logs, e.g. obs://bucket/prefix/.",
            "type": ["string", "null"],
            "pattern": "^obs://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$",
        },
        "engine_name": {
            "description": "Preset engine (with engine_version) when there is no image.",
            "type": ["string", "null"],
        },
        "engine_version": {"description": "Preset engine version (with engine_name).", "type": ["string", "null"]},
        "job_retry_num": {
            "description": (
                "The platform restarts the whole job after a fault, up to this many times "
                "(fault-tolerance/job-retry-num)."
            ),
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": 128,
        },
        "job_unconditional_retry": {
            "description": (
                "The platform restarts whatever the cause (fault-tolerance/job-unconditional-retry); "
                "needs job_retry_num."
            ),
            "type": ["boolean", "null"],
        },
        "ssh": {
            "description": "The platform's SSH endpoint for the job's hosts; 'ma-submit exec' prints the ssh command.",
            "type": ["object", "null"],
            "additionalProperties": False,
            "properties": {
                "key_pair_names": {
                    "description": "Names of SSH key pairs registered on the platform.",
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                }
            },
        },
    },
}


def prepare_options(
    fields: Dict[str, Any], path: str, resolve: Callable[[Optional[object]], Optional[object]]
) -> Dict[str, Any]:
    """The ``modelarts:`` mapping's fields ready for ``ModelArtsOptions(**fields)``: ``ssh: {key_pair_names:
    [...]}`` (the platform's SSH endpoint, ``ma-submit exec``) becomes ``ssh_key_pair_names``."""
    del resolve  # no paths in this section
    out = dict(fields)
    if "job_unconditional_retry" in out and out["job_unconditional_retry"] is None:
        del out["job_unconditional_retry"]  # null: the default (false)
    ssh = out.pop("ssh", None)
    if ssh is None:
        return out
    if not isinstance(ssh, Mapping) or set(ssh) - {"key_pair_names"}:
        raise SpecError(f"{path}.ssh", "must be a mapping with key_pair_names", ssh,
                        "e.g. ssh: {key_pair_names: [my-key-pair]}")  # fmt: skip
    names = ssh.get("key_pair_names") or []
    if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
        raise SpecError(f"{path}.ssh.key_pair_names", "must be a list of key-pair names", names)
    out["ssh_key_pair_names"] = tuple(names)
    return out


class _Spec(Protocol):
    """What reading a section needs of a ``JobSpec`` (the spec sits above the backends' facts)."""

    @property
    def sections(self) -> Mapping[str, Any]: ...


def modelarts_options(spec: _Spec) -> Optional[ModelArtsOptions]:
    """``spec``'s ``modelarts:`` section (``spec.modelarts``, typed), or None when the job file has none."""
    found = spec.sections.get("modelarts")
    return found if isinstance(found, ModelArtsOptions) else None
