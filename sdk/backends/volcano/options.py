"""What the spec and the loader ask the Volcano backend: its ``volcano:`` section (its id format: :mod:`.ids`).

Kept apart from :mod:`.backend` so that asking costs no client import.

- :class:`VolcanoOptions`: the section's dataclass (``JobSpec.volcano``), which checks its values when made;
- :data:`OPTIONS`, :data:`KEYS`, :data:`OPTIONAL` and :data:`SHAPE` declare the section to the spec and the
  loader (through the registry);
- :func:`prepare_options` turns the job file's ``volcano:`` mapping into ``VolcanoOptions`` keyword arguments
  (``null`` means the default, exit codes as a tuple, a template path relative to the job file).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Protocol, Tuple

from ...errors import SpecError
from ...spec.checks import check_int, check_pattern, check_text, fail, one_of

__all__ = [
    "KEYS",
    "OPTIONAL",
    "OPTIONS",
    "SCHEMA",
    "SHAPE",
    "VOLCANO_POD_ACTIONS",
    "VolcanoOptions",
    "prepare_options",
    "volcano_options",
]

#: ``volcano.on_pod_failure`` / ``on_pod_eviction`` values: restart the whole job (RestartJob) or abort it.
VOLCANO_POD_ACTIONS = ("restart", "abort")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
_RESOURCE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")


@dataclass(frozen=True)
class VolcanoOptions:
    """The ``volcano:`` section: where and how the Volcano backend runs the job (``docs/volcano.md``)."""

    namespace: Optional[str] = None  # None: the kubeconfig context's namespace
    queue: str = "default"
    priority_class: Optional[str] = None
    service_account: Optional[str] = None
    image: Optional[str] = None  # None: the top-level ``image``
    code_path: str = "/home/ma-user/code"  # the code folder inside the container
    code_volume: Optional[str] = None  # a PersistentVolumeClaim mounted at code_path; None: code is in the image
    device_resource: Optional[str] = None  # e.g. nvidia.com/gpu, huawei.com/Ascend910; None: CPU only
    max_retry: int = 3
    on_pod_failure: str = "restart"
    on_pod_eviction: str = "restart"
    not_retryable_exit_codes: Tuple[int, ...] = (2,)
    template: Optional[str] = None  # a Volcano Job manifest template; None: the packaged one

    def __post_init__(self) -> None:
        _check_volcano(self, "volcano")

    def to_dict(self) -> Dict[str, Any]:
        """YAML-shaped data."""
        data = dataclasses.asdict(self)
        data["not_retryable_exit_codes"] = list(self.not_retryable_exit_codes)
        return data


def _check_volcano(opts: VolcanoOptions, prefix: str) -> None:
    label = "a Kubernetes name (lower-case letters, digits, '-')"
    check_pattern(f"{prefix}.namespace", opts.namespace, _DNS_LABEL, label)
    check_text(f"{prefix}.queue", opts.queue)
    for key in ("priority_class", "service_account", "code_volume"):
        check_pattern(f"{prefix}.{key}", getattr(opts, key), _DNS_NAME, label)
    check_text(f"{prefix}.image", opts.image, optional=True)
    check_text(f"{prefix}.code_path", opts.code_path)
    if not opts.code_path.startswith("/"):
        raise fail(f"{prefix}.code_path", "must be an absolute path inside the container", opts.code_path)
    resource = "a resource name like nvidia.com/gpu"
    check_pattern(f"{prefix}.device_resource", opts.device_resource, _RESOURCE_NAME, resource)
    check_int(f"{prefix}.max_retry", opts.max_retry, 0, 1000)
    one_of(f"{prefix}.on_pod_failure", opts.on_pod_failure, VOLCANO_POD_ACTIONS)
    one_of(f"{prefix}.on_pod_eviction", opts.on_pod_eviction, VOLCANO_POD_ACTIONS)
    codes = opts.not_retryable_exit_codes
    if not isinstance(codes, tuple):
        raise fail(f"{prefix}.not_retryable_exit_codes", "must be a list of exit codes", codes)
    for index, code in enumerate(codes):
        check_int(f"{prefix}.not_retryable_exit_codes[{index}]", code, 1, 255)
        if code in codes[:index]:
            raise fail(f"{prefix}.not_retryable_exit_codes[{index}]", "is listed twice", code, "keep one")
    check_text(f"{prefix}.template", opts.template, optional=True)


#: The section's dataclass (``JobSpec.volcano``) and the keys a job file may give in it: its fields.
OPTIONS = VolcanoOptions
KEYS: Tuple[str, ...] = tuple(field.name for field in dataclasses.fields(VolcanoOptions))
#: ``JobSpec.volcano`` always holds options: the defaults when the job file has no ``volcano:`` section.
OPTIONAL = False
#: What the section must be (the error when ``JobSpec.volcano`` is given something else).
SHAPE = "a mapping of Volcano options"
_DEFAULT_WHEN_NULL = (
    "queue",
    "code_path",
    "max_retry",
    "on_pod_failure",
    "on_pod_eviction",
    "not_retryable_exit_codes",
)


#: The ``volcano:`` section's piece of the job file's JSON schema (``properties.volcano``; its own ``$defs`` go to the
#: root), from which both copies of the schema are made (:mod:`malaunch.sdk.spec.schema`).
SCHEMA: Dict[str, Any] = {
    "description": "Options of the Volcano backend (docs/volcano.md); other backends ignore them.",
    "type": ["object", "null"],
    "additionalProperties": False,
    "properties": {
        "namespace": {
            "description": "Kubernetes namespace. Default: the kubeconfig context's.",
            "$ref": "#/$defs/k8s_label",
        },
        "queue": {"description": "Volcano queue. Default: default.", "type": ["string", "null"], "minLength": 1},
        "priority_class": {"description": "PriorityClass of the pods.", "$ref": "#/$defs/k8s_name"},
        "service_account": {"description": "ServiceAccount of the pods.", "$ref": "#/$defs/k8s_name"},
        "image": {
            "description": "Container image. Default: the top-level image.",
            "type": ["string", "null"],
            "minLength": 1,
        },
        "code_path": {
            "description": "The code folder inside the container. Default: /home/ma-user/code.",
            "type": ["string", "null"],
            "pattern": "^/",
        },
        "code_volume": {
            "description": "PersistentVolumeClaim mounted at code_path; unset: the code is in the image.",
            "$ref": "#/$defs/k8s_name",
        },
        "device_resource": {
            "description": (
                "Extended resource per device, e.g. nvidia.com/gpu or huawei.com/Ascend910; unset: CPU only."
            ),
            "type": ["string", "null"],
            "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        },
        "max_retry": {
            "description": "Job restarts before it fails. Default: 3.",
            "type": ["integer", "null"],
            "minimum": 0,
            "maximum": 1000,
        },
        "on_pod_failure": {
            "description": "A failed pod restarts or aborts the job. Default: restart.",
            "enum": ["restart", "abort", None],
        },
        "on_pod_eviction": {
            "description": "An evicted pod restarts or aborts the job. Default: restart.",
            "enum": ["restart", "abort", None],
        },
        "not_retryable_exit_codes": {
            "description": "Exit codes that abort the job at once instead of restarting it. Default: [2].",
            "type": ["array", "null"],
            "uniqueItems": True,
            "items": {"type": "integer", "minimum": 1, "maximum": 255},
        },
        "template": {
            "description": "A Volcano Job manifest template (templates/volcano/job-template.yaml).",
            "type": ["string", "null"],
            "minLength": 1,
        },
    },
    "$defs": {
        "k8s_label": {"type": ["string", "null"], "pattern": "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"},
        "k8s_name": {"type": ["string", "null"], "pattern": "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"},
    },
}


def prepare_options(
    fields: Dict[str, Any], path: str, resolve: Callable[[Optional[object]], Optional[object]]
) -> Dict[str, Any]:
    """The ``volcano:`` mapping's fields ready for ``VolcanoOptions(**fields)``; ``resolve`` makes a path
    relative to the job file absolute.

    Raises:
        SpecError: ``not_retryable_exit_codes`` is not a list.
    """
    out = {key: value for key, value in fields.items() if not (key in _DEFAULT_WHEN_NULL and value is None)}
    key = "not_retryable_exit_codes"
    if key in out:
        if not isinstance(out[key], (list, tuple)):
            raise SpecError(f"{path}.{key}", "must be a list of exit codes (1-255)", out[key])
        out[key] = tuple(out[key])
    if "template" in out:
        out["template"] = resolve(out["template"])
    return out


class _Spec(Protocol):
    """What reading a section needs of a ``JobSpec`` (the spec sits above the backends' facts)."""

    @property
    def sections(self) -> Mapping[str, Any]: ...


def volcano_options(spec: _Spec) -> VolcanoOptions:
    """``spec``'s ``volcano:`` section (``spec.volcano``, typed): its defaults when the job file has none."""
    found = spec.sections.get("volcano")
    return found if isinstance(found, VolcanoOptions) else VolcanoOptions()
