"""Pure rendering: a :class:`~malaunch.sdk.spec.JobSpec` -> a ``batch.volcano.sh/v1alpha1`` Job manifest.

One task ``worker`` with ``replicas`` = hosts and ``minAvailable`` = hosts (the gang starts together or not at
all), or ``launcher.min_hosts`` for an elastic torchrun job (the gang may start with that many pods, and a pod
lost does not end the job: :func:`pod_policies`);
the ``env`` plugin gives each pod ``VC_TASK_INDEX``, the ``svc`` plugin (with not-ready addresses published,
so the master's name resolves while its peers are still starting) gives ``VC_WORKER_HOSTS`` and the host
names ``<job>-worker-<i>.<job>``. The container runs ``ma-entrypoint BOOT ARGS`` with the rest of the
environment contract (``docs/entrypoint.md``) set from the spec. The job's secret (``MALAUNCH_JOB_SECRET``)
is no value in the manifest: the container reads it from the Secret ``<job>-secret`` (``secretKeyRef``), which
the backend creates at submit, owned by the job (:func:`secret_manifest`), so it goes when the job goes.
A ``checkpoint:`` section mounts ``checkpoint.volume`` on every pod and sets ``MALAUNCH_CHECKPOINT_DIR`` to the
job's folder on it (:mod:`.checkpoint`).
``render_manifest`` is a pure function of the spec, the job name and the template text; :class:`VolcanoRequest`
carries the result.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

import yaml
from malaunch.entrypoint.public import Name

from ...errors import ConfigError
from ...notify.payload import notify_variable
from ...plan import SubmitPlan
from ...spec.contract import launcher_env
from ...spec.model import JobSpec
from .checkpoint import check_checkpoint, checkpoint_env, checkpoint_volume, missing_mount
from .options import VolcanoOptions, volcano_options
from .template import fill_template, parse_template

__all__ = [
    "with_labels",
    "API_VERSION",
    "ENTRYPOINT",
    "GROUP",
    "JOB_NAME_LABEL",
    "MAX_JOB_NAME",
    "PLURAL",
    "TASK_NAME",
    "VERSION",
    "VolcanoPlan",
    "VolcanoRequest",
    "check_job_name",
    "contract_env",
    "pod_policies",
    "render_manifest",
    "secret_manifest",
    "secret_name",
    "template_values",
]

GROUP = "batch.volcano.sh"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "jobs"
TASK_NAME = "worker"
ENTRYPOINT = "ma-entrypoint"
#: The label Volcano puts on every pod of a job; logs and status find the pods by it.
JOB_NAME_LABEL = "volcano.sh/job-name"
#: The svc plugin names pods' hosts ``<job>-worker-<index>``, a DNS label of at most 63 characters.
MAX_JOB_NAME = 63 - len(f"-{TASK_NAME}-") - 4
_DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_ACTIONS = {"restart": "RestartJob", "abort": "AbortJob"}


def check_job_name(name: str) -> None:
    """Refuse a job name Kubernetes (Service and host names) would refuse.

    Raises:
        ConfigError: not a DNS-1035 label or longer than :data:`MAX_JOB_NAME`.
    """
    if not _DNS_1035.match(name) or len(name) > MAX_JOB_NAME:
        raise ConfigError(
            "volcano job name: must be lower-case letters, digits and '-', start with a letter and have at most "
            f"{MAX_JOB_NAME} characters",
            name,
            "use a shorter job id",
        )


def secret_name(job_name: str) -> str:
    """The name of the job's Secret (holding ``MALAUNCH_JOB_SECRET``)."""
    return f"{job_name}-secret"


def secret_manifest(namespace: str, job_name: str, job_uid: str, secret: str) -> Dict[str, Any]:
    """The Secret holding the job's ``secret``, owned by the Volcano Job (``ownerReferences``): Kubernetes'
    garbage collector deletes it with the job. Made at submit, never printed."""
    owner = {"apiVersion": API_VERSION, "kind": "Job", "name": job_name, "uid": job_uid,
             "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(job_name),
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "malaunch", JOB_NAME_LABEL: job_name},
            "ownerReferences": [owner],
        },
        "type": "Opaque",
        "data": {Name.MALAUNCH_JOB_SECRET: base64.b64encode(secret.encode()).decode()},
    }


