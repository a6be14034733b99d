"""Console: lag, not loss, under torchrun and msrun. The workers write their own files (torchrun
``--redirects=3``, msrun ``worker_N.log``); the shim copies torchrun's into ``rank-N.log`` at full speed and
makes the console copy by reading back the rank's log at the console's pace. Real launchers, real floods, a
real pipe as the console, read slowly (or not at all)."""

from __future__ import annotations

import io
import os
import re
import resource
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, List, Mapping, Tuple

import pytest
from malaunch.entrypoint.run.output.console import Console
from malaunch.entrypoint.run.output.pump import FileFollower, LineStream
from malaunch.entrypoint.run.output.readback import CopyFeed, MirrorFeed, end_copies
from malaunch.entrypoint.run.output.splice import SpliceSink
from shimutil import MARK, assert_nothing_left, free_port, marked_env
from test_console_lag import SlowReader, flood_line, split_console

FLOOD = str(Path(__file__).resolve().parents[1] / "bin" / "flood.py")
LINES = 300_000  # 100-byte lines: 30 MB per rank, far more than the console's 16 MiB backlog


def _env(method: str, extra: Mapping[str, str]) -> Dict[str, str]:
    if method == "torchrun":
        return marked_env({"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2", **extra})
    return marked_env({"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2", "MA_MSRUN_MASTER_PORT": str(free_port()),
                       "MSRUN_CLUSTER_TIME_OUT": "60", **extra})  # fmt: skip


def _log(tmp_path: Path, method: str, rank: int) -> Path:
    node = tmp_path / "malaunch-logs" / "node-0"
    return node / f"rank-{rank}.log" if method == "torchrun" else node / "msrun" / f"worker_{rank}.log"


def run_shim(tmp_path: Path, method: str, reader: SlowReader, *args: str, extra: Mapping[str, str] = {}
             ) -> Tuple[int, bytes, bytes]:  # fmt: skip
    """The real shim, its stdout the reader's pipe; returns its exit code, the console and its stderr."""
    env = _env(method, extra)
    with open(tmp_path / "shim.err", "wb") as err:
        proc = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", FLOOD, *args], env=env, cwd=tmp_path,
                              stdin=subprocess.DEVNULL, stdout=reader.write_end, stderr=err, timeout=500)  # fmt: skip
    out = reader.close()
    assert_nothing_left(env[MARK])
    return proc.returncode, out, (tmp_path / "shim.err").read_bytes()


def _check_logs(tmp_path: Path, method: str, lines: int) -> None:
    """The log files never wait for the console: complete, whatever the console did."""
    for rank in (0, 1):
        log = _log(tmp_path, method, rank).read_bytes()
        want = b"".join(flood_line(rank, n) + b"\n" for n in range(lines)) + b"rank %d flood wrote %d lines\n" % (
            rank,
            lines,
        )
        assert log.endswith(want) and len(log) - len(want) < 4096, (rank, len(log), len(want))


def _method(name: str) -> object:
    return pytest.param(name, marks=pytest.mark.torch if name == "torchrun" else pytest.mark.mindspore)


@pytest.mark.process
@pytest.mark.timeout(600)
@pytest.mark.parametrize("method", [_method("torchrun"), _method("msrun")])
def test_two_flooding_ranks_lose_no_console_line_to_a_slow_reader(tmp_path: Path, method: str) -> None:
    reader = SlowReader(tmp_path / "console.out", piece=64 << 10, nap=0.004)  # ~16 MB/s, slower than the ranks
    code, out, err = run_shim(tmp_path, method, reader, "--lines", str(LINES))
    assert code == 0, err[-3000:]
    _check_logs(tmp_path, method, LINES)
    per_rank, _own = split_console(out)
    for rank in (0, 1):
        shown = [line for line in per_rank[rank] if line.startswith(b"r%d " % rank) or b"flood wrote" in line]
        assert shown[-1] == b"rank %d flood wrote %d lines" % (rank, LINES)  # each rank's last line arrived
        shown.pop()
        assert len(shown) == LINES, f"rank {rank}: {len(shown)} of {LINES} lines reached the console"
        assert shown == [flood_line(rank, n) for n in range(LINES)]  # every line, whole and in order
    assert b"did not keep up" not in err and b"not shown" not in err and b"not shown" not in out


@pytest.mark.process
@pytest.mark.timeout(600)
@pytest.mark.parametrize("method", [_method("torchrun"), _method("msrun")])
def test_a_stuck_console_costs_console_lines_only_and_says_what_and_where(tmp_path: Path, method: str) -> None:
    """Nobody reads the console until the shim has ended: the job still ends (the drain gives up on a console
    that takes nothing for 1 s), every log file is complete, and the console is told what it missed."""
    reader = SlowReader(tmp_path / "console.out", pause=None)
    code, out, err = run_shim(tmp_path, method, reader, "--lines", str(LINES))
    assert code == 0, err[-3000:]
    _check_logs(tmp_path, method, LINES)
    said = re.search(rb"the console \(stdout\) did not keep up: (.*)$", err, re.M)
    assert said is not None and b"it accepted nothing for 1 s at the end" in said.group(1), err[-2000:]
    assert b"writes to it were dropped" not in said.group(1)  # no rank line is dropped: they are read back
    per_rank, _own = split_console(out[: out.rfind(b"\n") + 1])
    for rank, lines in per_rank.items():  # what the pipe took before it filled: whole lines, in order
        numbers = [int(line.split(b" ")[1]) for line in lines if re.match(rb"^r\d \d{9} f+$", line)]
        assert all(line == flood_line(rank, n) for line, n in zip(lines, numbers) if line.startswith(b"r"))
        assert numbers == sorted(numbers) and len(numbers) < LINES


