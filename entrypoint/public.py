"""What the SDK may use of the shim: the one seam between ``malaunch.sdk`` and ``malaunch.entrypoint``.

The SDK imports the shim only through this module (``tests/entrypoint/shape/test_layering.py`` fails on any other
``sdk/`` import of a shim module), so the shim's folders can move without the SDK following them. Everything
here is re-exported from its one home in the shim:

- the environment contract: ``VARIABLES`` (the table), ``Name`` (a variable's name), ``int_bounds`` (a whole
  number variable's bounds), ``seconds_bounds`` and ``seconds_default`` (a seconds variable's bounds and default);
- failure classes: ``CLASSES``, ``RETRYABLE``, ``SIGNAL``, ``Classification``, ``classify_exit``, and
  ``signal_in_any_code`` (the signal an exit code stands for); ``describe_cause``, the one line for a
  multi-host job's root cause (a report's ``job_cause``);
- files: ``write_atomic`` (a temporary file renamed over the target);
- output: ``write_all``, ``OutputCut`` and ``StreamClosed`` (stdout written in full, or how much got through);
- checkpoints: a checkpoint folder's rows (``list_checkpoints``, ``CheckpointRow``; ``checkpoint_rows`` and
  ``found_of`` for a bucket's objects) and the complete checkpoint a new job would start from (``resume_point``),
  read as the shim reads the folder;
- processes: ``ProcKey`` and the ``/proc`` readers and proven signalling of the process tree, ``set_subreaper``;
- progress and recovery: each rank's progress records (``PROGRESS_DIR_NAME``, ``RankProgress``, ``read_progress``,
  ``newest_attempt``, ``JobProgress``, ``summarize``, ``first_progress``) and the time to recover after each
  failed attempt (``Recovery``, ``recovery_file``, ``read_recovery``, ``recovery_lines``, ``with_first_progress``),
  and the same as the shim writes them in its console's progress and recovery lines, for a reader that sees only
  the job's log (``read_status_lines``, ``LogRecords``, ``PROGRESS_EVERY``);
- restarts: the attempt file the shim announces each attempt in (``attempt_file``, ``read_attempt``), and the file
  it notes what it learns of the job's hosts in as it happens (``events_file``, ``read_events``);
- prepare steps: what a host's prepare steps are doing (``prepare_line``);
- notifications: the events, the payload and its signature, as host 0's shim sends them (``NOTIFY_EVENTS``,
  ``DEFAULT_NOTIFY_EVENTS``, ``DEFAULT_NOTIFY_TIMEOUT``, ``SIGNATURE_HEADER``, ``notify_payload``, ``sign``,
  ``target_label``, and ``redirect_reason``: a webhook's redirect is not followed, and this says so).
"""

from __future__ import annotations

from .contract import VARIABLES, Name, int_bounds, seconds_bounds, seconds_default
from .contract.checkpoint_list import CheckpointRow, checkpoint_rows, found_of, list_checkpoints, resume_point
from .contract.signals import signal_in_any_code
from .report.atomicfile import write_atomic
from .report.causetext import describe_cause
from .report.failure_class import CLASSES, RETRYABLE, SIGNAL, Classification, classify_exit
from .report.streams import OutputCut, StreamClosed, write_all
from .run.attempt_status import attempt_file, events_file, read_attempt, read_events
from .run.notify import (
    DEFAULT_NOTIFY_EVENTS,
    DEFAULT_NOTIFY_TIMEOUT,
    NOTIFY_EVENTS,
    notify_payload,
    redirect_reason,
    target_label,
)
from .run.prepare_status import prepare_line
from .run.procs.proctree import (
    ProcKey,
    descendants,
    env_has,
    env_values,
    is_alive,
    pids_with_env,
    read_environ,
    read_info,
    read_usage,
    signal_proven,
    snapshot,
)
from .run.procs.selfproc import set_subreaper
from .run.progress import (
    PROGRESS_DIR_NAME,
    JobProgress,
    RankProgress,
    first_progress,
    newest_attempt,
    read_progress,
    summarize,
)
from .run.recovery import Recovery, read_recovery, recovery_file, recovery_lines, with_first_progress
from .run.signature import SIGNATURE_HEADER, sign
from .run.statuslines import PROGRESS_EVERY, LogRecords, read_status_lines

__all__ = [
    "CLASSES",
    "DEFAULT_NOTIFY_EVENTS",
    "DEFAULT_NOTIFY_TIMEOUT",
    "NOTIFY_EVENTS",
    "PROGRESS_DIR_NAME",
    "PROGRESS_EVERY",
    "RETRYABLE",
    "SIGNAL",
    "SIGNATURE_HEADER",
    "VARIABLES",
    "CheckpointRow",
    "Classification",
    "JobProgress",
    "LogRecords",
    "Name",
    "OutputCut",
    "ProcKey",
    "RankProgress",
    "Recovery",
    "StreamClosed",
    "attempt_file",
    "checkpoint_rows",
    "classify_exit",
    "descendants",
    "describe_cause",
    "env_has",
    "env_values",
    "events_file",
    "first_progress",
    "found_of",
    "int_bounds",
    "is_alive",
    "list_checkpoints",
    "newest_attempt",
    "notify_payload",
    "pids_with_env",
    "prepare_line",
    "read_attempt",
    "read_environ",
    "read_events",
    "read_info",
    "read_progress",
    "read_recovery",
    "read_status_lines",
    "read_usage",
    "recovery_file",
    "recovery_lines",
    "redirect_reason",
    "resume_point",
    "seconds_bounds",
    "seconds_default",
    "set_subreaper",
    "sign",
    "signal_in_any_code",
    "signal_proven",
    "snapshot",
    "summarize",
    "target_label",
    "write_all",
    "with_first_progress",
    "write_atomic",
]
