"""The job's coordinator alone in a process, for the ``coordinator`` case: ``coord_serve.py HOSTS TIMEOUT LIFETIME``.

Serves a real :class:`~malaunch.entrypoint.run.hosts.server.Coordinator` (its own :class:`JobState` of HOSTS
hosts, no restarts) on 127.0.0.1 and a port the kernel picks, with the heartbeat interval the shim derives from
TIMEOUT. The key comes from ``MALAUNCH_JOB_SECRET`` in this process's environment, as in a shim. It prints
``{"port": P}`` once listening, then answers each ``status`` line on stdin with one JSON line (hosts here, hosts
lost, the book's phase and attempt, refused connections). It stops at stdin's end or after LIFETIME seconds,
whichever comes first, so it never outlives the benchmark.
"""

import json
import os
import sys
import threading
import time

from malaunch.entrypoint.run.hosts.jobstate import JobState
from malaunch.entrypoint.run.hosts.server import Coordinator
from malaunch.entrypoint.run.hosts.wire import job_key

hosts, timeout, lifetime = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
interval = max(0.1, min(2.0, timeout / 5.0))  # as HostsConfig.interval
state = JobState(hosts, 0, False, lambda restart: 0.0, 1.0, lifetime, time.monotonic())
server = Coordinator(job_key(os.environ["MALAUNCH_JOB_SECRET"]), state, 0, interval, timeout,
                     lambda line: print(line, file=sys.stderr, flush=True), bind="127.0.0.1").start()  # fmt: skip
print(json.dumps({"port": server.port, "interval": interval}), flush=True)


def _status() -> dict:
    for _ in range(20):  # the coordinator's thread may change the book while it is read
        try:
            return {"here": len(state.hosts.here), "lost": sorted(state.hosts.lost), "phase": state.phase.value,
                    "attempt": state.attempt, "refused": dict(server.refused)}  # fmt: skip
        except RuntimeError:
            time.sleep(0.001)
    return {"error": "the book kept changing"}


def _commands() -> None:
    for line in sys.stdin:
        if line.strip() == "status":
            print(json.dumps(_status()), flush=True)
    done.set()


done = threading.Event()
threading.Thread(target=_commands, daemon=True).start()
done.wait(lifetime)
server.close(linger=0.2)
