"""What planning starts from: :class:`LaunchInputs` (facts gathered before planning) and :class:`Needs`.

A launcher says what it needs gathered (:class:`Needs`: a rank table, this host's server in it, the master's
address, a directory whose ``python`` is the interpreter); :mod:`.prepare` gathers exactly that, with deadlines,
and hands the result to the launcher's pure ``plan()`` as :class:`LaunchInputs`.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

from .rank_table import RankTable

__all__ = ["LaunchInputs", "Needs"]


class Needs(NamedTuple):
    """What a launcher needs gathered before it can plan (all False: the boot file and the interpreter only)."""

    rank_table: bool = False  # read (or wait for) the rank table
    server: bool = False  # find this host's server in it
    master: bool = False  # the master's address must be known (resolved in a real run)
    master_ip: bool = False  # ... and the plan gets it as an IP (``LaunchInputs.master_ip``)
    python_dir: bool = False  # a directory whose ``python`` is the interpreter (a launcher that starts ``python``)


class LaunchInputs(NamedTuple):
    """Facts gathered by ``main`` before planning (the only non-environment inputs)."""

    boot_file: str  # absolute path
    boot_args: Tuple[str, ...]
    interpreter: str  # the Python that runs the boot file and the launchers
    cwd: str  # the shim's working directory
    hostname: str  # this host's name for reports
    path_env: str  # the PATH the shim inherited
    rank_table: Optional[RankTable] = None
    rank_table_path: Optional[str] = None  # resolved file (also for msrun's rank-table mode)
    server_index: Optional[int] = None
    master_ip: Optional[str] = None  # resolved master address (msrun needs an IP)
    python_dir: Optional[str] = None  # a directory whose ``python`` is ``interpreter`` (msrun starts ``python``)
    notes: Tuple[str, ...] = ()  # facts found while gathering, shown by --dry-run
