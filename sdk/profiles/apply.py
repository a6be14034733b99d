"""What a profile does to a job and to a backend, and where each value came from.

Precedence, for every value: the command line, then the job file, then the environment's variable (for the values
that have one: credentials, endpoints, ``KUBECONFIG``), then the profile, then the default. A profile fills only
what the job file leaves out: the shared keys (``backend``, ``image``, ``keep_for``) and the keys of the backend
the job goes to (``modelarts.obs_dir`` for a ModelArts job, never for a Volcano one).

- which keys a profile may hold and the profile in use, checked: :mod:`.check` (light: the verbs without a job
  file need only that);
- :func:`load_job` (:func:`fill_job_data`, :func:`blame_profile`): a job file read with a profile's values
  filled in, and the rows that say where each value came from (:func:`render_origins`: the compact block of
  ``ma-submit --dry-run``, secrets hidden);
- :func:`backend_arguments` / :func:`profile_environ`: how a backend is made for a profile.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..backends.registry import BACKEND_NAMES, DEFAULT_BACKEND
from ..errors import SpecError
from ..spec.loader import JOB_FIELDS, load_job_file, read_job_data, spec_from_mapping
from ..spec.model import JobSpec
from ..spec.trials import check_trial_variables
from .arguments import backend_arguments, profile_environ
from .check import keys_of
from .keys import ProfileKey
from .store import Profile

__all__ = [
    "HIDDEN",
    "Origin",
    "backend_arguments",
    "blame_profile",
    "fill_job_data",
    "load_job",
    "profile_environ",
    "render_origins",
]

#: How a secret value is shown.
HIDDEN = "(set, hidden)"


@dataclass(frozen=True)
class Origin:
    """Where one value came from: ``key`` (as in the profile file), the value as it may be shown, ``source``;
    ``field``: the job-file field it is (None for how the backend connects)."""

    key: str
    shown: str
    source: str
    field: Optional[str] = None


def _shown(key: ProfileKey, value: str) -> str:
    return HIDDEN if key.secret else value


def _lookup(data: Mapping[str, Any], path: str) -> Tuple[bool, Any]:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, Mapping) or node.get(part) is None:
            return False, None
        node = node[part]
    return True, node


def _put(data: Dict[str, Any], path: str, value: str) -> None:
    *parents, last = path.split(".")
    node = data
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value


def _fills(key: ProfileKey) -> bool:
    """Whether the job spec has the field ``key`` fills (``keep_for`` only where the spec has it)."""
    if key.fills is None:
        return False
    head, _, tail = key.fills.partition(".")
    return (tail in JOB_FIELDS.get(head, ())) if tail else head in JOB_FIELDS[""]


def _origins(
    data: Dict[str, Any], profile: Profile, backend: str, command_line: Optional[str], environ: Mapping[str, str]
) -> List[Origin]:
    """Fill ``data`` (in place) from ``profile`` for a job of ``backend``; the origin of every value."""
    label = f"profile {profile.name}"
    rows: List[Origin] = []
    for name, key in keys_of(backend).items():
        value = profile.get(name)
        if name == "backend":
            source = "command line" if command_line else ("job file" if data.get("backend") else None)
            rows.append(Origin(name, backend, source or (label if value else "default"), "backend"))
        elif key.fills is not None:  # a job-file field: the job file, else the profile, else the default
            given, current = _lookup(data, key.fills)
            if given:
                rows.append(Origin(name, _shown(key, str(current)), "job file", key.fills))
            elif value is not None and _fills(key):
                _put(data, key.fills, value)
                rows.append(Origin(name, _shown(key, value), label, key.fills))
            elif value is not None:
                rows.append(Origin(name, value, f"{label}, not used: this version's job file has no {key.fills}"))
            else:
                rows.append(Origin(name, "-", f"default ({key.default})", key.fills))
        elif key.from_env(environ) is not None:  # how the backend connects: the environment, else the profile
            rows.append(Origin(name, _shown(key, key.from_env(environ) or ""), f"environment ({key.env})"))
        elif value is not None:
            rows.append(Origin(name, _shown(key, value), label))
        else:
            rows.append(Origin(name, "-", f"default ({key.default})"))
    return rows


def fill_job_data(
    raw: Mapping[str, Any], profile: Profile, backend: Optional[str], environ: Mapping[str, str]
) -> Tuple[Dict[str, Any], List[Origin]]:
    """A copy of job-file data with ``profile``'s values where it has none, and where each value came from;
    ``backend``: the command line's ``--backend`` (it wins). Data whose ``backend`` is no backend is copied as is
    (the loader names the mistake)."""
    data: Dict[str, Any] = copy.deepcopy(dict(raw))
    chosen = backend or data.get("backend") or profile.get("backend") or DEFAULT_BACKEND
    if not isinstance(chosen, str) or chosen not in BACKEND_NAMES:
        return data, []
    rows = _origins(data, profile, chosen, backend, environ)
    if backend is None and not data.get("backend"):  # none, or null: the profile's (or the default)
        data["backend"] = chosen
    return data, rows


def blame_profile(error: SpecError, profile: Profile, rows: List[Origin]) -> Optional[SpecError]:
    """``error`` told as the profile's when its field got its value from ``profile`` (else None)."""
    label = f"profile {profile.name}"
    for row in rows:
        if row.field == error.field and row.source == label:
            return SpecError(
                f"{label}: {row.key}", error.problem, error.value,
                f"run 'ma-submit configure --profile {profile.name} --set {row.key}=...'",
            )  # fmt: skip
    return None


def load_job(
    path: str, profile: Profile, backend: Optional[str], environ: Mapping[str, str]
) -> Tuple[JobSpec, List[Origin]]:
    """The job file at ``path`` with ``profile``'s values filled in (:func:`fill_job_data`), and where each
    value came from.

    Raises:
        SpecError: the job file is invalid, or a value the profile gave is (the error names the profile's key).
    """
    raw, base_dir = read_job_data(path)
    if not isinstance(raw, dict):
        return load_job_file(path), []  # the loader's own error for a job file that is no mapping
    data, rows = fill_job_data(raw, profile, backend, environ)
    try:
        spec = spec_from_mapping(data, base_dir)
        check_trial_variables(spec.env)
    except SpecError as error:
        raise (blame_profile(error, profile, rows) or error.with_source(path)) from None
    return spec, rows


def render_origins(profile: Profile, rows: List[Origin]) -> str:
    """The compact block ``--dry-run`` prints: one line per value, with where it came from."""
    width = max((len(row.key) for row in rows), default=0)
    shown = max((len(row.shown) for row in rows), default=0)
    lines = [f"values (profile {profile.name}, {profile.path}):"]
    lines += [f"  {row.key.ljust(width)}  {row.shown.ljust(shown)}  {row.source}".rstrip() for row in rows]
    return "\n".join(lines)
