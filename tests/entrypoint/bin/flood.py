"""A rank that floods its stdout as fast as it can: ``--lines`` numbered 100-byte lines in 1 MiB writes, then
(after ``--pause`` s) its last line, ``rank R flood wrote N lines``."""

from __future__ import annotations

import argparse
import os
import time
from typing import List, Optional

LINE = 100


def line(rank: int, number: int) -> bytes:
    """Line ``number`` of rank ``rank`` (the test checks every one)."""
    head = b"r%d %09d " % (rank, number)
    return head + b"f" * (LINE - len(head) - 1) + b"\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, required=True)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between the flood and the last line")
    parser.add_argument("--interleave", action="store_true", help="one write per line, stdout and stderr in turn")
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    if args.interleave:
        for number in range(args.lines):
            os.write(1, line(rank, number))
            os.write(2, line(rank, number))
        os.write(2, b"rank %d flood wrote %d lines\n" % (rank, args.lines))
        return 0
    per_write = (1 << 20) // LINE
    for first in range(0, args.lines, per_write):
        block = b"".join(line(rank, n) for n in range(first, min(first + per_write, args.lines)))
        view = memoryview(block)
        while view:
            view = view[os.write(1, view) :]
    time.sleep(args.pause)
    os.write(1, b"rank %d flood wrote %d lines\n" % (rank, args.lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
