"""An interrupted test run leaves nothing behind: pytest SIGKILLed in the middle of a test that holds a shim
stopped (SIGSTOP) beside two helper processes of its own. The helpers and the shim die with the test process
(``PR_SET_PDEATHSIG``, see ``shimutil.die_with_the_test``), and the shim's watchdog then ends its job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from shimutil import assert_nothing_left, marked_pids

pytestmark = pytest.mark.process

OUTER = "MALAUNCH_TEST_OUTER_MARK"  # every process the inner run starts inherits it (marked_env copies the env)

INNER = """
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from shimutil import SCRIPTS, die_with_the_test, marked_env, start_shim, write_v10_table


def test_held_shim_beside_helpers(tmp_path):
    write_v10_table(tmp_path / "table.json", servers=1, devices=2)
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_GRACE_PERIOD": "1"})
    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    for _ in range(2):
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_the_test())
    proc = start_shim([str(SCRIPTS / "rank_job.py"), "--lines", "1", "--sleep", "600"], env, tmp_path)
    while "line 0" not in proc.stdout.readline():
        assert proc.poll() is None
    os.kill(proc.pid, signal.SIGSTOP)
    Path(os.environ["MALAUNCH_TEST_READY"]).write_text("held")
    time.sleep(600)
"""


def test_a_test_run_killed_mid_test_leaves_no_process(tmp_path: Path) -> None:
    (tmp_path / "test_held.py").write_text(INNER)
    ready = tmp_path / "ready"
    mark = uuid.uuid4().hex
    here = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, **{OUTER: mark, "MALAUNCH_TEST_READY": str(ready), "PYTHONPATH": here})
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
            "--rootdir", str(tmp_path), str(tmp_path / "test_held.py")]  # fmt: skip
    run = subprocess.Popen(argv, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not ready.exists():
            assert run.poll() is None, run.communicate()[0][-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.1)
        held = marked_pids(mark, OUTER)
        assert len(held) >= 6, held  # pytest, 2 helpers, the stopped shim, its 2 ranks, its watchdog
    finally:
        run.send_signal(signal.SIGKILL)  # pytest dies mid-test: no finalizer, no fixture teardown runs
        run.communicate()
    assert_nothing_left(mark, within=30, variable=OUTER)
