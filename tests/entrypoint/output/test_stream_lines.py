"""A rank's stdout and stderr never share a line of its log: a partial stdout line, then a whole stderr line, then
the stdout line's end. Both pipes are spliced into one log file as their bytes come, so the stderr line landed in
the middle of the stdout line (``partial-out a whole err line`` then ``rest of out``) in the rank's log and in the
report's tail, while the console showed both lines whole. The pump now lets an open line of one stream finish
(for up to ``HOLD_SECONDS``, as the console holds one) before the other stream's bytes follow it into the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from malaunch.entrypoint.run.output.pump import HOLD_SECONDS
from malaunch.entrypoint.run.output.splicepump import LineHold
from shimutil import assert_nothing_left, die_with_the_test, free_port, marked_env, write_v10_table

RANK = """
import os, sys, time
log = os.path.join(os.environ["MALAUNCH_LOG_DIR"], "rank-0.log")
sys.stdout.write("partial-out "); sys.stdout.flush()
deadline = time.monotonic() + 30
while time.monotonic() < deadline:  # the partial line is in the log: the pump has taken it
    with open(log, "rb") as handle:
        if handle.read().startswith(b"partial-out "):
            break
    time.sleep(0.01)
sys.stderr.write("a whole err line\\n"); sys.stderr.flush()
time.sleep(0.1)
sys.stdout.write("rest of out\\n"); sys.stdout.flush()
sys.exit(3)
"""


@pytest.mark.process
def test_a_partial_stdout_line_and_a_stderr_line_stay_two_lines(tmp_path: Path) -> None:
    (tmp_path / "rank.py").write_text(RANK)
    write_v10_table(tmp_path / "table.json", 1, 1)
    logs = tmp_path / "logs"
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_MASTER_PORT": str(free_port()),
                      "MA_CURRENT_HOST_IP": "127.0.0.1", "MALAUNCH_LOG_DIR": str(logs)})  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", "rank.py"], env=env, cwd=tmp_path,
                          capture_output=True, timeout=120, preexec_fn=die_with_the_test())  # fmt: skip
    assert_nothing_left(env["MALAUNCH_TEST_MARK"])
    assert done.returncode == 3, done.stderr.decode()[-3000:]
    lines = {"partial-out rest of out", "a whole err line"}
    assert set((logs / "rank-0.log").read_text().splitlines()) == lines  # two lines, each of one stream
    report = json.loads((logs / "report.json").read_text())
    assert set(report["root_cause"]["tail"]) == lines, report["root_cause"]["tail"]
    assert "[rank 0] partial-out rest of out" in done.stdout.decode().splitlines()
    assert "[rank 0] a whole err line" in done.stderr.decode().splitlines()


def test_an_open_line_holds_the_other_stream_for_hold_seconds_at_most() -> None:
    now = [10.0]
    hold = LineHold(clock=lambda: now[0])
    assert not hold.held(0) and not hold.held(1) and hold.wait_ms(200) == 200
    hold.note(0)  # stdout's line is open at the file's end
    assert hold.held(1) and not hold.held(0) and 0 < hold.wait_ms(10_000) <= HOLD_SECONDS * 1000 + 1
    now[0] += HOLD_SECONDS / 2
    hold.note(0)  # more of the same line: the hold still counts from its first byte
    assert hold.held(1)
    now[0] += HOLD_SECONDS / 2
    assert not hold.held(1) and hold.wait_ms(200) == 200  # waited long enough: stderr goes on
    hold.note(0)
    assert not hold.held(1)  # the same line, still open: no second wait
    hold.note(None)
    hold.note(1)  # now stderr's line is open: stdout waits
    assert hold.held(0) and not hold.held(1)
