"""The Kubernetes API as the Volcano backend uses it, configured by the official ``kubernetes`` client (lazily).

:func:`connect` imports ``kubernetes`` only when a backend first talks to a cluster, so ``--dry-run`` and
``ma-submit --help`` work without it. Configuration comes from, in order: the ``kubeconfig`` argument,
``$KUBECONFIG`` (its first file), ``~/.kube/config``, and the in-cluster service account. A missing client
or configuration is one :class:`~malaunch.sdk.errors.ConfigError` line naming what to install or set.

The client reads the configuration (contexts, certificates, tokens, exec plugins, the in-cluster account) and
makes the connection pool (TLS, proxies); :meth:`KubeApi.send` then makes each call itself, a REST request on
that pool with the client's own authorization header, answered as JSON. The client's generated API classes are
not used for these calls: with kubernetes 37 building ``CoreV1Api`` alone takes about 0.9 s (its pydantic
models), which every ``status`` and ``list`` would pay. Only ``exec`` still uses them (:meth:`KubeApi.core_v1`),
for the client's websocket ``stream``.

:class:`KubeApi` returns plain JSON-shaped data (``dict``) and maps every API error onto the SDK's tree:
404 -> :class:`~malaunch.sdk.errors.JobNotFound` where a job is looked up, anything else ->
:class:`~malaunch.sdk.errors.BackendError` with the status, the API's own message and what to check.
Every call goes through the one retry policy of :mod:`malaunch.sdk.backends._http` (429, 5xx, connection
errors and timeouts are retried; ``Retry-After`` is honoured) and has a timeout: :data:`TIMEOUT` (connect,
read) seconds, and for a followed log :data:`FOLLOW_READ_TIMEOUT` (a followed log may be silent for hours).
Only network errors and the API's own answers are caught: a programming error stays a programming error.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, TypeVar, Union

import urllib3
import yaml

from ...errors import BackendError, ConfigError, JobNotFound, show_value
from .._http import (
    DEFAULT_POLICY,
    TLS_ERRORS,
    RetryNotes,
    RetryPolicy,
    Transient,
    address_of,
    call_with_retry,
    connection_reason,
)
from .manifest import API_VERSION, GROUP, JOB_NAME_LABEL, PLURAL, TASK_NAME, VERSION

__all__ = [
    "COMMAND_GROUP",
    "FOLLOW_READ_TIMEOUT",
    "INSTALL_HINT",
    "LIST_RESTARTS",
    "PAGE_SIZE",
    "POD_PAGE_SIZE",
    "TIMEOUT",
    "KubeApi",
    "KubeTarget",
    "Timeout",
    "connect",
    "context_namespace",
    "core_path",
    "holds",
    "objects_path",
    "resolve_target",
]

INSTALL_HINT = "pip install 'malaunch[volcano]'"
_SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
#: (connect, read) timeout of every API call, in seconds.
TIMEOUT: Tuple[float, float] = (10.0, 30.0)
#: Read timeout of a followed log (it may be silent for hours; a dead connection still ends within a day).
FOLLOW_READ_TIMEOUT = 86400.0
#: Jobs asked for per page when listing (the API server pages with ``limit`` and ``continue``).
PAGE_SIZE = 100
#: Pods asked for per page (kubectl's chunk size): a 1,024-host job's pods come in three answers.
POD_PAGE_SIZE = 500
#: How many times a paged list starts again after its ``continue`` token expired (410) between two pages.
LIST_RESTARTS = 3
#: Volcano's bus API: a ``Command`` object asks the controller to act on a job (``vcctl job suspend`` uses it).
COMMAND_GROUP = "bus.volcano.sh"
_T = TypeVar("_T")
_NETWORK_ERRORS = (urllib3.exceptions.HTTPError, OSError)  # connection refused/reset, timeouts, broken streams
#: Of those, the ones where no connection was made at all (refused, unresolvable, no answer to connect).
_UNREACHABLE = (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError, ConnectionRefusedError)


#: What to do about an API server's refusal, by its status (others: check the cluster and the job file).
_HINTS = {
    400: "the cluster refused the job (an admission webhook or a check of the API server): change what its "
    "message names in the job file",
    401: "your credentials were refused: refresh the kubeconfig",
    403: "you lack permission: ask for access to Volcano jobs and pods in this namespace",
    404: "the cluster has no such resource: is Volcano installed (its Job CRD, batch.volcano.sh)?",
    409: "a job of that name exists already: submit again for a new id",
    422: "the cluster refused the job (an admission webhook or a check of the API server): change what its "
    "message names in the job file",
}
#: The most of an API server's message shown (an admission webhook's reason is in its end).
_MESSAGE_SHOWN = 400


def _message(exc: _Refused) -> str:
    """The API server's own message (its Status ``message``, else the HTTP reason), quoted, on one line."""
    message = exc.reason
    with contextlib.suppress(TypeError, ValueError, AttributeError):  # the body is the API's Status, usually
        message = json.loads(exc.body).get("message") or message
    text = repr(" ".join(str(message).split()))
    return text if len(text) <= _MESSAGE_SHOWN else text[: _MESSAGE_SHOWN - 3] + "..."


