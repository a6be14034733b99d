"""A Ctrl-C that lands where Python cannot raise it (a weak reference's callback, as the import system runs when a
module's lock goes; a finaliser) ends ``ma-submit`` as any other does, instead of being printed as ``Exception
ignored in: ...`` with a traceback and lost (seen once in a full run: SIGINT 39 ms into ``ma-submit list``, which
then said ``no jobs`` and exited 0). Deterministic: the callback raises ``KeyboardInterrupt`` itself."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys, time, weakref
from malaunch.sdk.cli.entry import interrupts_kept
if sys.argv[1] == "kept":
    sys.unraisablehook = interrupts_kept(sys.unraisablehook)

class Lock:
    pass

def gone(ref):
    raise KeyboardInterrupt  # as SIGINT's handler does when the signal lands in the callback

lock = Lock()
ref = weakref.ref(lock, gone)
try:
    del lock
    for _ in range(int(sys.argv[2])):  # the interrupt comes again 10 ms after the callback
        time.sleep(0.01)
    print("went on")
except KeyboardInterrupt:
    print("interrupted")
"""


def _run(mode: str, ticks: int) -> subprocess.CompletedProcess[str]:
    """The probe, going on for up to ``ticks`` x 10 ms after the callback."""
    return subprocess.run([sys.executable, "-c", PROBE, mode, str(ticks)], capture_output=True, text=True, timeout=60)


def test_a_ctrl_c_in_a_callback_is_raised_again_where_the_run_can_end() -> None:
    # up to 30 s for the interrupt sent again 10 ms after the callback: a deadline, which the whole suite on 2 cores
    # once stretched past 5 s (the probe then said "went on" and the interrupt landed in its teardown)
    kept = _run("kept", 3000)
    assert (kept.returncode, kept.stdout, kept.stderr) == (0, "interrupted\n", "")


def test_without_the_hook_python_prints_it_and_goes_on() -> None:
    # what the hook is for: Python's own handling (the probe would pass without the hook otherwise)
    bare = _run("bare", 20)
    assert bare.stdout == "went on\n" and "Exception ignored in" in bare.stderr, bare