def _field_env(name: str, path: str) -> Dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def contract_env(spec: JobSpec, job_name: str) -> List[Dict[str, Any]]:
    """The container's ``env``: the contract variables the plugins do not set, then the job's own ``env``.

    ``VC_TASK_INDEX`` (env plugin), ``VC_WORKER_HOSTS`` and ``VC_WORKER_NUM`` (svc plugin) come from Volcano.
    Ports the job file leaves open keep the shim's defaults (the platform's), so they are not set here; the job's
    secret comes from its Secret (:func:`secret_manifest`).
    """
    res, opts = spec.resources, volcano_options(spec)
    values: Dict[str, str] = {
        Name.MA_NUM_HOSTS: str(res.hosts),
        Name.MA_NUM_GPUS: str(res.devices_per_host),
        Name.MA_RUN_METHOD: spec.run_method,
        Name.MA_VJ_NAME: job_name,
        Name.MA_TASK_NAME: TASK_NAME,
        Name.MA_JOB_DIR: posixpath.dirname(opts.code_path.rstrip("/")) or "/",
        Name.MALAUNCH_JOB_ID: job_name,
    }
    values.update(launcher_env(spec))
    values.update(checkpoint_env(spec, job_name))  # the job's folder on checkpoint.volume (.checkpoint)
    notify = notify_variable(spec, job_name, "volcano")
    if notify is not None:  # host 0's shim sends the job's events (the secrets' variables come from env:)
        values[Name.MALAUNCH_NOTIFY] = notify
    env: List[Dict[str, Any]] = [{"name": key, "value": values[key]} for key in sorted(values)]
    env.append(_field_env(Name.MA_CURRENT_HOST_IP, "status.podIP"))
    env.append(_field_env(Name.MA_CURRENT_INSTANCE_NAME, "metadata.name"))
    reference = {"name": secret_name(job_name), "key": Name.MALAUNCH_JOB_SECRET}
    env.append({"name": Name.MALAUNCH_JOB_SECRET, "valueFrom": {"secretKeyRef": reference}})
    env.extend({"name": key, "value": value} for key, value in sorted(spec.env.items()))
    return env


def pod_policies(opts: VolcanoOptions, elastic: bool = False) -> List[Dict[str, Any]]:
    """The task's lifecycle policies: not-retryable exit codes first, then pod failure and eviction.

    Volcano applies the *first* policy that matches a pod event, and a failed pod matches ``PodFailed`` as
    well as its ``exitCode``; the exit-code policies must therefore come first to take effect.

    ``elastic`` (``launcher.min_hosts``): no ``PodFailed``/``PodEvicted`` policy, so one pod's loss neither
    restarts nor aborts the job (``on_pod_failure``/``on_pod_eviction`` are not used): the shims of the others
    go on without it while ``min_hosts`` remain, and Volcano ends the job Completed once every pod has ended
    and at least ``minAvailable`` succeeded. The exit-code policies stay: a code the job gives up with
    (``not_retryable_exit_codes``) still aborts it at once.
    """
    policies: List[Dict[str, Any]] = [
        {"exitCode": code, "action": "AbortJob"} for code in opts.not_retryable_exit_codes
    ]
    if not elastic:
        policies.append({"event": "PodFailed", "action": _ACTIONS[opts.on_pod_failure]})
        policies.append({"event": "PodEvicted", "action": _ACTIONS[opts.on_pod_eviction]})
    return policies


def _command(spec: JobSpec) -> List[str]:
    code_path = volcano_options(spec).code_path
    argv = [ENTRYPOINT, posixpath.join(code_path, posixpath.normpath(spec.boot_file)), *spec.args]
    for kind, items in (("inputs", spec.inputs), ("outputs", spec.outputs)):
        for index, item in enumerate(items):
            if item.path is None or "://" in item.path:
                raise ConfigError(
                    f"{kind}[{index}].path: the volcano backend passes paths inside the container as they are",
                    item.path,
                    "give a path inside the container (e.g. on a volume of an adapted template)",
                )
            argv.append(f"--{item.name}={item.path}")
    return argv


def _image(spec: JobSpec) -> str:
    image = volcano_options(spec).image or spec.image
    if image is None:
        raise ConfigError(
            "image: the volcano backend needs a container image", None, "set image: or volcano.image: in the job file"
        )
    return image


_INT32_MAX = 2**31 - 1  # ttlSecondsAfterFinished is an int32 in the CRD


def template_values(spec: JobSpec, job_name: str, namespace: Optional[str]) -> Dict[str, Any]:
    """The value of every placeholder the template may use (``docs/volcano.md`` lists them)."""
    opts, res = volcano_options(spec), spec.resources
    resources: Dict[str, Any] = {}
    if opts.device_resource is not None and res.devices_per_host > 0:
        resources = {"limits": {opts.device_resource: str(res.devices_per_host)}}
    mount: Optional[Dict[str, Any]] = None
    volume: Optional[Dict[str, Any]] = None
    if opts.code_volume is not None:
        mount = {"name": "code", "mountPath": opts.code_path}
        volume = {"name": "code", "persistentVolumeClaim": {"claimName": opts.code_volume}}
    checkpoints, checkpoints_mount = checkpoint_volume(spec)
    return {
        "job_name": job_name,
        "namespace": namespace,
        "spec_name": spec.name,
        "queue": opts.queue,
        "priority_class": opts.priority_class,
        "service_account": opts.service_account,
        "hosts": res.hosts,
        "min_available": res.hosts if spec.launcher.min_hosts is None else spec.launcher.min_hosts,
        "devices_per_host": res.devices_per_host,
        "max_retry": opts.max_retry,
        "ttl_seconds_after_finished": None if spec.keep_for is None else min(math.ceil(spec.keep_for), _INT32_MAX),
        "policies": pod_policies(opts, elastic=spec.launcher.min_hosts is not None),
        "image": _image(spec),
        "command": _command(spec),
        "code_path": opts.code_path,
        "env": contract_env(spec, job_name),
        "resources": resources,
        "code_volume": volume,
        "code_volume_mount": mount,
        "checkpoint_volume": checkpoints,
        "checkpoint_volume_mount": checkpoints_mount,
        "run_method": spec.run_method,
    }


