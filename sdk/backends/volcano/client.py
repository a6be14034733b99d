"""The Kubernetes API as the Volcano backend uses it, through the official ``kubernetes`` client (lazily).

:func:`connect` imports ``kubernetes`` only when a backend first talks to a cluster, so ``--dry-run`` and
``ma-submit --help`` work without it. Configuration comes from, in order: the ``kubeconfig`` argument,
``$KUBECONFIG`` (its first file), ``~/.kube/config``, and the in-cluster service account. A missing client
or configuration is one :class:`~malaunch.sdk.errors.ConfigError` line naming what to install or set.

:class:`KubeApi` returns plain JSON-shaped data (``dict``) and maps every API error onto the SDK's tree:
404 -> :class:`~malaunch.sdk.errors.JobNotFound` where a job is looked up, anything else ->
:class:`~malaunch.sdk.errors.BackendError` with the status, the API's own message and what to check.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, TypeVar

from ...errors import BackendError, ConfigError, JobNotFound, show_value
from .manifest import GROUP, JOB_NAME_LABEL, PLURAL, TASK_NAME, VERSION

__all__ = ["INSTALL_HINT", "KubeApi", "KubeTarget", "connect", "resolve_target"]

INSTALL_HINT = "pip install 'malaunch[volcano]'"
_SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_TIMEOUT = 30.0
_T = TypeVar("_T")


@dataclass(frozen=True)
class KubeTarget:
    """Where to connect: a kubeconfig file (and context), or the in-cluster service account."""

    kubeconfig: Optional[str]
    context: Optional[str]
    in_cluster: bool


def resolve_target(
    environ: Mapping[str, str],
    kubeconfig: Optional[str] = None,
    context: Optional[str] = None,
    exists: Callable[[str], bool] = os.path.isfile,
) -> KubeTarget:
    """Pick the configuration to use; pure given ``environ`` and ``exists``.

    Raises:
        ConfigError: a named kubeconfig is missing, or there is none and this is not a pod.
    """
    if kubeconfig is not None:
        if not exists(kubeconfig):
            raise ConfigError("kubeconfig file not found", kubeconfig, "check the path given as kubeconfig")
        return KubeTarget(kubeconfig, context, False)
    listed = [part for part in environ.get("KUBECONFIG", "").split(os.pathsep) if part]
    if listed:
        if not exists(listed[0]):
            raise ConfigError("$KUBECONFIG names a missing file", listed[0], "set KUBECONFIG to your kubeconfig file")
        return KubeTarget(listed[0], context, False)
    home = environ.get("HOME") or os.path.expanduser("~")
    default = os.path.join(home, ".kube", "config")
    if exists(default):
        return KubeTarget(default, context, False)
    if environ.get("KUBERNETES_SERVICE_HOST") and exists(os.path.join(_SERVICE_ACCOUNT, "token")):
        return KubeTarget(None, None, True)
    raise ConfigError(
        "no Kubernetes configuration: no $KUBECONFIG, no ~/.kube/config, not inside a cluster",
        default,
        "set KUBECONFIG to your kubeconfig file (or run 'kubectl config' to create ~/.kube/config)",
    )


def _import_kubernetes() -> Any:
    try:
        import kubernetes
    except ImportError:
        raise ConfigError(
            "the volcano backend needs the official Kubernetes client", "kubernetes", f"install it: {INSTALL_HINT}"
        ) from None
    return kubernetes


def _context_namespace(kubernetes: Any, target: KubeTarget) -> str:
    if target.in_cluster:
        try:
            with open(os.path.join(_SERVICE_ACCOUNT, "namespace"), encoding="utf-8") as handle:
                return handle.read().strip() or "default"
        except OSError:
            return "default"
    try:
        contexts, active = kubernetes.config.list_kube_config_contexts(config_file=target.kubeconfig)
    except Exception as exc:  # the client raises ConfigException, yaml and OS errors alike
        raise ConfigError(f"kubeconfig cannot be read ({exc})", target.kubeconfig, "fix or replace the file") from None
    chosen = active
    if target.context is not None:
        chosen = next((c for c in contexts or [] if c.get("name") == target.context), None)
        if chosen is None:
            names = ", ".join(str(c.get("name")) for c in contexts or [])
            raise ConfigError("kubeconfig has no such context", target.context, f"use one of: {names}")
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


def connect(target: KubeTarget) -> KubeApi:
    """A :class:`KubeApi` for ``target``.

    Raises:
        ConfigError: the client is not installed, or the configuration is unusable.
    """
    kubernetes = _import_kubernetes()
    namespace = _context_namespace(kubernetes, target)
    try:
        if target.in_cluster:
            configuration = kubernetes.client.Configuration()
            kubernetes.config.load_incluster_config(client_configuration=configuration)
            api_client = kubernetes.client.ApiClient(configuration)
        else:
            api_client = kubernetes.config.new_client_from_config(
                config_file=target.kubeconfig, context=target.context, persist_config=False
            )
    except Exception as exc:  # ConfigException and friends: one line, no traceback
        where = target.kubeconfig or "in-cluster configuration"
        raise ConfigError(f"Kubernetes configuration is unusable ({exc})", where, "fix the kubeconfig") from None
    return KubeApi(kubernetes, api_client, namespace)


class KubeApi:
    """The API calls the backend makes; every answer is JSON-shaped data, every failure an SDK error."""

    def __init__(self, kubernetes: Any, api_client: Any, namespace: str) -> None:
        self._k8s = kubernetes
        self._client = api_client
        self.namespace = namespace  # the context's namespace: used when a job id names none
        self.host = str(api_client.configuration.host)
        self._custom = kubernetes.client.CustomObjectsApi(api_client)
        self._core = kubernetes.client.CoreV1Api(api_client)

    def _call(self, what: str, call: Callable[[], _T], job: Optional[str] = None) -> _T:
        try:
            return call()
        except self._k8s.client.ApiException as exc:
            if exc.status == 404 and job is not None:
                raise JobNotFound(job, "volcano", "check the id with 'ma-submit list --backend volcano'") from None
            raise BackendError(self._describe(what, exc)) from None
        except Exception as exc:  # urllib3 connection errors, timeouts
            if isinstance(exc, (JobNotFound, BackendError, ConfigError)):
                raise
            raise BackendError(
                f"{what}: cannot reach the Kubernetes API at {self.host} ({type(exc).__name__}: "
                f"{show_value(str(exc))}); check the cluster and your kubeconfig context"
            ) from None

    def _describe(self, what: str, exc: Any) -> str:
        message = str(exc.reason or "")
        with contextlib.suppress(TypeError, ValueError, AttributeError):  # the body is the API's Status, usually
            message = json.loads(exc.body).get("message") or message
        hint = {
            401: "your credentials were refused: refresh the kubeconfig",
            403: "you lack permission: ask for access to Volcano jobs and pods in this namespace",
            409: "a job of that name exists already: submit again for a new id",
        }.get(exc.status, "check the cluster (is Volcano installed?) and the job file")
        return f"{what}: the Kubernetes API answered {exc.status}, {show_value(message)}; {hint}"

    def create_job(self, namespace: str, manifest: Mapping[str, Any]) -> Dict[str, Any]:
        """Create the Volcano Job; returns the object as stored."""
        result: Dict[str, Any] = self._call(
            f"creating Volcano job in namespace {namespace}",
            lambda: self._custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, dict(manifest), _request_timeout=_TIMEOUT
            ),
        )
        return result

    def get_job(self, namespace: str, name: str) -> Dict[str, Any]:
        """The Volcano Job; raises ``JobNotFound``."""
        result: Dict[str, Any] = self._call(
            f"reading Volcano job {namespace}/{name}",
            lambda: self._custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=_TIMEOUT
            ),
            job=f"{namespace}/{name}",
        )
        return result

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete the Volcano Job and, in the background, its pods; a missing job is fine."""
        try:
            self._call(
                f"deleting Volcano job {namespace}/{name}",
                lambda: self._custom.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, propagation_policy="Background", _request_timeout=_TIMEOUT
                ),
                job=f"{namespace}/{name}",
            )
        except JobNotFound:
            return

    def list_jobs(self, namespace: str) -> List[Dict[str, Any]]:
        """The Volcano Jobs malaunch created in ``namespace``."""
        result: Dict[str, Any] = self._call(
            f"listing Volcano jobs in namespace {namespace}",
            lambda: self._custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, label_selector="app.kubernetes.io/managed-by=malaunch",
                _request_timeout=_TIMEOUT,
            ),
        )  # fmt: skip
        return list(result.get("items") or [])

    def list_pods(self, namespace: str, name: str) -> List[Dict[str, Any]]:
        """The pods of Volcano Job ``name`` (by Volcano's job-name label)."""
        pods = self._call(
            f"listing the pods of {namespace}/{name}",
            lambda: self._core.list_namespaced_pod(
                namespace, label_selector=f"{JOB_NAME_LABEL}={name}", _request_timeout=_TIMEOUT
            ),
        )
        data: Dict[str, Any] = self._client.sanitize_for_serialization(pods)
        return list(data.get("items") or [])

    def pod_log(self, namespace: str, pod: str, *, follow: bool, tail_lines: Optional[int] = None) -> Iterator[bytes]:
        """The worker container's output as it arrives, in chunks of bytes (only the last ``tail_lines`` if set)."""
        extra: Dict[str, Any] = {} if tail_lines is None else {"tail_lines": tail_lines}
        response = self._call(
            f"reading the log of pod {namespace}/{pod}",
            lambda: self._core.read_namespaced_pod_log(
                pod, namespace, container=TASK_NAME, follow=follow, _preload_content=False,
                _request_timeout=None if follow else _TIMEOUT,  # a followed log may be silent for hours
                **extra,
            ),
        )  # fmt: skip
        try:
            yield from response.stream(1 << 16, decode_content=True)
        except Exception as exc:  # the connection broke while following
            raise BackendError(
                f"reading the log of pod {namespace}/{pod} broke off ({type(exc).__name__}); run 'ma-submit logs' again"
            ) from None
        finally:
            response.release_conn()
