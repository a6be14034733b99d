"""What ``ma-submit --help`` prints, kept as data so that the quick path (:mod:`.quick`) prints it
without importing click (issue 28). It is click's rendering at :data:`WIDTH`, the width click takes for a terminal
of 80 columns or more, or none; for any other width click answers.

Written by ``scripts/render_group_help.py``, never by hand: a test renders the help with click and fails when the
two differ (run the script then).
"""

from __future__ import annotations

__all__ = ["GROUP_HELP", "WIDTH"]

#: The help formatter's width this text was rendered at.
WIDTH = 78
#: The group's help as click renders it at :data:`WIDTH`; printed with one newline after it, as click prints it.
GROUP_HELP = (
    "Usage: ma-submit [OPTIONS] COMMAND [ARGS]...\n"
    "\n"
    "  Submit distributed training jobs (torchrun, msrun, rank table) and manage\n"
    "  them.\n"
    "\n"
    "  ma-submit [options] JOB.yaml [-- SCRIPT_ARGS...]\n"
    "  ma-submit status|logs [-f]|stop|wait|delete JOB_ID     (a unique prefix of the id is enough)\n"
    "  ma-submit list | prune [--older-than 7d]\n"
    "  ma-submit sweep JOB.yaml [--param lr=1e-3,3e-4]... | sweep status|wait|stop|logs SWEEP_ID\n"
    "  ma-submit events [-f]|top [--watch] JOB_ID | exec JOB_ID [--host N] -- COMMAND...\n"
    "  ma-submit configure [--profile NAME] ... | configure list|show   (then --profile NAME on any verb)\n"
    "  ma-submit host lose|restore JOB_ID HOST                (local jobs: try a recovery by hand)\n"
    "  ma-submit checkpoints JOB_ID | --resume-from JOB_ID[:NAME] JOB.yaml\n"
    "\n"
    "Options:\n"
    "  --version   Show the version and exit.\n"
    "  -h, --help  Show this message and exit.\n"
    "\n"
    "Commands:\n"
    "  checkpoints  List the checkpoints of JOB_ID: step, age, size, and...\n"
    "  configure    Write, list or show named profiles (see 'ma-submit...\n"
    "  delete       Delete ended jobs and their files (a running job must be...\n"
    "  events       Print what the platform did to JOB_ID, oldest first...\n"
    "  exec         Run COMMAND inside a running host of JOB_ID and exit with...\n"
    "  host         Lose host HOST of a running local job for good, or bring a...\n"
    "  list         List the jobs of a backend, newest first (jobs whose state...\n"
    "  logs         Print the output of JOB_ID merged by time, each line...\n"
    "  notify       Try the notification targets of a job file or a profile...\n"
    "  prune        Delete every ended job that ended longer ago than...\n"
    "  status       Show the state of JOB_ID (and of each of its hosts).\n"
    "  stop         Stop JOB_ID; returns when nothing of it is left running...\n"
    "  submit       Submit JOB.yaml; follow it and exit with its exit code...\n"
    "  sweep        Run JOB.yaml as many trials with different parameters, and...\n"
    "  top          Show what each host of JOB_ID uses: CPU, memory,...\n"
    "  ui           Serve a page of your jobs (local, ModelArts, Volcano) on...\n"
    "  wait         Wait for JOB_ID to end and exit with its exit code.\n"
    "\n"
    "  Exit codes: the job's own exit code when following (submit, wait); 0\n"
    "  otherwise on success; 2 invalid job file or option; 3 backend failure; 4\n"
    "  unknown job id; 124 wait timeout; 130 interrupted (the job keeps running).\n"
    "  Jobs of the local backend live under $MALAUNCH_HOME (default ~/.malaunch).\n"
    "  See docs/cli.md."
)
