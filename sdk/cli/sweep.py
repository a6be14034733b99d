"""``ma-submit sweep``: run a job file as a sweep of trials, then ``sweep status|wait|stop|logs|list SWEEP_ID``.

``ma-submit sweep JOB.yaml [--param NAME=V1,V2,...]... [--max-parallel N] [--metric NAME --metric-regex REGEX
--goal minimize|maximize] [--random N --seed S] [--stop-on-failure] [--detach] [--dry-run] [--output json]``:
the flags mirror the file's ``sweep:`` section and override it. Without ``--detach`` the sweep is followed
(trials starting and ending) and ends with the results table, best first; the exit code is that of ``sweep
wait``: 0 when every trial succeeded, else the first failed trial's exit code. Ctrl-C while following leaves
the trials (and the driver that starts the rest) running and says how to stop them. Only parsing and printing
live here; the work is :class:`malaunch.sdk.sweep.Sweep`'s.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

import click

from ..errors import MalaunchError, SpecError
from ..profiles.apply import blame_profile, fill_job_data, render_origins
from ..spec.loader import read_job_data
from ..status import JobState
from ..sweep.api import Sweep, attach_sweep, list_sweeps
from ..sweep.results import TrialResult
from ..sweep.run import is_done
from ..sweep.spec import format_value, parse_param_options
from ..sweep.state import TRIAL_WAITING
from .echo import echo
from .jobs import EXIT_INTERRUPTED, OUTPUT, echo_json, format_age, note
from .profile_option import chosen_profile, profile_option
from .profile_use import open_with, selected_profile

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..sweep.api import SweepHandle

__all__ = ["SweepGroup", "render_results", "sweep_group"]

_SUBCOMMANDS = ("run", "status", "wait", "stop", "logs", "list")


def sweep_for(job_file: str, overrides: Mapping[str, Any]) -> Tuple[Sweep, Optional[str]]:
    """As :func:`.submit.job_for`, for a sweep's job file (its ``sweep:`` section is the sweep's own, never filled)."""
    profile = selected_profile(chosen_profile())
    raw, base_dir = read_job_data(job_file) if profile is not None else (None, "")
    if profile is None or not isinstance(raw, dict):
        return Sweep.from_yaml(job_file, **overrides), None
    data, rows = fill_job_data(raw, profile, None, os.environ)
    try:
        return Sweep.from_data(data, base_dir, **overrides), render_origins(profile, rows)
    except SpecError as error:
        raise (blame_profile(error, profile, rows) or error.with_source(job_file)) from None


class SweepGroup(click.Group):
    """``ma-submit sweep JOB.yaml`` is ``ma-submit sweep run JOB.yaml``."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group("sweep", cls=SweepGroup, no_args_is_help=True)
def sweep_group() -> None:
    """Run JOB.yaml as many trials with different parameters, and compare them.

    \b
    ma-submit sweep JOB.yaml [--param lr=1e-3,3e-4]... [--max-parallel N] [--detach] [--dry-run]
    ma-submit sweep status|wait|stop|logs SWEEP_ID    (a unique prefix is enough)
    ma-submit sweep list
    """


def _trials_text(indexes: Sequence[int]) -> str:
    return ("trial " if len(indexes) == 1 else "trials ") + ", ".join(str(i) for i in indexes)


def _keeps_running(did: str, handle: SweepHandle) -> str:
    """After a Ctrl-C of following or waiting: which trials keep running, which wait and who starts them (the
    driver, else the next wait: :mod:`malaunch.sdk.sweep.run`), and how to stop them; as last recorded."""
    stop = f"'ma-submit sweep stop {handle.id}' ends them"
    try:
        rows = handle.trials
    except MalaunchError:  # the record is unreadable now: the line without the trials
        return f"{did}; sweep {handle.id} keeps running: {stop}"
    running = [r.index for r in rows if r.state in (JobState.PENDING.value, JobState.RUNNING.value)]
    waiting = [r.index for r in rows if r.state == TRIAL_WAITING]
    parts = [f"{_trials_text(running)} {'runs' if len(running) == 1 else 'run'}"] if running else []
    if waiting:
        it = "it" if len(waiting) == 1 else "them"
        parts.append(f"{_trials_text(waiting)} {'waits' if len(waiting) == 1 else 'wait'} for a free slot (the "
                     f"sweep's driver starts {it}, or the next 'ma-submit sweep wait {handle.id}')")  # fmt: skip
    return f"{did}; sweep {handle.id} keeps running: {', '.join(parts) or 'its trials'}; {stop}"


