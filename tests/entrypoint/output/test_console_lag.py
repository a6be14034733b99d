"""Console: lag, not loss. Real ranks flood their pipes through run_plan into a real pipe that a reader drains
slowly (or not at all for a while); the log files and the console are checked line by line."""

from __future__ import annotations

import fcntl
import io
import os
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from malaunch.entrypoint.launchers.running import run_plan
from malaunch.entrypoint.run import output as _router
from malaunch.entrypoint.run.output import console as _console
from procutil import MARK_VAR, assert_nothing_left, make_plan, new_mark, worker_spec

FLOOD_LINES = 524_288  # 100-byte lines: 50 MiB per rank, as in the issue
GAP = re.compile(rb"^\[ma-entrypoint\] warning: (\d+) bytes of rank (\d+)'s stdout were not shown here \((.+)\); "
                 rb"the full log is (.+)$")  # fmt: skip


class SlowReader:
    """Reads a pipe into a file, ``piece`` bytes at a time with ``nap`` s between reads, after ``pause`` s."""

    def __init__(self, path: Path, piece: int = 64 << 10, nap: float = 0.002, pause: Optional[float] = 0.0,
                 pause_from: int = 0) -> None:  # fmt: skip
        """``pause=None``: read nothing until :meth:`close` (a stuck console). ``pause_from``: the pause starts once
        the pipe holds that many bytes (the ranks' output, not the shim's first lines), however long the
        launcher takes to start them on a loaded machine."""
        self.go = threading.Event()
        self.read_end, self.write_end = os.pipe()
        self.path = path
        self.piece, self.nap, self.pause, self.pause_from = piece, nap, pause, pause_from
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _held(self) -> int:
        """The bytes the pipe holds now, unread."""
        return struct.unpack("i", fcntl.ioctl(self.read_end, termios.FIONREAD, b"\0\0\0\0"))[0]

    def _run(self) -> None:
        while self.pause_from and self._held() < self.pause_from and not self.go.is_set():
            time.sleep(0.01)  # polls the pipe's fill, the condition the pause waits for
        self.go.wait(self.pause)
        with open(self.path, "wb") as out:
            while True:
                data = os.read(self.read_end, self.piece)
                if not data:
                    return
                out.write(data)
                time.sleep(self.nap)

    def close(self) -> bytes:
        os.close(self.write_end)
        self.go.set()
        self.thread.join(300)
        assert not self.thread.is_alive()
        os.close(self.read_end)
        return self.path.read_bytes()


def flood_line(rank: int, number: int) -> bytes:
    head = b"r%d %09d " % (rank, number)
    return head + b"f" * (100 - len(head) - 1)


def run_flood(tmp_path: Path, ranks: int, lines: int, reader: SlowReader, pause: float = 0.0) -> Tuple[bytes, bytes]:
    mark = new_mark()
    logs = tmp_path / "logs"
    specs = [
        worker_spec(rank, logs, "--lines", str(lines), "--pause", str(pause), mark=mark, script="flood.py")
        for rank in range(ranks)
    ]
    with os.fdopen(reader.write_end, "wb", closefd=False) as console, io.BytesIO() as err_buf:
        result = run_plan(make_plan(logs, specs), dict(os.environ), console_out=console, console_err=err_buf)
        err = err_buf.getvalue()
    out = reader.close()
    assert result.exit_code == 0, err[-2000:]
    for rank in range(ranks):  # the log files never wait for the console: complete, whatever the console did
        log = (logs / f"rank-{rank}.log").read_bytes()
        assert len(log) == lines * 100 + len(b"rank %d flood wrote %d lines\n" % (rank, lines))
        assert log.endswith(b"\n" + flood_line(rank, lines - 1) + b"\nrank %d flood wrote %d lines\n" % (rank, lines))
    assert_nothing_left(mark)
    return out, err


def _first_difference(got: bytes, want: bytes) -> str:
    at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return f"{len(got)} vs {len(want)} bytes; from {at}: {got[at - 100 : at + 200]!r} vs {want[at - 100 : at + 200]!r}"


def split_console(out: bytes) -> Tuple[Dict[int, List[bytes]], List[bytes]]:
    """Each rank's console lines (prefix removed), and the shim's own lines."""
    per_rank: Dict[int, List[bytes]] = {}
    own: List[bytes] = []
    lines = out.split(b"\n")
    assert lines.pop() == b"", out[-200:]
    for line in lines:
        found = re.match(rb"^\[rank (\d+)\] (.*)$", line)
        if found:
            per_rank.setdefault(int(found.group(1)), []).append(found.group(2))
        else:
            own.append(line)
    return per_rank, own


@pytest.mark.process
@pytest.mark.timeout(600)
def test_four_flooding_ranks_lose_no_console_line_to_a_slow_reader(tmp_path: Path) -> None:
    reader = SlowReader(tmp_path / "console.out")
    out, err = run_flood(tmp_path, 4, FLOOD_LINES, reader)
    per_rank, own = split_console(out)
    assert own == [], own[:5]
    assert sorted(per_rank) == [0, 1, 2, 3]
    for rank, lines in per_rank.items():
        assert lines.pop() == b"rank %d flood wrote %d lines" % (rank, FLOOD_LINES)  # the last line arrived
        assert len(lines) == FLOOD_LINES, f"rank {rank}: {len(lines)} of {FLOOD_LINES} lines reached the console"
        assert lines == [flood_line(rank, n) for n in range(FLOOD_LINES)]  # every line, whole and in order
    assert b"did not keep up" not in err and b"not shown" not in err


