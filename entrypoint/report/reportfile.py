"""The run report's file on disk: its room set aside before the run, and its write, atomic and never fatal.

:func:`reserve_room` sets :data:`REPORT_RESERVE` bytes aside beside the report file before the logs can fill the
disk; :func:`write_report` gives that room up and writes the JSON atomically, returning what went wrong instead of
raising. The shim's other JSON status files (a host's ``attempt.json`` and ``prepare.json``, host 0's
``recovery.json``) are written the same way. A module apart from :mod:`.report` (the run's records and its
texts), so that a status file's writer and reader (:mod:`..run.attempt_status`, :mod:`..run.prepare_status`, both
re-exported to the SDK by ``public.py``) load no records of a run.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Dict, Optional

from .atomicfile import write_atomic

__all__ = ["REPORT_RESERVE", "reserve_room", "write_report"]

REPORT_RESERVE = 16 << 10  # room kept beside the report file during the run: a report with a long tail fits


def _reserve_path(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.reserve")


def reserve_room(path: str) -> None:
    """Set aside :data:`REPORT_RESERVE` bytes beside the report file ``path``, whole or not at all, given up when
    the report is written (:func:`write_report`): a run that fills the disk still gets its report."""
    reserve = _reserve_path(path)
    try:
        with open(reserve, "wb") as handle:
            handle.write(bytes(REPORT_RESERVE))
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(reserve)


def write_report(path: str, data: Dict[str, Any]) -> Optional[str]:
    """Write ``data`` as JSON to ``path`` atomically; returns None, or a message saying why it could not."""

    with contextlib.suppress(OSError):
        os.unlink(_reserve_path(path))  # its room is the report's now
    try:
        write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode=0o644, prefix=".report-")
        return None
    except (OSError, TypeError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        return (
            f"cannot write the run report to {path!r}: {reason}; "
            "point MALAUNCH_REPORT_FILE (or --report-file) at a writable path"
        )
