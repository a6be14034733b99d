"""A tiny rank for supervisor tests: behaves according to flags and its RANK (or RANK_ID / MS_NODE_ID).

Failure flags (--exit-code, --kill-self) apply to every rank, or only to --fail-rank. Every rank that does
not fail sleeps --sleep seconds and exits 0. With --info-dir it writes ``<dir>/<rank>.json`` holding its pid,
the shim token it was given and the pids of the grandchildren it started, before producing any output.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import List, Optional


def _rank() -> int:
    for name in ("RANK", "RANK_ID", "MS_NODE_ID"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def _write_json(path: str, data: object) -> None:
    temp = f"{path}.tmp"
    with open(temp, "w") as handle:
        json.dump(data, handle)
    os.replace(temp, path)


def _out(data: bytes, stream: Optional[object] = None) -> None:
    target = sys.stdout.buffer if stream is None else stream
    target.write(data)  # type: ignore[attr-defined]
    target.flush()  # type: ignore[attr-defined]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-rank", type=int)
    parser.add_argument("--exit-code", type=int)
    parser.add_argument("--kill-self", type=int, metavar="SIG")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before failing")
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds before exiting 0")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--spawn-grandchild", action="store_true")
    parser.add_argument("--grandchild-setsid", action="store_true", help="the grandchild leaves our session")
    parser.add_argument("--grandchild-sleep", type=float, default=120.0)
    parser.add_argument("--info-dir")
    parser.add_argument("--print-env", action="append", default=[], metavar="VAR")
    parser.add_argument("--say", action="append", default=[], help="a stdout line")
    parser.add_argument("--say-err", action="append", default=[], help="a stderr line")
    parser.add_argument("--lines", type=int, default=0)
    parser.add_argument("--line-bytes", type=int, default=80)
    parser.add_argument("--big-line", type=int, default=0, metavar="BYTES")
    parser.add_argument("--bad-utf8", action="store_true", help="a stdout line that is not UTF-8")
    parser.add_argument("--bad-utf8-err", action="store_true", help="a stderr line that is not UTF-8")
    parser.add_argument("--no-newline", metavar="TEXT", help="end stdout with TEXT and no newline")
    parser.add_argument("--no-newline-err", metavar="TEXT", help="end stderr with TEXT and no newline")
    parser.add_argument("--touch", help="create this file at start")
    args = parser.parse_args(argv)
    rank = _rank()

    if args.touch:
        open(args.touch, "w").close()
    if args.ignore_term:

        def ignore(signum: int, frame: object) -> None:
            _out(b"rank %d ignoring SIGTERM\n" % rank)

        signal.signal(signal.SIGTERM, ignore)
    grandchildren = []
    if args.spawn_grandchild:
        child_argv = [sys.executable, os.path.abspath(__file__), "--sleep", str(args.grandchild_sleep)]
        if args.ignore_term:
            child_argv.append("--ignore-term")
        child = subprocess.Popen(child_argv, start_new_session=args.grandchild_setsid)
        grandchildren.append(child.pid)
    if args.info_dir:
        info = {"pid": os.getpid(), "rank": rank, "token": os.environ.get("MALAUNCH_SHIM_TOKEN"),
                "grandchildren": grandchildren, "pgid": os.getpgid(0), "sid": os.getsid(0)}
        _write_json(os.path.join(args.info_dir, f"{rank}.json"), info)

    for name in args.print_env:
        _out(f"{name}={os.environ.get(name, '<unset>')}\n".encode())
    for text in args.say:
        _out(f"{text}\n".encode())
    for text in args.say_err:
        _out(f"{text}\n".encode(), sys.stderr.buffer)
    if args.lines:
        line = (b"%d " % rank + b"x" * args.line_bytes)[: max(args.line_bytes - 1, 0)] + b"\n"
        block = line * max(1, (1 << 20) // len(line))
        per_block = len(block) // len(line)
        left = args.lines
        while left >= per_block:
            sys.stdout.buffer.write(block)
            left -= per_block
        sys.stdout.buffer.write(line * left)
        sys.stdout.buffer.flush()
    if args.big_line:
        _out(b"B" * args.big_line + b"\n")
    if args.bad_utf8:
        _out(b"bad \xff\xfe\xc3( utf8 \xed\xa0\x80\n")
    if args.bad_utf8_err:
        _out(b"err \xff bytes\n", sys.stderr.buffer)
    if args.no_newline_err:
        _out(args.no_newline_err.encode(), sys.stderr.buffer)
    if args.no_newline:
        _out(args.no_newline.encode())

    fails = args.fail_rank is None or args.fail_rank == rank
    if fails and (args.exit_code is not None or args.kill_self is not None):
        time.sleep(args.delay)
        if args.kill_self is not None:
            if args.kill_self not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(args.kill_self, signal.SIG_DFL)
            os.kill(os.getpid(), args.kill_self)
            time.sleep(5)
        return args.exit_code if args.exit_code is not None else 1
    deadline = time.monotonic() + args.sleep
    while time.monotonic() < deadline:  # sleep again after an ignored SIGTERM
        time.sleep(max(0.0, min(1.0, deadline - time.monotonic())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
