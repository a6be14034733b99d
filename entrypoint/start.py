"""The shim's planning phase: its command line and environment read into this host's plan (no process started).

``main`` here runs the shim up to its plan: the options (:func:`split_argv`, :func:`parse_options`), the
contract's configuration (:func:`~.contract.config.parse_shim_config`), what the method needs gathered (the rank
table, the master's address), the method's planner (:mod:`.launchers.planning`) and its plan. A dry run prints that
plan and ends; a run hands it to the run phase it was given (:class:`RunPhase`, :mod:`.runphase`'s), so that this module
and what it imports (contract, plan, rank table, the launchers' argv building) never load the supervisor, the hosts'
coordinator, the output pumps or the report writer: ``ma-entrypoint --dry-run`` imports this module alone (the
entry script).

``main(argv, environ, run_phase=...) -> int`` is the one place that decides the shim's exit code:

- 0 when every process succeeded;
- the root-cause rank's own exit code (128+N for a rank killed by signal N) when a rank failed;
- 128+S when the shim itself received signal S (SIGTERM -> 143, SIGINT -> 130);
- 2 for invalid input (environment variable, argument, rank table), 3 when the launch could not proceed;
- 124 when the job hung (``MALAUNCH_HANG_TIMEOUT``, :mod:`.run.hang`) and no restart was left.

Options given on the command line override the ``MALAUNCH_*`` variables of the same meaning. The environment is
read here once (``os.environ``, or the ``environ`` given) and parsed once by the contract into a
:class:`~.contract.config.ShimConfig`, which the rest receives.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, Dict, List, Mapping, NamedTuple, NoReturn, Optional, Protocol, Sequence, Tuple

from .contract.config import ShimConfig, parse_shim_config
from .contract.errors import (
    EXIT_CONFIG,
    EXIT_LAUNCH,
    EXIT_PIPE,
    PROG,
    ConfigError,
    EntrypointError,
    Interrupted,
    exit_code_for,
)
from .launchers.planning import gather_inputs, planner_for
from .plan.launch_plan import LaunchPlan
from .report.streams import OutputCut, StreamClosed, write_all

__all__ = [
    "HELP",
    "OPTIONS",
    "PROG",
    "USAGE",
    "Options",
    "RunPhase",
    "asks_to_run",
    "console_main",
    "end_process",
    "error",
    "host_problem",
    "interruptible",
    "main",
    "overlay",
    "process_environment",
    "parse_options",
    "print_plan",
    "say",
    "split_argv",
    "stopped_before_start",
    "stderr",
]

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


#: What ``--help`` prints (the options are few and fixed: no parser library is loaded to format them).
HELP = f"""usage: {USAGE}

Start BOOT_FILE the way the platform environment asks (MA_RUN_METHOD: rank-table
fan-out, torchrun or msrun), supervise every process, and exit with the failing
rank's own exit code. Options come before BOOT_FILE; everything after it goes to
the script. A BOOT_FILE whose name starts with '-' goes after '--'. See
docs/entrypoint.md for every environment variable.

options:
  -h, --help            show this help message and exit
  --dry-run             read the environment and the rank table once, print
                        the launch plan as JSON, start nothing, never wait
  --log-dir DIR         per-rank logs go here (env MALAUNCH_LOG_DIR)
  --report-file FILE    write the JSON run report here (env
                        MALAUNCH_REPORT_FILE)
  --grace-period SECONDS
                        time between SIGTERM and SIGKILL when the group is
                        torn down (env MALAUNCH_GRACE_PERIOD, default 30)

exit codes: 0 success; the root-cause rank's code; 128+N after signal N; 2
invalid input; 3 launch error; 75 a host lost (multi-host); 124 the job hung
(MALAUNCH_HANG_TIMEOUT)
"""


class Options(NamedTuple):
    """The shim's own options (None: not given; the variable of the same meaning, or its default, applies)."""

    dry_run: bool = False
    log_dir: Optional[str] = None
    report_file: Optional[str] = None
    grace_period: Optional[str] = None


def _looks_like_option(value: str) -> bool:
    """Whether a word after an option that takes a value is an option instead (``-`` alone and negative numbers
    such as ``-5`` or ``-.5`` are values)."""
    if not value.startswith("-") or value == "-":
        return False
    whole, dot, fraction = value[1:].partition(".")
    number = fraction.isdigit() and (not whole or whole.isdigit()) if dot else whole.isdigit()
    return not number


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


