"""The edges a real ModelArts hits, against the fake API on 127.0.0.1: paged search (list, idempotent create
among many jobs of the same name prefix), expired and renewed temporary credentials, unreachable endpoints
(connect timeout apart from read timeout), truthful host lines, and logs followed by byte offset."""

from __future__ import annotations

import contextlib
import io
import socket
import stat
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest
import requests
from fake_modelarts import SEARCH_LIMIT, FakeJob, FakeModelArts
from malaunch.sdk import BackendError, JobNotFound, JobState
from malaunch.sdk.backends._http import DEFAULT_POLICY, RetryPolicy
from malaunch.sdk.backends.modelarts.api import ModelArtsClient
from malaunch.sdk.backends.modelarts.backend import ModelArtsBackend
from malaunch.sdk.backends.modelarts.credentials import Credentials
from malaunch.sdk.follow import follow_job
from modelarts_env import AK, BUCKET, PROJECT, SK
from prefix_checks import Written, one_prefix
from sdkutil import ma_submit
from test_modelarts_api import FAST, body, client

LOG_FOLDER = f"obs://{BUCKET}/jobs/edge/logs/"


def api_env(fake: FakeModelArts, tmp_path: Path, **extra: str) -> Dict[str, str]:
    env = {
        "HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK, "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT,
        "HUAWEICLOUD_SDK_REGION": "cn-north-4", "MALAUNCH_MODELARTS_ENDPOINT": fake.url,
        "MALAUNCH_OBS_ENDPOINT": "http://127.0.0.1:9", "MALAUNCH_HOME": str(tmp_path / "home"),
        "MALAUNCH_MODELARTS_PROFILE": str(tmp_path / "no-profile.ini"),
    }  # fmt: skip
    env.update(extra)
    return env


def one_task_body(name: str = "edge-1") -> Dict[str, Any]:
    data = body(name)
    data["spec"] = {"resource": {"flavor_id": "f", "node_count": 1}, "log_export_path": {"obs_url": LOG_FOLDER}}
    return data


# -- paged search ------------------------------------------------------------------------------------------


def test_list_pages_through_every_job(fake_ma: FakeModelArts, tmp_path: Path) -> None:
    made = [fake_ma.add_job(f"other-{index:03d}") for index in range(120)]
    backend = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, progress=None)
    listed = backend.list()
    names = [job.body["metadata"]["name"] for job in reversed(made)]
    assert [status.id for status in listed] == names  # all of them, newest first; the id is the job name
    assert fake_ma.count("POST", "/training-job-searches") == 3  # 50 + 50 + 20
    assert fake_ma.body_errors == []


def test_list_says_how_many_jobs_it_left_out(
    fake_ma: FakeModelArts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from malaunch.sdk.backends.modelarts import api

    monkeypatch.setattr(api, "MAX_PAGES", 2)  # the real cap is 200 pages of 50; 120 jobs stand in for 10,020
    for index in range(120):
        fake_ma.add_job(f"other-{index:03d}")
    said = io.StringIO()
    backend = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, progress=said)
    assert len(backend.list()) == 100
    assert "20 older job(s) were left out" in said.getvalue(), said.getvalue()


def test_idempotent_create_finds_its_job_among_many_of_the_same_prefix(fake_ma: FakeModelArts) -> None:
    def crowd(job: FakeJob) -> None:  # right after our create, others make 120 jobs our name is part of
        fake_ma.after_create = None
        for index in range(120):
            fake_ma.add_job(f"{job.body['metadata']['name']}-copy-{index}")

    fake_ma.after_create = crowd
    fake_ma.faults = {"create": ["drop"]}  # our create worked but its answer was lost
    created = client(fake_ma, []).create_job(body("job-1", token="mine"))
    ours = [job for job in fake_ma.jobs.values() if job.body["metadata"]["name"] == "job-1"]
    assert len(ours) == 1 and created["metadata"]["id"] == ours[0].id
    assert fake_ma.count("POST", "/training-job-searches") >= 3  # it had to page past the 120 newer ones
    assert len(fake_ma.jobs) == 121 > SEARCH_LIMIT


# -- credentials ---------------------------------------------------------------------------------------------


