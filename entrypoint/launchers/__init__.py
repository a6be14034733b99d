"""Layer 4, the launchers: one module per launch method, each owning everything that method needs.

==================  ==========================  ======================================================
method              module                      what it starts
==================  ==========================  ======================================================
``ranktable``       :mod:`.fanout`              one process per device of this host's server in the rank table
``single``          :mod:`.single`              the boot file once
``torchrun``        :mod:`.torchrun`            one torchrun per host (its stub, logs, summary, error files, gate)
``msrun``           :mod:`.msrun`               one msrun per host
msrun + recovery    :mod:`.msrun.recovery`      the scheduler and workers themselves, a failed one relaunched
==================  ==========================  ======================================================

Two registries map a method name to its hooks, one per phase: :mod:`.planning` to each method's planner (what
``--dry-run`` needs: what to gather, the plan, each attempt's plan; :func:`~.planning.planner_for`,
:func:`~.planning.plan_launch`) and :mod:`.running` to its whole launcher (the planner and the run's hooks:
:func:`~.running.launcher_for`, :func:`~.running.run_plan`). Where a method's run hooks need the run's modules
(torchrun's log followers and gate, MindSpore recovery's classes), its planner lives in a module of its own
(``torchrun/plan.py``, ``msrun/recovery_plan.py``) and the launcher subclasses it. This root imports nothing.
"""

__all__: list[str] = []