def _check_rendered(manifest: Mapping[str, Any], source: str) -> None:
    tasks = manifest.get("spec", {}).get("tasks") if isinstance(manifest.get("spec"), dict) else None
    names = [task.get("name") for task in tasks if isinstance(task, dict)] if isinstance(tasks, list) else []
    if manifest.get("apiVersion") != API_VERSION or manifest.get("kind") != "Job" or names != [TASK_NAME]:
        raise ConfigError(
            f"{source}: must be a {API_VERSION} Job with exactly one task named {TASK_NAME!r}",
            names,
            "keep apiVersion, kind and the one worker task of templates/volcano/job-template.yaml",
        )


def render_manifest(
    spec: JobSpec, job_name: str, template_text: str, source: str, namespace: Optional[str] = None
) -> Dict[str, Any]:
    """The Volcano Job for ``spec``; pure. ``namespace`` defaults to ``spec.volcano.namespace``.

    Raises:
        ConfigError: the job cannot run on Volcano as given (no image, a URL as data path, a bad template, a
            ``checkpoint:`` section without ``volume`` or a template that does not mount it).
    """
    check_job_name(job_name)
    if spec.run_method == "ranktable" and spec.resources.devices_per_host < 1:
        raise ConfigError(
            "resources.devices_per_host: a rank table needs at least one device per host",
            spec.resources.devices_per_host,
            "set devices_per_host >= 1, or use run_method torchrun or msrun",
        )
    check_checkpoint(spec)
    values = template_values(spec, job_name, namespace or volcano_options(spec).namespace)
    manifest = fill_template(parse_template(template_text, source), values, source)
    _check_rendered(manifest, source)
    if spec.checkpoint is not None and missing_mount(manifest) is not None:
        raise ConfigError(
            f"{source}: task {missing_mount(manifest)!r} does not mount the checkpoint volume",
            spec.checkpoint.volume,
            'keep "{{checkpoint_volume}}" in the pod\'s volumes and "{{checkpoint_volume_mount}}" in the '
            "container's volumeMounts (as templates/volcano/job-template.yaml does)",
        )
    return manifest


@dataclass(frozen=True)
class VolcanoRequest:
    """What the Volcano backend creates: one manifest in one namespace (``None``: the context's namespace)."""

    manifest: Mapping[str, Any]
    namespace: Optional[str]
    template: str

    @property
    def name(self) -> str:
        """The Volcano Job's name."""
        return str(self.manifest["metadata"]["name"])

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data."""
        return {"namespace": self.namespace, "template": self.template, "manifest": dict(self.manifest)}

    def render(self) -> str:
        """The manifest as YAML, ready for ``kubectl apply -f -``."""
        text: str = yaml.safe_dump(dict(self.manifest), sort_keys=False, default_flow_style=False, width=1000)
        return text.rstrip("\n")


@dataclass(frozen=True)
class VolcanoPlan(SubmitPlan):
    """A :class:`SubmitPlan` whose text form is the manifest itself, with the summary as YAML comments."""

    def render(self) -> str:
        """YAML for ``kubectl apply -f -``: the summary as ``#`` comment lines, then the manifest."""
        body = self.request.render()
        text = super().render()  # the summary lines, then the request's text
        summary = text[: len(text) - len(body)] if text.endswith(body) else text
        header = [f"# {line}".rstrip() for line in summary.rstrip("\n").splitlines()]
        return "\n".join([*header, body])


def with_labels(plan: SubmitPlan, labels: Mapping[str, str]) -> SubmitPlan:
    """``plan`` with ``labels`` added to its Volcano Job's metadata (a plan of another backend stays as it is)."""
    request = plan.request
    if not isinstance(request, VolcanoRequest) or not labels:
        return plan
    manifest = dict(request.manifest)
    metadata = dict(manifest["metadata"])
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    manifest["metadata"] = metadata
    return dataclasses.replace(plan, request=dataclasses.replace(request, manifest=manifest))
