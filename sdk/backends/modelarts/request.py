"""Job spec -> ModelArts create request (``POST /v2/{project_id}/training-jobs``): pure functions.

What maps where (``docs/modelarts.md`` has the table):

- ``metadata.name`` is the malaunch job id; ``metadata.description`` carries the client token that makes a
  retried create find the job it already made;
- code: a local ``code_dir`` is uploaded to ``<obs_dir>/<name>/code/`` (a stable place, so unchanged files
  are skipped the next time); an ``obs://`` ``code_dir`` is used as is. ``algorithm.code_dir`` is that URL;
- a preset engine (``modelarts.engine_name``/``engine_version``): ``algorithm.boot_file`` is the boot file's
  ``obs://`` URL and ``args`` become ``parameters`` (``--name=value`` / ``--name value``); the platform starts
  the boot file itself, honouring ``MA_RUN_METHOD``;
- a custom ``image``: ``algorithm.command`` is the shim, ``ma-entrypoint <boot file in the container> <args>``;
- ``inputs``/``outputs`` with ``obs://`` paths are OBS channels passed as ``--<name>=<local dir>``; an output
  without a path goes to ``<obs_dir>/<job id>/outputs/<name>/``; a ``checkpoint:`` section adds the output
  channel of the checkpoint folder (:mod:`.checkpoint`: ``MALAUNCH_CHECKPOINT_DIR``, uploaded to
  ``checkpoint.obs_path`` or ``<obs_dir>/<job id>/checkpoints/``);
- ``environments``: ``MA_RUN_METHOD``, the launcher knobs in the platform's names, ``MALAUNCH_JOB_ID``,
  ``MALAUNCH_JOB_SECRET`` (the plan's :data:`~malaunch.sdk.plan.SECRET` placeholder; ``execute`` puts the job's
  secret in its place, :meth:`CreateRequest.with_secret`), then ``env`` (at most 100 in all);
- ``metadata.annotations``: the platform's fault tolerance when the job file asks for it
  (``modelarts.job_retry_num`` -> ``fault-tolerance/job-retry-num``, ``modelarts.job_unconditional_retry`` ->
  ``fault-tolerance/job-unconditional-retry``);
- ``spec.resource``: ``flavor_id`` = ``resources.flavor`` (required), ``node_count`` = ``resources.hosts``,
  ``pool_id`` = ``resources.pool``; ``spec.log_export_path`` = ``<obs_dir>/<job id>/logs/``.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.entrypoint.public import Name

from ...errors import SpecError
from ...notify.payload import notify_variable
from ...plan import SECRET
from ...spec.contract import launcher_env
from ...spec.model import JobSpec
from .checkpoint import add_input, checkpoint_env, checkpoint_output, resume_of
from .options import modelarts_options

__all__ = [
    "CONTAINER_JOB_DIR",
    "MAX_ENVIRONMENTS",
    "CreateRequest",
    "PlannedUpload",
    "args_to_parameters",
    "build_create_body",
    "client_token",
    "code_url",
    "environments",
    "fault_tolerance_annotations",
    "find_token",
    "obs_join",
    "token_description",
]

#: Where the platform puts the code folder in the container (``MA_JOB_DIR``).
CONTAINER_JOB_DIR = "/home/ma-user/modelarts/user-job-dir"
MAX_ENVIRONMENTS = 100
_TOKEN_PREFIX = "malaunch client-token "


def obs_join(base: str, *parts: str) -> str:
    """``obs://bucket/a/`` + ``b``, ``c/`` -> ``obs://bucket/a/b/c/`` (a trailing ``/`` on the last part kept)."""
    out = base if base.endswith("/") else base + "/"
    for index, part in enumerate(parts):
        piece = part.strip("/")
        last = index == len(parts) - 1
        out += piece + ("" if last and not part.endswith("/") else "/")
    return out


def client_token(job_id: str) -> str:
    """The token kept in ``metadata.description``: derived from the (random) job id, so planning stays pure."""
    return hashlib.sha256(job_id.encode("utf-8")).hexdigest()[:20]


def token_description(job_id: str) -> str:
    """The description a job carries; :func:`client_token` is in it."""
    return _TOKEN_PREFIX + client_token(job_id)


def _obs_dir(spec: JobSpec) -> str:
    section = modelarts_options(spec)
    obs_dir = section.obs_dir if section is not None else None
    if obs_dir is None:
        raise SpecError(
            "modelarts.obs_dir",
            "is required for the modelarts backend",
            None,
            "add modelarts: {obs_dir: obs://bucket/prefix/}",
        )
    return obs_dir if obs_dir.endswith("/") else obs_dir + "/"


def code_url(spec: JobSpec) -> str:
    """The ``obs://`` folder the code runs from (uploaded there unless ``code_dir`` is already ``obs://``)."""
    if spec.code_dir.startswith("obs://"):
        return spec.code_dir if spec.code_dir.endswith("/") else spec.code_dir + "/"
    return obs_join(_obs_dir(spec), spec.name, "code/")