def _gaps(out: bytes) -> List[Tuple[int, int, bytes, bytes]]:
    gap = re.compile(rb"^\[ma-entrypoint\] warning: (\d+) bytes of rank (\d+)'s stdout were not shown here "
                     rb"\((.+)\); the full log is (.+)$", re.M)  # fmt: skip
    return [(int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)) for m in gap.finditer(out)]


@pytest.mark.process
@pytest.mark.timeout(600)
@pytest.mark.parametrize("method", [_method("torchrun"), _method("msrun")])
def test_a_console_stuck_for_a_while_is_skipped_then_gets_the_rest(tmp_path: Path, method: str) -> None:
    """The console takes nothing for 12 s once the ranks' flood fills its pipe (stuck after 5 s), then reads
    everything: each rank's copy skipped a span said in one line naming the rank's log, then resumed at a whole
    line, its last line included. (The 12 s counted from before the shim's start let a launcher that took that
    long under load find the console reading again: no gap.)"""
    reader = SlowReader(tmp_path / "console.out", nap=0.0, pause=12.0, pause_from=32 << 10)  # from the flood on
    code, out, err = run_shim(tmp_path, method, reader, "--lines", str(LINES), "--pause", "16")
    assert code == 0, err[-3000:]
    _check_logs(tmp_path, method, LINES)
    gaps = _gaps(out)
    per_rank, _own = split_console(out)
    for rank in (0, 1):
        mine = [gap for gap in gaps if gap[1] == rank]
        shown = per_rank[rank]
        assert shown.pop() == b"rank %d flood wrote %d lines" % (rank, LINES)
        numbers = [int(line.split(b" ")[1]) for line in shown if line.startswith(b"r%d " % rank)]
        assert all(line == flood_line(rank, int(line.split(b" ")[1])) for line in shown if line.startswith(b"r"))
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
        if len(numbers) < LINES:  # this rank's copy was skipped while stuck: one line says so, exactly
            assert len(mine) == 1, mine
            assert mine[0][2] == b"the console was stuck: it accepted nothing for 5 s"
            assert mine[0][3] == str(_log(tmp_path, method, rank)).encode()
            assert mine[0][0] == (LINES - len(numbers)) * 100
    assert gaps, "the console was stuck for 12 s: some copy was skipped"


def test_a_rank_log_that_fills_up_mid_copy_warns_once_and_the_console_keeps_every_line(tmp_path: Path) -> None:
    """torchrun's copy into rank-N.log fails part-way through a chunk (a file size limit): what the file took
    is read back from it, the rest travels in memory; every line of both streams reaches its console."""
    warnings: List[str] = []
    sink = SpliceSink(str(tmp_path / "rank-0.log"), warnings.append)
    buffers = io.BytesIO(), io.BytesIO()
    consoles = Console(buffers[0], "stdout"), Console(buffers[1], "stderr")
    streams = [LineStream(c, b"[rank 0] ", None, gap_note=lambda n, why: f"gap {n}: {why}") for c in consoles]
    reader = threading.Thread(target=sink.forward, args=(streams, consoles, warnings.append))
    reader.start()
    feeds = CopyFeed(sink, 0), CopyFeed(sink, 1)
    limit = 64 << 10
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))  # a write past it fails with EFBIG
    try:
        for block in range(40):  # 40 x 2 x 3 KB, each chunk in a bytearray the follower reuses
            for stream, feed in enumerate(feeds):
                chunk = bytearray(b"".join(b"%d %05d %s\n" % (stream, block * 100 + n, b"x" * 20) for n in range(100)))
                feed.feed(chunk, len(chunk))
                chunk[:] = b"#" * len(chunk)  # the follower's buffer is overwritten right after
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    end_copies(sink)
    reader.join(30)
    assert not reader.is_alive()
    sink.close()
    for console in consoles:
        console.close(1.0)
    for stream, buffer in enumerate(buffers):
        want = b"".join(b"[rank 0] %d %05d %s\n" % (stream, n, b"x" * 20) for n in range(4000))
        assert buffer.getvalue() == want, (stream, len(buffer.getvalue()), len(want))
    assert len(warnings) == 1 and "cannot write log file" in warnings[0] and "File too large" in warnings[0]
    assert (tmp_path / "rank-0.log").stat().st_size == limit


def test_msrun_worker_log_replaced_mid_run_still_reaches_the_console_whole(tmp_path: Path) -> None:
    """A worker_N.log read back from the file itself; when msrun puts a new file in its place, the new file's
    lines still reach the console (from memory), after every line of the old one."""
    path = tmp_path / "worker_0.log"
    sink = SpliceSink(str(path), print, write_file=False)
    buffer = io.BytesIO()
    console = Console(buffer, "stdout")
    stream = LineStream(console, b"[rank 0] ", None, gap_note=lambda n, why: f"gap {n}: {why}")
    reader = threading.Thread(target=sink.forward, args=([stream, stream], (console, console), print))
    reader.start()
    follower = FileFollower({0: str(path)}, {0: MirrorFeed(sink)})
    first = b"".join(b"old %05d\n" % n for n in range(5000))
    second = b"".join(b"new %05d\n" % n for n in range(5000))
    path.write_bytes(first[:20000])
    follower.poll()
    with open(path, "ab") as handle:
        handle.write(first[20000:])
    follower.poll()
    (tmp_path / "next.log").write_bytes(second)
    os.replace(tmp_path / "next.log", path)
    follower.finish()
    reader.join(30)
    assert not reader.is_alive()
    sink.close()
    console.close(1.0)
    assert buffer.getvalue() == (first + second).replace(b"old ", b"[rank 0] old ").replace(b"new ", b"[rank 0] new ")
    assert "new 04999" in sink.text()  # the failure report's tail follows the new file
