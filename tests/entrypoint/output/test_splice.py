"""The pipe log path: splice into the log file, the console copy read back from it, and the fallbacks.

Real pipes and real files throughout; the process tests run real ranks through run_plan.
"""

from __future__ import annotations

import io
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Set, Tuple

import pytest
from malaunch.entrypoint.launchers.running import run_plan
from malaunch.entrypoint.run.output import Output
from malaunch.entrypoint.run.output import spans as _spans
from malaunch.entrypoint.run.output.console import Console
from malaunch.entrypoint.run.output.pump import LineStream
from malaunch.entrypoint.run.output.splice import SpliceSink, splice_pump
from procutil import assert_nothing_left, make_plan, new_mark, run, unprefix, worker_spec

MAX_SPANS = 4096  # the bound the far-behind test sets (the real one takes minutes to reach here)


class _Harness:
    """A SpliceSink fed by two real pipes (0 = stdout, 1 = stderr), with its pumps and console reader."""

    def __init__(self, path: Path, start_reader: bool = True) -> None:
        self.warnings: List[str] = []
        self.sink = SpliceSink(str(path), self.warnings.append)
        self.out_buf, self.err_buf = io.BytesIO(), io.BytesIO()
        self.out, self.err = Console(self.out_buf, "stdout"), Console(self.err_buf, "stderr")
        self.streams = [
            LineStream(self.out, b"[p] ", None, gap_note=lambda count, why: f"gap {count}: {why}"),
            LineStream(self.err, b"[p] ", None, gap_note=lambda count, why: f"gap {count}: {why}"),
        ]
        self.pipes: List[Tuple[int, int]] = [os.pipe(), os.pipe()]
        self.stop = threading.Event()
        self.ended: Set[int] = set()
        self.threads = [
            threading.Thread(target=splice_pump, args=([read_end for read_end, _ in self.pipes], self.sink, self.stop))
        ]
        self.reader = threading.Thread(target=self.sink.forward, args=(self.streams, (self.out, self.err), print))
        for thread in self.threads:
            thread.start()
        if start_reader:
            self.reader.start()
        self.path = path

    def write(self, stream: int, data: bytes) -> None:
        """Write to a pipe and wait until the pump has put it in the file (so the spans' order is known)."""
        before = self.path.stat().st_size
        os.write(self.pipes[stream][1], data)
        deadline = time.monotonic() + 10
        while self.path.stat().st_size < before + len(data):
            assert time.monotonic() < deadline, "the pump never moved the bytes"
            time.sleep(0.0005)

    def end(self, stream: int) -> None:
        """The writer closes one pipe (its other pipe stays open)."""
        os.close(self.pipes[stream][1])
        self.ended.add(stream)

    def finish(self) -> Tuple[bytes, bytes]:
        for stream, (_, write_end) in enumerate(self.pipes):
            if stream not in self.ended:
                os.close(write_end)
        for thread in self.threads:
            thread.join(10)
        if not self.reader.is_alive() and self.reader.ident is None:
            self.reader.start()
        self.reader.join(10)
        assert not self.reader.is_alive()
        self.sink.close()
        self.out.close(1.0)
        self.err.close(1.0)
        for read_end, _ in self.pipes:
            os.close(read_end)
        return self.out_buf.getvalue(), self.err_buf.getvalue()


