"""Hang detection over the coordinator's real wire (run/hosts/server.py, link.py): each host's ``silent`` travels
proved with the job's secret; once every host said its ranks are silent, each gets an ``end`` marked hung."""

from __future__ import annotations

import queue
import time
from typing import List

from malaunch.entrypoint.run.events import Event, HostsEnd
from malaunch.entrypoint.run.hosts.jobstate import JobState, Phase
from malaunch.entrypoint.run.hosts.link import HostLink, Start
from malaunch.entrypoint.run.hosts.server import Coordinator
from malaunch.entrypoint.run.hosts.wire import job_key


def _end(box: queue.SimpleQueue[Event], within: float) -> Event:
    """The first event posted to ``box`` (an empty queue after ``within`` seconds fails the test)."""
    return box.get(timeout=within)


def test_every_host_silent_reaches_every_host_as_a_hung_end() -> None:
    key, said = job_key("a-secret"), []
    state = JobState(2, 1, True, lambda n: 0.1, host_wait=5.0, join_wait=10.0, now=time.monotonic())
    server = Coordinator(key, state, 0, 0.2, 5.0, said.append, bind="127.0.0.1").start()
    links = [HostLink(key, host, f"127.0.0.{host + 1}", "127.0.0.1", server.port, 0.2, 5.0, 10.0, 5.0,
                      said.append).start() for host in (0, 1)]  # fmt: skip
    boxes: List[queue.SimpleQueue[Event]] = [queue.SimpleQueue(), queue.SimpleQueue()]
    try:
        for link, box in zip(links, boxes):
            command = link.next_command(lambda seconds: False)
            assert isinstance(command, Start) and command.attempt == 0
            link.last_attempt = 0
            link.attach(box.put)
        links[0].silent(0, True)
        links[1].silent(0, True)
        for box in boxes:
            end = _end(box, 10.0)
            assert isinstance(end, HostsEnd) and end.hung, said
        assert state.phase is Phase.ENDING
    finally:
        for link in links:
            link.close()
        server.close(linger=0.5)
