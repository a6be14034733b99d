"""The verbs that look inside a job: ``ma-submit events``, ``ma-submit top`` and ``ma-submit exec`` (parse, call,
print). The work is done by the backends (``Backend.events``, ``usage``, ``exec``); exit codes are decided in
``malaunch.sdk.cli.exits``, except that ``exec`` exits with the command's own exit code.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from typing import TYPE_CHECKING, List, Optional, Tuple

import click

from ...entrypoint.public import OutputCut
from ..errors import ExecElsewhere, JobNotRunning
from ..units import binary_size_text
from .echo import echo, say_output_lost
from .jobs import EXIT_INTERRUPTED, OUTPUT, backend_option, echo_json, note, resolved

if TYPE_CHECKING:
    from ..backends.inside import HostUsage, UsageReport

__all__ = ["INSIDE_COMMANDS", "render_usage"]


def _size(count: Optional[int]) -> str:
    return "-" if count is None else binary_size_text(count)


def _cpu(row: HostUsage) -> str:
    if row.cpu_cores is not None:
        return f"{row.cpu_cores:.2f} cores"
    return "-" if row.cpu_percent is None else f"{row.cpu_percent:.1f}%"


def _memory(row: HostUsage) -> str:
    if row.memory_bytes is not None:
        return _size(row.memory_bytes)
    return "-" if row.memory_percent is None else f"{row.memory_percent:.1f}%"


def render_usage(report: UsageReport) -> str:
    """The table of ``ma-submit top``: one row per host, then each rank's step (where the backend sees the ranks'
    progress records), then the report's note."""
    rows: List[Tuple[str, ...]] = [("HOST", "NAME", "CPU", "MEMORY", "PROCS", "ACCELERATORS")]
    for row in report.hosts:
        accel = ", ".join(f"{name} {value:g}%" for name, value in sorted(row.accelerators.items())) or "-"
        if row.note:
            accel = f"{accel}  ({row.note})" if accel != "-" else f"({row.note})"
        procs = "-" if row.processes is None else str(row.processes)
        rows.append((str(row.host), row.name, _cpu(row), _memory(row), procs, accel))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5] for r in rows] if report.hosts else []
    if report.ranks:
        from ..progress_text import rank_rows

        steps = rank_rows(report.ranks)
        sizes = [max(len(r[i]) for r in steps) for i in range(len(steps[0]))]
        lines += [""] + ["  ".join(c.ljust(w) for c, w in zip(r, sizes)) for r in steps]
    if report.note:
        lines.append(report.note)
    if report.source and report.hosts:
        lines.append(f"(from {report.source})")
    return "\n".join(line.rstrip() for line in lines)


@click.command("events")
@backend_option
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events until the job ends.")
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: one JSON list (with -f: one "
              "JSON object per line).")  # fmt: skip
@click.argument("job_id")
def events_cmd(backend: Optional[str], follow: bool, output: str, job_id: str) -> int:
    """Print what the platform did to JOB_ID, oldest first (scheduling, starts, exits, restarts, root cause)."""
    impl, ident = resolved(backend, job_id)
    handle = impl.handle(ident)
    if output == "json" and not follow:
        echo_json([event.to_json() for event in handle.events()])
        return 0
    count = 0
    try:
        for event in handle.events(follow=follow):
            count += 1
            echo(json.dumps(event.to_json()) if output == "json" else event.render())
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    if not count and output == "text":
        note(f"job {ident} has no events yet")
    return 0


@click.command("top")
@backend_option
@click.option("--watch", is_flag=True, help="Refresh until the job ends (Ctrl-C stops watching).")
@click.option("--interval", type=click.FloatRange(min=0.5), default=2.0, show_default=True, metavar="SECONDS",
              help="Seconds between refreshes with --watch.")  # fmt: skip
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
@click.argument("job_id")
def top_cmd(backend: Optional[str], watch: bool, interval: float, output: str, job_id: str) -> int:
    """Show what each host of JOB_ID uses: CPU, memory, accelerators where the platform reports them."""
    impl, ident = resolved(backend, job_id)
    shown = 0
    try:
        while True:
            try:
                report = impl.usage(ident)
            except JobNotRunning:
                if not shown:
                    raise
                return 0  # it ended between two refreshes
            shown += 1
            if output == "json":
                echo_json(report.to_json())
            else:
                echo(render_usage(report))
            if not watch:
                return 0
            time.sleep(interval)
            if impl.status(ident).is_terminal:
                return 0
            if output == "text":
                echo("")
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


@click.command("exec", context_settings={"ignore_unknown_options": True})
@backend_option
@click.option("--host", type=click.IntRange(min=0), default=0, show_default=True, help="Which host (task index).")
@click.option("-i", "--stdin", "interactive", is_flag=True, help="Pass this terminal's input to the command.")
@click.option("-t", "--tty", is_flag=True, help="Give the command a terminal (where the backend supports one).")
@click.argument("job_id")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- COMMAND...")
def exec_cmd(backend: Optional[str], host: int, interactive: bool, tty: bool, job_id: str,
             command: Tuple[str, ...]) -> int:  # fmt: skip
    """Run COMMAND inside a running host of JOB_ID and exit with its exit code.

    ma-submit exec JOB_ID --host 1 -- nvidia-smi;  ma-submit exec -it JOB_ID -- bash

    ModelArts has no exec API: for a job with modelarts.ssh.key_pair_names this prints the ssh command for the
    host (with COMMAND appended, if given).
    """
    impl, ident = resolved(backend, job_id)
    words = list(command[1:] if command[:1] == ("--",) else command)
    try:
        result = impl.exec(ident, words, host=host, tty=tty and sys.stdin.isatty(), capture=False,
                           stdin=None if interactive else b"")  # fmt: skip
    except ExecElsewhere as elsewhere:
        note(elsewhere.note)
        echo(shlex.join(elsewhere.command))
        return 0
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except OutputCut as cut:  # stdout stopped midway (were it stderr, the line could not be said anyway)
        say_output_lost(cut, cut.written)
        raise
    return result.exit_code


INSIDE_COMMANDS = (events_cmd, top_cmd, exec_cmd)
