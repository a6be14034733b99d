"""A host's link (run/hosts/link.py) over a real coordinator's sockets: what reaches the running attempt."""

from __future__ import annotations

import queue
import time

from malaunch.entrypoint.run.events import Event, HostsEnd
from malaunch.entrypoint.run.hosts.jobstate import JobState, Phase
from malaunch.entrypoint.run.hosts.link import HostLink, Start
from malaunch.entrypoint.run.hosts.messages import Resume
from malaunch.entrypoint.run.hosts.server import Coordinator
from malaunch.entrypoint.run.hosts.wire import job_key


def test_an_end_that_comes_before_its_attempt_is_attached_ends_it_once_attached() -> None:
    """Another host fails the moment attempt 0 starts (a host that cannot resume from the job's checkpoint starts
    no rank): the coordinator's ``end`` may reach this host before its attempt runs; it must end that attempt once
    it runs, not be lost (the attempt would wait for ranks that never come)."""
    key, said = job_key("a-secret"), []
    state = JobState(2, 1, True, lambda n: 0.1, host_wait=5.0, join_wait=10.0, now=time.monotonic())
    server = Coordinator(key, state, 0, 0.2, 5.0, said.append, bind="127.0.0.1").start()
    links = [HostLink(key, host, f"127.0.0.{host + 1}", "127.0.0.1", server.port, 0.2, 5.0, 10.0, 5.0,
                      said.append).start() for host in (0, 1)]  # fmt: skip
    box: queue.SimpleQueue[Event] = queue.SimpleQueue()
    try:
        for link in links:
            command = link.next_command(lambda seconds: False)
            assert isinstance(command, Start) and command.attempt == 0
        links[1].last_attempt = 0
        links[1].failing(0)  # at once: host 0 has not started its attempt yet
        deadline = time.monotonic() + 10.0
        # wait until the end reached host 0's link, before its attempt runs (the old link kept none: it fails here)
        while getattr(getattr(links[0], "_ends", None), "early", None) is None:
            assert time.monotonic() < deadline, f"host 0's link kept no early end; {state.phase}, {said}"
            assert state.phase in (Phase.RUNNING, Phase.ENDING), said
            time.sleep(0.01)
        links[0].last_attempt = 0
        links[0].attach(box.put)
        end = box.get(timeout=10.0)
        assert isinstance(end, HostsEnd) and "host 1 (127.0.0.2) failed" in end.line, said
        links[0].attach(None)
        links[0].last_attempt = 1
        links[0].attach(box.put)  # an early end of an attempt before is never posted to a later one
        assert box.empty()
    finally:
        for link in links:
            link.close()
        server.close(linger=0.5)


def test_a_new_coordinator_names_the_newest_checkpoint_the_hosts_heard_of_in_its_first_start() -> None:
    """The master host was replaced: its coordinator is new and saw no save, its own shim heard of none; host 1's
    shim heard ``saved`` for step 9 from the coordinator before. Host 1's hello says so, and the first ``start`` of
    the new coordinator names step 9 to both hosts (on the old code it named none: each host resumed from the
    newest checkpoint of its own folder)."""
    key, said = job_key("a-secret"), []
    state = JobState(2, 9, True, lambda n: 0.1, host_wait=5.0, join_wait=10.0, now=time.monotonic())
    server = Coordinator(key, state, 0, 0.2, 5.0, said.append, bind="127.0.0.1").start()
    links = [HostLink(key, host, f"127.0.0.{host + 1}", "127.0.0.1", server.port, 0.2, 5.0, 10.0, 5.0, said.append)
             for host in (0, 1)]  # fmt: skip
    links[1].last_attempt = links[0].last_attempt = 3
    links[1].heard = lambda: Resume("step-00000009", 9)
    try:
        for link in links:
            link.start()
        for link in links:
            command = link.next_command(lambda seconds: False)
            assert isinstance(command, Start) and (command.attempt, command.resume) == (4, Resume("step-00000009", 9))
    finally:
        for link in links:
            link.close()
        server.close(linger=0.5)