def test_an_expired_token_is_one_line(fake_ma: FakeModelArts, ma_env: Dict[str, str]) -> None:
    fake_ma.token = "token-of-today"
    env = dict(ma_env, HUAWEICLOUD_SDK_SECURITY_TOKEN="token-of-yesterday")
    result = ma_submit(["status", "--backend", "modelarts", "some-job"], env)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "token-of-yesterday" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("ma-submit: error: the temporary credentials from the environment")
    assert "have expired" in line and "get a new AK/SK and security token" in line


def write_profile(path: Path, ak: str, sk: str, token: str) -> None:
    path.write_text(
        f"[default]\nak = {ak}\nsk = {sk}\nproject_id = {PROJECT}\nregion = cn-north-4\nsecurity_token = {token}\n"
    )
    path.chmod(stat.S_IRUSR | stat.S_IWUSR)


def rounds(*steps: Callable[[], None]) -> Callable[[float], None]:
    """A ``sleep`` for the backend that runs one step per call (between two polls), then does nothing."""
    queue = list(steps)

    def sleep(_seconds: float) -> None:
        if queue:
            queue.pop(0)()

    return sleep


def test_logs_follow_outlives_renewed_temporary_credentials(fake_ma: FakeModelArts, tmp_path: Path) -> None:
    profile = tmp_path / "modelarts.ini"
    write_profile(profile, AK, SK, "token-1")
    fake_ma.token, fake_ma.outcome = "token-1", ("silent", 0)
    env = api_env(fake_ma, tmp_path, MALAUNCH_MODELARTS_PROFILE=str(profile))
    del env["HUAWEICLOUD_SDK_AK"]
    job: List[str] = []

    def say(text: str) -> Callable[[], None]:
        return lambda: fake_ma.append_log(job[0], "worker-0", text)

    def renew() -> None:  # the platform rotates the temporary keys; the profile gets the new ones
        fake_ma.ak, fake_ma.sk, fake_ma.token = "AKRENEWED000000002", "sk-renewed-2", "token-2"
        write_profile(profile, fake_ma.ak, fake_ma.sk, fake_ma.token)
        fake_ma.append_log(job[0], "worker-0", "after renewal\n")

    backend = ModelArtsBackend(
        environ=env,
        policy=FAST,
        poll=0.0,
        status_interval=0.0,
        progress=None,
        sleep=rounds(say("before renewal\n"), renew, lambda: fake_ma.finish(job[0])),
    )
    job.append(backend.api.create_job(one_task_body())["metadata"]["id"])
    lines = list(backend.logs(job[0], follow=True))
    assert lines == ["[host 0] before renewal", "[host 0] after renewal"]
    assert backend.status(job[0]).state is JobState.SUCCEEDED
    assert any(code == 401 for _, _, code in fake_ma.calls)  # the old keys were refused once, then renewed


# -- unreachable endpoints -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_endpoint_fails_within_the_connect_budget_in_a_whole_sentence() -> None:
    sleeps: List[float] = []
    creds = Credentials(AK, SK, PROJECT, "cn-north-4", "the test")
    api = ModelArtsClient(requests.Session(), f"http://127.0.0.1:{free_port()}", creds, sleep=sleeps.append)
    with pytest.raises(BackendError) as caught:
        api.get_job("x")
    text = str(caught.value)
    attempts = len(sleeps) + 1
    # the waits and the attempts' connect timeouts stay within ~10 s (the default policy; today: 6 attempts, 18 s)
    assert sum(sleeps) + attempts * 0.01 <= DEFAULT_POLICY.connect_budget
    assert "cannot reach the endpoint at 127.0.0.1:" in text
    assert ", the connection was refused (nothing listens there)" in text
    assert text.endswith("check the endpoint setting and your network, then try again") and "..." not in text


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A port on 127.0.0.1 whose listen queue is full: connecting hangs like a host that drops packets."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = int(server.getsockname()[1])
    filler = []
    for _ in range(4):
        sock = socket.socket()
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect(("127.0.0.1", port))
        filler.append(sock)
    yield port
    for sock in filler:
        sock.close()
    server.close()