def args_to_parameters(args: Sequence[str]) -> List[Dict[str, str]]:
    """``--name=value`` and ``--name value`` -> ``[{"name", "value"}]``; a flag alone gets value ``""``.

    Raises:
        SpecError: a positional argument (the platform can only pass ``--name=value``).
    """
    params: List[Dict[str, str]] = []
    index = 0
    while index < len(args):
        word = args[index]
        if not word.startswith("--") or word == "--" or word.startswith("--="):
            raise SpecError(
                f"args[{index}]",
                "a preset engine passes only --name=value parameters",
                word,
                "write it as --name=value, or use a custom image (image:) to pass any arguments",
            )
        name, sep, value = word[2:].partition("=")
        if not sep and index + 1 < len(args) and not args[index + 1].startswith("--"):
            value = args[index + 1]
            index += 1
        params.append({"name": name, "value": value})
        index += 1
    return params


def environments(spec: JobSpec, job_id: str, custom_image: bool) -> Dict[str, str]:
    """``algorithm.environments``: run method, launcher knobs, the job id, then the job's ``env``.

    Raises:
        SpecError: more than :data:`MAX_ENVIRONMENTS` variables.
    """
    env: Dict[str, str] = {}
    if spec.run_method != "ranktable" or custom_image:
        env["MA_RUN_METHOD"] = spec.run_method
    env.update(launcher_env(spec))  # ports left open stay unset: the platform assigns them
    env["MALAUNCH_JOB_ID"] = job_id
    env[Name.MALAUNCH_JOB_SECRET] = SECRET  # the real one only in the body execute sends
    env.update(checkpoint_env(spec))  # the checkpoint output channel's folder (.checkpoint)
    notify = notify_variable(spec, job_id, "modelarts")
    if notify is not None:  # host 0's shim sends the job's events (the secrets' variables come from env:)
        env[Name.MALAUNCH_NOTIFY] = notify
    env.update(sorted(spec.env.items()))
    if len(env) > MAX_ENVIRONMENTS:
        raise SpecError(
            "env",
            f"gives {len(env)} variables with the ones malaunch sets, ModelArts takes at most {MAX_ENVIRONMENTS}",
            len(spec.env),
            f"remove {len(env) - MAX_ENVIRONMENTS} of them",
        )
    return env


def fault_tolerance_annotations(spec: JobSpec) -> Dict[str, str]:
    """``metadata.annotations`` asking for the platform's job restarts; empty when the job file does not."""
    opts = modelarts_options(spec)
    if opts is None or opts.job_retry_num is None:
        return {}
    annotations = {"fault-tolerance/job-retry-num": str(opts.job_retry_num)}
    if opts.job_unconditional_retry:
        annotations["fault-tolerance/job-unconditional-retry"] = "true"
    return annotations


def _channel(name: str, url: str) -> Dict[str, Any]:
    return {"name": name, "access_method": "parameter", "remote": {"obs": {"obs_url": url}}}


def _channels(spec: JobSpec, job_id: str) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    inputs = []
    for index, item in enumerate(spec.inputs):
        if item.path is None or not item.path.startswith("obs://"):
            raise SpecError(f"inputs[{index}].path", "must be an obs:// URL for the modelarts backend", item.path)
        inputs.append(_channel(item.name, item.path))
    outputs = []
    for index, item in enumerate(spec.outputs):
        if item.path is None:
            url = obs_join(_obs_dir(spec), job_id, "outputs", item.name + "/")
        elif item.path.startswith("obs://"):
            url = item.path
        else:
            raise SpecError(
                f"outputs[{index}].path", "must be an obs:// URL (or none) for the modelarts backend", item.path
            )
        outputs.append(_channel(item.name, url))
    if spec.checkpoint is not None:
        outputs.append(checkpoint_output(spec, job_id))
    return inputs, outputs


def _engine(spec: JobSpec) -> Dict[str, str]:
    if spec.image is not None:
        return {"image_url": spec.image}
    opts = modelarts_options(spec)
    if opts is None or opts.engine_name is None or opts.engine_version is None:
        raise SpecError(
            "image",
            "the modelarts backend needs a container image or a preset engine",
            None,
            "set image: (an image with malaunch installed) or modelarts.engine_name and engine_version",
        )
    return {"engine_name": opts.engine_name, "engine_version": opts.engine_version}


