"""How data becomes a job's notification targets: the job file's ``notify:`` list of mappings, or a profile's text
of one (YAML or JSON), as :class:`~.targets.NotifyTarget` records checked field by field."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

import yaml

from ..errors import SpecError
from ..spec.checks import unknown_field
from .targets import TARGET_KEYS, NotifyTarget

__all__ = ["targets_from_data"]


def _target(raw: object, path: str) -> NotifyTarget:
    if isinstance(raw, NotifyTarget):
        return raw
    if not isinstance(raw, Mapping):
        raise SpecError(path, "must be a mapping with url or command", raw, "e.g. - url: https://...")
    fields: Dict[str, Any] = {}
    for key, value in raw.items():
        if key not in TARGET_KEYS:
            raise unknown_field(f"{path}.{key}", key, TARGET_KEYS)
        fields[key] = value
    for key in ("command", "events"):
        value = fields.get(key)
        if isinstance(value, str):
            fields[key] = (value,)
        elif isinstance(value, list):
            fields[key] = tuple(value)
        elif value is None:
            fields.pop(key, None)
    try:
        return _with_path(fields, path)
    except SpecError:
        raise
    except TypeError as error:
        raise SpecError(path, f"cannot be read ({error})", None) from None


def _with_path(fields: Dict[str, Any], path: str) -> NotifyTarget:
    try:
        return NotifyTarget(**fields)
    except SpecError as error:
        tail = error.field.split(".", 1)[1] if "." in error.field else ""
        raise SpecError(f"{path}.{tail}" if tail else path, error.problem, error.value, error.hint) from None


def targets_from_data(value: object) -> Tuple[NotifyTarget, ...]:
    """The job file's ``notify:`` (a list of mappings; a profile's text of one, YAML or JSON) as targets."""
    if value is None:
        return ()
    if isinstance(value, str):  # a profile keeps it as text
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            raise SpecError("notify", "is not a YAML or JSON list of targets", value) from None
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise SpecError("notify", "must be a list of targets (url: or command:)", value)
    found: List[NotifyTarget] = [_target(raw, f"notify[{index}]") for index, raw in enumerate(value)]
    return tuple(found)