def _seconds(value: Optional[float]) -> str:
    if value is None or value < 0:
        return "-"
    return f"{value:.1f}s" if value < 60 else format_age(value)


def _cell(row: TrialResult, now: float) -> Tuple[str, str, str, str]:
    code = "-" if row.exit_code is None else str(row.exit_code)
    took = _seconds(None if row.started_at is None else (row.ended_at or now) - row.started_at)
    metric = "-" if row.metric is None else f"{row.metric:g}"
    why = row.failure_class or ("" if row.state in ("SUCCEEDED", TRIAL_WAITING, "PENDING", "RUNNING") else row.message)
    return code, took, metric, why


def render_results(record: Dict[str, Any], rows: Sequence[TrialResult], now: float) -> str:
    """The results table of ``sweep status``: one row per trial, best first, parameters as columns."""
    metric = record.get("metric")
    names = list(rows[0].params) if rows else []
    head = [
        "TRIAL",
        *[n.upper() for n in names],
        "STATE",
        "EXIT",
        "DURATION",
        (str(metric["name"]).upper() if isinstance(metric, dict) else "METRIC"),
        "JOB ID",
        "FAILURE",
    ]
    table = [head]
    for row in rows:
        code, took, value, why = _cell(row, now)
        values = [format_value(row.params.get(n, "-")) for n in names]
        table.append([str(row.index), *values, row.state, code, took, value, row.job_id or "-", why])
    widths = [max(len(line[i]) for line in table) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in table)


def _summary(record: Dict[str, Any]) -> str:
    counts: Dict[str, int] = {}
    for trial in record["trials"]:
        counts[trial["state"]] = counts.get(trial["state"], 0) + 1
    states = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    stopped = f"; stopped: {record['stopped']}" if record.get("stopped") else ""
    return (
        f"sweep {record['id']} ({record['backend']}, {len(record['trials'])} trial(s), at most "
        f"{record['max_parallel']} at once): {states}{stopped}"
    )


def _show(handle: SweepHandle, output: str) -> None:
    rows = handle.results()
    record = handle.record()
    if output == "json":
        echo_json(
            {
                "id": handle.id,
                "backend": record["backend"],
                "stopped": record.get("stopped"),
                "metric": record.get("metric"),
                "trials": [r.to_json() for r in rows],
            }
        )
        return
    echo(_summary(record))
    echo(render_results(record, rows, time.time()))


def _follow(handle: SweepHandle, output: str, poll: float = 0.5) -> int:
    seen: Dict[int, str] = {}
    try:
        while True:
            record = handle.step()
            for trial in record["trials"]:
                state, index = trial["state"], trial["index"]
                if seen.get(index) == state or state == TRIAL_WAITING:
                    continue
                seen[index] = state
                params = TrialResult.from_record(trial, record.get("param_names") or ()).params_text()
                if state in ("PENDING", "RUNNING"):
                    note(f"trial {index} ({params}) {state}: job {trial['job_id']}")
                else:
                    code = "" if trial.get("exit_code") is None else f", exit code {trial['exit_code']}"
                    why = f"; {trial['message']}" if trial.get("message") else ""
                    note(f"trial {index} ({params}) {state}{code}{why}")
            if is_done(record):
                break
            time.sleep(poll)
    except KeyboardInterrupt:
        note(_keeps_running("stopped following", handle))
        return EXIT_INTERRUPTED
    _show(handle, output)
    return handle.exit_code()


