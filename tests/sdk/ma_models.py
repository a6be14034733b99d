"""Check JSON bodies against the official ``huaweicloudsdkmodelarts`` model definitions (field names and types).

``model_errors(data, "Job")`` walks ``data`` along the model classes' ``openapi_types`` and lists every field
the official model lacks and every value of the wrong type, e.g. ``algorithm.foo: not a field of JobAlgorithm``.
"""

from __future__ import annotations

import re
from typing import Any, List

from huaweicloudsdkmodelarts.v1 import model as ma_model

__all__ = ["model_errors"]

_LIST = re.compile(r"list\[(.+)\]\Z")
_DICT = re.compile(r"dict\((\w+), (.+)\)\Z")
_SCALARS = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}


def model_errors(data: Any, type_name: str, path: str = "") -> List[str]:
    """Problems of ``data`` as an instance of the SDK type ``type_name`` (``Job``, ``list[Input]``, ``str``...)."""
    where = path or "(body)"
    if data is None:
        return []
    list_match = _LIST.match(type_name)
    if list_match:
        if not isinstance(data, list):
            return [f"{where}: expected a list for {type_name}, got {type(data).__name__}"]
        out: List[str] = []
        for index, item in enumerate(data):
            out += model_errors(item, list_match.group(1), f"{path}[{index}]")
        return out
    dict_match = _DICT.match(type_name)
    if dict_match:
        if not isinstance(data, dict):
            return [f"{where}: expected a mapping for {type_name}"]
        out = []
        for key, value in data.items():
            out += model_errors(key, dict_match.group(1), f"{path}.<key {key}>")
            out += model_errors(value, dict_match.group(2), f"{path}.{key}")
        return out
    if type_name in _SCALARS:
        expected = _SCALARS[type_name]
        if type_name == "int" and isinstance(data, bool):
            return [f"{where}: expected int, got bool"]
        if not isinstance(data, expected):  # type: ignore[arg-type]
            return [f"{where}: expected {type_name}, got {type(data).__name__} {data!r}"]
        return []
    cls = getattr(ma_model, type_name, None)
    if cls is None:
        return [f"{where}: unknown model type {type_name}"]
    if not isinstance(data, dict):
        return [f"{where}: expected an object {type_name}, got {type(data).__name__}"]
    out = []
    for key, value in data.items():
        child = f"{path}.{key}" if path else key
        if key not in cls.openapi_types:
            out.append(f"{child}: not a field of {type_name}")
            continue
        out += model_errors(value, cls.openapi_types[key], child)
    return out
