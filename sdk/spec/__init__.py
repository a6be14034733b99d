"""The job spec: what a job file says, with no backend's knowledge of how to run it.

- :mod:`.model`: the frozen dataclasses whose fields are the job file's keys (``JobSpec``, ``Resources``,
  ``LauncherOptions``, ``DataSpec``, and the sections the backends read), validated on construction;
- :mod:`.loader`: YAML text or a mapping -> ``JobSpec``; each backend's own section is read by a hook the
  backend declares (:func:`malaunch.sdk.backends.options_hook`).
"""

from __future__ import annotations

from .loader import JOB_FIELDS, LAUNCHER_ENV, load_job_file, load_job_text, read_job_data, spec_from_mapping
from .model import (
    DEFAULT_RUN_METHOD,
    RESERVED_ENV,
    RESTART_ON_WORDS,
    RUN_METHODS,
    VOLCANO_POD_ACTIONS,
    DataSpec,
    JobSpec,
    LauncherOptions,
    ModelArtsOptions,
    Resources,
    VolcanoOptions,
    key_text,
)

__all__ = [
    "DEFAULT_RUN_METHOD",
    "JOB_FIELDS",
    "LAUNCHER_ENV",
    "RESERVED_ENV",
    "RESTART_ON_WORDS",
    "RUN_METHODS",
    "VOLCANO_POD_ACTIONS",
    "DataSpec",
    "JobSpec",
    "LauncherOptions",
    "ModelArtsOptions",
    "Resources",
    "VolcanoOptions",
    "key_text",
    "load_job_file",
    "load_job_text",
    "read_job_data",
    "spec_from_mapping",
]
