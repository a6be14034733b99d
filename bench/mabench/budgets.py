"""Issue 41's time budgets, judged as stated and scaled to the machine that runs the bench.

Issue 41 states its budgets in milliseconds (a verb within 60 ms of ``python -c pass``, the shim's start-up within
25 ms of the floor, a 32,768-rank dry run under 60 ms) and gives the interpreter it measured them against:
``python -c pass`` took :data:`ISSUE_FLOOR` there. Speed targets in this bench are ratios measured side by side in
one run, so each of those budgets is judged twice:

- **as stated**: the milliseconds themselves, on this machine;
- **scaled**: the milliseconds times this run's ``python -c pass`` over :data:`ISSUE_FLOOR`. What the budgets
  pay for (unmarshalling modules, defining classes, reading and planning) is the same kind of work as an
  interpreter's own start, so a machine whose bare interpreter is slower by some factor runs it slower by about
  that factor too.

Both verdicts go into the results; neither replaces the other. The factor is always taken from the project's own
venv (the interpreter that runs ``ma-submit``, with its site and the editable install's finder, as the issue measured
it), also for a target whose own floor is another interpreter (the dry run's wheel venv).
"""

from __future__ import annotations

from .procs import PYTHON, BenchError, bench_env, new_mark, timed_process
from .results import Target, fmt_value

__all__ = ["ISSUE_FLOOR", "interpreter_floor", "machine_factor", "scaled_target"]

#: ``python -c pass`` (wall, median) on the machine issue 41 set its budgets on.
ISSUE_FLOOR = 0.018


def interpreter_floor() -> float:
    """Wall seconds of one ``python -c pass`` of the project's venv (what the budgets are scaled by)."""
    wall, _cpu, code, err = timed_process([PYTHON, "-c", "pass"], bench_env(new_mark(), {}))
    if code != 0:
        raise BenchError(f"python -c pass exited with {code}: {err}")
    return wall


def machine_factor(floor: float) -> float:
    """How much slower this machine's bare interpreter is than the issue's (``floor``: this run's median
    ``python -c pass``, seconds)."""
    return floor / ISSUE_FLOOR


def scaled_target(subject: str, measured: float, budget: float, floor: float, what: str = "excess") -> Target:
    """The target "``subject`` within ``budget``, scaled to this machine", judged on ``measured`` (seconds: an
    excess over a floor, or a whole process, as ``what`` says)."""
    factor = machine_factor(floor)
    bound = budget * factor
    claim = (f"{subject}, scaled to this machine: {what} within {fmt_value(budget, 's')} x {factor:.2f} = "
             f"{fmt_value(bound, 's')}")  # fmt: skip
    comment = (f"python -c pass took {fmt_value(floor, 's')} in this run against {fmt_value(ISSUE_FLOOR, 's')} where "
               "the issue set the budget")  # fmt: skip
    return Target(claim, fmt_value(measured, "s"), measured <= bound, comment)