def build_create_body(spec: JobSpec, job_id: str) -> Dict[str, Any]:
    """The create body for ``spec`` (see the module docstring). Pure.

    Raises:
        SpecError: a field the modelarts backend cannot map (no flavor, no obs_dir, local data, min_hosts, ...).
    """
    if spec.launcher.min_hosts is not None:
        raise SpecError(
            "launcher.min_hosts",
            "is not supported on ModelArts (the platform starts all of a job's hosts and runs it only with them all)",
            spec.launcher.min_hosts,
            "remove launcher.min_hosts for this backend (it works on the local and volcano backends)",
        )
    if spec.resources.flavor is None:
        raise SpecError(
            "resources.flavor", "is required for the modelarts backend", None, "set it, e.g. modelarts.vm.cpu.8u"
        )
    code = code_url(spec)
    boot = posixpath.normpath(spec.boot_file.replace("\\", "/"))
    custom_image = spec.image is not None
    algorithm: Dict[str, Any] = {"code_dir": code}
    if custom_image:
        folder = posixpath.basename(code.rstrip("/"))
        in_container = posixpath.join(CONTAINER_JOB_DIR, folder, boot)
        algorithm["command"] = shlex.join(["ma-entrypoint", in_container, *spec.args])
    else:
        algorithm["boot_file"] = code + boot
        algorithm["parameters"] = args_to_parameters(spec.args)
    algorithm["engine"] = _engine(spec)
    inputs, outputs = _channels(spec, job_id)
    if inputs:
        algorithm["inputs"] = inputs
    if outputs:
        algorithm["outputs"] = outputs
    algorithm["environments"] = environments(spec, job_id, custom_image)
    resource: Dict[str, Any] = {"flavor_id": spec.resources.flavor, "node_count": spec.resources.hosts}
    if spec.resources.pool is not None:
        resource["pool_id"] = spec.resources.pool
    body: Dict[str, Any] = {
        "kind": "job",
        "metadata": {"name": job_id, "description": token_description(job_id)},
        "algorithm": algorithm,
        "spec": {
            "resource": resource,
            "log_export_path": {"obs_url": obs_join(_obs_dir(spec), job_id, "logs/")},
        },
    }
    resume = resume_of(spec)
    if resume is not None:  # another job's checkpoints, downloaded before the start (MALAUNCH_RESUME_SOURCE)
        body = add_input(body, resume[0])
    annotations = fault_tolerance_annotations(spec)
    if annotations:
        body["metadata"]["annotations"] = annotations
    section = modelarts_options(spec)
    if section is not None and section.ssh_key_pair_names:  # the platform's SSH endpoint per task
        body["endpoints"] = {"ssh": {"key_pair_names": list(section.ssh_key_pair_names)}}
    return body


@dataclass(frozen=True)
class PlannedUpload:
    """A local folder to upload (selected by :mod:`malaunch.sdk.backends.codefiles`) and its ``obs://`` target."""

    source: str
    target: str

    def to_json(self) -> Dict[str, str]:
        """JSON-ready data."""
        return {"source": self.source, "target": self.target}


@dataclass(frozen=True)
class CreateRequest:
    """The planned create call and uploads; ``to_json`` is what ``--dry-run --output json`` shows."""

    method: str
    url: str
    body: Mapping[str, Any]
    uploads: Tuple[PlannedUpload, ...]
    client_token: str

    @classmethod
    def for_spec(cls, spec: JobSpec, *, job_id: str, endpoint: str, project_id: str) -> CreateRequest:
        """Plan the create call for ``spec``. Pure."""
        body = build_create_body(spec, job_id)
        uploads: Tuple[PlannedUpload, ...] = ()
        if not spec.code_dir.startswith("obs://"):
            uploads = (PlannedUpload(spec.code_dir, code_url(spec)),)
        url = f"{endpoint}/v2/{project_id}/training-jobs"
        return cls("POST", url, body, uploads, client_token(job_id))

    def with_secret(self, secret: str) -> CreateRequest:
        """The request to send: the job's ``secret`` in place of the plan's placeholder (never printed)."""
        body = json.loads(json.dumps(self.body))
        env = body["algorithm"]["environments"]
        if env.get(Name.MALAUNCH_JOB_SECRET) == SECRET:
            env[Name.MALAUNCH_JOB_SECRET] = secret
        return replace(self, body=body)

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready data: method, url, body, uploads, client_token."""
        return {
            "method": self.method,
            "url": self.url,
            "body": json.loads(json.dumps(self.body)),
            "uploads": [item.to_json() for item in self.uploads],
            "client_token": self.client_token,
        }

    def render(self) -> str:
        """Text for ``--dry-run``."""
        lines = [f"  upload:      {item.source} -> {item.target}" for item in self.uploads]
        lines.append(f"  request:     {self.method} {self.url}")
        lines.extend("    " + line for line in json.dumps(self.body, indent=2).splitlines())
        return "\n".join(lines)


def find_token(job: Mapping[str, Any]) -> Optional[str]:
    """The client token in a job's description, if any."""
    description = str((job.get("metadata") or {}).get("description") or "")
    if not description.startswith(_TOKEN_PREFIX):
        return None
    return description[len(_TOKEN_PREFIX) :].split()[0] if description[len(_TOKEN_PREFIX) :].strip() else None
