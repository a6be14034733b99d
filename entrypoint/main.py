"""``ma-entrypoint BOOT_FILE [ARGS...]``: the whole shim, its planning (:mod:`.start`) and its run phase
(:mod:`.runphase`) with the hosts' coordinated attempt loop (:func:`~.run.hosts.jobloop.run_coordinated`).

:func:`main` is the shim as a function (the options, the environment, the plan, the run, the exit code), for a
caller in Python; the entry scripts (``__main__.py``, ``ma-entrypoint``) run the same phases and load the
coordinator only for a plan of several hosts.
"""

from __future__ import annotations

from typing import Mapping, NoReturn, Optional, Sequence

from . import start
from .run.hosts.jobloop import run_coordinated
from .runphase import RunPhase
from .start import host_problem, parse_options, split_argv

__all__ = ["console_main", "host_problem", "main", "parse_options", "split_argv"]


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None) -> int:
    """Run the shim; returns the exit code (never raises for user errors): :func:`.start.main` with the run
    phase."""
    return start.main(argv, environ, run_phase=RunPhase(run_coordinated))


def console_main() -> NoReturn:
    """The shim in a process of its own (:func:`main`), then its exit."""
    start.end_process(main())
