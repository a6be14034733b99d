"""Emulated hosts for the ``coordinator`` case: ``coord_members.py PORT FIRST LAST TIMEOUT LIFETIME``.

Hosts FIRST to LAST - 1 of the job, each a real :class:`~malaunch.entrypoint.run.hosts.link.HostLink` (its own
thread, as in a shim: join, heartbeats both ways, commands in) joining the coordinator on 127.0.0.1:PORT with the
key from ``MALAUNCH_JOB_SECRET``. One driver thread plays each host's attempt loop: on ``start K`` it sets the
link's attempt and attaches a receiver for ``end``, which stamps the time (``time.monotonic()``: one clock for
every process on Linux) and keeps the line. Each ``report`` line on stdin is answered with one JSON line: how many
hosts started (and when the last did), how many were told ``end`` (first and last stamp, the distinct lines), how
many heard ``finish`` or lost the coordinator. It stops at stdin's end or after LIFETIME seconds.
"""

import json
import os
import sys
import threading
import time
from typing import Dict, List

from malaunch.entrypoint.run.events import Event, HostsEnd
from malaunch.entrypoint.run.hosts.link import Finish, Gone, HostLink, Start
from malaunch.entrypoint.run.hosts.wire import job_key

port, first, last = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
timeout, lifetime = float(sys.argv[4]), float(sys.argv[5])
interval = max(0.1, min(2.0, timeout / 5.0))  # as HostsConfig.interval
key = job_key(os.environ["MALAUNCH_JOB_SECRET"])
lock = threading.Lock()
started: Dict[int, float] = {}
told: Dict[int, float] = {}
lines: List[str] = []
ended: Dict[int, str] = {}  # host -> "finish" / "gone"


def _quiet(line: str) -> None:
    del line  # a link's own progress lines (lost the coordinator, joining again): not measured


def _receiver(host: int):  # type: ignore[no-untyped-def]
    def post(event: Event) -> None:
        now = time.monotonic()
        if isinstance(event, HostsEnd):
            with lock:
                told.setdefault(host, now)
                if event.line not in lines and len(lines) < 3:
                    lines.append(event.line)

    return post


links = {
    host: HostLink(key, host, "127.0.0.1", "127.0.0.1", port, interval, timeout, lifetime, 0.5, _quiet)
    for host in range(first, last)
}
for link in links.values():
    link.start()


def _drive() -> None:
    while True:
        for host, link in links.items():
            while not link.commands.empty():
                command = link.commands.get_nowait()
                if isinstance(command, Start):
                    link.last_attempt = command.attempt
                    link.attach(_receiver(host))
                    with lock:
                        started.setdefault(host, time.monotonic())
                elif isinstance(command, (Finish, Gone)):
                    with lock:
                        ended.setdefault(host, type(command).__name__.lower())
        time.sleep(0.01 if len(started) < len(links) else 0.2)


def _report() -> Dict[str, object]:
    with lock:
        return {
            "links": len(links), "started": len(started), "start_last": max(started.values(), default=None),
            "told": len(told), "told_first": min(told.values(), default=None),
            "told_last": max(told.values(), default=None), "lines": list(lines),
            "finish": sum(v == "finish" for v in ended.values()), "gone": sum(v == "gone" for v in ended.values()),
            "threads": threading.active_count(),
        }  # fmt: skip


def _commands() -> None:
    for line in sys.stdin:
        if line.strip() == "report":
            print(json.dumps(_report()), flush=True)
    done.set()


done = threading.Event()
threading.Thread(target=_drive, daemon=True).start()
threading.Thread(target=_commands, daemon=True).start()
done.wait(lifetime)
os._exit(0)  # the links' threads are daemons; the kernel closes their sockets