def parse_options(flags: Sequence[str]) -> Options:
    """The shim's options from ``flags`` (what :func:`split_argv` took before BOOT_FILE), the last of each winning;
    ``-h``/``--help`` prints :data:`HELP` and exits 0 here.

    Raises:
        ConfigError: a flag given a value it takes none of (``--dry-run=1``), or one lacking its value (one line
            naming the options parsed; exit 2).
    """
    given = " ".join(flags)
    values: Dict[str, Any] = {}
    index = 0
    while index < len(flags):
        name, equals, value = flags[index].partition("=")
        index += 1
        if not OPTIONS.get(name, False):  # --dry-run, -h, --help
            if equals:
                shown = "-h/--help" if name in ("-h", "--help") else name
                raise ConfigError("arguments", given, f"argument {shown}: ignored explicit argument {value!r}; see "
                                  f"{PROG} --help")
            if name != "--dry-run":
                sys.stdout.write(HELP)
                sys.stdout.flush()
                raise SystemExit(0)
            values["dry_run"] = True
            continue
        if not equals:
            if index >= len(flags) or _looks_like_option(flags[index]):
                raise ConfigError("arguments", given, f"argument {name}: expected one argument; see {PROG} --help")
            value = flags[index]
            index += 1
        values[name[2:].replace("-", "_")] = value
    return Options(**values)


def process_environment() -> Mapping[str, str]:
    """This process's environment: the one place the shim reads it (a run's guards and :func:`main` are given it)."""
    return os.environ


def asks_to_run(args: Sequence[str]) -> bool:
    """Whether :func:`main` given the command line ``args`` begins a run phase on this host (it calls
    :meth:`RunPhase.before_planning`): Linux, the options read, a BOOT_FILE named, no ``--dry-run``. The entry
    script asks before it imports the run phase, to begin the job's guards that early (``__main__.py``); a command
    line :func:`main` refuses begins nothing. ``-h``/``--help`` prints the help and exits 0 here, as in :func:`main`.
    """
    if host_problem(sys.platform) is not None:
        return False
    try:
        flags, boot_file, _ = split_argv(args)
        options = parse_options(flags)
    except ConfigError:  # main says so
        return False
    return boot_file is not None and not options.dry_run


def overlay(environ: Mapping[str, str], options: Options) -> Dict[str, str]:
    """``environ`` with the options given laid over the variables of the same meaning."""
    merged = dict(environ)
    for flag, variable in (("log_dir", "MALAUNCH_LOG_DIR"), ("report_file", "MALAUNCH_REPORT_FILE"),
                           ("grace_period", "MALAUNCH_GRACE_PERIOD")):
        value = getattr(options, flag)
        if value is not None:
            merged[variable] = value
    return merged


def stderr(text: str) -> None:
    """Write the shim's own lines; a console that takes nothing (a full disk) costs the line, never the run."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def say(message: str) -> None:
    """One line of the shim's own, with its prefix."""
    stderr(f"[{PROG}] {message}\n")


def error(message: str) -> None:
    """The line of an error that ends the shim."""
    stderr(f"{PROG}: error: {message}\n")


class interruptible:
    """While waiting, SIGINT/SIGTERM/SIGHUP raise :class:`Interrupted` (exit 128+N, one line, no traceback).

    Outside the main thread no handler can be set (``signal.signal`` refuses with ValueError at the first): the wait
    then goes on without them."""

    def __init__(self, during: str) -> None:
        self.during = during
        self.previous: Dict[int, Any] = {}

    def _stop(self, signum: int, _frame: object) -> None:
        raise Interrupted(signum, self.during)

    def __enter__(self) -> None:
        try:
            for name in _WAIT_SIGNALS:
                if hasattr(signal, name):
                    sig = getattr(signal, name)
                    self.previous[sig] = signal.signal(sig, self._stop)
        except ValueError:
            pass

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def print_plan(text: str) -> int:
    """``--dry-run``'s plan on stdout, to its last byte; a reader that leaves before it (or a full disk) is one line,
    not a traceback nor a plan cut short in silence. The exit code: 0, :data:`EXIT_PIPE` for a closed pipe, or
    :data:`EXIT_LAUNCH` for another failure to write."""
    binary = getattr(sys.stdout, "buffer", None)
    if binary is None:  # a caller's text-only stdout (main() with a StringIO): no bytes under it to cut short
        sys.stdout.write(text)
        return 0
    data = text.encode("utf-8")  # the plan is JSON, non-ASCII escaped
    try:
        write_all(binary, data)
    except OutputCut as cut:
        error(f"the plan's output stopped after {cut.written:,} of its {len(data):,} bytes: {cut.why}; {cut.advice}")
        return EXIT_PIPE if isinstance(cut, StreamClosed) else EXIT_LAUNCH
    return 0


