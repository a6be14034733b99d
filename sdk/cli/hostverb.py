"""``ma-submit host lose|restore JOB_ID HOST``: play the platform losing one host of a running local job for good,
or giving it a machine again, to try a job's recovery by hand (:meth:`LocalBackend.lose_host`,
:meth:`LocalBackend.restore_host`; docs/recovery.md). The local backend only: a cloud's hosts are its own.
"""

from __future__ import annotations

from typing import Optional

import click

from .actions import render_status
from .echo import echo
from .jobs import backend_option, resolved

__all__ = ["host_cmd"]


@click.command("host")
@backend_option
@click.argument("action", type=click.Choice(("lose", "restore")), metavar="lose|restore")
@click.argument("job_id")
@click.argument("host", type=click.IntRange(min=0), metavar="HOST")
def host_cmd(backend: Optional[str], action: str, job_id: str, host: int) -> int:
    """Lose host HOST of a running local job for good, or bring a lost one back (to try its recovery).

    ma-submit host lose JOB_ID 1;  ma-submit host restore JOB_ID 1

    lose kills the host's shim and everything under it and does not start it again (the other hosts decide: an
    elastic job goes on, any other waits launcher.host_wait for it); restore starts its shim again and it joins
    the job. Each returns once the job's runner has done it, and prints the job's status.
    """
    impl, ident = resolved(backend, job_id)  # the local backend plays the platform; the others refuse
    status = impl.lose_host(ident, host) if action == "lose" else impl.restore_host(ident, host)
    echo(render_status(status))
    return 0