@sweep_group.command("run")
@click.option("--param", "params", multiple=True, metavar="NAME=V1,V2,...", help="A parameter's values (repeatable).")
@click.option("--max-parallel", type=click.IntRange(min=1), help="Trials running at once.")
@click.option("--random", "random_count", type=click.IntRange(min=1), metavar="N", help="N random trials, not a grid.")
@click.option("--seed", type=click.IntRange(min=0), help="Seed of --random.")
@click.option("--metric", "metric_name", metavar="NAME", help="The objective's name (with --metric-regex).")
@click.option("--metric-regex", metavar="REGEX", help="Its value in a trial's output (group 1); last match wins.")
@click.option("--goal", type=click.Choice(["minimize", "maximize"]), help="Best is smallest or largest.")
@click.option("--stop-on-failure", is_flag=True, default=None, help="Stop the sweep when a trial fails.")
@click.option("--detach", is_flag=True, help="Print the sweep id and return; the trials go on.")
@click.option("--dry-run", is_flag=True, help="Print every trial's plan; start nothing.")
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
@profile_option
@click.argument("job_file", metavar="JOB.yaml")
def run_cmd(
    params: Tuple[str, ...],
    max_parallel: Optional[int],
    random_count: Optional[int],
    seed: Optional[int],
    metric_name: Optional[str],
    metric_regex: Optional[str],
    goal: Optional[str],
    stop_on_failure: Optional[bool],
    detach: bool,
    dry_run: bool,
    output: str,
    job_file: str,
) -> int:
    """Run JOB.yaml as a sweep (its sweep: section, overridden by the flags)."""
    overrides: Dict[str, Any] = {
        "params": parse_param_options(params),
        "max_parallel": max_parallel,
        "random": random_count,
        "seed": seed,
        "stop_on_failure": stop_on_failure,
    }
    base, origins = sweep_for(job_file, overrides)
    if metric_name or metric_regex or goal:
        old = base.sweep.metric
        metric = {
            "name": metric_name or (old.name if old else "metric"),
            "regex": metric_regex or (old.regex if old else ""),
            "goal": goal or (old.goal if old else "minimize"),
        }
        base = Sweep(base.spec, sweep=base.sweep, metric=metric)
    impl = open_with(base.spec.backend, chosen_profile())
    try:
        return _run(base, impl, origins, dry_run=dry_run, detach=detach, output=output)
    except SpecError as error:  # a field found wrong while planning a trial: named with the file, as loading does
        raise error.with_source(job_file) from None


def _run(base: Sweep, impl: Backend, origins: Optional[str], *, dry_run: bool, detach: bool, output: str) -> int:
    if dry_run:
        plan = base.plan(backend=impl, dry=True)
        data = plan.to_json() if output == "json" else None
        if data is not None:
            echo_json(data)
        else:
            echo(plan.render())
        if origins is not None:  # where the values came from, when a profile is in use
            echo(origins, err=True)
        return 0
    handle = base.submit(impl, profile=chosen_profile())
    record = handle.record()
    if detach:
        if output == "json":
            echo_json({"id": handle.id, "trials": [r.to_json() for r in handle.trials]})
        else:
            echo(handle.id)
            note(f"submitted {len(record['trials'])} trial(s); 'ma-submit sweep status {handle.id}' shows them")
        return 0
    note(f"{_summary(record)}; Ctrl-C stops following, not the sweep")
    return _follow(handle, output)


@sweep_group.command("status")
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
@click.argument("sweep_id")
def status_cmd(output: str, sweep_id: str) -> int:
    """The results table of SWEEP_ID: one row per trial, best first."""
    _show(attach_sweep(sweep_id), output)
    return 0


@sweep_group.command("wait")
@click.option("--timeout", type=click.FloatRange(min=0), help="Give up after this many seconds (exit 124).")
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
@click.argument("sweep_id")
def wait_cmd(timeout: Optional[float], output: str, sweep_id: str) -> int:
    """Wait for every trial; exit 0 when all succeeded, else the first failed trial's exit code."""
    handle = attach_sweep(sweep_id)
    try:
        handle.wait(timeout=timeout)
    except KeyboardInterrupt:  # as following a sweep says it
        note(_keeps_running("stopped waiting", handle))
        return EXIT_INTERRUPTED
    _show(handle, output)
    return handle.exit_code()


@sweep_group.command("stop")
@click.argument("sweep_id")
def stop_cmd(sweep_id: str) -> int:
    """Stop every running trial of SWEEP_ID and start no more (stopping a stopped sweep is a no-op)."""
    handle = attach_sweep(sweep_id)
    handle.stop()
    _show(handle, "text")
    return 0


@sweep_group.command("logs")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until every trial has ended.")
@click.option("--trial", type=click.IntRange(min=0), help="Only this trial.")
@click.argument("sweep_id")
def logs_cmd(follow: bool, trial: Optional[int], sweep_id: str) -> int:
    """Every submitted trial's output, each line prefixed with [trial N]."""
    try:
        for line in attach_sweep(sweep_id).logs(trial, follow=follow):
            echo(line)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return 0


@sweep_group.command("list")
@click.option("--output", type=OUTPUT, default="text", show_default=True, help="json: machine-readable.")
def list_cmd(output: str) -> int:
    """The sweeps under $MALAUNCH_HOME, newest first."""
    records = list_sweeps()
    if output == "json":
        echo_json(
            [
                {"id": r["id"], "backend": r.get("backend"), "trials": len(r["trials"]), "error": r.get("error")}
                for r in records
            ]
        )
        return 0
    if not records:
        note("no sweeps")
    for record in records:
        echo(f"error: {record['id']}: {record['error']}" if record.get("error") else _summary(record))
    return 0
