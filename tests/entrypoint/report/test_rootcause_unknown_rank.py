"""A worker msrun names by pid whose rank the shim could not read (no birth record: an older plan, a damaged record)
is called what it is: an msrun worker of unknown rank, its pid, its own code, and the folder its rank's log is in;
never "process msrun", never msrun's own log, never msrun's lines as its output.

Real processes: a stand-in msrun started by the real supervisor, whose worker is reaped before the watch can see it
and was started past the birth folder (no record), then msrun's line naming its pid.
"""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path
from typing import Optional

import pytest
from malaunch.entrypoint.plan.launch_plan import ProcessSpec
from malaunch.entrypoint.report.causetext import describe_cause
from malaunch.entrypoint.report.report import format_failure, report_json
from malaunch.entrypoint.report.rootcause import Death, find_root_cause, teardown_signals
from procutil import PY, assert_nothing_left, make_plan, new_mark, run

MSRUN = textwrap.dedent(
    """
    import subprocess, sys
    worker = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(4)"], start_new_session=True)
    worker.wait()
    print("Start worker process with rank id:0, log file:worker_0.log.", flush=True)
    sys.stderr.write(f"[ERROR] ME(1,fake,MainProcess):2026-11-29 [_api.py:365] Worker process {worker.pid} exit "
                     "with exception. Error code: 4.\\n")
    sys.stderr.write("RuntimeError: Distributed job exited with exception.\\n")
    sys.exit(1)
    """
)


@pytest.mark.process
def test_a_worker_of_unknown_rank_is_named_as_one_with_its_pid_code_and_logs_folder(tmp_path: Path) -> None:
    mark = new_mark()
    logs = tmp_path / "logs"
    msrun_logs = logs / "msrun"
    spec = ProcessSpec(name="msrun", argv=(PY, "-c", MSRUN), env={"MALAUNCH_TEST_MARK": mark}, cwd=None,
                       log_file=str(logs / "msrun.log"))  # fmt: skip
    rank_logs = {rank: str(msrun_logs / f"worker_{rank}.log") for rank in range(2)}
    plan = make_plan(logs, [spec], log_source="files", rank_logs=rank_logs, grace=1.0)._replace(watch_workers=True)
    result, _out, _err = run(plan)
    failure = result.root_cause
    assert failure is not None
    text = format_failure(result)
    head = text.splitlines()[0]
    assert head.endswith(f"Root cause: msrun worker of unknown rank on host test-host, pid {failure.pid}"), text
    assert "  exit code : 4 (" in text and "process msrun" not in text and "msrun.log" not in text, text
    assert f"  log file  : its rank's, in {msrun_logs} (it ended before its rank could be read)" in text, text
    assert "Distributed job exited" not in text and "(it wrote no output)" not in text, text
    cause = report_json(result, plan)["root_cause"]
    assert {key: cause[key] for key in ("name", "rank", "exit_code", "log_file", "source", "tail")} == {
        "name": "msrun worker of unknown rank", "rank": None, "exit_code": 4, "log_file": str(msrun_logs),
        "source": "summary", "tail": []}  # fmt: skip
    assert result.exit_code == 4
    wire = {"host": 1, "addr": "127.0.0.2", "rank": None, "name": cause["name"], "code": 4, "kind": "user_error",
            "log": cause["log_file"]}  # fmt: skip
    assert describe_cause(wire) == (f"msrun worker of unknown rank on host 1 (127.0.0.2) exited with 4; "
                                    f"class user_error; log {msrun_logs}")  # fmt: skip
    assert_nothing_left(mark)


def _death(rank: Optional[int], at: float, evidence: Optional[str] = None, code: int = 1, seq: int = 0) -> Death:
    """msrun's line about a pid of unknown rank (``rank`` None), else the watch's death of ``rank``."""
    return Death(source="summary" if rank is None else "watch", index=0, rank=rank, pid=700 if rank is None else 800,
                 code=code, at=at, seq=seq, evidence=evidence)  # fmt: skip


def test_a_death_naming_a_peer_never_outranks_a_worker_of_unknown_rank() -> None:
    """The rank-unknown worker's log cannot be read, so nothing says it failed because of a peer: a death whose log
    does say so, seen in the same look or earlier within the window, does not outrank it."""
    kills = teardown_signals(launcher_kills=True, escalated=False)
    peer = _death(0, 10.0, evidence="connection closed by peer")
    unknown = _death(None, 10.05, seq=1)
    cause = find_root_cause([peer, unknown], kills, launcher_kills=True)
    assert cause is not None and (cause.death.rank, cause.death.pid) == (None, 700)
    assert "failed after a peer" in cause.why
    plain = _death(1, 10.0)  # a rank that failed without naming a peer, first: it stays the root cause
    cause = find_root_cause([plain, _death(None, 10.5, seq=1)], kills, launcher_kills=True)
    assert cause is not None and cause.death.rank == 1


def test_msruns_sigkill_of_the_worker_it_names_is_no_collateral_whatever_its_rank() -> None:
    kills = teardown_signals(launcher_kills=True, escalated=False)
    named = _death(None, 10.0, code=-signal.SIGKILL)
    other = _death(1, 10.2, code=-signal.SIGKILL, seq=1)
    cause = find_root_cause([named, other], kills, launcher_kills=True)
    assert cause is not None and cause.death.pid == 700
