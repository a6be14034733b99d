"""The ModelArts training-job API v2 over an injected ``requests.Session``: signed calls, one retry policy.

Every call is signed (:mod:`.signer`) afresh for each attempt and goes through
:func:`malaunch.sdk.backends._http.call_with_retry` (429, 5xx and connection errors are retried). Create is
idempotent: before it sends again it looks for a job with the same name whose description carries the same
client token, so a lost answer (the connection dropped after the platform made the job, or a 5xx) never
makes a second job; that lookup and ``list`` page through every match (the search returns at most
:data:`SEARCH_PAGE` jobs a page), however many jobs share the name. Answers 401 become one line naming the
credential source, or saying that the temporary credentials expired; 403 (valid credentials whose IAM policy lacks
the action) one line naming the action the platform denied, the request and where to allow it; before that, the
credentials are read again from their source (``refresh``), so a long ``wait`` or ``logs -f`` goes on with renewed
temporary credentials. 404 of a job becomes :class:`~malaunch.sdk.errors.JobNotFound`.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union
from urllib.parse import urlsplit

import requests

from ...errors import BackendError, ConfigError, JobNotFound
from .._http import DEFAULT_POLICY, RetryNotes, RetryPolicy, call_with_retry
from .credentials import Credentials, mask
from .request import find_token
from .signer import DATE_HEADER, canonical_query, sdk_date, sign_request

__all__ = ["SEARCH_PAGE", "LogPreview", "ModelArtsClient"]

Query = Sequence[Tuple[str, str]]
#: The most jobs one search answer holds (the API's ``limit`` is 1-50).
SEARCH_PAGE = 50
#: Pages read at most by one search (10,000 jobs), so a platform that ignores ``offset`` cannot loop us.
MAX_PAGES = 200
_EXPIRED = ("expire", "APIGW.0307")
#: An IAM action as a 403's message names it (``service:resource:verb``, e.g. ``modelarts:trainJob:create``).
_IAM_ACTION = re.compile(r"\b[a-z][a-z0-9]*:[A-Za-z][A-Za-z0-9]*:[A-Za-z][A-Za-z0-9]*\b")


@dataclass(frozen=True)
class LogPreview:
    """A task log's preview: the last bytes of the log (``content``) and the log's ``full_size`` in bytes."""

    content: bytes
    full_size: int


def _error_text(response: requests.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        code = data.get("error_code") or ""
        msg = data.get("error_msg") or ""
        return f"{code}: {msg}".strip(": ")[:300]
    return response.text.strip().replace("\n", " ")[:200]


class ModelArtsClient:
    """Calls of the training-job API v2 for one project (see the module docstring)."""

    def __init__(
        self,
        session: requests.Session,
        endpoint: str,
        credentials: Credentials,
        *,
        policy: RetryPolicy = DEFAULT_POLICY,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        timeout: Optional[Tuple[float, float]] = None,
        refresh: Optional[Callable[[], Credentials]] = None,
        notice: Optional[Callable[[str], None]] = None,
    ) -> None:
        self.session = session
        self.endpoint = endpoint.rstrip("/")
        self.credentials = credentials
        self.policy = policy
        self.sleep = sleep
        self.clock = clock
        self.timeout = timeout if timeout is not None else policy.timeout  # (connect, read)
        self.host = urlsplit(self.endpoint).netloc
        self.refresh = refresh
        self.notice = None if notice is None else RetryNotes(notice)  # one note an outage, for all our calls
        self.names: Dict[str, str] = {}  # platform id -> our id (the job name) the user gave for it (:meth:`named`)
        self.left_out = 0  # jobs the last iter_jobs could not reach (past MAX_PAGES pages)

    @property
    def jobs_path(self) -> str:
        """``/v2/{project_id}/training-jobs``."""
        return f"/v2/{self.credentials.project_id}/training-jobs"

    def job_url(self, job_id: str) -> str:
        """The API URL of one job (shown as its location)."""
        return f"{self.endpoint}{self.jobs_path}/{job_id}"

    def named(self, platform_id: str, job_id: str) -> str:
        """Remember that the user named the job of ``platform_id`` by ``job_id`` (a 404 then says that id); returns
        ``platform_id``."""
        self.names[platform_id] = job_id
        return platform_id

    # -- one signed request ------------------------------------------------------------------------------
    def send(self, method: str, path: str, query: Query = (), body: Optional[Any] = None) -> requests.Response:
        """One signed request, no retry."""
        creds = self.credentials
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
        headers: Dict[str, str] = {
            "Content-Type": "application/json",
            "Host": self.host,
            DATE_HEADER: sdk_date(self.clock()),
            "X-Project-Id": creds.project_id,
        }
        if creds.security_token:
            headers["X-Security-Token"] = creds.security_token
        headers["Authorization"] = sign_request(method, path, query, headers, data, ak=creds.ak, sk=creds.sk)
        qs = canonical_query(query)
        url = f"{self.endpoint}{path}" + (f"?{qs}" if qs else "")
        return self.session.request(method, url, data=data or None, headers=headers, timeout=self.timeout)

    def _refused(self, response: requests.Response, what: str) -> ConfigError:
        creds = self.credentials
        text = _error_text(response)
        if creds.security_token and any(word.lower() in text.lower() for word in _EXPIRED):
            return ConfigError(
                f"the temporary credentials from {creds.source} have expired (HTTP {response.status_code} {text})",
                mask(creds.ak),
                "get a new AK/SK and security token (HUAWEICLOUD_SDK_SECURITY_TOKEN) and try again; a long "
                "wait or logs -f picks new ones up from the profile file by itself",
            )
        if response.status_code == 403:
            return self._denied(what, text)
        return ConfigError(
            f"ModelArts refused the credentials from {creds.source} (HTTP {response.status_code} {text})",
            mask(creds.ak),
            "check the access key, secret key, project id and their permissions",
        )

    def _denied(self, what: str, text: str) -> ConfigError:
        """403: the signature was good, the credentials' IAM policy lacks the action (named in the answer when
        the platform names it, as IAM's messages do)."""
        creds = self.credentials
        found = _IAM_ACTION.search(text)
        where = "the IAM policy of that user (in a ModelArts job: of the job's agency)"
        if found is None:
            return ConfigError(
                f"ModelArts denied {what} to the credentials from {creds.source}: HTTP 403 {text}",
                mask(creds.ak),
                f"the credentials are valid but lack the permission for this request: allow its action (the "
                f"ModelArts API reference's table of permissions names it) in {where}, then try again",
            )
        action = found.group(0)
        return ConfigError(
            f"ModelArts denied the action {action} ({what}) to the credentials from {creds.source}: HTTP 403 {text}",
            mask(creds.ak),
            f"the credentials are valid but lack this permission: allow {action} in {where}, then try again",
        )

    def _check(self, response: requests.Response, what: str, job_id: Optional[str] = None) -> Any:
        code = response.status_code
        if code in (401, 403):
            raise self._refused(response, what)
        if code == 404 and job_id is not None and self.names.get(job_id, job_id) != job_id:  # our id given: it, and
            said = _error_text(response)  # what the platform answered for its own
            raise JobNotFound(self.names[job_id], "modelarts", f"the platform no longer has it (its platform id "
                              f"{job_id} answered HTTP 404 {said}): it was deleted there; see 'ma-submit list "
                              "--backend modelarts'")  # fmt: skip
        if code == 404 and job_id is not None:
            raise JobNotFound(job_id, "modelarts", "check the id with 'ma-submit list --backend modelarts'")
        if code >= 400:
            raise BackendError(f"{what} failed: HTTP {code} {_error_text(response)}; fix the request and try again")
        if not response.content:
            return {}
        try:
            return response.json()
        except ValueError:
            raise BackendError(f"{what}: the answer is not JSON ({response.text[:80]!r}); check the endpoint") from None

    def _renewed(self) -> bool:
        """Read the credentials again from their source; True when they changed (then they are used)."""
        if self.refresh is None:
            return False
        try:
            fresh = self.refresh()
        except ConfigError:
            return False
        if (fresh.ak, fresh.sk, fresh.security_token) == (
            self.credentials.ak,
            self.credentials.sk,
            self.credentials.security_token,
        ):
            return False
        self.credentials = fresh
        return True

    def _send_checked(self, method: str, path: str, query: Query, body: Optional[Any]) -> requests.Response:
        what = f"{method} {self.endpoint}{path}"
        response = call_with_retry(
            lambda _attempt: self.send(method, path, query, body), what=what, policy=self.policy, sleep=self.sleep,
            notice=self.notice,
        )
        if response.status_code in (401, 403) and self._renewed():
            response = call_with_retry(
                lambda _attempt: self.send(method, path, query, body), what=what, policy=self.policy, sleep=self.sleep,
                notice=self.notice,
            )
        return response

    def call(
        self, method: str, path: str, *, query: Query = (), body: Optional[Any] = None, job_id: Optional[str] = None
    ) -> Any:
        """A signed request under the retry policy; the decoded JSON answer."""
        response = self._send_checked(method, path, query, body)
        return self._check(response, f"{method} {self.endpoint}{path}", job_id)

    # -- the API -------------------------------------------------------------------------------------------
    def create_job(self, body: Mapping[str, Any]) -> Dict[str, Any]:
        """Create a training job once, however often the answer is lost (see the module docstring)."""
        name = str(body["metadata"]["name"])
        token = find_token(body)
        what = f"POST {self.endpoint}{self.jobs_path}"

        def attempt(number: int) -> Union[requests.Response, Dict[str, Any]]:
            if number > 1 and token is not None:
                found = self.find_job(name, token)
                if found is not None:
                    return found
            return self.send("POST", self.jobs_path, (), body)

        result = call_with_retry(attempt, what=what, policy=self.policy, sleep=self.sleep, notice=self.notice)
        if isinstance(result, requests.Response):
            created: Dict[str, Any] = self._check(result, what)
            return created
        return result

    def search_page(self, page: int, name: Optional[str] = None, limit: int = SEARCH_PAGE) -> Mapping[str, Any]:
        """One page of ``POST /training-job-searches`` (``offset`` is the page number), newest first."""
        body: Dict[str, Any] = {"offset": page, "limit": limit, "sort_by": "create_time", "order": "desc"}
        if name is not None:
            body["filters"] = [{"key": "name", "operator": "like", "value": [name]}]
        data = self.call("POST", f"/v2/{self.credentials.project_id}/training-job-searches", body=body)
        return data if isinstance(data, Mapping) else {}

    def iter_jobs(self, name: Optional[str] = None) -> Iterator[Dict[str, Any]]:
        """Every job of the project (or every job whose name contains ``name``), newest first, page by page."""
        seen: Set[str] = set()
        self.left_out = 0
        for page in range(MAX_PAGES):
            data = self.search_page(page, name)
            items = [dict(item) for item in data.get("items") or [] if isinstance(item, Mapping)]
            fresh = 0
            for item in items:
                job_id = str((item.get("metadata") or {}).get("id") or "")
                if job_id and job_id in seen:
                    continue  # a job created while paging shifts the pages by one
                seen.add(job_id)
                fresh += 1
                yield item
            total = data.get("total")
            if len(items) < SEARCH_PAGE or not fresh:
                return
            if isinstance(total, int) and (page + 1) * SEARCH_PAGE >= total:
                return
        total = data.get("total")  # MAX_PAGES pages read and more were there: how many were left out
        self.left_out = max(0, total - len(seen)) if isinstance(total, int) else 1

    def search_jobs(self, name: Optional[str] = None) -> List[Dict[str, Any]]:
        """All jobs of the project (optionally those whose name contains ``name``), newest first."""
        return list(self.iter_jobs(name))

    def check_credentials(self) -> None:
        """One cheap signed call (a one-job search) that fails with one line when the credentials are refused."""
        self.search_page(0, limit=1)

    def find_job(self, name: str, token: str) -> Optional[Dict[str, Any]]:
        """The job called ``name`` whose description carries ``token``, or None (every page is looked at)."""
        for item in self.iter_jobs(name):
            metadata = item.get("metadata") or {}
            if metadata.get("name") != name:
                continue
            if "description" not in metadata and metadata.get("id"):
                item = self.get_job(str(metadata["id"]))
            if find_token(item) == token:
                return item
        return None

    def get_job(self, job_id: str) -> Dict[str, Any]:
        """A job's details; raises ``JobNotFound``."""
        data: Dict[str, Any] = self.call("GET", f"{self.jobs_path}/{job_id}", job_id=job_id)
        return data

    def terminate(self, job_id: str) -> Dict[str, Any]:
        """Ask the platform to terminate the job (``POST .../actions``)."""
        data: Dict[str, Any] = self.call(
            "POST", f"{self.jobs_path}/{job_id}/actions", body={"action_type": "terminate"}, job_id=job_id
        )
        return data

    def task_log(self, job_id: str, task: str) -> Tuple[bytes, int]:
        """The tail (at most 5 MB) of one task's log and the log's full size in bytes.

        A task without a log yet may answer 4xx; that is a ``BackendError`` (not ``JobNotFound``).
        """
        preview = self.log_preview(job_id, task)
        return preview.content, preview.full_size

    def log_preview(self, job_id: str, task: str) -> LogPreview:
        """``GET .../tasks/{task}/logs/preview``: the last bytes of the log (at most 5 MB) and its full size."""
        data = self.call("GET", f"{self.jobs_path}/{job_id}/tasks/{task}/logs/preview")
        text = data.get("content")
        if text is None:
            text = data.get("context")  # the field's name before 2022-03
        content = str(text or "").encode("utf-8")
        full = data.get("full_size")
        size = int(full) if isinstance(full, int) and not isinstance(full, bool) else len(content)
        return LogPreview(content, max(size, len(content)))

    def log_url(self, job_id: str, task: str) -> Optional[str]:
        """``GET .../tasks/{task}/logs/url``: a temporary (5 minutes) link to the task's whole log, or None."""
        try:
            data = self.call("GET", f"{self.jobs_path}/{job_id}/tasks/{task}/logs/url")
        except (BackendError, ConfigError):
            return None
        url = data.get("obs_url") if isinstance(data, Mapping) else None
        return str(url) if url else None
