"""The shim's notifications (``entrypoint/run/notify.py``): what ``MALAUNCH_NOTIFY`` may hold, the payload's
one format, and a value that cannot be read costing the job nothing but one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from malaunch.entrypoint.run.notifier import Notifier
from malaunch.entrypoint.run.notify import parse_notify, payload, target_label
from malaunch.entrypoint.run.signature import sign
from notify_receiver import Receiver


def test_parse_reads_the_sdks_value_and_refuses_what_it_cannot_send() -> None:
    job, timeout, targets = parse_notify(json.dumps({"job": {"id": "j"}, "timeout": 3, "targets": [
        {"url": "https://h.example/x"}, {"command": ["true"], "events": ["hung"]}]}))  # fmt: skip
    assert (job, timeout) == ({"id": "j"}, 3.0)
    assert [t["events"] for t in targets] == [["failed", "succeeded"], ["hung"]]
    for bad in ({"targets": [{"url": "ftp://h/x"}]}, {"targets": [{"url": "https://h", "command": ["x"]}]},
                {"targets": [{"command": ["x"], "events": ["exploded"]}]}, {"targets": [], "timeout": 0},
                {"targets": [{"url": "https://h/x\nmore"}]}, {"targets": [{"url": "https://h/x more"}]}):  # fmt: skip
        with pytest.raises(ValueError):
            parse_notify(json.dumps(bad))


def test_the_payload_has_no_empty_field_and_one_line_of_text() -> None:
    data = payload("failed", {"id": "j-1", "name": "j", "backend": "local"}, 2,
                   cause={"host": 1, "rank": 3, "exit_code": 7, "signal": None, "class": "user_error"}, exit_code=7,
                   now=0.0)  # fmt: skip
    assert data["cause"] == {"host": 1, "rank": 3, "exit_code": 7, "class": "user_error"}
    assert data["text"] == ("malaunch job j (local) failed, attempt 2: rank 3 on host 1 exited with 7 (user_error); "
                            "exit code 7 [j-1]")  # fmt: skip
    assert data["time"] == "1970-01-01T00:00:00Z" and "\n" not in data["text"]
    assert sign(b"k", b"body").startswith("sha256=") and len(sign(b"k", b"body")) == 7 + 64
    assert target_label({"url": "https://hooks.slack.com/services/T/B/secret"}) == "https://hooks.slack.com/..."


def test_an_unreadable_value_is_said_once_and_the_job_runs_as_without(tmp_path: Path) -> None:
    (tmp_path / "boot.py").write_text("print('ran')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MA_", "VC_", "MALAUNCH_"))}
    env.update(MALAUNCH_NOTIFY="{not json", MALAUNCH_LOG_DIR=str(tmp_path / "logs"),
               MALAUNCH_REPORT_FILE=str(tmp_path / "report.json"))  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", "boot.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "MALAUNCH_NOTIFY" in line]
    assert len(said) == 1 and "no notifications are sent" in said[0], done.stderr


@pytest.mark.process
def test_a_shim_started_as_a_pod_sends_restarted_then_succeeded_signed(tmp_path: Path) -> None:
    """No SDK, no runner: the shim alone, with the platform's variables and the SDK's ``MALAUNCH_NOTIFY``, as a
    pod starts it. Attempt 0 exits 7, attempt 1 succeeds: the receiver gets ``restarted`` naming the process and
    its own 7, then ``succeeded``, each once and signed with the secret from the variable the target names."""
    (tmp_path / "boot.py").write_text("import os, sys\nsys.exit(7 if os.environ['MALAUNCH_ATTEMPT'] == '0' else 0)\n")
    receiver = Receiver(secret="pod-secret")
    try:
        value = {"job": {"id": "pod-1", "name": "pod", "backend": "volcano"}, "timeout": 20,
                 "targets": [{"url": receiver.url, "secret_env": "HOOK_SECRET",
                              "events": ["restarted", "failed", "succeeded"]}]}  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MA_", "VC_", "MALAUNCH_"))}
        env.update(MA_NUM_HOSTS="1", VC_TASK_INDEX="0", MA_MAX_RESTARTS="1", MALAUNCH_RESTART_ON="always",
                   MALAUNCH_RESTART_BACKOFF="0.1", HOOK_SECRET="pod-secret", MALAUNCH_NOTIFY=json.dumps(value),
                   MALAUNCH_LOG_DIR=str(tmp_path / "logs"), MALAUNCH_REPORT_FILE=str(tmp_path / "report.json"))
        done = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", "boot.py"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert receiver.events() == ["restarted", "succeeded"] and receiver.signed(), receiver.events()
        restarted = receiver.posts[0]["data"]
        cause = restarted["cause"]
        assert (cause["host"], cause["name"], cause["exit_code"], cause["class"]) == (0, "boot", 7, "user_error")
        assert "process boot on host 0 exited with 7 (user_error)" in restarted["text"], restarted["text"]
        assert "pod-secret" not in done.stdout + done.stderr
    finally:
        receiver.close()


JOB = {"id": "hooked-1", "name": "hooked", "backend": "local"}


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_webhook_that_redirects_is_said_not_to_have_taken_the_event(code: int) -> None:
    """A 301, 302 or 303 made the HTTP client ask the new address with a GET and no body, whose 200 counted as
    delivered: the event was lost and nothing said so. A redirect is not followed: one line names the target, the
    code and what to do (give the address it redirects to), never the URL's path."""
    receiver = Receiver(answers=[code])
    said: List[str] = []
    try:
        notifier = Notifier(JOB, 10.0, [{"url": receiver.url, "events": ["failed"]}], dict(os.environ), said.append)
        notifier.send("failed", 0, {"host": 0, "exit_code": 1}, 1)
        notifier.wait()
        assert receiver.landed == [] and receiver.tries == 1, (receiver.landed, receiver.tries)
        host = receiver.url.split("/")[2]
        assert said == [f"notify: http://{host}/... did not take the failed event after 1 try within 10s (HTTP {code}: "
                        f"it redirects to http://{host}/...; give the address it redirects to as the url); the job "
                        "goes on (try the target with 'ma-submit notify test JOB.yaml')"], said  # fmt: skip
    finally:
        receiver.close()


