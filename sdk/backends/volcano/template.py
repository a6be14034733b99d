"""The Volcano Job manifest template: load it, and fill its ``"{{name}}"`` placeholders with typed values.

The packaged template (``job-template.yaml`` beside this module, the same file as
``templates/volcano/job-template.yaml``) is used unless the job file names another one
(``volcano.template``). Filling is a pure function of the parsed template and a mapping of values:

1. A scalar that is exactly ``"{{name}}"`` becomes the value itself (a number stays a number, a list a list).
2. A placeholder inside a longer string is replaced by the value's text (only strings and numbers).
3. A mapping entry or list item whose value comes out as ``None``, an empty list or an empty mapping is left
   out, so optional settings disappear instead of becoming ``null``.
4. An unknown placeholder name is a :class:`~malaunch.sdk.errors.ConfigError` naming the template.
"""

from __future__ import annotations

import copy
import re
from importlib.resources import files
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

from ...errors import ConfigError

__all__ = ["PACKAGED_TEMPLATE", "fill_template", "load_template", "parse_template"]

#: The name of the packaged template (package data of ``malaunch.sdk.backends.volcano``).
PACKAGED_TEMPLATE = "job-template.yaml"
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_DROP = object()


def load_template(path: Optional[str]) -> Tuple[str, str]:
    """The template's text and a name for messages: ``path``, or the packaged template when ``None``.

    Raises:
        ConfigError: the file cannot be read.
    """
    if path is None:
        return (files(__package__) / PACKAGED_TEMPLATE).read_text(encoding="utf-8"), PACKAGED_TEMPLATE
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), path
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"volcano.template: cannot be read ({reason})", path, "check the path") from None


def parse_template(text: str, source: str) -> Dict[str, Any]:
    """The template's YAML as a mapping.

    Raises:
        ConfigError: not YAML, or not a mapping.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: is not valid YAML ({exc})", text[:40], "fix the template") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: must be one YAML mapping (a Volcano Job)", data, "fix the template")
    return data


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, (list, dict)) and not value)


def _fill(node: object, values: Mapping[str, Any], source: str) -> object:
    if isinstance(node, dict):
        out: Dict[Any, Any] = {}
        for key, item in node.items():
            filled = _fill(item, values, source)
            if filled is not _DROP:
                out[key] = filled
        return out
    if isinstance(node, list):
        items: List[Any] = [_fill(item, values, source) for item in node]
        return [item for item in items if item is not _DROP]
    if not isinstance(node, str) or "{{" not in node:
        return node
    whole = _PLACEHOLDER.fullmatch(node.strip())
    if whole is not None:
        value = _lookup(whole.group(1), values, source)
        return _DROP if _empty(value) else copy.deepcopy(value)
    return _PLACEHOLDER.sub(lambda match: _text(match.group(1), values, source), node)


def _lookup(name: str, values: Mapping[str, Any], source: str) -> Any:
    if name not in values:
        raise ConfigError(
            f"{source}: unknown placeholder {{{{{name}}}}}", name, f"use one of: {', '.join(sorted(values))}"
        )
    return values[name]


def _text(name: str, values: Mapping[str, Any], source: str) -> str:
    value = _lookup(name, values, source)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(
            f"{source}: placeholder {{{{{name}}}}} holds structured data and must be a whole value",
            name,
            f'write it alone, as "{{{{{name}}}}}"',
        )
    return str(value)


def fill_template(template: Mapping[str, Any], values: Mapping[str, Any], source: str) -> Dict[str, Any]:
    """A filled copy of ``template`` (the input is not changed); see the module docstring for the rules."""
    filled = _fill(dict(template), values, source)
    if not isinstance(filled, dict):  # pragma: no cover - a mapping always fills to a mapping
        raise ConfigError(f"{source}: did not fill to a mapping", filled, "fix the template")
    return filled