#: A call's timeout: (connect, read) seconds, or one number for the whole call.
Timeout = Union[float, Tuple[float, float]]


class _Refused(Exception):
    """The API server answered a call with a status other than 2xx (:meth:`KubeApi.send`). It never leaves this
    module: :meth:`KubeApi._call` makes it one of the SDK's errors."""

    def __init__(self, status: int, reason: str, body: bytes, headers: Mapping[str, str]) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = headers


class _NotJson(Exception):
    """A 2xx answer whose body is no JSON object (a proxy's page, a wrong address): its first bytes."""

    def __init__(self, start: bytes) -> None:
        super().__init__(start)
        self.start = start


class _ContinueExpired(Exception):
    """A later page of a list was refused: its ``continue`` token expired (410); the list must start again."""


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


def context_namespace(target: KubeTarget) -> str:
    """The namespace of the kubeconfig's chosen context (else ``default``); reads the file, needs no client.

    Raises:
        ConfigError: the kubeconfig cannot be read or has no such context.
    """
    if target.in_cluster:
        try:
            with open(os.path.join(_SERVICE_ACCOUNT, "namespace"), encoding="utf-8") as handle:
                return handle.read().strip() or "default"
        except OSError:
            return "default"
    path = str(target.kubeconfig)
    try:
        with open(path, encoding="utf-8") as handle:
            config = yaml.safe_load(handle)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(f"kubeconfig cannot be read ({reason})", path, "fix or replace the file") from None
    config = config if isinstance(config, dict) else {}
    contexts = [c for c in config.get("contexts") or [] if isinstance(c, dict)]
    wanted = target.context or config.get("current-context")
    chosen = next((c for c in contexts if c.get("name") == wanted), None)
    if chosen is None and target.context is not None:
        names = ", ".join(str(c.get("name")) for c in contexts)
        raise ConfigError("kubeconfig has no such context", target.context, f"use one of: {names}")
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


