"""The one line for a multi-host job's root cause (issue 43): the host, the rank, its own exit code or signal
(a lost host: why it was lost, never the survivors' 75), its class and its log; never ``None`` nor an empty
field."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from malaunch.entrypoint.public import describe_cause
from malaunch.entrypoint.report.causetext import shim_line

LOST = {"host": 1, "addr": "127.0.0.2", "rank": None, "code": 75, "signal": None, "kind": "host_lost",
        "line": "ma-entrypoint: host 1 (127.0.0.2) lost: no heartbeat for 3 s", "log": ""}  # fmt: skip


@pytest.mark.parametrize(("cause", "line"), [
    (LOST, "host 1 (127.0.0.2) lost: no heartbeat for 3 s; class host_lost"),
    ({**LOST, "line": "ma-entrypoint: host 1 (127.0.0.2) lost: its connection closed; it did not come back within "
      "20 s"}, "host 1 (127.0.0.2) lost: its connection closed; it did not come back within 20 s; class host_lost"),
    ({"host": 1, "addr": "127.0.0.2", "rank": 3, "code": 7, "signal": None, "kind": "user_error",
      "log": "/l/rank-3.log"}, "rank 3 on host 1 (127.0.0.2) exited with 7; class user_error; log /l/rank-3.log"),
    ({"host": 0, "addr": "127.0.0.1", "rank": 1, "code": 137, "signal": 9, "kind": "signal", "log": "/l/rank-1.log"},
     "rank 1 on host 0 (127.0.0.1) killed by SIGKILL (exit 137); class signal; log /l/rank-1.log"),
    ({"host": 1, "addr": "127.0.0.2", "rank": 1, "code": 124, "kind": "hang", "log": "/l/rank-1.log"},
     "rank 1 on host 1 (127.0.0.2) hung (ended with exit 124); class hang; log /l/rank-1.log"),
    ({"host": 1, "addr": "127.0.0.2", "rank": None, "name": "torchrun", "code": 1, "kind": "launcher_error",
      "log": "/l/torchrun.log"},
     "torchrun on host 1 (127.0.0.2) exited with 1; class launcher_error; log /l/torchrun.log"),
    ({"rank": 2, "code": 1, "log": "/logs/worker_2.log"}, "rank 2 exited with 1; log /logs/worker_2.log"),
    ({"host": 1, "addr": "127.0.0.2", "ended": True, "code": 3, "kind": "host_lost", "log": "/l/torchrun.log",
      "line": "ma-entrypoint: host 0 (127.0.0.1) lost: this host's attempt ends with it"},
     "host 0 (127.0.0.1) lost; class host_lost"),
    ({"host": None, "addr": "", "kind": "rendezvous_timeout",
      "line": "ma-entrypoint: gave up waiting for host(s) 1 to join the job's coordinator"},
     "gave up waiting for host(s) 1 to join the job's coordinator; class rendezvous_timeout"),
    ({"host": 1, "addr": "127.0.0.2", "rank": None, "name": "ma-entrypoint", "code": 2, "kind": "launcher_misuse",
      "log": "/l/h1", "line": "ma-entrypoint: error: host 1 (127.0.0.2) cannot resume from checkpoint "
      "/c/step-00000003 (step 3), the newest the job's hosts completed together: restore that folder"},
     "host 1 (127.0.0.2) cannot resume from checkpoint /c/step-00000003 (step 3), the newest the job's hosts "
     "completed together: restore that folder (ma-entrypoint on host 1 (127.0.0.2) exited with 2); class "
     "launcher_misuse; log /l/h1"),  # the shim's own refusal: its line (on the old code: 'ma-entrypoint on host 1 ...')
])  # fmt: skip
def test_each_cause_has_one_line_naming_its_facts(cause: Dict[str, Any], line: str) -> None:
    assert describe_cause(cause) == line


@pytest.mark.parametrize("cause", [{}, {"host": None, "rank": None, "code": None, "kind": None, "log": None},
                                   {"host": True, "addr": 5, "rank": "x", "line": 3}])  # fmt: skip
def test_missing_or_wrong_facts_are_left_out_never_shown_as_none(cause: Dict[str, Any]) -> None:
    said = describe_cause(cause)
    assert said and "None" not in said and "log ;" not in said and not said.endswith(("log", "; "))


def test_a_lost_hosts_line_never_shows_the_survivors_code() -> None:
    assert "75" not in describe_cause(LOST)


def test_shim_line_drops_the_prefix_only() -> None:
    assert shim_line("ma-entrypoint: host 1 lost") == "host 1 lost"
    assert shim_line("host 1 lost") == "host 1 lost" and shim_line(None) == ""


def test_a_report_whose_root_cause_is_a_lost_host_names_it_without_a_code_of_its_own() -> None:
    from malaunch.entrypoint.report.report import Failure, RunResult, _failure_json, format_failure

    line = "ma-entrypoint: host 1 (127.0.0.2) lost: no heartbeat for 3 s"
    failure = Failure(name="host 1", rank=None, local_rank=None, host="127.0.0.2", pid=None, exit_code=75,
                      signal=None, log_file="/logs/h1", tail=(line,), source="lost",
                      why="the job's coordinator found host 1 lost")  # fmt: skip
    text = format_failure(RunResult(75, failure, None, 36.8))
    first = "The job failed after 36.8s. Root cause: host 1 (127.0.0.2) lost: no heartbeat for 3 s"
    assert text.splitlines()[0] == first
    assert "exit code :" not in text and "its logs  : /logs/h1" in text
    assert "75" not in _failure_json(failure)["hint"]