@pytest.mark.process
@pytest.mark.timeout(600)
def test_four_flooding_ranks_and_a_console_nobody_reads_cost_console_lines_only(tmp_path: Path) -> None:
    reader = SlowReader(tmp_path / "console.out", pause=None)  # stuck from the start to the end of the run
    out, err = run_flood(tmp_path, 4, FLOOD_LINES, reader)  # every log file complete (checked there)
    assert b"the console (stdout) did not keep up: it accepted nothing for 1 s at the end" in err
    per_rank, _ = split_console(out[: out.rfind(b"\n") + 1])
    for rank, lines in per_rank.items():  # what the pipe took before it filled: whole lines, in order
        numbers = [int(line.split(b" ")[1]) for line in lines if line.startswith(b"r")]
        assert all(line == flood_line(rank, n) for line, n in zip(lines, numbers))
        assert numbers == sorted(numbers)


@pytest.mark.process
@pytest.mark.timeout(300)
def test_stdout_and_stderr_in_turn_line_by_line_lose_nothing_to_slow_consoles(tmp_path: Path) -> None:
    """Every line a write of its own, stdout and stderr in turn: many thousand pieces wait for slow consoles."""
    lines = 250_000  # 27 MB per console: more than its backlog holds
    mark = new_mark()
    logs = tmp_path / "logs"
    spec = worker_spec(0, logs, "--lines", str(lines), "--interleave", mark=mark, script="flood.py")
    out_reader = SlowReader(tmp_path / "out.txt", piece=4096, nap=0.002)
    err_reader = SlowReader(tmp_path / "err.txt", piece=4096, nap=0.002)
    with os.fdopen(out_reader.write_end, "wb", closefd=False) as out, os.fdopen(
        err_reader.write_end, "wb", closefd=False
    ) as err:
        result = run_plan(make_plan(logs, [spec]), dict(os.environ), console_out=out, console_err=err)
    shown_out, shown_err = out_reader.close(), err_reader.close()
    assert result.exit_code == 0
    expected = b"".join(b"[rank 0] " + flood_line(0, n) + b"\n" for n in range(lines))
    assert shown_out == expected, _first_difference(shown_out, expected)
    assert shown_err == expected + b"[rank 0] rank 0 flood wrote %d lines\n" % lines, _first_difference(
        shown_err, expected
    )
    assert (logs / "rank-0.log").stat().st_size == 2 * lines * 100 + len(b"rank 0 flood wrote %d lines\n" % lines)
    assert_nothing_left(mark)


@pytest.mark.process
@pytest.mark.timeout(300)
def test_a_console_stuck_for_a_while_is_skipped_with_one_line_saying_what_and_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_console, "CONSOLE_STUCK", 1.0)
    lines = 400_000  # 40 MB: far more than the pipe and the console backlog hold while nobody reads
    reader = SlowReader(tmp_path / "console.out", nap=0.0, pause=4.0)  # stuck 4 s, then reads everything
    out, _err = run_flood(tmp_path, 1, lines, reader, pause=6.0)
    per_rank, own = split_console(out)
    assert len(own) == 1, own[:5]
    gap = GAP.match(own[0])
    assert gap is not None, own[0]
    assert gap.group(2) == b"0" and gap.group(3) == b"the console was stuck: it accepted nothing for 1 s"
    assert gap.group(4) == str(tmp_path / "logs" / "rank-0.log").encode()
    shown = per_rank[0]
    assert shown.pop() == b"rank 0 flood wrote %d lines" % lines  # the console took bytes again: it got the rest
    numbers = [int(line.split(b" ")[1]) for line in shown]
    assert all(line == flood_line(0, n) for line, n in zip(shown, numbers))  # whole lines only
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert 0 < len(numbers) < lines
    assert int(gap.group(1)) == (lines - len(numbers)) * 100  # the note counts exactly what was not shown
    note_at = out.index(own[0])
    assert out[:note_at].endswith(b"\n") and out[note_at:].count(b"[rank 0] ") == 1  # said where the gap is


@pytest.mark.process
@pytest.mark.timeout(300)
def test_the_drain_after_the_end_is_bounded_and_says_when_it_cuts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_router, "CONSOLE_DRAIN", 1.0)
    lines = 200_000  # 20 MB to a reader taking ~1 MB/s: far behind when the rank ends
    reader = SlowReader(tmp_path / "console.out", piece=4096, nap=0.004)
    out, _err = run_flood(tmp_path, 1, lines, reader)
    per_rank, own = split_console(out)
    assert own and re.match(
        rb"^\[ma-entrypoint\] warning: the console \(stdout\) was still \d+ bytes behind 1 s after the end; "
        rb"they were not shown, the log files under .+ have every line$",
        own[-1],
    ), own
    shown: Optional[List[bytes]] = per_rank.get(0)
    assert shown is not None and 0 < len(shown) < lines
    assert all(line == flood_line(0, n) for n, line in enumerate(shown))  # a prefix of the output, whole lines


@pytest.mark.process
@pytest.mark.timeout(120)
def test_a_console_on_a_full_disk_costs_the_console_only_never_the_exit_code(tmp_path: Path) -> None:
    """stdout and stderr on /dev/full (every write fails with ENOSPC): the run's result is the rank's."""
    mark = new_mark()
    script = tmp_path / "job.py"
    script.write_text("print('the last line', flush=True)\n")
    env = {**os.environ, "MALAUNCH_LOG_DIR": str(tmp_path / "logs"), MARK_VAR: mark}
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", str(script)], env=env, cwd=tmp_path,
                              stdout=full, stderr=full, timeout=100)  # fmt: skip
    assert proc.returncode == 0
    logs = list((tmp_path / "logs").rglob("*.log"))
    assert any(b"the last line\n" in log.read_bytes() for log in logs), logs
    assert (tmp_path / "logs" / "report.json").exists()
    assert_nothing_left(mark)
