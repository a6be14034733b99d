"""The hosts' coordinator at scale: N emulated hosts against the real coordinator, N = 2, 64, 1,024 side by side.

Three processes a session, all on 127.0.0.1, all marked (:func:`~mabench.procs.kill_marked` ends what is left):

- the coordinator alone (``workers/coord_serve.py``: :class:`~malaunch.entrypoint.run.hosts.server.Coordinator`
  and its :class:`JobState`), so that its CPU time (``/proc/PID/stat``) and memory (``VmRSS``) are its own;
- hosts 0 to N - 2 (``workers/coord_members.py``): one real ``HostLink`` thread each, as a shim runs it (not a
  lighter stand-in: 1,023 of them cost their process about a tenth of a core at the default interval and a
  quarter at the short one on a loaded 2-core machine, which leaves the coordinator its share; the case notes
  say what they used in each run);
- the victim, host N - 1, the same script alone in its process, so it can die as a shim dies.

A session waits until every host started attempt 0 (``join``: members launched -> the last ``start`` received),
lets the heartbeats settle for a second, then reads the coordinator's CPU seconds over a steady window of
heartbeats (its ``CPU share``: CPU seconds / wall seconds, 100 % = one core) and its resident memory, checks that
no host was lost meanwhile, and then kills the victim:

- at the documented default timeout (20 s: heartbeats every 2 s both ways) it is SIGKILLed, so the kernel
  closes its socket (``closed``);
- at a short timeout (:data:`SHORT_TIMEOUT`: heartbeats every 0.4 s) it is SIGSTOPped: its socket stays open and
  says nothing (``silent``), as a frozen or partitioned host; the figure includes the timeout itself.

The time measured is from the signal to the last of the N - 1 others told (``end`` received by its link); the
line they were told must name the victim. Nothing here is asserted on time: figures, ratios to N = 2, and the
issue's bounds as pass/short.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .procs import PYTHON, WORKERS, BenchError, bench_env, kill_marked, new_mark, scratch_dir, tail
from .results import CaseResult, Series, Target, fmt_value, say

__all__ = ["DEFAULT_TIMEOUT", "SHORT_TIMEOUT", "SIZES", "run_coordinator"]

SIZES = (2, 64, 1024)
DEFAULT_TIMEOUT = 20.0  # MALAUNCH_HEARTBEAT_TIMEOUT's documented default (heartbeats every 2 s)
SHORT_TIMEOUT = 2.0  # heartbeats every 0.4 s
_CPU_BUDGET = 5.0  # % of one core: what "costs it little" is taken to mean for 1,024 hosts at the default interval
_CLOSED_BOUND = 5.0  # the issue: a host SIGKILLed -> the others end their attempt within 5 s
_SILENT_EXTRA = 5.0  # the issue: a host frozen -> noticed within the heartbeat timeout + 5 s
_TICK = os.sysconf("SC_CLK_TCK")


class _Child:
    """A worker with a line protocol: commands on stdin, one JSON line back on stdout."""

    def __init__(self, label: str, argv: Sequence[str], env: Dict[str, str], scratch: Path) -> None:
        self.label, self.log = label, scratch / f"{label}.stderr"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(list(argv), env=env, cwd=str(scratch), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, start_new_session=True)  # fmt: skip
        self._buffer = b""

    def line(self, within: float) -> Dict[str, Any]:
        """The next JSON line this worker prints (BenchError after ``within`` seconds or at its exit)."""
        assert self.proc.stdout is not None
        fd, deadline = self.proc.stdout.fileno(), time.monotonic() + within
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise BenchError(f"{self.label}: no answer within {within:g} s; its stderr ends with:\n"
                                 + tail(self.log))  # fmt: skip
            chunk = os.read(fd, 65536)
            if not chunk:
                raise BenchError(f"{self.label} exited ({self.proc.poll()}); its stderr ends with:\n{tail(self.log)}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        data: Dict[str, Any] = json.loads(line)
        return data

    def ask(self, command: str, within: float = 30.0) -> Dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()
        return self.line(within)

    def cpu_seconds(self) -> float:
        """CPU seconds of the process so far, every thread's (their ``schedstat``: nanoseconds, where ``stat``
        counts clock ticks of 10 ms, too coarse for a share under 1 % over a few seconds)."""
        total = 0
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended meanwhile
        if total:
            return total / 1e9
        text = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / _TICK

    def rss_mb(self) -> float:
        """Resident memory now (VmRSS), in MB."""
        for row in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) / 1024.0
        raise BenchError(f"{self.label}: no VmRSS in /proc/{self.proc.pid}/status")

    def stop(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):  # it may have exited already
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _session(hosts: int, timeout: float, fault: str, window: float) -> Dict[str, Any]:
    """One job of ``hosts`` hosts: join, a steady window, the victim's fault; the figures of it."""
    mark, scratch = new_mark(), scratch_dir(f"coord{hosts}")
    env = bench_env(mark, {"MALAUNCH_JOB_SECRET": secrets.token_hex(16)})
    lifetime = str(120.0 + window + timeout)
    children: List[_Child] = []
    try:
        server = _Child("coordinator", [PYTHON, str(WORKERS / "coord_serve.py"), str(hosts), str(timeout), lifetime],
                        env, scratch)  # fmt: skip
        children.append(server)
        port = str(server.line(60.0)["port"])
        began = time.monotonic()
        members = _Child("members", [PYTHON, str(WORKERS / "coord_members.py"), port, "0", str(hosts - 1),
                                     str(timeout), lifetime], env, scratch)  # fmt: skip
        victim = _Child("victim", [PYTHON, str(WORKERS / "coord_members.py"), port, str(hosts - 1), str(hosts),
                                   str(timeout), lifetime], env, scratch)  # fmt: skip
        children += [members, victim]
        ours, _ = _until(members, lambda r: r["started"] == hosts - 1, 60.0 + hosts * 0.1, "every host started")
        alone, _ = _until(victim, lambda r: r["started"] == 1, 30.0, "the victim started")
        joined = max(ours["start_last"], alone["start_last"]) - began
        time.sleep(1.0)  # the first heartbeats both ways
        cpu0, members0, wall0 = server.cpu_seconds(), members.cpu_seconds(), time.monotonic()
        time.sleep(window)
        cpu1, members1, wall1 = server.cpu_seconds(), members.cpu_seconds(), time.monotonic()
        rss = server.rss_mb()
        book = server.ask("status")
        if book.get("lost") or book.get("here") != hosts or book.get("phase") != "running":
            raise BenchError(f"N={hosts}: the coordinator's book after the steady window is {book} (a host was lost "
                             "while it beat: the machine is too loaded for this timeout)")  # fmt: skip
        killed = time.monotonic()
        os.kill(victim.proc.pid, signal.SIGKILL if fault == "closed" else signal.SIGSTOP)
        told, _ = _until(members, lambda r: r["told"] == hosts - 1, timeout + 60.0, "every other host told")
        named = [line for line in told["lines"] if f"host {hosts - 1} " in line]
        if not named:
            raise BenchError(f"N={hosts}: the others were told {told['lines']}, not of host {hosts - 1}")
        return {"join": joined, "cpu": 100.0 * (cpu1 - cpu0) / (wall1 - wall0), "rss": rss,
                "members_cpu": 100.0 * (members1 - members0) / (wall1 - wall0),
                "told": told["told_last"] - killed, "first": told["told_first"] - killed, "line": named[0]}  # fmt: skip
    finally:
        for child in children:
            if child.label == "victim" and child.proc.poll() is None:
                os.kill(child.proc.pid, signal.SIGKILL)
            child.stop()
        kill_marked(mark)
        shutil.rmtree(scratch, ignore_errors=True)