class RunPhase(Protocol):
    """What runs a plan (:mod:`.runphase`'s): given to :func:`main`, which calls it in this order."""

    def before_planning(self, environ: Mapping[str, str]) -> None:
        """Once the options are read, before the environment is (the job's watchdog starts and its cgroup is
        entered here; ``environ``: the shim's environment)."""

    def resolve(self, name: str) -> str:
        """The master's name to its IPv4 address, while planning (the name service; a dry run asks none)."""

    def run(self, config: ShimConfig, plan: LaunchPlan, environ: Mapping[str, str]) -> Any:
        """Run the plan's attempts (with the method's whole launcher); what it returns goes to :meth:`finish`."""

    def finish(self, plan: LaunchPlan, outcome: Any) -> int:
        """The report, the last lines; the exit code."""

    def abandon(self) -> None:
        """Whatever the run phase holds that a run did not take (always called, after :meth:`run`)."""


def main(
    argv: Optional[Sequence[str]] = None,
    environ: Optional[Mapping[str, str]] = None,
    *,
    run_phase: Optional[RunPhase] = None,
) -> int:
    """Plan, then print the plan (``--dry-run``) or run it with ``run_phase``; returns the exit code (never raises
    for user errors). Without ``run_phase`` only a dry run can be asked: anything else is a launch error."""
    args: List[str] = list(sys.argv[1:] if argv is None else argv)
    env: Mapping[str, str] = process_environment() if environ is None else environ
    problem = host_problem(sys.platform)
    if problem is not None:
        error(problem)
        return EXIT_CONFIG
    try:
        flags, boot_file, boot_args = split_argv(args)
        options = parse_options(flags)
        if boot_file is None:
            raise ConfigError("BOOT_FILE", "", f"expected the training script to start: {USAGE}")
        if not options.dry_run:
            if run_phase is None:
                error("this entry plans only (--dry-run); run the shim through malaunch.entrypoint.main")
                return EXIT_LAUNCH
            run_phase.before_planning(env)  # the watchdog boots and the kernel moves the shim while it plans
        with interruptible("preparing the launch (reading the environment, waiting for the rank table or the "
                           "master's address)"):
            config = parse_shim_config(overlay(env, options))
            inputs = gather_inputs(config, boot_file, boot_args, cwd=os.getcwd(), progress=say,
                                   resolve=None if run_phase is None else run_phase.resolve,
                                   dry_run=options.dry_run)  # fmt: skip
            planner = planner_for(config)
            plan = planner.plan(config.cluster, inputs)
            if config.prepare is not None:  # every method's: run before the first attempt (run/prepare_steps.py)
                plan = plan._replace(prepare=config.prepare)
        if options.dry_run or run_phase is None:
            return print_plan(planner.plan_attempt(plan, 0, config.policy).render() + "\n")
        outcome = run_phase.run(config, plan, env)
    except EntrypointError as failed:
        error(str(failed))
        return exit_code_for(failed)
    except KeyboardInterrupt:  # Ctrl-C before the wait handlers were installed (start-up, argument parsing)
        return stopped_before_start()
    finally:
        if run_phase is not None:
            run_phase.abandon()
    return run_phase.finish(plan, outcome)  # a run phase ran: it was given


def stopped_before_start() -> int:
    """Say that a Ctrl-C came before anything was started (the run's own handlers not yet installed); its exit code."""
    error("stopped by SIGINT; nothing was started")
    return 128 + signal.SIGINT


def end_process(code: int) -> NoReturn:
    """End this process with ``code`` once the console took the last bytes (the shim's command's last step)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # the console takes nothing (a full disk): its bytes are lost, the code stands
        os._exit(code)  # everything is done; the interpreter's own final flush would turn the code into 120
    sys.exit(code)


def console_main() -> NoReturn:
    """``ma-entrypoint --dry-run ...``: :func:`main` without a run phase, in a process of its own."""
    end_process(main())
