"""Log-throughput worker: writes TOTAL bytes of text lines to stdout, or with ``--file PATH`` to that file.

``log_worker.py TOTAL [--line-bytes B] [--file PATH]``. The bytes are the same either way: 1 MiB blocks of
B-byte lines (default 100, newline included) that look like training log lines, each written with one
``os.write`` (looping on partial writes), so the only difference between the two runs is where fd 1 goes.
"""

from __future__ import annotations

import argparse
import os

BLOCK = 1 << 20


def block_of_lines(line_bytes: int) -> bytes:
    """About 1 MiB of whole lines, each exactly ``line_bytes`` long including its newline."""
    lines = []
    for i in range(max(BLOCK // line_bytes, 1)):
        head = f"step {i:7d} | loss {1.0 / (i + 1):.6f} | lr 3.0e-04 | tokens/s 123456 |"
        body = (head + " x" * line_bytes)[: line_bytes - 1]
        lines.append(body + "\n")
    return "".join(lines).encode()


def write_all(fd: int, data: memoryview) -> None:
    while data:
        done = os.write(fd, data)
        data = data[done:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("total", type=int, help="bytes to write (rounded down to whole lines)")
    parser.add_argument("--line-bytes", type=int, default=100)
    parser.add_argument("--file", help="write here instead of stdout")
    args = parser.parse_args()
    block = block_of_lines(args.line_bytes)
    fd = os.open(args.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if args.file else 1
    left = args.total
    view = memoryview(block)
    while left >= len(block):
        write_all(fd, view)
        left -= len(block)
    if left >= args.line_bytes:
        write_all(fd, view[: left - left % args.line_bytes])
    if args.file:
        os.close(fd)


if __name__ == "__main__":
    main()