def test_spans_of_stdout_and_stderr_reach_their_own_console_in_file_order(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    harness = _Harness(log)
    steps = [
        (0, b"out one\n"),
        (1, b"err one\n"),
        (0, b"out two is part"),  # a partial line on stdout ...
        (1, b"err two\nerr thr"),  # ... stderr in between, with a partial line of its own
        (0, b"ial\nout three\n"),  # ... and the rest of stdout's line
        (1, b"ee \xff\n"),
        (0, b"no newline at the end"),
    ]
    for stream, data in steps:
        harness.write(stream, data)
    out, err = harness.finish()
    assert log.read_bytes() == b"".join(data for _, data in steps)  # every byte, in the order it came
    assert out == b"[p] out one\n[p] out two is partial\n[p] out three\n[p] no newline at the end"
    assert err == b"[p] err one\n[p] err two\n[p] err three \xff\n"
    assert harness.sink.tail() == (
        "out one",
        "err one",
        "out two is parterr two",
        "err thrial",
        "out three",
        "ee \ufffd",
        "no newline at the end",
    )
    assert harness.warnings == []
    assert harness.out.dropped == harness.err.dropped == 0


def test_one_pipe_ended_the_other_keeps_flowing_through_the_same_pump(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    harness = _Harness(log)
    harness.write(0, b"out before\n")
    harness.end(0)  # stdout closed (a rank may close it and go on writing to stderr)
    harness.write(1, b"err after stdout ended\n")
    harness.write(1, b"and more\n")
    out, err = harness.finish()
    assert log.read_bytes() == b"out before\nerr after stdout ended\nand more\n"
    assert out == b"[p] out before\n"
    assert err == b"[p] err after stdout ended\n[p] and more\n"
    assert harness.warnings == []


@pytest.mark.process
def test_each_process_has_one_pump_thread_for_both_pipes(tmp_path: Path) -> None:
    specs = [worker_spec(rank, tmp_path, mark=new_mark()) for rank in (0, 1)]
    output = Output(make_plan(tmp_path, specs), io.BytesIO(), io.BytesIO())
    output.open()
    script = "import sys; print('out', flush=True); print('err', file=sys.stderr, flush=True); sys.stdin.read()"
    pipe = subprocess.PIPE
    procs = [subprocess.Popen([sys.executable, "-c", script], stdin=pipe, stdout=pipe, stderr=pipe) for _ in specs]
    try:
        output.attach(procs, lambda: None)
        pumps = [thread for thread in threading.enumerate() if thread.name == "splice"]
        assert len(pumps) == len(procs)  # one for stdout and stderr alike, not one per pipe
    finally:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(10)
        output.drain(procs)
        output.close()
    for spec in specs:
        assert sorted(Path(spec.log_file).read_bytes().splitlines()) == [b"err", b"out"]


def test_a_reader_far_behind_drops_the_oldest_spans_and_resumes_at_a_whole_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_spans, "MAX_SPANS", MAX_SPANS)  # a small bound, so that the test stays short
    log = tmp_path / "rank-0.log"
    harness = _Harness(log, start_reader=False)  # the console copy is stuck until every span is in
    count = MAX_SPANS  # alternating streams: 2 x MAX_SPANS spans, none can merge
    expected = bytearray()
    for n in range(count):
        for stream in (0, 1):
            data = b"%s line %d\n" % (b"out" if stream == 0 else b"err", n)
            harness.write(stream, data)
            expected += data
    out, err = harness.finish()
    assert log.read_bytes() == bytes(expected)
    for console, name in ((out, b"out"), (err, b"err")):
        lines = console.split(b"\n")
        assert lines.pop() == b""
        note = lines.pop(0).decode()  # one line says how much was skipped, before the lines that follow it
        why = f"the console copy fell too far behind: more than {MAX_SPANS} pieces or 16 MiB waited"
        assert note.startswith("gap ") and note.endswith(why), note
        numbers = [int(line.split(b" ")[-1]) for line in lines]
        skipped = sum(len(b"%s line %d\n" % (name, n)) for n in range(numbers[0]))
        assert note == f"gap {skipped}: {why}"
        assert all(line == b"[p] %s line %d" % (name, n) for line, n in zip(lines, numbers))
        assert numbers == list(range(numbers[0], count))  # the newest lines, whole and in order
        assert count - MAX_SPANS // 2 - 1 <= numbers[0] < count


@pytest.mark.process
@pytest.mark.timeout(120)
def test_a_log_file_that_fills_up_mid_run_falls_back_and_the_console_keeps_every_line(tmp_path: Path) -> None:
    mark = new_mark()
    logs = tmp_path / "logs"
    lines = 20000  # 20000 x 80 bytes: the log file stops at 256 KiB, the rest is read from the pipe
    spec = worker_spec(0, logs, "--lines", str(lines), "--say-err", "the end", mark=mark)
    limit = 256 << 10
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))  # a write past it fails with EFBIG
    try:
        result, out, err = run(make_plan(logs, [spec]))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert result.exit_code == 0
    numbered = unprefix(out, b"[rank 0] ").split(b"\n")
    assert numbered.pop() == b""
    assert numbered == [b"0 " + b"x" * 77] * lines  # every line, whole, spliced part and read part alike
    assert err.count(b"cannot write log file") == 1 and b"File too large" in err
    assert b"[rank 0] the end\n" in err
    assert (logs / "rank-0.log").stat().st_size == limit
    assert_nothing_left(mark)


