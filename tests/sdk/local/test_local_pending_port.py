"""Local pending reasons: once every host has launched, a job whose master port (torchrun's store, msrun's
scheduler) is not open yet says it waits for that port, and stops saying so once something listens there
(issue 29). The launcher here is a stand-in ``torch.distributed.run`` (found first on PYTHONPATH) that opens the
port only when the test says so, so both sides are seen for certain."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from malaunch.sdk import Job
from malaunch.sdk.backends.local.backend import LocalBackend
from malaunch.sdk.backends.local.pending import _ranks_spoke
from sdkutil import wait_for, write_job

pytestmark = pytest.mark.process

LAUNCHER = """\
import os, socket, time
print("launcher started", flush=True)
while not os.path.exists(os.environ["OPEN_PORT_FLAG"]):
    time.sleep(0.05)
server = socket.socket()
server.bind((os.environ["MA_CURRENT_HOST_IP"], int(os.environ["MA_TORCHRUN_MASTER_PORT"])))
server.listen()
print("port open", flush=True)
while not os.path.exists(os.environ["OPEN_PORT_FLAG"] + ".done"):
    time.sleep(0.05)
with open(os.path.join(os.environ["MALAUNCH_LOG_DIR"], "rank-0.log"), "a") as log:
    log.write("the ranks ran\\n")  # as the shim's copy of a worker's output would hold
server.close()  # as torchrun ends its store once its workers are done, before it exits
print("port closed", flush=True)
time.sleep(600)
"""


def test_a_master_port_not_open_yet_is_a_pending_reason(tmp_path: Path, home: Path, cleanup_jobs: None) -> None:
    fake = tmp_path / "launcher" / "torch" / "distributed"
    fake.mkdir(parents=True)
    for init in (fake.parent / "__init__.py", fake / "__init__.py"):
        init.write_text("")
    (fake / "run.py").write_text(LAUNCHER)
    flag = tmp_path / "open-now"
    job = write_job(tmp_path / "job", "print('never started')\n", name="port", run_method="torchrun",
                    resources={"hosts": 2, "devices_per_host": 1},
                    env={"PYTHONPATH": str(tmp_path / "launcher"), "OPEN_PORT_FLAG": str(flag)})  # fmt: skip
    backend = LocalBackend(home=str(home))
    handle = Job.from_yaml(str(job)).submit(backend)
    consoles = [home / "jobs" / handle.id / "hosts" / str(i) / "console.log" for i in (0, 1)]
    try:
        wait_for(lambda: all(c.is_file() and "launcher started" in c.read_text() for c in consoles), 120, "launchers")
        reason = handle.status().pending_reason
        assert re.fullmatch(
            r"waiting for a port: torchrun's store on host 0 \(\S+\) port \d+ is not open yet", reason
        ), reason
        flag.write_text("")
        wait_for(lambda: "port open" in consoles[0].read_text(), 60, "the port to open")
        assert handle.status().pending_reason == ""
        Path(str(flag) + ".done").write_text("")
        wait_for(lambda: "port closed" in consoles[0].read_text(), 60, "the port to close")
        assert handle.status().pending_reason == ""  # closed again after the ranks ran: nothing waits
    finally:
        backend.stop(handle.id)


def test_msruns_worker_logs_count_as_ranks_that_spoke(tmp_path: Path) -> None:
    """The msrun template said 'waiting for a port: msrun's scheduler ... is not open yet' after 'AllReduce OK':
    msrun's scheduler closes its port when the workers are done, and its workers' logs are msrun/worker_N.log
    (msrun writes them itself), not the shim's rank-N.log, so the ranks were not seen to have run."""
    logs = tmp_path / "logs"
    (logs / "msrun").mkdir(parents=True)
    (logs / "msrun" / "worker_0.log").write_text("")
    assert not _ranks_spoke(str(logs))  # launched, nothing said yet: the port may still be waited for
    (logs / "msrun" / "worker_0.log").write_text("AllReduce OK\n")
    assert _ranks_spoke(str(logs))
    (logs / "msrun" / "worker_0.log").write_text("")
    (logs / "rank-1.log").write_text("the ranks ran\n")  # the shim's copy, as before
    assert _ranks_spoke(str(logs))
