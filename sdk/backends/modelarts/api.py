"""The ModelArts training-job API v2 over an injected ``requests.Session``: signed calls, one retry policy.

Every call is signed (:mod:`.signer`) afresh for each attempt and goes through
:func:`malaunch.sdk.backends._http.call_with_retry` (429, 5xx and connection errors are retried). Create is
idempotent: before it sends again it looks for a job with the same name whose description carries the same
client token, so a lost answer (the connection dropped after the platform made the job, or a 5xx) never
makes a second job. Answers 401/403 become one line naming the credential source; 404 of a job becomes
:class:`~malaunch.sdk.errors.JobNotFound`.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

import requests

from ...errors import BackendError, ConfigError, JobNotFound
from .._http import DEFAULT_POLICY, RetryPolicy, call_with_retry
from .credentials import Credentials, mask
from .request import find_token
from .signer import DATE_HEADER, canonical_query, sdk_date, sign_request

__all__ = ["SEARCH_PAGE", "ModelArtsClient"]

#: Jobs per search call: the most the platform gives in one answer.
SEARCH_PAGE = 50

Query = Sequence[Tuple[str, str]]


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
        timeout: float = 60.0,
    ) -> None:
        self.session = session
        self.endpoint = endpoint.rstrip("/")
        self.credentials = credentials
        self.policy = policy
        self.sleep = sleep
        self.clock = clock
        self.timeout = timeout
        self.host = urlsplit(self.endpoint).netloc

    @property
    def jobs_path(self) -> str:
        """``/v2/{project_id}/training-jobs``."""
        return f"/v2/{self.credentials.project_id}/training-jobs"

    def job_url(self, job_id: str) -> str:
        """The API URL of one job (shown as its location)."""
        return f"{self.endpoint}{self.jobs_path}/{job_id}"

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

    def _check(self, response: requests.Response, what: str, job_id: Optional[str] = None) -> Any:
        code = response.status_code
        if code in (401, 403):
            raise ConfigError(
                f"ModelArts refused the credentials from {self.credentials.source} "
                f"(HTTP {code} {_error_text(response)})",
                mask(self.credentials.ak),
                "check the access key, secret key, project id and their permissions",
            )
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

    def call(
        self, method: str, path: str, *, query: Query = (), body: Optional[Any] = None, job_id: Optional[str] = None
    ) -> Any:
        """A signed request under the retry policy; the decoded JSON answer."""
        what = f"{method} {self.endpoint}{path}"
        response = call_with_retry(
            lambda _attempt: self.send(method, path, query, body), what=what, policy=self.policy, sleep=self.sleep
        )
        return self._check(response, what, job_id)

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

        result = call_with_retry(attempt, what=what, policy=self.policy, sleep=self.sleep)
        if isinstance(result, requests.Response):
            created: Dict[str, Any] = self._check(result, what)
            return created
        return result

    def search_jobs(self, name: Optional[str] = None, limit: int = SEARCH_PAGE) -> List[Dict[str, Any]]:
        """Every job of the project, newest first (``POST /training-job-searches``), optionally by name.

        The platform answers at most :data:`SEARCH_PAGE` jobs a call: pages are asked for by ``offset`` until
        ``total`` is reached (or a page comes back empty), so nothing is left out.
        """
        found: List[Dict[str, Any]] = []
        seen = set()
        offset = 0
        while True:
            body: Dict[str, Any] = {"offset": offset, "limit": limit, "sort_by": "create_time", "order": "desc"}
            if name is not None:
                body["filters"] = [{"key": "name", "operator": "like", "value": [name]}]
            data = self.call("POST", f"/v2/{self.credentials.project_id}/training-job-searches", body=body)
            items = data.get("items") if isinstance(data, Mapping) else None
            page = [dict(item) for item in items or [] if isinstance(item, Mapping)]
            offset += len(page)
            for item in page:
                key = str((item.get("metadata") or {}).get("id", ""))
                if key not in seen:  # a job created between two pages shifts the next page by one
                    seen.add(key)
                    found.append(item)
            total = data.get("total") if isinstance(data, Mapping) else None
            if not page or (isinstance(total, int) and offset >= total):
                return found

    def find_job(self, name: str, token: str) -> Optional[Dict[str, Any]]:
        """The job called ``name`` whose description carries ``token``, or None."""
        for item in self.search_jobs(name):
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
        data = self.call("GET", f"{self.jobs_path}/{job_id}/tasks/{task}/logs/preview")
        content = str(data.get("content") or "").encode("utf-8")
        full = data.get("full_size")
        return content, int(full) if isinstance(full, int) and not isinstance(full, bool) else len(content)