def _until(child: _Child, done: Any, within: float, what: str) -> Tuple[Dict[str, Any], float]:
    """Ask ``child`` for its report every 0.2 s until ``done(report)``; (the report, seconds waited)."""
    began = time.monotonic()
    while True:
        report = child.ask("report")
        if done(report):
            return report, time.monotonic() - began
        if time.monotonic() - began > within:
            raise BenchError(f"{child.label}: not yet {what} after {within:g} s: {report}")
        time.sleep(0.2)


def _series(hosts: int) -> Dict[str, Series]:
    size = f"N={hosts}"
    interval = DEFAULT_TIMEOUT / 10.0
    share = "coordinator CPU share, heartbeats every {:g} s (timeout {:g} s)"
    made = {
        "join": ("every host joined and started attempt 0", "s"),
        "cpu-default": (share.format(interval, DEFAULT_TIMEOUT), "%"),
        "cpu-short": (share.format(SHORT_TIMEOUT / 5, SHORT_TIMEOUT), "%"),
        "rss": ("coordinator resident memory (VmRSS)", "MB"),
        "closed": ("a host SIGKILLed (socket closed) -> every other host told", "s"),
        "silent": (f"a host SIGSTOPped (silent) -> every other host told (timeout {SHORT_TIMEOUT:g} s)", "s"),
    }
    return {name: Series(f"coord/{hosts}/{name}", "coordinator", subject, size, unit)
            for name, (subject, unit) in made.items()}  # fmt: skip


