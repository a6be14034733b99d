"""The shim's notifications (``entrypoint/run/notify.py``): what ``MALAUNCH_NOTIFY`` may hold, the payload's
one format, and a value that cannot be read costing the job nothing but one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from malaunch.entrypoint.run.notify import parse_notify, payload, sign, target_label


def test_parse_reads_the_sdks_value_and_refuses_what_it_cannot_send() -> None:
    job, timeout, targets = parse_notify(json.dumps({"job": {"id": "j"}, "timeout": 3, "targets": [
        {"url": "https://h.example/x"}, {"command": ["true"], "events": ["hung"]}]}))  # fmt: skip
    assert (job, timeout) == ({"id": "j"}, 3.0)
    assert [t["events"] for t in targets] == [["failed", "succeeded"], ["hung"]]
    for bad in ({"targets": [{"url": "ftp://h/x"}]}, {"targets": [{"url": "https://h", "command": ["x"]}]},
                {"targets": [{"command": ["x"], "events": ["exploded"]}]}, {"targets": [], "timeout": 0}):  # fmt: skip
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
