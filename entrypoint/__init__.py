"""malaunch.entrypoint: the in-container shim ``ma-entrypoint`` (standard library only).

The package root imports nothing: ``import malaunch.entrypoint`` costs nothing, and each name is imported from
its home. The homes of the names a caller needs:

    malaunch.entrypoint.main                   main(argv, environ) -> exit code; console_main (the command)
    malaunch.entrypoint.start                  the planning phase: command line and environment -> the plan
    malaunch.entrypoint.contract.cluster_env   ClusterEnv, parse_cluster_env: environment -> platform facts (pure)
    malaunch.entrypoint.contract.errors        EntrypointError, ConfigError, ...: the one exception tree
    malaunch.entrypoint.plan.inputs            LaunchInputs: what is gathered before planning
    malaunch.entrypoint.plan.launch_plan       LaunchPlan, ProcessSpec: what --dry-run prints and the run starts
    malaunch.entrypoint.plan.rank_table        RankTable, parse_rank_table, read_rank_table, select_server, ...
    malaunch.entrypoint.launchers              plan_launch, launcher_for, launcher_of: the launchers' registry
    malaunch.entrypoint.run.supervisor         run_plan: one attempt of a plan, supervised
    malaunch.entrypoint.report.report          RunResult, Failure: a run's result and report.json
    malaunch.entrypoint.public                 what the SDK may use of the shim (its one seam)
    malaunch.entrypoint.checkpoint             the helper for training scripts (runs in the ranks)
"""

__all__: list[str] = []
