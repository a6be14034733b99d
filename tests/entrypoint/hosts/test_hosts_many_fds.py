"""A host's link to the coordinator works whatever its socket's file descriptor (run/hosts/link.py): with 1,024
descriptors already open (a shim that holds many, or a bench process holding a thousand links), the link's socket
gets a descriptor of 1,024 or more, which ``select.select`` refuses (issue 43: the 1,024-host bench failed)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

_SCRIPT = r"""
import json, os, resource, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4096)), hard))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1030)]  # every descriptor below 1,024 is taken
from malaunch.entrypoint.run.hosts.jobstate import JobState
from malaunch.entrypoint.run.hosts.link import Finish, HostLink, Start
from malaunch.entrypoint.run.hosts.server import Coordinator
from malaunch.entrypoint.run.hosts.wire import job_key

key, said = job_key("many-fds"), []
state = JobState(1, 0, True, lambda n: 0.1, host_wait=5.0, join_wait=30.0, now=time.monotonic())
server = Coordinator(key, state, 0, 0.1, 10.0, said.append, bind="127.0.0.1").start()
link = HostLink(key, 0, "127.0.0.1", "127.0.0.1", server.port, 0.1, 10.0, 30.0, 5.0, said.append).start()
first = link.next_command(lambda seconds: False)
fd = link._sock.fileno() if link._sock is not None else -1
link.last_attempt = 0
link.over(0, None)
last = link.next_command(lambda seconds: False)
link.close()
server.close(linger=0.5)
print(json.dumps({"fd": fd, "first": type(first).__name__, "last": type(last).__name__,
                  "code": getattr(last, "code", None), "said": said}))
"""


def test_a_link_whose_socket_descriptor_is_over_1023_joins_beats_and_finishes() -> None:
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 1100:
        pytest.skip("this machine's hard limit of open files is under 1,100: no descriptor reaches 1,024")
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["fd"] >= 1024, seen
    assert (seen["first"], seen["last"], seen["code"]) == ("Start", "Finish", 0), seen
    assert not [line for line in seen["said"] if "lost the job's coordinator" in line], seen