def connect(
    target: KubeTarget,
    *,
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Callable[[float], None] = time.sleep,
    notice: Optional[Callable[[str], None]] = None,
) -> KubeApi:
    """A :class:`KubeApi` for ``target``.

    Raises:
        ConfigError: the client is not installed, or the configuration is unusable.
    """
    kubernetes = _import_kubernetes()
    namespace = context_namespace(target)
    try:
        configuration = kubernetes.client.Configuration()
        if target.in_cluster:
            kubernetes.config.load_incluster_config(client_configuration=configuration)
        else:
            kubernetes.config.load_kube_config(
                config_file=target.kubeconfig,
                context=target.context,
                client_configuration=configuration,
                persist_config=False,
            )
        configuration.retries = False  # the one retry policy (_http) decides; urllib3's own retries are off
        configuration.client_go_retries = False
        api_client = kubernetes.client.ApiClient(configuration)
    except (kubernetes.config.ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as exc:
        where = target.kubeconfig or "in-cluster configuration"  # the client's own ways of refusing a config
        raise ConfigError(f"Kubernetes configuration is unusable ({exc})", where, "fix the kubeconfig") from None
    return KubeApi(kubernetes, api_client, namespace, policy=policy, sleep=sleep, notice=notice)


class KubeApi:
    """The API calls the backend makes; every answer is JSON-shaped data, every failure an SDK error."""

    def __init__(
        self,
        kubernetes: Any,
        api_client: Any,
        namespace: str,
        *,
        policy: RetryPolicy = DEFAULT_POLICY,
        sleep: Callable[[float], None] = time.sleep,
        notice: Optional[Callable[[str], None]] = None,
    ) -> None:
        self._k8s = kubernetes
        self._notice = None if notice is None else RetryNotes(notice)  # one note an outage, for all our calls
        self._policy = policy
        self._sleep = sleep
        self._client = api_client
        self._core: Any = None
        self.namespace = namespace  # the context's namespace: used when a job id names none
        self.host = str(api_client.configuration.host).rstrip("/")

    def core_v1(self) -> Any:
        """The client's ``CoreV1Api`` (built on first use: it takes about a second to import), for ``exec``."""
        if self._core is None:
            self._core = self._k8s.client.CoreV1Api(self._client)
        return self._core

    def send(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, object]] = None,
        body: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Timeout = TIMEOUT,
        stream: bool = False,
    ) -> Any:
        """One call: ``method`` on ``path`` (``/api/v1/...``, ``/apis/...``) with ``query`` (None values left out,
        booleans as ``true``/``false``) and ``body`` as JSON, on the client's connection pool with its headers and
        authorization (an exec plugin's or the service account's token is refreshed by the client when due).

        Returns the decoded JSON object, or with ``stream`` the open response (the caller reads and releases it).

        Raises:
            _Refused: the answer's status is not 2xx.
            _NotJson: a 2xx answer that is no JSON object.
            urllib3.exceptions.HTTPError, OSError: no answer (refused, timed out, broken off).
        """
        url = self.host + path
        if query:
            url += "?" + urllib.parse.urlencode({name: _query_text(value) for name, value in query.items()
                                                 if value is not None})  # fmt: skip
        headers = dict(self._client.default_headers)
        headers["Accept"] = "application/json"
        configuration = self._client.configuration
        for auth in configuration.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"]] = auth["value"]
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        response = self._client.rest_client.pool_manager.request(
            method, url, body=data, headers=headers, preload_content=False, retries=False, timeout=_timeout(timeout)
        )
        if stream and 200 <= response.status < 300:
            return response
        try:
            raw = response.data
        finally:
            response.release_conn()
        if not 200 <= response.status < 300:
            raise _Refused(response.status, str(response.reason or ""), raw, response.headers)  # case-blind names
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = None
        if not isinstance(decoded, dict):
            raise _NotJson(raw[:60])
        return decoded

    def _call(self, what: str, call: Callable[[], _T], job: Optional[str] = None, continued: bool = False) -> _T:
        """``call()`` under the retry policy; API errors as the SDK's errors (see the module docstring).
        ``continued``: the call asks for a later page of a list, whose ``continue`` token may have expired (410)."""

        def once(_attempt: int) -> _T:
            try:
                return call()
            except _Refused as exc:
                if exc.status == 410 and continued:
                    raise _ContinueExpired(self._describe(what, exc)) from None
                if exc.status == 429 or exc.status >= 500:
                    said = f"the Kubernetes API answered {exc.status}, {_message(exc)}"
                    raise Transient(said, exc.headers.get("Retry-After"), status=exc.status) from None
                if exc.status == 404 and job is not None:
                    raise JobNotFound(job, "volcano", "check the id with 'ma-submit list --backend volcano'") from None
                if exc.status == 401:  # the user's credentials, as ModelArts' refusal of them: an input to fix (exit 2)
                    raise ConfigError(f"{what}: the Kubernetes API answered 401, {_message(exc)}", self.host,
                                      _HINTS[401]) from None  # fmt: skip
                raise BackendError(self._describe(what, exc)) from None
            except _NotJson as exc:
                raise BackendError(f"{what}: the Kubernetes API answered with something that is no JSON object "
                                   f"({show_value(exc.start.decode('utf-8', errors='replace'))}); check the "
                                   "cluster's address in the kubeconfig") from None  # fmt: skip
            except _NETWORK_ERRORS as exc:
                raise self._network_failure(exc) from None

        result: _T = call_with_retry(once, what=what, policy=self._policy, sleep=self._sleep,  # type: ignore[assignment]
                                     notice=self._notice)  # fmt: skip
        return result

    def _network_failure(self, exc: BaseException) -> Transient:
        """The cause in words and where (``the connection was refused ... at 127.0.0.1:6443``), never a repr."""
        cause = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason else exc
        reason = connection_reason(cause, self._policy.connect_timeout)
        where = address_of(self.host) or f" at {self.host}"
        unreachable = isinstance(cause, _UNREACHABLE + TLS_ERRORS)  # a handshake refused fails fast as well
        if unreachable:
            return Transient(f"cannot reach the Kubernetes API{where}: {reason}", unreachable=True)
        return Transient(f"the Kubernetes API{where} failed to answer: {reason}")

    def _describe(self, what: str, exc: _Refused) -> str:
        message = _message(exc)
        if exc.status == 404 and re.search(r'namespaces? "[^"]*" not found', message):
            hint = "that namespace does not exist: create it, or name another (the job file, the kubeconfig's context)"
        else:
            hint = _HINTS.get(exc.status, "check the cluster (is Volcano installed?) and the job file")
        return f"{what}: the Kubernetes API answered {exc.status}, {message}; {hint}"

    def create_job(self, namespace: str, manifest: Mapping[str, Any]) -> Dict[str, Any]:
        """Create the Volcano Job; returns the object as stored.

        A create that the API stored but whose answer was lost (a 5xx such as etcd's "request timed out", or a
        dropped connection) is retried by the policy, and the retry meets 409 for the job it made itself. Then the
        stored job is read: when it holds everything this manifest says, it is ours and the create succeeded;
        otherwise the 409 stands (a job of that name that is not this one)."""
        name = str(manifest["metadata"]["name"])
        jobs = objects_path(GROUP, VERSION, namespace, PLURAL)
        posts = 0

        def create() -> Dict[str, Any]:
            nonlocal posts
            posts += 1
            try:
                created: Dict[str, Any] = self.send("POST", jobs, body=manifest)
                return created
            except _Refused as exc:
                if exc.status != 409 or posts == 1:
                    raise
                stored: Dict[str, Any] = self.send("GET", objects_path(GROUP, VERSION, namespace, PLURAL, name))
                if not holds(stored, manifest):
                    raise
                return stored

        result: Dict[str, Any] = self._call(f"creating Volcano job in namespace {namespace}", create)
        return result

    def create_job_with_secret(self, namespace: str, manifest: Mapping[str, Any],
                               secret: Callable[[str], Mapping[str, Any]]) -> Dict[str, Any]:  # fmt: skip
        """Create the Volcano Job, then its Secret ``secret(uid)``, owned by the job just created (it goes when the
        job goes); without the Secret the job is deleted again (its pods could not start). The job as stored."""
        created = self.create_job(namespace, manifest)
        name = str(manifest["metadata"]["name"])
        uid = str((created.get("metadata") or {}).get("uid") or "")
        try:
            if not uid:
                raise BackendError(f"the Kubernetes API created job {namespace}/{name} but sent no uid")
            self.create_secret(namespace, secret(uid))
        except BaseException:
            with contextlib.suppress(Exception):  # the Secret's error is the one to show
                self.delete_job(namespace, name)
            raise
        return created

    def create_secret(self, namespace: str, manifest: Mapping[str, Any]) -> None:
        """Create a Secret (the job's; its value is never part of an error message)."""
        self._call(
            f"creating the job's Secret in namespace {namespace}",
            lambda: self.send("POST", core_path(namespace, "secrets"), body=manifest),
        )

    def delete_secret(self, namespace: str, name: str) -> None:
        """Delete a Secret; a missing one is fine (the garbage collector may have been first)."""
        try:
            self._call(
                f"deleting Secret {namespace}/{name}",
                lambda: self.send("DELETE", core_path(namespace, "secrets", name)),
                job=f"{namespace}/{name}",
            )
        except JobNotFound:
            return

    def get_job(self, namespace: str, name: str) -> Dict[str, Any]:
        """The Volcano Job; raises ``JobNotFound``."""
        result: Dict[str, Any] = self._call(
            f"reading Volcano job {namespace}/{name}",
            lambda: self.send("GET", objects_path(GROUP, VERSION, namespace, PLURAL, name)),
            job=f"{namespace}/{name}",
        )
        return result

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete the Volcano Job and, in the background, its pods; a missing job is fine."""
        path = objects_path(GROUP, VERSION, namespace, PLURAL, name)
        try:
            self._call(
                f"deleting Volcano job {namespace}/{name}",
                lambda: self.send("DELETE", path, {"propagationPolicy": "Background"}),
                job=f"{namespace}/{name}",
            )
        except JobNotFound:
            return

    def list_jobs(self, namespace: str) -> List[Dict[str, Any]]:
        """Every Volcano Job malaunch created in ``namespace``, page after page (``limit`` + ``continue``)."""
        return self._paged(f"listing Volcano jobs in namespace {namespace}", functools.partial(self._list_page,
                                                                                              namespace))  # fmt: skip

    def _paged(self, what: str, page_of: Callable[[Optional[str]], Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Every item of a list the API server pages: ``page_of(token)`` is the page after ``token`` (None: the first).

        A ``continue`` token can expire between two pages (410: the API server keeps one for a few minutes, less
        when its store compacts); the list then starts again from its first page, at most :data:`LIST_RESTARTS`
        times, so what is returned is always one consistent list."""
        expired = ""
        for _start in range(LIST_RESTARTS + 1):
            items: List[Dict[str, Any]] = []
            token: Optional[str] = None
            try:
                while True:
                    page = self._call(what, functools.partial(page_of, token), continued=token is not None)
                    items.extend(item for item in page.get("items") or [] if isinstance(item, dict))
                    token = (page.get("metadata") or {}).get("continue") or None
                    if token is None:
                        return items
            except _ContinueExpired as exc:
                expired = str(exc)
        raise BackendError(f"{expired} (the list was started {LIST_RESTARTS + 1} times and its continue token "
                           "expired each time); try again when the cluster is less busy")  # fmt: skip

    def _list_page(self, namespace: str, token: Optional[str]) -> Dict[str, Any]:
        query = {"labelSelector": "app.kubernetes.io/managed-by=malaunch", "limit": PAGE_SIZE, "continue": token}
        page: Dict[str, Any] = self.send("GET", objects_path(GROUP, VERSION, namespace, PLURAL), query)
        return page

    def terminate_job(self, namespace: str, name: str, uid: str) -> None:
        """Ask Volcano to terminate the job: a ``TerminateJob`` Command (its pods go; the job stays, Terminated)."""
        command = {
            "apiVersion": f"{COMMAND_GROUP}/{VERSION}",
            "kind": "Command",
            "metadata": {
                "generateName": f"{name}-terminatejob-",
                "namespace": namespace,
                "ownerReferences": [
                    {"apiVersion": API_VERSION, "kind": "Job", "name": name, "uid": uid, "controller": True,
                     "blockOwnerDeletion": True},
                ],
            },
            "action": "TerminateJob",
            "target": {"apiVersion": API_VERSION, "kind": "Job", "name": name, "uid": uid},
        }  # fmt: skip
        self._call(
            f"terminating Volcano job {namespace}/{name}",
            lambda: self.send("POST", objects_path(COMMAND_GROUP, VERSION, namespace, "commands"), body=command),
        )

    def list_pods(self, namespace: str, name: str) -> List[Dict[str, Any]]:
        """The pods of Volcano Job ``name`` (by Volcano's job-name label)."""
        return self._pods(f"listing the pods of {namespace}/{name}", namespace, f"{JOB_NAME_LABEL}={name}")

    def list_namespace_pods(self, namespace: str, selector: str) -> List[Dict[str, Any]]:
        """The pods of ``namespace`` matching the label ``selector`` (every job's pods, whatever their number)."""
        return self._pods(f"listing the pods in namespace {namespace}", namespace, selector)

    def _pods(self, what: str, namespace: str, selector: str) -> List[Dict[str, Any]]:
        """Pods page after page (:data:`POD_PAGE_SIZE` asked each time), as plain JSON."""
        return self._paged(what, functools.partial(self._pod_page, namespace, selector))

    def _pod_page(self, namespace: str, selector: str, token: Optional[str]) -> Dict[str, Any]:
        query = {"labelSelector": selector, "limit": POD_PAGE_SIZE, "continue": token}
        page: Dict[str, Any] = self.send("GET", core_path(namespace, "pods"), query)
        return page

    def pod_log(self, namespace: str, pod: str, *, follow: bool, tail_lines: Optional[int] = None,
                limit_bytes: Optional[int] = None) -> Iterator[bytes]:  # fmt: skip
        """The worker container's output as it arrives, in chunks of bytes (only the last ``tail_lines`` if set, and
        of those at most ``limit_bytes``: the API server stops there, maybe in the middle of a line)."""
        path = core_path(namespace, "pods", pod, "log")
        query = {"container": TASK_NAME, "follow": follow, "tailLines": tail_lines, "limitBytes": limit_bytes}
        timeout = (TIMEOUT[0], FOLLOW_READ_TIMEOUT) if follow else TIMEOUT
        response = self._call(
            f"reading the log of pod {namespace}/{pod}",
            lambda: self.send("GET", path, query, stream=True, timeout=timeout),
        )
        try:
            yield from response.stream(1 << 16, decode_content=True)
        except _NETWORK_ERRORS as exc:  # the connection broke while following
            raise BackendError(
                f"reading the log of pod {namespace}/{pod} broke off ({type(exc).__name__}); run 'ma-submit logs' again"
            ) from None
        finally:
            response.release_conn()