def test_a_silent_endpoint_is_a_connect_timeout_not_a_read_timeout(blackhole: int) -> None:
    policy = RetryPolicy(connect_timeout=0.5, read_timeout=120.0, connect_budget=1.4)
    creds = Credentials(AK, SK, PROJECT, "cn-north-4", "the test")
    sleeps: List[float] = []
    api = ModelArtsClient(requests.Session(), f"http://127.0.0.1:{blackhole}", creds, policy=policy,
                          sleep=sleeps.append)  # fmt: skip
    assert api.timeout == (0.5, 120.0)
    with pytest.raises(BackendError) as caught:
        api.get_job("x")
    text = str(caught.value)
    assert f"cannot reach the endpoint at 127.0.0.1:{blackhole}, no answer to connect within 0.5s" in text, text
    assert "attempts over" in text or "attempt over" in text
    assert len(sleeps) <= 2  # the budget, not the 6 attempts, ended it


def test_ma_submit_names_the_unreachable_endpoint(ma_env: Dict[str, str]) -> None:
    env = dict(ma_env, MALAUNCH_MODELARTS_ENDPOINT=f"http://127.0.0.1:{free_port()}")
    result = ma_submit(["status", "--backend", "modelarts", "some-job"], env)
    assert result.returncode == 3
    *notes, line = result.stderr.strip().splitlines()
    assert "cannot reach the endpoint at 127.0.0.1:" in line and ", the connection was refused" in line
    assert line.startswith("ma-submit: error: ") and line.endswith("then try again")
    assert notes and all(note.startswith("ma-submit: note: POST http://127.0.0.1:") for note in notes)  # each retry
    assert all("the connection was refused (nothing listens there) (ConnectionError); attempt " in n for n in notes)


# -- host lines and logs -------------------------------------------------------------------------------------


def test_host_lines_tell_the_truth_without_exit_codes(fake_ma: FakeModelArts, tmp_path: Path) -> None:
    fake_ma.report_exit_codes, fake_ma.run_seconds = False, 0.3
    backend = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, poll=0.05, status_interval=0.0,
                               progress=None)  # fmt: skip
    job_id = backend.api.create_job(body())["metadata"]["id"]
    events = list(follow_job(backend.handle(job_id), poll=0.05))
    progress = [event.text for event in events if event.kind == "progress"]
    assert not [text for text in progress if "failed" in text], progress
    for host in (0, 1):
        assert f"host {host} (worker-{host}) ended (succeeded job; the platform reports no exit code)" in progress
    assert events[-1].status is not None and events[-1].status.exit_code == 0


def test_a_job_deleted_on_the_platform_is_named_by_the_id_the_user_gave(fake_ma: FakeModelArts, tmp_path: Path) -> None:
    """The job's name (our id) given, the platform's 404 for its own id: the line named the platform's UUID, which
    the user never typed; now the id given, the platform's id and its answer, and what happened."""
    backend = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, status_interval=0.0, progress=None)
    created = backend.api.create_job(body("edge-gone"))
    platform_id = created["metadata"]["id"]
    assert backend.status("edge-gone").id == "edge-gone"  # found by its name
    fake_ma.jobs.clear()  # deleted in the console
    for ask in (backend.status, backend.stop):
        with pytest.raises(JobNotFound) as caught:
            ask("edge-gone")
        assert str(caught.value) == (
            f"no job with id 'edge-gone' on backend 'modelarts'; the platform no longer has it (its platform id "
            f"{platform_id} answered HTTP 404 ModelArts.2762: training job {platform_id} not found): it was deleted "
            "there; see 'ma-submit list --backend modelarts'"
        )
    with pytest.raises(JobNotFound) as caught:  # the platform's id given: that id, as before
        backend.status(platform_id)
    assert str(caught.value).startswith(f"no job with id '{platform_id}' on backend 'modelarts'; check the id")


def burst(tag: str, count: int) -> str:
    """``count`` lines of exactly 100 bytes."""
    return "".join(f"{tag}-{index:05d}".ljust(99, ".") + "\n" for index in range(count))


