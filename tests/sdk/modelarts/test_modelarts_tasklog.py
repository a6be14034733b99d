"""Pure parts of following a ModelArts task log by offset (:mod:`malaunch.sdk.backends.modelarts.tasklog`) and
the connection reasons of the retry policy's final message."""

from __future__ import annotations

import requests
from malaunch.sdk.backends._http import connection_reason
from malaunch.sdk.backends.modelarts.logread import full_log_place
from malaunch.sdk.backends.modelarts.tasklog import TaskLog


def test_ranged_reads_show_each_byte_once_across_line_breaks() -> None:
    log = TaskLog(0)
    assert log.feed(b"one\ntw", 0) == ["[host 0] one"]
    assert log.feed(b"tw", 4) == []  # already shown: nothing twice
    assert log.feed(b"o\nthree", 6) == ["[host 0] two"]
    assert log.feed(b"one\ntwo\nthree\n", 0) == ["[host 0] three"]  # a whole answer (no Range) is cut at the offset
    assert log.flush() is None and log.offset == 14


def test_a_shorter_log_started_again() -> None:
    log = TaskLog(1)
    log.feed(b"a\nb\nc\n", 0)
    assert log.feed(b"x\n", 0) == ["[host 1] x"] and log.restarts == 1
    assert log.feed_preview(b"x\n", 2, "worker-1", "W") == ([], 0)  # the same size: nothing new
    assert log.feed_preview(b"y", 1, "worker-1", "W") == ([], 0) and log.restarts == 2  # shorter: again
    assert log.flush() == "[host 1] y" and log.flush() is None


def test_a_preview_gap_is_one_line_in_its_place() -> None:
    log = TaskLog(0)
    assert log.feed_preview(b"first\nhalf a li", 15, "worker-0", "W") == (["[host 0] first"], 0)
    lines, skipped = log.feed_preview(b"tail line\n", 40, "worker-0", "obs://b/logs/")
    assert skipped == 15
    assert lines[0] == "[host 0] half a li"  # the line before the gap, as far as it was seen
    assert lines[1].startswith("[host 0 ma-submit] 15 bytes of worker-0's log are not shown")
    assert lines[1].endswith("the whole log is at obs://b/logs/")
    assert lines[2:] == ["[host 0] tail line"]
    assert log.feed_preview(b"tail line\n", 40, "worker-0", "W") == ([], 0)


def test_where_the_whole_log_is() -> None:
    assert full_log_place({"spec": {"log_export_path": {"obs_url": "obs://b/jobs/x/logs/"}}}) == "obs://b/jobs/x/logs/"
    assert full_log_place({"spec": {"log_export_path": {"obs_url": "/b/jobs/x/logs/"}}}) == "obs://b/jobs/x/logs/"
    assert "logs/url" in full_log_place({})


def test_connection_reasons_are_whole_phrases() -> None:
    refused = requests.ConnectionError(
        "Max retries exceeded (Caused by NewConnectionError('[Errno 111] Connection refused'))"
    )
    assert connection_reason(refused) == "the connection was refused (nothing listens there)"
    assert connection_reason(requests.exceptions.ConnectTimeout("x"), 3.0).startswith("no answer to connect within 3s")
    dns = requests.ConnectionError(
        "Failed to resolve 'modelarts.nowhere.example' ([Errno -2] Name or service not known)"
    )
    assert connection_reason(dns) == "the host name does not resolve"
    assert connection_reason(requests.ConnectionError("odd")) == "ConnectionError"
