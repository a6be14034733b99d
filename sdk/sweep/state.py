"""A sweep's record on disk: ``$MALAUNCH_HOME/sweeps/<sweep id>/sweep.json``, for every backend.

The record is what makes a sweep outlive the process that submitted it: ``ma-submit sweep status|wait|stop``
from another shell, and the detached driver that starts the remaining trials, all read it. Rules:

1. Written atomically (temporary file + rename + fsync, :func:`~malaunch.sdk.home.write_json_atomic`):
   a reader sees the old record or the new one, never half of one.
2. Changed only under the sweep's lock (``flock`` on ``<dir>/lock``), so the driver and a ``stop`` from another
   shell never submit a trial twice or lose a change.
3. Read defensively: a missing record is :class:`~malaunch.sdk.errors.SweepNotFound` (exit 4); a damaged one is
   one :class:`~malaunch.sdk.errors.BackendError` line naming the file, never a traceback or a hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping

from ..errors import BackendError, SweepNotFound
from ..home import close_id, file_lock, one_by_prefix, write_json_atomic

__all__ = [
    "RECORD_VERSION",
    "TRIAL_SKIPPED",
    "TRIAL_WAITING",
    "SweepPaths",
    "list_sweep_ids",
    "read_record",
    "resolve_sweep_id",
    "save_record",
    "sweep_lock",
]

RECORD_VERSION = 1
#: A trial not submitted yet.
TRIAL_WAITING = "WAITING"
#: A trial that will never be submitted (the sweep was stopped, or stop_on_failure).
TRIAL_SKIPPED = "SKIPPED"
_SWEEP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_NEEDED: Dict[str, Any] = {"id": str, "backend": str, "trials": list, "created_at": (int, float), "max_parallel": int}


@dataclass(frozen=True)
class SweepPaths:
    """Where one sweep's files are: ``<home>/sweeps/<sweep id>/``."""

    home: str
    sweep_id: str

    @property
    def folder(self) -> str:
        """The sweep's folder."""
        return os.path.join(self.home, "sweeps", self.sweep_id)

    @property
    def record(self) -> str:
        """``sweep.json``."""
        return os.path.join(self.folder, "sweep.json")

    @property
    def lock(self) -> str:
        """The lock file."""
        return os.path.join(self.folder, "lock")

    @property
    def driver_log(self) -> str:
        """The detached driver's own output (normally empty)."""
        return os.path.join(self.folder, "driver.log")


def list_sweep_ids(home: str) -> List[str]:
    """The sweeps under ``home``, sorted by id."""
    root = os.path.join(home, "sweeps")
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return sorted(n for n in names if _SWEEP_ID.match(n) and os.path.isdir(os.path.join(root, n)))


def resolve_sweep_id(home: str, prefix: str) -> str:
    """``prefix`` itself or the one sweep id starting with it."""
    if _SWEEP_ID.match(prefix) and os.path.isdir(SweepPaths(home, prefix).folder):
        return prefix
    found = one_by_prefix(prefix, list_sweep_ids(home), "sweep") if _SWEEP_ID.match(prefix) else None
    if found is not None:
        return found
    raise SweepNotFound(prefix, home, close=close_id(prefix, list_sweep_ids(home)))


def _damaged(paths: SweepPaths, why: str) -> BackendError:
    return BackendError(
        f"sweep {paths.sweep_id}: its record {paths.record} is damaged ({why}); its trials are still jobs: "
        "see 'ma-submit list'"
    )


def read_record(paths: SweepPaths) -> Dict[str, Any]:
    """The sweep's record, checked for the fields everything relies on (see the module docstring)."""
    try:
        with open(paths.record, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise SweepNotFound(paths.sweep_id, paths.home) from None
    except OSError as exc:
        raise BackendError(f"sweep {paths.sweep_id}: cannot read {paths.record} ({exc.strerror})") from None
    except ValueError as exc:
        raise _damaged(paths, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _damaged(paths, "not a JSON object")
    for key, kind in _NEEDED.items():
        if not isinstance(data.get(key), kind):
            raise _damaged(paths, f"no valid {key!r}")
    for position, trial in enumerate(data["trials"]):
        if not isinstance(trial, dict) or trial.get("index") != position or not isinstance(trial.get("state"), str):
            raise _damaged(paths, f"trial {position} is not valid")
        if not isinstance(trial.get("spec"), dict) or not isinstance(trial.get("params"), dict):
            raise _damaged(paths, f"trial {position} has no spec or params")
    return data


def save_record(paths: SweepPaths, record: Mapping[str, Any]) -> None:
    """Write the record atomically (rule 1)."""
    try:
        write_json_atomic(paths.record, record)
    except OSError as exc:
        raise BackendError(
            f"sweep {paths.sweep_id}: cannot write {paths.record} ({exc.strerror or exc}); free some space or "
            "check MALAUNCH_HOME"
        ) from None


@contextlib.contextmanager
def sweep_lock(paths: SweepPaths) -> Iterator[None]:
    """Hold the sweep's lock (rule 2); blocks while another process holds it."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(file_lock(paths.lock, 0o644))
        except FileNotFoundError:
            raise SweepNotFound(paths.sweep_id, paths.home) from None
        except OSError as exc:
            raise BackendError(f"sweep {paths.sweep_id}: cannot open its lock {paths.lock} ({exc.strerror})") from None
        yield
