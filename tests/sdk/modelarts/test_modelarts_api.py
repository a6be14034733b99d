"""The v2 client against the fake ModelArts API on 127.0.0.1: the retry policy (429 + Retry-After, 5xx,
connection errors, the final message), idempotent create, errors, and follow-mode logs."""

from __future__ import annotations

import socket
import threading
from typing import Any, Dict, List

import pytest
import requests
from fake_modelarts import FakeModelArts
from malaunch.sdk import BackendError, ConfigError, JobNotFound
from malaunch.sdk.backends._http import RetryPolicy, retry_after_seconds
from malaunch.sdk.backends.modelarts.api import ModelArtsClient
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.modelarts.credentials import Credentials
from modelarts_env import AK, PROJECT, SK

FAST = RetryPolicy(attempts=4, initial=0.01, maximum=0.05, jitter=0.01)


def client(fake: FakeModelArts, sleeps: List[float], *, sk: str = SK, url: str = "") -> ModelArtsClient:
    creds = Credentials(AK, sk, PROJECT, "cn-north-4", "the test", security_token=None)
    return ModelArtsClient(requests.Session(), url or fake.url, creds, policy=FAST, sleep=sleeps.append)


def body(name: str = "job-1", token: str = "tok1") -> Dict[str, Any]:
    return {
        "kind": "job",
        "metadata": {"name": name, "description": f"malaunch client-token {token}"},
        "algorithm": {"code_dir": "obs://b/c/", "boot_file": "obs://b/c/t.py", "engine": {"image_url": "i:1"}},
        "spec": {"resource": {"flavor_id": "f", "node_count": 2}},
    }


def test_429_honours_retry_after(fake_ma: FakeModelArts) -> None:
    sleeps: List[float] = []
    api = client(fake_ma, sleeps)
    job_id = api.create_job(body())["metadata"]["id"]
    fake_ma.faults = {"get": ["429", "429"]}
    assert api.get_job(job_id)["metadata"]["id"] == job_id
    assert sleeps == [1.0, 1.0]
    assert fake_ma.signature_failures == [] and fake_ma.body_errors == []


def test_5xx_exhausts_with_attempts_and_time(fake_ma: FakeModelArts) -> None:
    sleeps: List[float] = []
    api = client(fake_ma, sleeps)
    fake_ma.faults = {"search": ["500"] * 10}
    with pytest.raises(BackendError) as caught:
        api.search_jobs()
    text = str(caught.value)
    assert "failed after 4 attempts over" in text and "HTTP 500" in text and "training-job-searches" in text
    assert len(sleeps) == 3 and all(0 < s <= 0.07 for s in sleeps)


def test_connection_refused_is_retried_then_one_message(fake_ma: FakeModelArts) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    sleeps: List[float] = []
    api = client(fake_ma, sleeps, url=f"http://127.0.0.1:{port}")
    with pytest.raises(BackendError) as caught:
        api.get_job("x")
    text = str(caught.value)
    refused = f"cannot reach the endpoint at 127.0.0.1:{port}, the connection was refused (nothing listens there)"
    assert f"{refused} (4 attempts over" in text
    assert text.endswith("check the endpoint setting and your network, then try again")
    assert SK not in str(caught.value)


def test_an_answer_cut_short_is_retried_then_one_line(fake_ma: FakeModelArts) -> None:
    """A body that stops short of its Content-Length (a proxy or a server dying midway) is retried like a dropped
    connection; when it lasts, one line says so (it was a ChunkedEncodingError's traceback)."""
    sleeps: List[float] = []
    api = client(fake_ma, sleeps)
    job_id = api.create_job(body())["metadata"]["id"]
    fake_ma.faults = {"get": ["cut"]}
    assert api.get_job(job_id)["metadata"]["id"] == job_id
    fake_ma.faults = {"get": ["cut"] * 4}
    with pytest.raises(BackendError) as caught:
        api.get_job(job_id)
    text = str(caught.value)
    assert "failed after 4 attempts over" in text, text
    assert "last: the answer was cut short (the connection broke before its end)" in text, text


def test_429_and_5xx_give_up_with_the_services_words_and_what_to_do(fake_ma: FakeModelArts) -> None:
    """The last answer's own error code and message, not its JSON; and to wait or try later, not to check the
    network (which answered)."""
    sleeps: List[float] = []
    api = client(fake_ma, sleeps)
    job_id = api.create_job(body())["metadata"]["id"]
    fake_ma.faults = {"get": ["429"] * 4}
    with pytest.raises(BackendError) as caught:
        api.get_job(job_id)
    text = str(caught.value)
    assert text.endswith("last: HTTP 429 APIGW.0308: throttled; the service is limiting requests: wait a few minutes, "
                         "then try again"), text  # fmt: skip
    fake_ma.faults = {"get": ["500"] * 4}
    with pytest.raises(BackendError) as caught:
        api.get_job(job_id)
    text = str(caught.value)
    assert "last: HTTP 500 ModelArts.0001: internal error; the service is failing: try again later" in text, text
    assert "network" not in text and "{" not in text


