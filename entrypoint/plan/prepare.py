"""The I/O before planning: find the boot file, wait for the rank table, resolve the master, locate Python.

Everything here has a deadline and ends in a clear error; the results are handed to the pure planner as
a :class:`~.inputs.LaunchInputs`. What is gathered is what the launcher's :class:`~.inputs.Needs` ask for.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import time
from typing import TYPE_CHECKING, Optional, Sequence, Tuple

from ..contract import VARIABLES
from ..contract.cluster_env import ClusterEnv, require_master
from ..contract.errors import ConfigError, LaunchError, RankTableError, WaitTimeout, shorten
from .inputs import LaunchInputs, Needs
from .rank_table import (
    RankTable,
    RankTableNotReady,
    read_rank_table,
    resolve_rank_table_path,
    select_server,
    wait_for_rank_table,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    #: What resolves a host name to an IPv4 address (a run's: :func:`.resolve.resolve_ipv4`; tests: a stand-in).
    Resolver = Callable[[str], str]
    #: Where progress lines go while the shim waits.
    Progress = Callable[[str], None]

__all__ = ["DEFAULT_RANK_TABLE_PATH", "gather", "python_dir_for", "wait_for_address"]

#: Where ModelArts puts the rank table when ``RANK_TABLE_FILE`` is unset.
DEFAULT_RANK_TABLE_PATH = str(VARIABLES["RANK_TABLE_FILE"].default)


def wait_for_address(
    name: str,
    timeout: float,
    *,
    resolve: Resolver,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    progress: Optional[Progress] = None,
) -> str:
    """Resolve ``name`` to an IP, retrying until ``timeout`` seconds have passed (peers' DNS records appear late)."""
    start = clock()
    delay, last_report = 0.2, start
    while True:
        try:
            return resolve(name)
        except (OSError, UnicodeError) as exc:
            elapsed = clock() - start
            if elapsed >= timeout:
                raise WaitTimeout(
                    f"the master address {name!r} to resolve",
                    elapsed,
                    f"last error: {exc}; check VC_WORKER_HOSTS / MA_VJ_NAME, or raise MALAUNCH_MASTER_WAIT",
                ) from None
            if progress is not None and clock() - last_report >= 10:
                progress(f"waiting for {name!r} to resolve ({elapsed:.0f}s of {timeout:.0f}s): {exc}")
                last_report = clock()
            sleep(min(delay, max(timeout - elapsed, 0.01)))
            delay = min(delay * 2, 5.0)


def python_dir_for(interpreter: str, fallback_dir: str) -> Tuple[str, bool]:
    """A directory whose ``python`` is ``interpreter``: its own directory when that holds it, else ``fallback_dir``.

    Returns ``(directory, needs_link)``; when ``needs_link`` is true the caller links ``fallback_dir/python``.
    """
    own = os.path.join(os.path.dirname(interpreter), "python")
    try:
        if os.path.samefile(own, interpreter):
            return os.path.dirname(interpreter), False
    except OSError:
        pass
    return fallback_dir, True


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _link_python(directory: str, interpreter: str) -> None:
    link = os.path.join(directory, "python")
    try:
        os.makedirs(directory, exist_ok=True)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(interpreter, link)
    except OSError as exc:
        raise LaunchError(
            f"cannot link {link} -> {interpreter} for msrun's workers ({exc}); make the log directory writable"
        ) from None


def _boot_file(cwd: str, boot_file: str) -> str:
    path = os.path.normpath(os.path.join(cwd, boot_file))
    if os.path.isfile(path):
        return path
    if os.path.isdir(path):
        what = "a directory"
    elif os.path.exists(path):
        what = "not a regular file"
    else:
        what = "no such file"
    raise ConfigError("BOOT_FILE", boot_file, f"{what} ({shorten(path)}); give the training script's path")


def _read_once(path: str, cluster: ClusterEnv) -> RankTable:
    """``--dry-run``: one read; a table that is not ready is reported (exit 2), never waited for."""
    try:
        return read_rank_table(path)
    except RankTableNotReady as exc:
        value = shorten(path if exc.value is None else exc.value)
        raise RankTableError(path, exc.where, value, f"not ready ({exc.reason}); --dry-run reads the table once "
                             f"and never waits (a real run waits up to {cluster.rank_table_timeout:g}s, "
                             "MALAUNCH_RANK_TABLE_TIMEOUT)") from None


def _rank_table(
    cluster: ClusterEnv, needs: Needs, progress: Optional[Progress], dry_run: bool
) -> Tuple[Optional[RankTable], Optional[str]]:
    if not needs.rank_table:
        return None, None
    given = cluster.rank_table_file or DEFAULT_RANK_TABLE_PATH
    path = resolve_rank_table_path(given)

    def on_wait(reason: str, elapsed: float) -> None:
        if progress is not None:
            waited = f"{elapsed:.0f}s of {cluster.rank_table_timeout:.0f}s"
            progress(f"waiting for rank table {shorten(path)} ({waited}): {reason}")

    if dry_run:
        return _read_once(path, cluster), path
    table = wait_for_rank_table(path, cluster.rank_table_timeout, on_wait=on_wait)
    return table, path


def _master_ip(
    cluster: ClusterEnv, method: str, needs: Needs, progress: Optional[Progress], resolve: Optional[Resolver],
    dry_run: bool,
) -> Tuple[Optional[str], Tuple[str, ...]]:
    """The master's IP (when the launcher wants it as an IP), and the note a dry run shows.

    Raises:
        ValueError: a run with no ``resolve`` (the caller's mistake: a run resolves the master's name).
    """
    if not needs.master:
        return None, ()
    master = require_master(cluster, method)
    notes: Tuple[str, ...] = ()
    if dry_run:
        # A dry run asks no name server: an IP literal is used as is, a name is shown as the name.
        master_ip = master
        if needs.master_ip and not _is_ip(master):
            notes = (
                f"a real run first resolves {master!r} to an IP (waiting up to "
                f"{cluster.master_wait:.0f}s) and passes the IP to {method}",
            )
    elif resolve is None:
        raise ValueError("a run resolves the master's name: gather needs the run phase's resolve")
    else:
        master_ip = wait_for_address(master, cluster.master_wait, resolve=resolve, progress=progress)
    return (master_ip if needs.master_ip else None), notes


def gather(
    cluster: ClusterEnv,
    method: str,
    needs: Needs,
    boot_file: str,
    boot_args: Sequence[str],
    path_env: str,
    *,
    cwd: str,
    progress: Optional[Progress] = None,
    resolve: Optional[Resolver] = None,
    dry_run: bool = False,
) -> LaunchInputs:
    """Do the waiting and looking-up ``needs`` asks for (the launcher of ``method`` says), in the order a failure
    is cheapest to report.

    ``resolve`` is the name service a run asks for the master's address (:func:`.resolve.resolve_ipv4`); a dry run
    asks none. The only thing written is, for a launcher that needs a ``python`` directory when the interpreter's
    directory has no ``python``, a link to the interpreter in a private directory (skipped by ``dry_run``).
    """
    boot = _boot_file(cwd, boot_file)
    interpreter = cluster.script_interpreter or sys.executable
    table, table_path = _rank_table(cluster, needs, progress, dry_run)
    server_index = None
    if needs.server and table is not None:
        server_index = select_server(
            table,
            host_ip=cluster.current_host_ip,
            instance_name=cluster.current_instance_name,
            node_rank=cluster.node_rank,
            num_hosts=cluster.num_hosts,
        )
    master_ip, notes = _master_ip(cluster, method, needs, progress, resolve, dry_run)
    python_dir = None
    if needs.python_dir:
        fallback = os.path.join(cwd, cluster.log_dir or "malaunch-logs", ".python")
        python_dir, needs_link = python_dir_for(interpreter, fallback)
        if needs_link and not dry_run:
            _link_python(python_dir, interpreter)
    return LaunchInputs(
        boot_file=boot,
        boot_args=tuple(boot_args),
        interpreter=interpreter,
        cwd=cwd,
        hostname=os.uname().nodename,
        path_env=path_env,
        rank_table=table,
        rank_table_path=table_path,
        server_index=server_index,
        master_ip=master_ip,
        python_dir=python_dir,
        notes=notes,
    )
