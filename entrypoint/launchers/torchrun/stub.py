"""The real attempt counters for torchrun's workers when the shim drives the attempts.

With ``MA_MAX_RESTARTS > 0`` each attempt is a torchrun of its own with ``--max_restarts=0``
(:mod:`...run.attempts`), and torchrun writes ``TORCHELASTIC_RESTART_COUNT=0`` and ``TORCHELASTIC_MAX_RESTARTS=0``
into every worker's environment. So torchrun is started with ``--no_python`` and each worker's command is
:data:`STUB`, run by the same interpreter: it keeps torchrun's own count in ``MALAUNCH_TORCHRUN_RESTART_COUNT``
(the watch groups deaths by it), puts the shim's attempt and ``MA_MAX_RESTARTS`` into the two variables and
``exec``s the command torchrun would have run (``python -u SCRIPT ARGS``, or the boot file itself under
``--no_python``). Same pid, no extra process: the worker stays torchrun's direct child. Standard library only.

Before the ``exec`` it leaves the ``RANK`` torchrun gave the worker in :data:`RANK_NOTE`, beside the worker's
error file (``<run>/attempt_<K>/<local rank>/``): in an elastic attempt the rendezvous numbers the hosts in an
order of its own, so a worker's rank need not be its host's place; the shim names its log and console prefix
by the rank the script sees (:mod:`.logs`).
"""

import os
from typing import Optional, Tuple

__all__ = ["LAUNCHER_COUNT", "RANK_NOTE", "STUB", "attempt_argv", "noted_rank", "stub_argv"]

LAUNCHER_COUNT = "MALAUNCH_TORCHRUN_RESTART_COUNT"
#: The file, in a worker's folder of torchrun's log dir, that holds the ``RANK`` the worker's script sees.
RANK_NOTE = "malaunch-rank"

STUB = (
    "import os,sys;e=os.environ;a=sys.argv;"
    f"e['{LAUNCHER_COUNT}']=e.get('TORCHELASTIC_RESTART_COUNT','');"
    "e['TORCHELASTIC_RESTART_COUNT']=a[1];e['TORCHELASTIC_MAX_RESTARTS']=a[2];"
    "f=e.get('TORCHELASTIC_ERROR_FILE','');r=e.get('RANK','')\n"
    "if f and r.isdigit():\n"
    " try:\n"
    f"  with open(os.path.join(os.path.dirname(f),'{RANK_NOTE}.tmp'),'w') as n:n.write(r)\n"
    f"  os.replace(n.name,os.path.join(os.path.dirname(f),'{RANK_NOTE}'))\n"
    " except OSError:pass\n"
    "os.execvp(a[3],a[3:])"
)

_NO_PYTHON = ("--no_python", "--no-python")
_MODULE = ("-m", "--module")


def stub_argv(argv: Tuple[str, ...], script_at: int, attempt: int, max_restarts: int) -> Tuple[str, ...]:
    """torchrun's ``argv`` (``python -m <torchrun> FLAGS SCRIPT ARGS``, ``SCRIPT`` at ``script_at``) with
    ``--no_python`` and :data:`STUB` in front of the command torchrun would have started. Pure."""
    interpreter, flags, command = argv[0], argv[3:script_at], argv[script_at:]
    if not any(flag in _NO_PYTHON for flag in flags):  # torchrun's own: [sys.executable, -u, (-m), SCRIPT, ...]
        module = ("-m",) if any(flag in _MODULE for flag in flags) else ()
        command = (interpreter, "-u", *module, *command)
    flags = tuple(flag for flag in flags if flag not in _MODULE + _NO_PYTHON)  # ours comes once, below
    stub = (interpreter, "-I", "-S", "-c", STUB, str(attempt), str(max_restarts))
    return (*argv[:3], *flags, "--no_python", *stub, *command)


def attempt_argv(
    argv: Tuple[str, ...], script_at: Optional[int], attempt: int, max_restarts: int
) -> Tuple[str, ...]:
    """torchrun's command for one attempt the shim drives: ``--max_restarts=0`` right after the module name (the
    shim's loop makes every attempt, torchrun none on its own), its workers started through :data:`STUB`, which
    gives them the real attempt counters (torchrun would give them 0). Pure."""
    if len(argv) < 3 or argv[1] != "-m":
        return argv
    if script_at is not None:
        argv = stub_argv(argv, script_at, attempt, max_restarts)
    return (*argv[:3], "--max_restarts=0", *argv[3:])


def noted_rank(folder: str) -> Optional[int]:
    """The ``RANK`` a worker's start noted in its folder of torchrun's log dir (:data:`RANK_NOTE`); None before
    the worker started, or without the stub."""
    try:
        with open(os.path.join(folder, RANK_NOTE), encoding="ascii") as note:
            text = note.read(32).strip()
    except (OSError, ValueError):
        return None
    return int(text) if text.isascii() and text.isdigit() else None
