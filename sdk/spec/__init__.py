"""The job spec: what a job file says, with no backend's knowledge of how to run it.

- :mod:`.model`: the frozen dataclasses whose fields are the job file's keys (``JobSpec``, ``Resources``,
  ``LauncherOptions``, ``DataSpec``), validated on construction; ``JobSpec`` also holds each backend's own
  section (``VolcanoOptions``, ``ModelArtsOptions``: declared, checked and read in ``<backend>/options.py``,
  re-exported here);
- :mod:`.checks`: the checks a value goes through, shared with the backends' sections;
- :mod:`.loader`: YAML text or a mapping -> ``JobSpec``; each backend's own section is read by a hook the
  backend declares (:func:`malaunch.sdk.backends.options_hook`).

The names below are imported on first use, so that a verb reading a job's status loads no YAML parser.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..backends import ModelArtsOptions, VolcanoOptions
    from .loader import JOB_FIELDS, LAUNCHER_ENV, load_job_file, load_job_text, read_job_data, spec_from_mapping
    from .model import (
        DEFAULT_RUN_METHOD,
        RESERVED_ENV,
        RESTART_ON_WORDS,
        RUN_METHODS,
        DataSpec,
        JobSpec,
        LauncherOptions,
        Resources,
        key_text,
    )

#: Where each name lives, imported on first use: the spec's model needs no YAML, the loader does.
_HOMES = {
    **dict.fromkeys(("ModelArtsOptions", "VolcanoOptions"), "..backends"),
    **dict.fromkeys(
        ("JOB_FIELDS", "LAUNCHER_ENV", "load_job_file", "load_job_text", "read_job_data", "spec_from_mapping"),
        ".loader",
    ),
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES.get(name, ".model"), __name__), name)


__all__ = [
    "DEFAULT_RUN_METHOD",
    "JOB_FIELDS",
    "LAUNCHER_ENV",
    "RESERVED_ENV",
    "RESTART_ON_WORDS",
    "RUN_METHODS",
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
