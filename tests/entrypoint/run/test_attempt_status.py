"""What a host's shim says for whoever looks (issue 43): ``attempt.json``'s wait for a lost host (which, why,
until when), and ``events.jsonl``, what it learns of the job's hosts as it happens, read defensively."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from malaunch.entrypoint.run import attempt_status


def test_a_wait_for_a_lost_host_is_announced_with_the_host_the_reason_and_the_deadline(tmp_path: Path) -> None:
    waiting = {"host": 1, "addr": "127.0.0.2", "why": "lost: no heartbeat for 3 s", "until": 1000.5}
    attempt_status.announce_attempt(str(tmp_path), 0, "waiting", waiting)
    read = attempt_status.read_attempt(attempt_status.attempt_file(str(tmp_path)))
    assert read == {"attempt": 0, "state": "waiting", "pid": os.getpid(), "waiting": waiting}


@pytest.mark.parametrize("waiting", [None, [], {"host": "1", "addr": "a", "why": "w", "until": 1.0},
                                     {"host": 1, "addr": "a", "why": "w", "until": float("nan")},
                                     {"host": True, "addr": "a", "why": "w", "until": 1.0},
                                     {"host": 1, "addr": "a", "until": 1.0}])  # fmt: skip
def test_a_waiting_that_is_not_whole_is_left_out(tmp_path: Path, waiting: object) -> None:
    path = Path(attempt_status.attempt_file(str(tmp_path)))
    path.write_text(json.dumps({"attempt": 1, "state": "waiting", "pid": 5, "waiting": waiting}))
    assert attempt_status.read_attempt(str(path)) == {"attempt": 1, "state": "waiting", "pid": 5}


def test_events_are_appended_as_they_happen_and_read_back_in_order(tmp_path: Path) -> None:
    before = time.time()
    attempt_status.note_event(str(tmp_path), "HostLost", "host 1 (127.0.0.2) lost: no heartbeat for 3 s",
                              "Warning", host=1)  # fmt: skip
    attempt_status.note_event(str(tmp_path), "HostsChanged", "the job's hosts changed (host(s) 1 left)")
    events = attempt_status.read_events(attempt_status.events_file(str(tmp_path)))
    assert [(e["reason"], e["level"], e["host"]) for e in events] == [("HostLost", "Warning", 1),
                                                                     ("HostsChanged", "Info", None)]  # fmt: skip
    assert all(before - 1 <= e["at"] <= time.time() + 1 for e in events)
    with pytest.raises(ValueError, match="unknown event"):
        attempt_status.note_event(str(tmp_path), "Whatever", "x")


def test_damaged_cut_or_unknown_event_lines_are_left_out(tmp_path: Path) -> None:
    attempt_status.note_event(str(tmp_path), "HostBack", "host 1 (127.0.0.2) joined again", host=1)
    path = Path(attempt_status.events_file(str(tmp_path)))
    with path.open("ab") as handle:
        handle.write(b'{"at": 5, "reason": "Nope", "level": "Info", "line": "x"}\n[1]\n\xff\xfe\n')
        handle.write(b'{"at": -1, "reason": "HostBack", "level": "Info", "line": "x"}\n')
        handle.write(b'{"at": 5, "reason": "HostBack", "level": "Info", "line": "cut sh')
    assert [e["line"] for e in attempt_status.read_events(str(path))] == ["host 1 (127.0.0.2) joined again"]
    assert attempt_status.read_events(str(tmp_path / "missing")) == []


def test_nothing_is_raised_where_the_events_cannot_be_written(tmp_path: Path) -> None:
    attempt_status.note_event(str(tmp_path / "no" / "such"), "HostBack", "x")  # best effort: it only informs