def test_a_webhooks_url_is_on_no_command_line_while_it_is_posted() -> None:
    """The webhook program got the URL as an argument, so any user of the machine saw a Slack or Teams hook's token
    (its path) in ``ps`` while an event was sent. It reads the URL from its stdin now: while the receiver holds the
    POST, no process's command line holds the path."""
    seen: List[str] = []

    def look() -> None:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    line = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                except OSError:
                    continue
                if "secret-path" in line:
                    seen.append(line)

    receiver = Receiver(on_post=look)
    said: List[str] = []
    try:
        notifier = Notifier(JOB, 10.0, [{"url": receiver.url, "events": ["failed"]}], dict(os.environ), said.append)
        notifier.send("failed", 0, {"host": 0, "exit_code": 1}, 1)
        notifier.wait()
        assert receiver.events() == ["failed"] and said == [], said
        assert seen == [], seen
    finally:
        receiver.close()


def test_a_url_the_http_client_refuses_is_said_without_its_path() -> None:
    """A URL the HTTP client refuses (a space in its path) crashed the webhook program, whose last line of
    traceback, the client's message with the path (a hook's token), was the shim's reason, tried three times.
    It is one try, and the line names the target by its host and says what to do."""
    said: List[str] = []
    target = {"url": "http://127.0.0.1:9/hook/sec ret-token", "events": ["failed"]}
    notifier = Notifier(JOB, 10.0, [target], dict(os.environ), said.append)
    notifier.send("failed", 0, {"host": 0, "exit_code": 1}, 1)
    notifier.wait()
    assert said == ["notify: http://127.0.0.1:9/... did not take the failed event after 1 try within 10s (its URL "
                    "cannot be sent: InvalidURL; check the url in the job file); the job goes on (try the target "
                    "with 'ma-submit notify test JOB.yaml')"], said