@pytest.mark.process
@pytest.mark.timeout(120)
def test_a_stuck_console_while_splicing_costs_console_lines_only(tmp_path: Path) -> None:
    mark = new_mark()
    logs = tmp_path / "logs"
    lines = 400_000  # 32 MB: far more than the pipe to the console and the console backlog hold
    spec = worker_spec(0, logs, "--lines", str(lines), "--say-err", "done", mark=mark)
    read_end, write_end = os.pipe()
    started = time.monotonic()
    try:
        with os.fdopen(write_end, "wb", closefd=False) as console, io.BytesIO() as err_buf:
            result = run_plan(make_plan(logs, [spec]), dict(os.environ), console_out=console, console_err=err_buf)
            err = err_buf.getvalue()
        took = time.monotonic() - started
        os.set_blocking(read_end, False)
        shown = b""
        while True:
            try:
                piece = os.read(read_end, 1 << 20)
            except BlockingIOError:
                break
            if not piece:
                break
            shown += piece
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result.exit_code == 0
    assert took < 60, f"the run took {took:.1f}s"
    # every byte of both pipes: stdout's lines in order, stderr's line once. The pumps splice whole chunks, so
    # when both pipes hold bytes at once stderr's chunk may land between two of stdout's, within a line (seen
    # under load: the stderr pump ran after stdout's first chunk); the console copy keeps them apart
    log = (logs / "rank-0.log").read_bytes()
    assert log.count(b"done\n") == 1
    assert log.replace(b"done\n", b"", 1) == (b"0 " + b"x" * 77 + b"\n") * lines
    assert b"[rank 0] done\n" in err  # stderr's console was read: it got its line, and the note on stdout
    assert b"the console (stdout) did not keep up: it accepted nothing for 1 s at the end" in err
    assert 0 < len(shown) < 16 << 20
    for line in shown.split(b"\n")[:-1]:  # what reached the console are whole, prefixed lines
        assert line == b"[rank 0] 0 " + b"x" * 77, line[:100]
    assert_nothing_left(mark)


@pytest.mark.process
@pytest.mark.timeout(120)
def test_a_log_file_that_is_not_a_regular_file_is_written_without_splice(tmp_path: Path) -> None:
    mark = new_mark()
    spec = worker_spec(0, tmp_path, "--say", "to the void", "--big-line", str(1 << 20), mark=mark)
    spec = spec._replace(log_file=os.devnull)  # /dev/null cannot be read back: no splice
    result, out, err = run(make_plan(tmp_path, [spec]))
    assert result.exit_code == 0
    assert unprefix(out, b"[rank 0] ") == b"to the void\n" + b"B" * (1 << 20) + b"\n"
    assert err == b""
    assert_nothing_left(mark)


def test_a_partial_line_reaches_the_console_while_the_stream_is_quiet(tmp_path: Path) -> None:
    harness = _Harness(tmp_path / "rank-0.log")
    harness.write(0, b"epoch 1 done\nprogress 10%")
    deadline = time.monotonic() + 20  # held for HOLD_SECONDS of quiet, then shown without waiting for its end
    while harness.out_buf.getvalue() != b"[p] epoch 1 done\n[p] progress 10%":
        assert time.monotonic() < deadline, harness.out_buf.getvalue()
        time.sleep(0.01)
    harness.write(0, b" 20%\n")
    harness.write(1, b"warning\n")
    out, err = harness.finish()
    assert out == b"[p] epoch 1 done\n[p] progress 10% 20%\n"
    assert err == b"[p] warning\n"
