"""Issue 42, notifications through the local backend: real jobs, a real receiver on 127.0.0.1.

Host 0's shim sends each event once, signed with the secret from the variable the target names; a receiver that
fails twice still gets it, one that never answers costs the job at most ``notify_timeout``, and a bad target is
refused at submit in one line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from notify_receiver import Receiver
from sdkutil import assert_nothing_running, job_ids, ma_submit, wait_for, write_job

SECRET = "s3cr3t-value-for-tests"
HANG = (Path(__file__).resolve().parents[2] / "entrypoint" / "scripts" / "hang_job.py").read_text()
FAILS_ONCE = """
import os, sys
attempt = int(os.environ.get("MALAUNCH_ATTEMPT", "0"))
print(f"attempt {attempt}", flush=True)
sys.exit(7 if attempt == 0 and os.environ.get("FAIL_FIRST") == "1" else (7 if os.environ.get("FAIL_ALWAYS") else 0))
"""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver(secret=SECRET)
    yield found
    found.close()


def _env(cli_env: Dict[str, str]) -> Dict[str, str]:
    return {**cli_env, "HOOK_SECRET": SECRET}


def _job(tmp_path: Path, url: str, events: List[str], script: str = FAILS_ONCE, **fields: Any) -> Path:
    target = {"url": url, "secret_env": "HOOK_SECRET", "events": events}
    return write_job(tmp_path / "job", script, name="hooked", notify=[target], **fields)


def _run(job: Path, env: Dict[str, str], home: Path) -> str:
    done = ma_submit([str(job)], env)
    (job_id,) = job_ids(home)
    assert_nothing_running(job_id)
    del done
    return job_id


ALL = ["succeeded", "failed", "restarted", "hung", "stopped"]


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_job_that_succeeds_sends_succeeded_once_signed(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, receiver: Receiver
) -> None:
    job_id = _run(_job(tmp_path, receiver.url, ALL), _env(cli_env), home)
    assert receiver.events() == ["succeeded"]
    assert receiver.signed()
    data = receiver.posts[0]["data"]
    assert data["job"] == {"id": job_id, "name": "hooked", "backend": "local"}
    assert data["exit_code"] == 0 and "cause" not in data and job_id in data["text"]
    assert SECRET not in (home / "jobs" / job_id / "plan.json").read_text()


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_failed_job_sends_failed_with_its_root_cause(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, receiver: Receiver
) -> None:
    job = _job(tmp_path, receiver.url, ALL, env={"FAIL_ALWAYS": "1"}, resources={"devices_per_host": 2})
    job_id = _run(job, _env(cli_env), home)
    assert receiver.events() == ["failed"] and receiver.signed()
    data = receiver.posts[0]["data"]
    cause = data["cause"]
    assert (data["exit_code"], data["attempt"]) == (7, 0)
    assert cause["exit_code"] == 7 and cause["host"] == 0 and cause["rank"] in (0, 1), cause
    assert cause["class"] and None not in cause.values()
    assert f"exited with 7 ({cause['class']})" in data["text"] and job_id in data["text"]


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_restarted_job_sends_restarted_then_succeeded(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, receiver: Receiver
) -> None:
    job = _job(tmp_path, receiver.url, ALL, env={"FAIL_FIRST": "1", "MALAUNCH_RESTART_BACKOFF": "0.2"},
               launcher={"max_restarts": 1, "restart_on": "always"})  # fmt: skip
    _run(job, _env(cli_env), home)
    assert receiver.events() == ["restarted", "succeeded"] and receiver.signed()
    restarted = receiver.posts[0]["data"]
    assert (restarted["attempt"], restarted["cause"]["exit_code"]) == (0, 7)
    assert receiver.posts[1]["data"]["attempt"] == 1


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_hung_job_sends_hung_and_failed(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, receiver: Receiver
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    job = _job(tmp_path, receiver.url, ALL, script=HANG, env={"HANG_PLAN": "0:0=pipe", "HANG_JOB_DIR": str(marks)},
               launcher={"grace_period": 3, "hang_timeout": 2})  # fmt: skip
    _run(job, _env(cli_env), home)
    assert receiver.events() == ["hung", "failed"] and receiver.signed()
    assert receiver.posts[1]["data"]["exit_code"] == 124
    assert receiver.posts[0]["data"]["cause"]["class"] == "hang"


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_only_the_events_a_target_asks_for_are_sent(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, receiver: Receiver
) -> None:
    job = _job(tmp_path, receiver.url, ["failed"], env={"FAIL_FIRST": "1", "MALAUNCH_RESTART_BACKOFF": "0.2"},
               launcher={"max_restarts": 1, "restart_on": "always"})  # fmt: skip
    _run(job, _env(cli_env), home)
    assert receiver.posts == []


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_receiver_answering_500_twice_then_200_gets_the_event(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    receiver = Receiver(answers=[500, 500], secret=SECRET)
    try:
        _run(_job(tmp_path, receiver.url, ["succeeded"]), _env(cli_env), home)
        assert receiver.tries == 3 and receiver.events() == ["succeeded"] and receiver.signed()
    finally:
        receiver.close()


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_receiver_that_never_answers_costs_at_most_the_timeout(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    receiver = Receiver(hang=True, secret=SECRET)
    try:
        job = _job(tmp_path, receiver.url, ["failed"], env={"FAIL_ALWAYS": "1"}, notify_timeout=2)
        done = ma_submit([str(job)], _env(cli_env))
        (job_id,) = job_ids(home)
        assert done.returncode == 7, done.stderr
        status = json.loads(ma_submit(["status", "--output", "json", job_id], cli_env).stdout)
        assert (status["state"], status["exit_code"]) == ("FAILED", 7)
        console = (home / "jobs" / job_id / "hosts" / "0" / "console.log").read_text()
        said = [line for line in console.splitlines() if "notify:" in line]
        assert len(said) == 1 and "within 2s" in said[0] and "the job goes on" in said[0], console
        assert said[0].endswith("(try the target with 'ma-submit notify test JOB.yaml')"), said
        assert "secret-path" not in console and SECRET not in console
        report = json.loads((home / "jobs" / job_id / "hosts" / "0" / "report.json").read_text())
        assert report["exit_code"] == 7
        assert receiver.waiting >= 1  # the job ended while the receiver still held the event, unanswered
    finally:
        receiver.close()


@pytest.mark.process
def test_a_command_target_gets_the_event_on_stdin_and_in_its_environment(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    out = tmp_path / "got.json"
    hook = tmp_path / "hook.py"
    hook.write_text(f"import os, sys\nopen({str(out)!r}, 'w').write(sys.stdin.read() + '\\n' + "
                    "os.environ['MALAUNCH_EVENT'])\n")  # fmt: skip
    target = {"command": [sys.executable, str(hook)], "events": ["succeeded"]}
    job = write_job(tmp_path / "job", FAILS_ONCE, name="cmd", notify=[target])
    _run(job, cli_env, home)
    body, event = out.read_text().rsplit("\n", 1)
    assert event == "succeeded" and json.loads(body)["event"] == "succeeded"


@pytest.mark.parametrize(
    ("target", "field", "words"),
    [
        ({"url": "ftp://example.org/x"}, "notify[0].url", "must be an http:// or https:// URL"),
        ({"command": ["no-such-program-here-42"]}, "notify[0].command[0]", "is not a program found on PATH"),
        ({"url": "http://127.0.0.1:9/x", "secret_env": "NOT_SET_ANYWHERE"}, "notify[0].secret_env", "not set here"),
        # a port that is no number or out of range, and a broken IPv6 address: a traceback at submit, or at the
        # first event (the target's label could not be made), on the old code
        ({"url": "https://hooks.example.org:abc/tok"}, "notify[0].url", "its port must be a number from 1 to 65535"),
        ({"url": "https://hooks.example.org:99999/tok"}, "notify[0].url", "its port must be a number from 1 to 65535"),
        ({"url": "http://[::1/tok"}, "notify[0].url", "must be an http:// or https:// URL"),
        # a space: --dry-run printed what follows it, and the shim's sender said the path in its error
        ({"url": "https://hooks.example.org/a b"}, "notify[0].url", "must hold no space (write it as %20)"),
    ],
)
def test_a_bad_target_is_refused_at_submit_in_one_line(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, target: Dict[str, Any], field: str, words: str
) -> None:
    job = write_job(tmp_path / "job", FAILS_ONCE, name="bad", notify=[target])
    done = ma_submit([str(job)], cli_env)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and words in lines[0], lines
    assert "Traceback" not in done.stderr and job_ids(home) == []


def test_notify_test_sends_a_sample_to_every_target_and_reports_each(
    tmp_path: Path, cli_env: Dict[str, str], receiver: Receiver
) -> None:
    failing = Receiver(answers=[404])
    try:
        targets = [{"url": receiver.url, "secret_env": "HOOK_SECRET"}, {"url": failing.url}]
        job = write_job(tmp_path / "job", FAILS_ONCE, name="tried", notify=targets)
        done = ma_submit(["notify", "test", str(job)], _env(cli_env))
        lines = done.stdout.strip().splitlines()
        assert done.returncode == 3 and len(lines) == 2, (done.stdout, done.stderr)
        assert lines[0].startswith("ok") and lines[0].endswith("(1 try): HTTP 200"), lines[0]
        assert lines[1].startswith("FAILED") and "HTTP 404" in lines[1]
        assert "secret-path" not in done.stdout
        assert receiver.signed() and receiver.posts[0]["data"]["test"] is True
    finally:
        failing.close()



def test_notify_test_says_a_webhook_that_redirects_did_not_take_the_sample(tmp_path: Path,
                                                                           cli_env: Dict[str, str]) -> None:
    """A 302 made requests ask the new address with a GET and no body, whose 200 printed ``ok``: the sample was
    lost, and the check a user runs before a job said all was well. A redirect is not followed: FAILED, with the
    code, where it points (scheme and host) and what to do, as the shim says it (exit 3)."""
    moving = Receiver(answers=[302])
    try:
        job = write_job(tmp_path / "job", FAILS_ONCE, name="tried", notify=[{"url": moving.url}])
        done = ma_submit(["notify", "test", str(job)], cli_env)
        host = moving.url.split("/")[2]
        assert done.returncode == 3, (done.stdout, done.stderr)
        assert done.stdout.split() == ["FAILED", f"http://{host}/...", "(1", "try):", "HTTP", "302:", "it", "redirects",
                                       "to", f"http://{host}/...;", "give", "the", "address", "it", "redirects", "to",
                                       "as", "the", "url"], done.stdout  # fmt: skip
        assert moving.landed == [] and moving.tries == 1
    finally:
        moving.close()


@pytest.mark.parametrize("output", ["text", "json"])
def test_dry_run_shows_a_webhook_by_its_host_and_no_secret(
    tmp_path: Path, cli_env: Dict[str, str], output: str
) -> None:
    target = {"url": "https://hooks.example.org/services/T0/B0/token-42", "secret_env": "HOOK_SECRET"}
    job = write_job(tmp_path / "job", FAILS_ONCE, name="dry", notify=[target])
    done = ma_submit(["--dry-run", "--output", output, str(job)], _env(cli_env))
    assert done.returncode == 0, done.stderr
    assert "token-42" not in done.stdout + done.stderr and SECRET not in done.stdout + done.stderr
    assert "https://hooks.example.org/..." in done.stdout and "HOOK_SECRET" in done.stdout


@pytest.mark.parametrize("url", ["https://bot:pa55word@hooks.example.org/x", "https://hooks.example.org?key=pa55word",
                                 "https://hooks.example.org#pa55word"])  # fmt: skip
def test_dry_run_shows_no_password_query_or_fragment_of_a_webhook(tmp_path: Path, cli_env: Dict[str, str],
                                                                  url: str) -> None:  # fmt: skip
    """Only a URL's path was hidden: a password before the host, or a token in a query with no path before it,
    was printed by --dry-run (in MALAUNCH_NOTIFY and in the job's notify list). Scheme and host only."""
    job = write_job(tmp_path / "job", FAILS_ONCE, name="dry", notify=[{"url": url}])
    for output in ("text", "json"):
        done = ma_submit(["--dry-run", "--output", output, str(job)], cli_env)
        assert done.returncode == 0, done.stderr
        assert "pa55word" not in done.stdout + done.stderr, done.stdout
        assert "https://hooks.example.org/..." in done.stdout


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_two_hosts_send_each_event_once_from_host_0_naming_the_host_that_failed(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, receiver: Receiver
) -> None:
    script = """
    import os, sys, time
    if os.environ.get("VC_TASK_INDEX") == "1":
        sys.exit(9)
    time.sleep(60)
    """
    job = _job(tmp_path, receiver.url, ALL, script=script, resources={"hosts": 2}, launcher={"grace_period": 3})
    _run(job, _env(cli_env), home)
    assert receiver.events() == ["failed"] and receiver.signed()
    cause = receiver.posts[0]["data"]["cause"]
    assert (cause["host"], cause["exit_code"], cause["rank"]) == (1, 9, 1), cause


@pytest.mark.parametrize("backend", ["volcano", "modelarts"])
def test_cloud_plans_give_host_0_its_targets_and_show_no_token_or_secret(
    tmp_path: Path, cli_env: Dict[str, str], backend: str
) -> None:
    target = {"url": "https://hooks.example.org/services/T0/B0/token-42", "secret_env": "HOOK_SECRET"}
    job = write_job(tmp_path / "job", FAILS_ONCE, name="cloud", notify=[target], image="train:1",
                    env={"HOOK_SECRET": SECRET}, resources={"flavor": "modelarts.vm.cpu.8u"},
                    modelarts={"obs_dir": "obs://bucket/jobs/"})  # fmt: skip
    done = ma_submit(["--dry-run", "--backend", backend, "--output", "json", str(job)], cli_env)
    assert done.returncode == 0, done.stderr
    assert "MALAUNCH_NOTIFY" in done.stdout and "https://hooks.example.org/..." in done.stdout
    assert "token-42" not in done.stdout + done.stderr and SECRET not in done.stdout + done.stderr


@pytest.mark.process
@pytest.mark.usefixtures("cleanup_jobs")
def test_a_host_lost_and_back_is_told_once_each_naming_the_host(
    tmp_path: Path, cli_env: Dict[str, str], home: Path, receiver: Receiver
) -> None:
    """Host 0's coordinator sees host 1 lost (the platform took its machine: ``ma-submit host lose``) and back
    (``host restore``): each is sent once, with the host, its address and a line that says what happened."""
    hosts_job = (Path(__file__).resolve().parents[2] / "entrypoint" / "scripts" / "hosts_job.py").read_text()
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"HOSTS_JOB_PLAN": "0:0=sleep,0:1=sleep", "HOSTS_JOB_DIR": str(marks), "MALAUNCH_RESTART_BACKOFF": "0.5"}
    job = _job(tmp_path, receiver.url, ["host_lost", "host_back", "succeeded"], script=hosts_job,
               resources={"hosts": 2}, env=env,
               launcher={"grace_period": 3, "heartbeat_timeout": 3, "max_restarts": 2, "restart_on": "always",
                         "host_wait": 60})  # fmt: skip
    submitted = ma_submit(["--detach", str(job)], _env(cli_env))
    assert submitted.returncode == 0, submitted.stderr
    (job_id,) = job_ids(home)
    for mark in ("started-h0-a0", "started-h1-a0"):
        wait_for((marks / mark).exists, 60, mark)
    assert ma_submit(["host", "lose", job_id, "1"], cli_env).returncode == 0
    wait_for(lambda: receiver.events() == ["host_lost"], 60, "host_lost delivered")
    assert ma_submit(["host", "restore", job_id, "1"], cli_env).returncode == 0
    ma_submit(["wait", job_id], cli_env)
    assert_nothing_running(job_id)
    assert receiver.events() == ["host_lost", "host_back", "succeeded"] and receiver.signed(), receiver.events()
    lost, back = (post["data"] for post in receiver.posts[:2])
    assert (lost["cause"]["host"], lost["cause"]["class"], back["cause"]["host"]) == (1, "host_lost", 1), lost
    assert "lost a host, attempt 0: host 1 (" in lost["text"] and " lost" in lost["text"].split(": ", 1)[1]
    assert "has a host back" in back["text"] and "host 1 (" in back["text"] and "joined the job again" in back["text"]
    for post in receiver.posts:
        assert "None" not in post["data"]["text"], post["data"]["text"]