def test_logs_follow_by_offset_through_the_log_link(fake_ma: FakeModelArts, tmp_path: Path) -> None:
    fake_ma.outcome, fake_ma.preview_limit = ("silent", 0), 1000
    job: List[str] = []

    def add(tag: str) -> Callable[[], None]:
        return lambda: [fake_ma.append_log(job[0], f"worker-{h}", burst(f"{tag}{h}", 60)) for h in (0, 1)] and None

    backend = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, poll=0.0, progress=None,
                               sleep=rounds(add("a"), add("b"), add("c"), lambda: fake_ma.finish(job[0])))  # fmt: skip
    job.append(backend.api.create_job(body())["metadata"]["id"])
    lines = list(backend.logs(job[0], follow=True))
    for host in (0, 1):
        mine = [line for line in lines if line.startswith(f"[host {host}] ")]
        expected = [f"[host {host}] {text}" for tag in "abc" for text in burst(f"{tag}{host}", 60).splitlines()]
        assert mine == expected  # 6 KB a round through a 1 KB preview: nothing lost, nothing twice
    assert fake_ma.log_bytes_served == 2 * 3 * 6000  # every byte read once


def test_logs_from_the_preview_say_what_they_skipped(fake_ma: FakeModelArts, tmp_path: Path) -> None:
    fake_ma.outcome, fake_ma.preview_limit, fake_ma.log_links = ("silent", 0), 1000, False
    job: List[str] = []

    def add(text: str) -> Callable[[], None]:
        return lambda: fake_ma.append_log(job[0], "worker-0", text)

    backend = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, poll=0.0, progress=None,
                               sleep=rounds(add(burst("a", 3)), add(burst("b", 50)), add(burst("c", 2)),
                                            lambda: fake_ma.finish(job[0])))  # fmt: skip
    job.append(backend.api.create_job(one_task_body())["metadata"]["id"])
    lines = list(backend.logs(job[0], follow=True))
    notice = (
        "[host 0 ma-submit] 4000 bytes of worker-0's log are not shown: more arrived between two reads than the "
        f"platform's log preview holds; the whole log is at {LOG_FOLDER}"
    )
    expected = [f"[host 0] {text}" for text in burst("a", 3).splitlines()]
    expected += [notice] + [f"[host 0] {text}" for text in burst("b", 50).splitlines()[40:]]
    expected += [f"[host 0] {text}" for text in burst("c", 2).splitlines()]
    assert lines == expected


def test_logs_of_an_ended_job_are_whole_however_long(fake_ma: FakeModelArts, tmp_path: Path) -> None:
    fake_ma.outcome, fake_ma.preview_limit = ("silent", 0), 1000
    backend = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, poll=0.0, progress=None)
    job_id = backend.api.create_job(one_task_body())["metadata"]["id"]
    fake_ma.append_log(job_id, "worker-0", burst("x", 100) + "last line without a newline")
    fake_ma.finish(job_id)
    lines = list(backend.logs(job_id))
    assert len(lines) == 101 and lines[0] == "[host 0] " + burst("x", 1).rstrip("\n")
    assert lines[-1] == "[host 0] last line without a newline"


def test_each_task_line_has_one_prefix_naming_its_host_and_writer(fake_ma: FakeModelArts, tmp_path: Path) -> None:
    """The tasks' logs carry the shim's one prefix a line; ``logs`` names the host in that same prefix (it showed
    ``[host 1] [rank 3] ...``: two prefixes), through the log link and through the preview alike."""
    fake_ma.outcome = ("silent", 0)
    backend = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, poll=0.0, progress=None)
    job_id = backend.api.create_job(body())["metadata"]["id"]
    for host in (0, 1):
        fake_ma.append_log(job_id, f"worker-{host}", f"[ma-entrypoint] method=torchrun node_rank={host}/2\n"
                           f"[rank {2 * host + 1}] step 1\nW1129 a launcher's warning\n[ma-entrypoint] exit code 0")
    fake_ma.finish(job_id)
    expected = [
        Written(host, writer, text) for host in (0, 1) for writer, text in (
            ("ma-entrypoint", f"method=torchrun node_rank={host}/2"), (f"rank {2 * host + 1}", "step 1"),
            (None, "W1129 a launcher's warning"), ("ma-entrypoint", "exit code 0"))
    ]  # fmt: skip
    assert sorted(one_prefix(backend.logs(job_id)), key=str) == sorted(expected, key=str)
    fake_ma.log_links = False  # the preview: the same lines
    previewed = ModelArtsBackend(environ=api_env(fake_ma, tmp_path), policy=FAST, poll=0.0, progress=None)
    assert sorted(one_prefix(previewed.logs(job_id)), key=str) == sorted(expected, key=str)