def run_coordinator(sizes: Sequence[int] = SIZES, reps: int = 1, window: float = 10.0) -> CaseResult:
    """The case (see the module's docstring)."""
    everything: Dict[int, Dict[str, Series]] = {}
    notes_members: List[str] = []
    for hosts in sizes:
        load: Dict[float, List[float]] = {DEFAULT_TIMEOUT: [], SHORT_TIMEOUT: []}
        series = everything[hosts] = _series(hosts)
        firsts: Dict[str, List[float]] = {"closed": [], "silent": []}
        for rep in range(reps):
            for timeout, fault in ((DEFAULT_TIMEOUT, "closed"), (SHORT_TIMEOUT, "silent")):
                try:
                    got = _session(hosts, timeout, fault, window)
                except BenchError as error:
                    series[fault].error = str(error).splitlines()[0][:200]
                    say(f"coordinator N={hosts} timeout {timeout:g} s: FAILED: {error}")
                    continue
                which = "cpu-default" if fault == "closed" else "cpu-short"
                series[which].samples.append(round(got["cpu"], 3))
                series[fault].samples.append(got["told"])
                firsts[fault].append(got["first"])
                series["join"].samples.append(got["join"])
                if fault == "closed":
                    series["rss"].samples.append(round(got["rss"], 1))
                load[timeout].append(got["members_cpu"])
                say(f"coordinator N={hosts} timeout {timeout:g} s run {rep + 1}/{reps}: joined in "
                    f"{fmt_value(got['join'], 's')}, CPU {got['cpu']:.2f} %, RSS {got['rss']:.1f} MB, {fault} -> "
                    f"first told {fmt_value(got['first'], 's')}, all told {fmt_value(got['told'], 's')}")  # fmt: skip
        shares = [f"{statistics.median(got):.1f} % at timeout {timeout:g} s" for timeout, got in load.items() if got]
        if shares:
            threads = f"{hosts - 1} HostLink thread{'s' if hosts > 2 else ''}"
            notes_members.append(f"N={hosts}: the members' process ({threads}) used "
                                 f"{', '.join(shares)} of a core (median)")  # fmt: skip
        for fault, stamps in firsts.items():
            if stamps:
                series[fault].note = f"the first other host told after {fmt_value(statistics.median(stamps), 's')}"
                notes_members.append(f"N={hosts}, {fault}: {series[fault].note} (median)")
    return _result(sizes, everything, window, notes_members)


