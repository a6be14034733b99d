"""``ma-entrypoint BOOT_FILE [ARGS...]``: the container ENTRYPOINT.

``main(argv, environ) -> int`` is the one place that decides the shim's exit code:

- 0 when every process succeeded;
- the root-cause rank's own exit code (128+N for a rank killed by signal N) when a rank failed;
- 128+S when the shim itself received signal S (SIGTERM -> 143, SIGINT -> 130);
- 2 for invalid input (environment variable, argument, rank table), 3 when the launch could not proceed;
- 124 when the job hung (``MALAUNCH_HANG_TIMEOUT``, :mod:`.run.hang`) and no restart was left.

Options given on the command line override the ``MALAUNCH_*`` variables of the same meaning. The environment is
read here once (``os.environ``, or the ``environ`` given) and parsed once by the contract into a
:class:`~.contract.config.ShimConfig`, which the rest receives; the ranks get the mapping itself, without the
job's secret.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, NoReturn, Optional, Sequence, Tuple

from .contract.errors import (
    EXIT_CONFIG,
    EXIT_LAUNCH,
    EXIT_PIPE,
    ConfigError,
    EntrypointError,
    Interrupted,
    exit_code_for,
)

if TYPE_CHECKING:  # imported where used: start-up imports only what runs before the first rank starts
    import argparse
    import signal as _signal

    from .contract.config import ShimConfig
    from .plan.launch_plan import LaunchPlan
    from .report.report import RunResult
    from .run.attempts import RestartOutcome
    from .run.checkpoints import CheckpointKeeper
    from .run.hosts import HostsConfig
    from .run.procs.cgroup import CgroupEntry
else:  # the C module signal.py wraps (and types as): signal.py imports enum, start-up time, to return enums
    import _signal

__all__ = ["build_parser", "console_main", "host_problem", "main", "split_argv"]

PROG = "ma-entrypoint"
USAGE = f"{PROG} [--dry-run] [--log-dir DIR] [--report-file FILE] [--grace-period SECONDS] [--] BOOT_FILE [ARGS...]"
#: The shim's options and whether each takes a value; they come before BOOT_FILE (or before ``--``).
OPTIONS = {"--dry-run": False, "--log-dir": True, "--report-file": True, "--grace-period": True, "-h": False,
           "--help": False}
#: Signals that end a wait before any rank started (the supervisor handles them once ranks run).
_WAIT_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def host_problem(platform: str) -> Optional[str]:
    """Why the shim cannot run on ``platform`` (a ``sys.platform`` value), or None on Linux.

    The shim needs Linux: ``/proc`` to watch ranks, ``PR_SET_CHILD_SUBREAPER`` to adopt orphans, process
    groups and ``fcntl`` pipes. Elsewhere it would start ranks it cannot supervise, so it refuses.
    """
    if platform.startswith("linux"):
        return None
    return (f"{PROG} runs on Linux only (this host is {platform!r}): it watches ranks through /proc and adopts "
            "orphans as a subreaper; run it inside the Linux training container")


def build_parser(given: str = "") -> argparse.ArgumentParser:
    """The parser of the shim's own options (those before BOOT_FILE); ``--help`` prints the whole usage.

    Its errors raise :class:`ConfigError` (one line naming ``given``, the options parsed; exit 2) instead of
    printing the usage and exiting. argparse is imported here, only when the shim is given options.
    """
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise ConfigError("arguments", given, f"{message}; see {PROG} --help")

    parser = _Parser(
        prog=PROG,
        usage=USAGE,
        allow_abbrev=False,
        description=(
            "Start BOOT_FILE the way the platform environment asks (MA_RUN_METHOD: rank-table fan-out, torchrun or "
            "msrun), supervise every process, and exit with the failing rank's own exit code. Options come before "
            "BOOT_FILE; everything after it goes to the script. A BOOT_FILE whose name starts with '-' goes after "
            "'--'. See docs/entrypoint.md for every environment variable."
        ),
        epilog=(
            "exit codes: 0 success; the root-cause rank's code; 128+N after signal N; 2 invalid input; "
            "3 launch error; 75 a host lost (multi-host); 124 the job hung (MALAUNCH_HANG_TIMEOUT)"
        ),
    )
    parser.add_argument(
        "--dry-run", action="store_true",
        help="read the environment and the rank table once, print the launch plan as JSON, start nothing, never wait",
    )
    parser.add_argument("--log-dir", metavar="DIR", help="per-rank logs go here (env MALAUNCH_LOG_DIR)")
    parser.add_argument("--report-file", metavar="FILE",
                        help="write the JSON run report here (env MALAUNCH_REPORT_FILE)")
    parser.add_argument(
        "--grace-period", metavar="SECONDS",
        help="time between SIGTERM and SIGKILL when the group is torn down (env MALAUNCH_GRACE_PERIOD, default 30)",
    )
    return parser


def split_argv(args: Sequence[str]) -> Tuple[List[str], Optional[str], List[str]]:
    """``(shim options, BOOT_FILE, script arguments)``: options end at ``--`` or at the first other token.

    Raises:
        ConfigError: a token starting with ``-`` that is no option of the shim (the message says how to start a
            script whose name starts with ``-``), or an option that lacks its value.
    """
    options: List[str] = []
    index = 0
    while index < len(args):
        token = args[index]
        name = token.split("=", 1)[0]
        if token == "--":
            index += 1
            break
        if name in OPTIONS:
            options.append(token)
            if OPTIONS[name] and "=" not in token:
                if index + 1 >= len(args):
                    raise ConfigError(name, "", f"expected a value after {name}; see {PROG} --help")
                options.append(args[index + 1])
                index += 1
            index += 1
            continue
        if token.startswith("-") and token != "-":
            raise ConfigError("BOOT_FILE", token, f"{PROG} has no such option, and a name starting with '-' is read "
                              f"as one; to start a script of this name put it after '--': {PROG} -- {token}")
        break
    if index >= len(args):
        return options, None, []
    return options, args[index], list(args[index + 1:])


class _interruptible:
    """While waiting, SIGINT/SIGTERM/SIGHUP raise :class:`Interrupted` (exit 128+N, one line, no traceback).

    Outside the main thread no handler can be set (``signal.signal`` refuses with ValueError at the first): the wait
    then goes on without them (this, not a look at :mod:`threading`, which start-up would otherwise import). A
    class, not contextlib: start-up would import contextlib and functools for it."""

    def __init__(self, during: str) -> None:
        self.during = during
        self.previous: Dict[int, Any] = {}

    def _stop(self, signum: int, _frame: object) -> None:
        raise Interrupted(signum, self.during)

    def __enter__(self) -> None:
        try:
            for name in _WAIT_SIGNALS:
                if hasattr(_signal, name):
                    sig = getattr(_signal, name)
                    self.previous[sig] = _signal.signal(sig, self._stop)
        except ValueError:
            pass

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self.previous.items():
            _signal.signal(sig, handler)


def _parse_options(flags: List[str]) -> Any:
    """The shim's options (an ``argparse.Namespace``); without any, or ``--dry-run`` alone, without building a
    parser (argparse and what it imports cost more than a dry-run's own work on a small table)."""
    if not flags or flags == ["--dry-run"]:
        import types

        return types.SimpleNamespace(dry_run=bool(flags), log_dir=None, report_file=None, grace_period=None)
    return build_parser(" ".join(flags)).parse_args(flags)  # --help prints and exits 0 here


def _overlay(environ: Mapping[str, str], options: Any) -> Dict[str, str]:
    merged = dict(environ)
    for flag, variable in (("log_dir", "MALAUNCH_LOG_DIR"), ("report_file", "MALAUNCH_REPORT_FILE"),
                           ("grace_period", "MALAUNCH_GRACE_PERIOD")):
        value = getattr(options, flag)
        if value is not None:
            merged[variable] = value
    return merged


def _stderr(text: str) -> None:
    """Write the shim's own lines; a console that takes nothing (a full disk) costs the line, never the run."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _say(message: str) -> None:
    _stderr(f"[{PROG}] {message}\n")


def _checkpoint_keeper(config: ShimConfig) -> Optional[CheckpointKeeper]:
    """The checkpoint folder's keeper, its folder checked (None without ``MALAUNCH_CHECKPOINT_DIR``). Every host
    prunes its view; only host 0 clears an earlier run's parts (:mod:`.run.checkpoints`).

    Raises:
        ConfigError: the folder is not writable (exit 2).
    """
    if config.checkpoints is None:
        return None
    from .run.checkpoints import CheckpointKeeper

    keeper = CheckpointKeeper(config.checkpoints, config.cluster.node_rank == 0, _say)
    keeper.check()
    return keeper


def _announce(plan: LaunchPlan) -> None:
    ranks = len(plan.rank_logs) or len(plan.processes)  # a launcher (torchrun, msrun) is one process for N ranks
    started = "" if ranks == len(plan.processes) else f" (started by {plan.method})"
    _say(
        f"method={plan.method} node_rank={plan.node_rank}/{plan.num_hosts} host={plan.host} "
        f"ranks={ranks}{started} log_dir={plan.log_dir}"
    )
    for note in plan.notes:
        _say(note)


def _finish(plan: LaunchPlan, outcome: RestartOutcome) -> int:
    from .report.report import format_failure, report_json, write_report
    from .run import notify
    from .run.attempts import restart_report

    result = outcome.result
    problem = write_report(plan.report_file, {**report_json(result, plan), **restart_report(outcome)})
    if problem:
        _say(problem)
    if result.root_cause is not None or result.shim_signal is not None:
        _stderr(format_failure(result) + "\n")
    if outcome.classification is not None:
        kind = outcome.classification
        _say(f"failure class: {kind.kind} ({'retryable' if kind.retryable else 'not retryable'}): {kind.description}")
    notify.job_over(outcome)  # host 0 only (see install); at most the targets' timeout
    _say(f"exit code {result.exit_code}; report: {plan.report_file}")
    return result.exit_code


def _hosts(config: ShimConfig, plan: LaunchPlan) -> Optional[HostsConfig]:
    """The coordinator settings of a multi-host job (None: one host, or no master address to reach)."""
    cluster = config.cluster
    if cluster.num_hosts < 2:
        return None
    from .run.hosts import hosts_config

    names = cluster.worker_hosts
    addr = names[cluster.node_rank] if cluster.node_rank < len(names) else plan.host
    hosts = hosts_config(config.coordinator, cluster.node_rank, cluster.num_hosts, addr, cluster.master_addr,
                         cluster.job_id, cluster.master_wait, cluster.min_hosts, cluster.procs_per_host)  # fmt: skip
    if hosts is None and cluster.master_addr is None:
        _say("no coordinator: the master host's address is unknown (set VC_WORKER_HOSTS); the hosts do not "
             "restart together and a lost host is noticed only by its peers' collectives")
    return hosts


def _without_secret(env: Mapping[str, str]) -> Mapping[str, str]:
    """The environment the ranks get: the job's secret is the shims' alone."""
    if "MALAUNCH_JOB_SECRET" not in env:
        return env
    return {name: value for name, value in env.items() if name != "MALAUNCH_JOB_SECRET"}


def _error(message: str) -> None:
    _stderr(f"{PROG}: error: {message}\n")


def _print_plan(text: str) -> int:
    """``--dry-run``'s plan on stdout, to its last byte; a reader that leaves before it (or a full disk) is one line,
    not a traceback nor a plan cut short in silence. The exit code: 0, :data:`EXIT_PIPE` for a closed pipe, or
    :data:`EXIT_LAUNCH` for another failure to write."""
    from .report.streams import OutputCut, StreamClosed, write_all

    binary = getattr(sys.stdout, "buffer", None)
    if binary is None:  # a caller's text-only stdout (main() with a StringIO): no bytes under it to cut short
        sys.stdout.write(text)
        return 0
    data = text.encode("utf-8")  # the plan is JSON, non-ASCII escaped
    try:
        write_all(binary, data)
    except OutputCut as cut:
        _error(f"the plan's output stopped after {cut.written:,} of its {len(data):,} bytes: {cut.why}; {cut.advice}")
        return EXIT_PIPE if isinstance(cut, StreamClosed) else EXIT_LAUNCH
    return 0


def main(
    argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None, *, own_process: bool = False
) -> int:
    """Run the shim; returns the exit code (never raises for user errors).

    ``own_process``: the process is the shim's alone (:func:`console_main`). Its start-up (the option and
    environment parsing, the rank table, the plan, and the modules they import) then runs with the cyclic garbage
    collector off: it makes objects that live as long as the shim, which a collection would walk for nothing (a
    32,768-rank table's columns among them). Once planned they are frozen out of every later collection
    (:func:`gc.freeze`) and the collector is back on, before a rank starts or a dry-run prints. A caller's own
    process is left alone.
    """
    args: List[str] = list(sys.argv[1:] if argv is None else argv)
    env: Mapping[str, str] = os.environ if environ is None else environ
    problem = host_problem(sys.platform)
    if problem is not None:
        _error(problem)
        return EXIT_CONFIG
    entry: Optional[CgroupEntry] = None
    if own_process:
        gc.disable()  # an error before the plan ends the process: the collector is never needed again then
    try:
        flags, boot_file, boot_args = split_argv(args)
        options = _parse_options(flags)
        if boot_file is None:
            raise ConfigError("BOOT_FILE", "", f"expected the training script to start: {USAGE}")
        if not options.dry_run:  # the ranks are born in the job's cgroup; the kernel's wait overlaps the start-up
            from .run.procs.guards import enter_cgroup_early

            entry = enter_cgroup_early()
        from .contract.config import parse_shim_config
        from .launchers import gather_inputs, launcher_for

        with _interruptible("preparing the launch (reading the environment, waiting for the rank table or the "
                            "master's address)"):
            config = parse_shim_config(_overlay(env, options))
            inputs = gather_inputs(config, boot_file, boot_args, cwd=os.getcwd(), progress=_say,
                                   dry_run=options.dry_run)  # fmt: skip
            launcher = launcher_for(config)
            plan = launcher.plan(config.cluster, inputs)
            if config.prepare is not None:  # every method's: run before the first attempt (run/prepare_steps.py)
                plan = plan._replace(prepare=config.prepare)
        if own_process:
            gc.freeze()
            gc.enable()
        policy = config.policy
        if options.dry_run:
            return _print_plan(launcher.plan_attempt(plan, 0, policy).render() + "\n")
        hosts = _hosts(config, plan)
        keeper = _checkpoint_keeper(config)
        _announce(plan)
        from .run import notify
        from .run.attempts import run_with_restarts
        from .run.supervisor import run_plan

        notify.install(env, plan, _say)  # host 0 sends the job's events (MALAUNCH_NOTIFY)

        def run(attempt: LaunchPlan, base_env: Mapping[str, str], **options: Any) -> RunResult:  # link, on_round
            return run_plan(attempt, base_env, launcher, cgroup=entry.take() if entry is not None else None,
                            hang_timeout=config.hang_timeout, **options)  # fmt: skip

        ranks_env = _without_secret(env)
        if hosts is None:
            outcome = run_with_restarts(plan, ranks_env, policy, run, _say, launcher, keeper)
        else:
            from .run.hosts.jobloop import run_coordinated

            outcome = run_coordinated(plan, ranks_env, policy, run, _say, launcher, hosts, keeper)
    except EntrypointError as error:
        _error(str(error))
        return exit_code_for(error)
    except KeyboardInterrupt:  # Ctrl-C before the wait handlers were installed (start-up, argument parsing)
        _error("stopped by SIGINT; nothing was started")
        return 128 + _signal.SIGINT
    finally:
        if entry is not None:
            entry.abandon()  # a run that started removed it; else this process leaves it and removes it
    return _finish(plan, outcome)


def console_main() -> None:
    """The shim's command (``ma-entrypoint``, ``python -m malaunch.entrypoint``): :func:`main` in a process of its
    own, then its exit."""
    code = main(own_process=True)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # the console takes nothing (a full disk): its bytes are lost, the code stands
        os._exit(code)  # everything is done; the interpreter's own final flush would turn the code into 120
    if code == 0 and _printed_a_plan(sys.argv[1:]):
        os._exit(0)  # a dry-run started nothing and holds nothing: the interpreter's teardown would only cost time
    sys.exit(code)


def _printed_a_plan(args: Sequence[str]) -> bool:
    """Whether the shim's options (as :func:`split_argv` reads them) asked for ``--dry-run``."""
    try:
        return "--dry-run" in split_argv(args)[0]
    except ConfigError:
        return False
