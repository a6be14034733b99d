"""Checks a rendered Volcano Job must pass: the real CRD schema (strictly, as the API server prunes unknown
fields) and the official ``kubernetes`` client's models for the pod template (unknown fields refused)."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List

import jsonschema
import yaml

# The Volcano Job CRD as published by Volcano (the project's shared copy in ../shared/schemas/), kept verbatim.
CRD_FILE = Path(__file__).resolve().parent / "data" / "volcano-batch.volcano.sh_jobs.yaml"


def _strict(schema: Any) -> Any:
    """A copy where every object schema with ``properties`` refuses other keys (the API server drops them)."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) for key, value in schema.items()}
    if (
        out.get("type") == "object"
        and "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@lru_cache(maxsize=1)
def crd_schema() -> Dict[str, Any]:
    """The v1alpha1 openAPIV3Schema of the Volcano Job CRD, made strict."""
    crd = yaml.safe_load(CRD_FILE.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    schema: Dict[str, Any] = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    return schema


def crd_errors(manifest: Dict[str, Any]) -> List[str]:
    """Every violation of the CRD schema, as ``path: message``."""
    validator = jsonschema.Draft7Validator(crd_schema())
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(manifest)]


def _walk(data: Any, type_name: str, path: str, errors: List[str]) -> None:
    import kubernetes.client

    if type_name.startswith(("list[", "List[")):
        if not isinstance(data, list):
            errors.append(f"{path}: expected a list")
            return
        for index, item in enumerate(data):
            _walk(item, type_name[5:-1], f"{path}[{index}]", errors)
        return
    if type_name.startswith(("dict(", "Dict[")):  # dict(str, T) or Dict[str, T], by client version
        if not isinstance(data, dict):
            errors.append(f"{path}: expected a mapping")
            return
        inner = type_name[type_name.index(",") + 1 : -1].strip()
        for key, item in data.items():
            _walk(item, inner, f"{path}.{key}", errors)
        return
    # bytes (a Secret's data): base64 text on the wire
    simple = {"str": str, "int": int, "bool": bool, "float": (int, float), "datetime": str, "date": str, "bytes": str}
    if type_name in simple:
        ok = isinstance(data, simple[type_name]) and not (type_name == "int" and isinstance(data, bool))
        if not ok:
            errors.append(f"{path}: expected {type_name}, got {type(data).__name__}")
        return
    if type_name == "object":
        return
    model = getattr(kubernetes.client, type_name)
    if not isinstance(data, dict):
        errors.append(f"{path}: expected a {type_name} mapping")
        return
    by_json = {json_key: attr for attr, json_key in model.attribute_map.items()}
    for key, item in data.items():
        if key not in by_json:
            errors.append(f"{path}.{key}: not a field of {type_name}")
            continue
        _walk(item, model.openapi_types[by_json[key]], f"{path}.{key}", errors)


def pod_template_errors(template: Dict[str, Any]) -> List[str]:
    """Unknown fields and wrong types under ``V1PodTemplateSpec``; then the client builds the model itself
    (client-side validation of required fields and enums), whose failure is reported too."""
    import kubernetes.client

    errors: List[str] = []
    _walk(template, "V1PodTemplateSpec", "template", errors)
    if not errors:
        try:
            # the client's own JSON -> model step (the same in every client version; the public
            # deserialize() changed its signature), with client-side validation on
            client = kubernetes.client.ApiClient()
            client._ApiClient__deserialize(json.loads(json.dumps(template)), "V1PodTemplateSpec")
        except (ValueError, TypeError) as exc:
            errors.append(f"template: the kubernetes client refused it: {exc}")
    return errors


def secret_errors(secret: Dict[str, Any]) -> List[str]:
    """What the API server would refuse in a ``v1`` Secret: unknown fields and wrong types under ``V1Secret``,
    then the client's own model step; a Secret of the job must name its owner (``ownerReferences``)."""
    import kubernetes.client

    errors: List[str] = []
    if (secret.get("apiVersion"), secret.get("kind")) != ("v1", "Secret"):
        errors.append(f"apiVersion/kind: {secret.get('apiVersion')}/{secret.get('kind')} is not a v1 Secret")
    _walk(secret, "V1Secret", "secret", errors)
    if not errors:
        try:
            kubernetes.client.ApiClient()._ApiClient__deserialize(json.loads(json.dumps(secret)), "V1Secret")
        except (ValueError, TypeError) as exc:
            errors.append(f"secret: the kubernetes client refused it: {exc}")
    if not (secret.get("metadata") or {}).get("ownerReferences"):
        errors.append("secret.metadata.ownerReferences: the job's Secret has no owner (it would outlive the job)")
    return errors


#: Volcano's bus/v1alpha1 ``Command`` actions (what ``vcctl`` and the controller understand).
COMMAND_ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "TerminateJob", "CompleteJob", "ResumeJob")
_COMMAND_FIELDS = {"apiVersion", "kind", "metadata", "action", "target", "reason", "message"}


def command_errors(command: Dict[str, Any]) -> List[str]:
    """What the API server and Volcano's controller would refuse in a ``bus.volcano.sh/v1alpha1`` Command:
    unknown fields, metadata and target checked against the client's ``V1ObjectMeta``/``V1OwnerReference``,
    and the action."""
    errors = [f"{key}: not a field of Command" for key in command if key not in _COMMAND_FIELDS]
    if (command.get("apiVersion"), command.get("kind")) != ("bus.volcano.sh/v1alpha1", "Command"):
        errors.append(f"apiVersion/kind: {command.get('apiVersion')}/{command.get('kind')} is not a Volcano Command")
    _walk(command.get("metadata"), "V1ObjectMeta", "metadata", errors)
    target = command.get("target")
    _walk(target, "V1OwnerReference", "target", errors)
    if isinstance(target, dict):
        for key in ("apiVersion", "kind", "name", "uid"):
            if not target.get(key):
                errors.append(f"target.{key}: is required")
    if command.get("action") not in COMMAND_ACTIONS:
        errors.append(f"action: {command.get('action')!r} is not one of {', '.join(COMMAND_ACTIONS)}")
    return errors
