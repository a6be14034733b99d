"""What the local backend's collaborators share: where its jobs live, the environment it was made with, how it runs
hosts, and the runners this process started (its own children, reaped here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Mapping, NamedTuple, Optional

if TYPE_CHECKING:
    import subprocess

__all__ = ["LocalSetup"]


class LocalSetup(NamedTuple):
    """``home``: the jobs' home; ``environ``: the environment the backend was made with (a submitted job's runner
    gets it); ``python``: the interpreter each host runs; ``network_mode``: ``auto``, loopback or netns;
    ``capacity_setting``: ``local.capacity`` of the profile (``MALAUNCH_LOCAL_CAPACITY`` beats it); ``runners``:
    job id -> the runner this process started (its child, polled so it does not linger as a zombie)."""

    home: str
    environ: Mapping[str, str]
    python: str
    network_mode: str
    capacity_setting: Optional[str]
    runners: Dict[str, subprocess.Popen[bytes]]