def test_each_retry_is_announced_before_its_wait(fake_ma: FakeModelArts) -> None:
    """A call retried for 16 s said nothing until it gave up; now each retry is one line: what failed, in the
    service's words, and which attempt comes after how long."""
    notices: List[str] = []
    creds = Credentials(AK, SK, PROJECT, "cn-north-4", "the test", security_token=None)
    api = ModelArtsClient(requests.Session(), fake_ma.url, creds, policy=FAST, sleep=lambda _: None,
                          notice=notices.append)  # fmt: skip
    job_id = api.create_job(body())["metadata"]["id"]
    assert notices == []
    fake_ma.faults = {"get": ["429", "500"]}
    assert api.get_job(job_id)["metadata"]["id"] == job_id
    where = f"GET {fake_ma.url}/v2/{PROJECT}/training-jobs/{job_id}"
    assert notices == [f"{where}: HTTP 429 APIGW.0308: throttled; attempt 2 of 4 in 1.0s",
                       notices[1]]  # fmt: skip
    assert notices[1].startswith(f"{where}: HTTP 500 ModelArts.0001: internal error; attempt 3 of 4 in 0.0"), notices


@pytest.mark.parametrize("faults", [["drop"], ["500", "drop"], ["drop", "500", "429"], ["429", "drop"], ["cut"]])
def test_create_makes_exactly_one_job(fake_ma: FakeModelArts, faults: List[str]) -> None:
    fake_ma.faults = {"create": list(faults)}
    sleeps: List[float] = []
    created = client(fake_ma, sleeps).create_job(body())
    assert len(fake_ma.jobs) == 1 and created["metadata"]["id"] in fake_ma.jobs
    assert fake_ma.signature_failures == []


def test_create_ignores_a_same_named_job_with_another_token(fake_ma: FakeModelArts) -> None:
    sleeps: List[float] = []
    api = client(fake_ma, sleeps)
    api.create_job(body(token="someone-else"))
    fake_ma.faults = {"create": ["500"]}
    api.create_job(body(token="mine"))
    assert len(fake_ma.jobs) == 2


def test_unknown_job_and_wrong_key(fake_ma: FakeModelArts) -> None:
    sleeps: List[float] = []
    with pytest.raises(JobNotFound):
        client(fake_ma, sleeps).get_job("no-such-job")
    with pytest.raises(ConfigError) as caught:
        client(fake_ma, sleeps, sk="wrong-secret").get_job("x")
    assert "refused the credentials from the test" in str(caught.value) and "wrong-secret" not in str(caught.value)
    assert sleeps == []  # 401 is not retried


def test_a_denied_action_names_the_action_and_the_policy(fake_ma: FakeModelArts) -> None:
    """A 403 is the platform saying the (valid) credentials lack a permission: the line names the action it
    refused, the request, where the credentials came from, and what to change (the IAM policy, or the agency)."""
    sleeps: List[float] = []
    api = client(fake_ma, sleeps)
    job_id = api.create_job(body())["metadata"]["id"]
    fake_ma.denied = {"modelarts:trainJob:get"}
    with pytest.raises(ConfigError) as caught:
        api.get_job(job_id)
    text = str(caught.value)
    assert text.startswith(f"ModelArts denied the action modelarts:trainJob:get (GET {fake_ma.url}/v2/{PROJECT}/"
                           f"training-jobs/{job_id}) to the credentials from the test: HTTP 403 ModelArts.0203: "), text
    assert "refused the credentials" not in text and "no identity-based policy allows" in text
    assert text.endswith("; the credentials are valid but lack this permission: allow modelarts:trainJob:get in the "
                         "IAM policy of that user (in a ModelArts job: of the job's agency), then try again"), text
    assert "'AKTE...'" in text and SK not in text
    assert sleeps == []  # 403 is not retried
    assert fake_ma.signature_failures == []


def test_retry_after_forms() -> None:
    assert retry_after_seconds("7", 0.0) == 7.0
    assert retry_after_seconds("Thu, 01 Jan 1970 00:00:10 GMT", 4.0) == 6.0
    assert retry_after_seconds("soon", 0.0) is None and retry_after_seconds(None, 0.0) is None


def test_logs_follow_until_the_end(fake_ma: FakeModelArts, tmp_path: Any) -> None:
    fake_ma.run_seconds = 1.5
    env = {
        "HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK, "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT,
        "HUAWEICLOUD_SDK_REGION": "cn-north-4", "MALAUNCH_MODELARTS_ENDPOINT": fake_ma.url,
        "MALAUNCH_OBS_ENDPOINT": "http://127.0.0.1:9", "MALAUNCH_HOME": str(tmp_path),
    }  # fmt: skip
    backend = ModelArtsBackend(environ=env, policy=FAST, poll=0.1, progress=None)
    job_id = backend.api.create_job(body())["metadata"]["id"]
    got: List[str] = []
    reader = threading.Thread(target=lambda: got.extend(backend.logs(job_id, follow=True)))
    reader.start()
    reader.join(timeout=60)
    assert not reader.is_alive()
    assert [line for line in got if line.startswith("[host 1]")] == [
        *(f"[host 1] worker-1 step {i}" for i in range(5)),
        "[host 1] worker-1 done",
    ]
    assert backend.status(job_id).exit_code == 0
    assert [s.id for s in backend.list()] == ["job-1"]  # the job name: one id from plan to list