def _timeout(value: Timeout) -> urllib3.Timeout:
    """urllib3's form of a call's timeout, as the kubernetes client makes it of the timeout a call is given."""
    if isinstance(value, tuple):
        return urllib3.Timeout(connect=value[0], read=value[1])
    return urllib3.Timeout(total=value)


def _query_text(value: object) -> str:
    """A query parameter as the API reads it (booleans as ``true``/``false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _segments(*parts: str) -> str:
    return "".join("/" + urllib.parse.quote(part, safe="") for part in parts)


def core_path(namespace: str, resource: str, *rest: str) -> str:
    """The core API's path of a namespaced ``resource`` (``/api/v1/namespaces/NS/pods[/NAME[/log]]``)."""
    return "/api/v1" + _segments("namespaces", namespace, resource, *rest)


def objects_path(group: str, version: str, namespace: Optional[str], plural: str, *rest: str) -> str:
    """The path of an API group's objects (``/apis/GROUP/VERSION[/namespaces/NS]/PLURAL[/NAME]``); ``namespace``
    None: cluster-scoped (a Volcano Queue)."""
    scope = ("namespaces", namespace) if namespace is not None else ()
    return f"/apis/{group}/{version}" + _segments(*scope, plural, *rest)


def holds(stored: Any, sent: Any) -> bool:
    """True when ``stored`` (an object as the API keeps it) holds everything ``sent`` says: every key of a mapping
    with a value it holds in turn, lists of the same length item by item, other values equal. What the API adds
    (uid, timestamps, status, defaults of the admission webhooks) is ignored."""
    if isinstance(sent, Mapping):
        return isinstance(stored, Mapping) and all(key in stored and holds(stored[key], value)
                                                   for key, value in sent.items())  # fmt: skip
    if isinstance(sent, list):
        return isinstance(stored, list) and len(stored) == len(sent) and all(map(holds, stored, sent))
    return bool(stored == sent)