def _result(sizes: Sequence[int], everything: Dict[int, Dict[str, Series]], window: float,
            notes_members: List[str]) -> CaseResult:  # fmt: skip
    series = [item for hosts in sizes for item in everything[hosts].values()]
    targets: List[Target] = []
    big = max(sizes)
    top = everything[big]
    cpu, closed, silent = top["cpu-default"].median, top["closed"].median, top["silent"].median
    targets.append(Target(f"coordinator: {big} hosts' heartbeats every 2 s cost <= {_CPU_BUDGET:g} % of one core",
                          "-" if cpu is None else f"{cpu:.2f} %", None if cpu is None else cpu <= _CPU_BUDGET))
    targets.append(Target(f"coordinator: a host SIGKILLed -> all {big - 1} others told within {_CLOSED_BOUND:g} s",
                          fmt_value(closed, "s"), None if closed is None else closed <= _CLOSED_BOUND))
    bound = SHORT_TIMEOUT + _SILENT_EXTRA
    targets.append(Target(f"coordinator: a host frozen -> all {big - 1} others told within the timeout + "
                          f"{_SILENT_EXTRA:g} s ({bound:g} s)", fmt_value(silent, "s"),
                          None if silent is None else silent <= bound))  # fmt: skip
    small = min(sizes)
    low, high = everything[small]["rss"].median, top["rss"].median
    notes = [
        f"coordinator: one process serving a real Coordinator on 127.0.0.1; hosts 0 to N - 2 as HostLink threads "
        f"in one process, the victim (host N - 1) alone in another; CPU share over a {window:g} s window of steady "
        "heartbeats after every host started attempt 0 (100 % = one core); all-told = signal to the last other "
        "host's link receiving end.",
    ]
    if low is not None and high is not None and big > small:
        per_host = (high - low) * 1024.0 / (big - small)
        notes.append(f"coordinator memory: {low:.1f} MB at N={small}, {high:.1f} MB at N={big}: "
                     f"{per_host:.1f} KB a host")  # fmt: skip
    notes += _per_unit(everything, small, big)
    notes += notes_members
    return CaseResult("coordinator", series, targets, notes)


def _per_unit(everything: Dict[int, Dict[str, Series]], small: int, big: int) -> List[str]:
    """What one more heartbeat line and one more host cost, from the smallest job to the largest."""
    if big <= small:
        return []
    out = []
    for name, timeout in (("cpu-default", DEFAULT_TIMEOUT), ("cpu-short", SHORT_TIMEOUT)):
        low, high = everything[small][name].median, everything[big][name].median
        if low is not None and high is not None:
            lines = 2 * (big - small) / (timeout / 5.0)  # one line in and one out per host per interval
            out.append(f"coordinator CPU per heartbeat line (in or out) at timeout {timeout:g} s, N={small} -> "
                       f"N={big}: {(high - low) / 100.0 / lines * 1e6:.1f} us")  # fmt: skip
    low, high = everything[small]["closed"].median, everything[big]["closed"].median
    if low is not None and high is not None:
        out.append(f"telling one more host of a death, N={small} -> N={big}: {(high - low) / (big - small) * 1e6:.0f} "
                   "us (the coordinator's sealed line and that host's link waking to read it)")  # fmt: skip
    return out


def window_seconds(quick: bool) -> float:
    """The steady window: 10 s (five heartbeats at the default interval), 6 s with ``--quick``."""
    return 6.0 if quick else 10.0


def parse_sizes(text: Optional[str]) -> Tuple[int, ...]:
    """``--hosts 2,64,1024`` -> (2, 64, 1024); None -> :data:`SIZES`. Raises ValueError with what to do."""
    if text is None:
        return SIZES
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"--hosts {text!r} is not a list of numbers; give e.g. 2,64,1024") from None
    if not sizes or any(n < 2 or n > 4096 for n in sizes):
        raise ValueError(f"--hosts {text!r}: every size must be 2 to 4096 hosts; give e.g. 2,64,1024")
    return tuple(sorted(set(sizes)))
