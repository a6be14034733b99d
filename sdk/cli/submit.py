"""``ma-submit submit`` (and ``ma-submit JOB.yaml``, the same), the verb's definition: its options, its help text
and the parsing of their values, as click sees them.

The work, checking the job file, printing its plan or submitting and following the job, is
:func:`.submitting.submit_job`, which the verbs table (:mod:`.verbs`) names beside this command: the group makes it
this command's callback, imported when the verb runs. So ``ma-submit submit --help`` loads click and these light
facts (the run methods of the shim's contract, the registry's backend names), not the job API (the loader with
PyYAML, the spec, following a job).
"""

from __future__ import annotations

import click
from malaunch.entrypoint.public import VARIABLES

from ..backends.registry import BACKEND_NAMES
from .output import OUTPUT
from .profile_option import profile_param

__all__ = ["submit_cmd"]

_HELP = """Submit JOB.yaml; follow it and exit with its exit code (unless --detach or --dry-run).

Words after -- are appended to the job's args: ma-submit job.yaml -- --epochs 2

--resume-from JOB_ID[:NAME] starts from an ended job's checkpoint on the same backend: every rank gets it as
MALAUNCH_RESUME_FROM until this job saves a complete one of its own (ma-submit checkpoints JOB_ID lists them).
"""

#: The command without its work: the verbs table's ``work`` (:func:`.submitting.submit_job`) becomes its callback.
submit_cmd = click.Command(
    "submit",
    help=_HELP,
    params=[
        click.Option(
            ["--run-method"],
            type=click.Choice(VARIABLES["MA_RUN_METHOD"].choices, case_sensitive=False),  # the spec's RUN_METHODS
            help="Override run_method (MA_RUN_METHOD), in any case.",
        ),
        click.Option(["--backend"], type=click.Choice(BACKEND_NAMES), help="Override the job file's backend."),
        click.Option(["--name"], help="Override the job's name."),
        click.Option(["--hosts"], type=click.IntRange(min=1), help="Override resources.hosts."),
        click.Option(["--devices-per-host"], type=click.IntRange(min=0), help="Override resources.devices_per_host."),
        click.Option(["--env", "env_pairs"], multiple=True, metavar="NAME=VALUE", help="Set a variable (repeatable)."),
        click.Option(
            ["--resume-from"], metavar="JOB_ID[:NAME]",
            help="Start from an ended job's checkpoint (its newest complete one, or NAME); needs checkpoint:.",
        ),
        click.Option(["--detach"], is_flag=True, help="Print the job id and return; do not follow the job."),
        click.Option(["--dry-run"], is_flag=True, help="Check and print what would be submitted; start nothing."),
        click.Option(["--output"], type=OUTPUT, default="text", show_default=True,
                     help="json: machine-readable result."),
        profile_param(),
        click.Argument(["job_file"], metavar="JOB.yaml"),
        click.Argument(["script_args"], nargs=-1, metavar="[-- SCRIPT_ARGS...]"),
    ],
)  # fmt: skip
