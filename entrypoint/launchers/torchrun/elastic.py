"""Elastic torchrun (``MALAUNCH_MIN_HOSTS``): the job goes on with fewer hosts instead of none. Pure.

The plan (what ``--dry-run`` shows): ``--nnodes=MIN:MAX --nproc_per_node=G --rdzv_backend=c10d
--rdzv_endpoint=MASTER:PORT --rdzv_id=J --rdzv_conf=...`` and ``--max_restarts=0``: the rendezvous's store is
served by the master host's torchrun (``is_host`` says which host serves it, as every host of a job run on one
machine would otherwise claim the address), and torch never restarts on its own: the shims' coordinator
decides every attempt and which hosts it has (docs/recovery.md, "Elastic torchrun").

Each attempt (:func:`members_argv`) gets a rendezvous of its own, ``--rdzv_id=J-aK``: a rendezvous that an
earlier attempt closed, or a straggler of it, never meets the next one (kubeflow/trainer#1638). The lower bound
of ``--nnodes`` becomes the number of hosts the coordinator started the attempt with, so the rendezvous never
completes without one of them, and it completes as soon as the last of them arrives (at once when they are
all the job's hosts, after :data:`LAST_CALL` seconds otherwise).
"""

from __future__ import annotations

from typing import List, Set, Tuple

from ...contract.cluster_env import ClusterEnv, require_master

__all__ = ["JOIN_TIMEOUT", "LAST_CALL", "elastic_presets", "is_elastic", "members_argv"]

#: Seconds a rendezvous waits for its hosts (torch's default; the coordinator ends an attempt whose host is lost
#: long before).
JOIN_TIMEOUT = 600
#: Seconds the rendezvous waits, once the attempt's hosts are in, for more (there are none: every member is known).
LAST_CALL = 1
#: Seconds torch waits for its agents to agree that the rendezvous is closed at the end.
CLOSE_TIMEOUT = 10

_BACKEND = "--rdzv_backend=c10d"


def elastic_presets(cluster: ClusterEnv, method: str) -> List[str]:
    """torchrun's flags for an elastic job (``cluster.min_hosts`` set, several hosts). Pure."""
    assert cluster.min_hosts is not None
    is_host = 1 if cluster.node_rank == 0 else 0
    conf = f"join_timeout={JOIN_TIMEOUT},last_call_timeout={LAST_CALL},close_timeout={CLOSE_TIMEOUT},is_host={is_host}"
    return [
        f"--nnodes={cluster.min_hosts}:{cluster.num_hosts}",
        f"--nproc_per_node={cluster.procs_per_host}",
        _BACKEND,
        f"--rdzv_endpoint={require_master(cluster, method)}:{cluster.torchrun_master_port}",
        f"--rdzv_id={cluster.job_id}",
        f"--rdzv_conf={conf}",
        "--max_restarts=0",
    ]


def is_elastic(argv: Tuple[str, ...]) -> bool:
    """Whether torchrun's command line is an elastic plan's."""
    return _BACKEND in argv and any(arg.startswith("--nnodes=") and ":" in arg for arg in argv)


def members_argv(argv: Tuple[str, ...], attempt: int, members: int) -> Tuple[str, ...]:
    """torchrun's command line for attempt ``attempt`` run by ``members`` hosts (see the module's docstring)."""
    out: List[str] = []
    done: Set[str] = set()  # torchrun's flags come first: the script's own arguments after them are never touched
    for arg in argv:
        if arg.startswith("--nnodes=") and ":" in arg and "nnodes" not in done:
            low, _, high = arg[len("--nnodes="):].partition(":")
            arg = f"--nnodes={max(int(low), members) if low.isdigit() else members}:{high}"
            done.add("nnodes")
        elif arg.startswith("--rdzv_id=") and "rdzv_id" not in done:
            arg = f"{arg}-a{attempt}"
            done.add("rdzv_id")
        out.append(arg)
    return tuple(out)
