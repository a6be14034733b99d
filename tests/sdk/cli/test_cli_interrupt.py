"""Ctrl-C at any moment of ``ma-submit``'s start (issue 43): it ends with ``ma-submit: error: interrupted`` and 130
(or, before Python holds SIGINT at all, dies of the signal as any program does, which a shell shows as 130), never
with a traceback of ours. The real console script, SIGINT sent at moments spread over a whole run, many times."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from typing import Dict, List, Tuple

import pytest
from sdkutil import VENV_BIN

#: What Python itself says when SIGINT lands in its own start-up, before the script's first line runs: while it
#: initialises (its streams, ``site`` with the environment's ``.pth`` files), looks at the script's path, sets it up
#: as ``__main__``, or on the script's line 0. Nothing of ``ma-submit`` ran yet.
_PYTHONS_OWN = re.compile(
    r"\AFatal Python error: init_"
    r"|\Apython: failed to set __main__.__loader__\n"
    r"|\AFailed checking if argv\[0\] is an import path entry\n"
    r"|\AError processing line \d+ of [^\n]*\.pth:\n"  # ``site`` running an installed .pth (an editable install's)
    r"|ma-submit\", line 0, in <module>\nKeyboardInterrupt\n\Z"
    r"|\AKeyboardInterrupt\n\Z"  # the bare word, no traceback: SIGINT in its start-up or its finalisation
    # SIGINT in ``site``'s imports inside importlib's module-lock callback: Python prints it as ignored and goes on
    r"|\AException ignored in: <function _get_module_lock\.<locals>\.cb at 0x[0-9a-f]+>\nTraceback \(most recent "
    r"call last\):\n  File \"<frozen importlib\._bootstrap>\", line \d+, in cb\nKeyboardInterrupt: \n"
)
_INTERRUPTED = "ma-submit: error: interrupted\n"


def _run(args: List[str], env: Dict[str, str], delay: float) -> Tuple[int, str, str]:
    proc = subprocess.Popen(
        [os.path.join(VENV_BIN, "ma-submit"), *args], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.mark.process
@pytest.mark.parametrize("args", [["list"], ["--help"], ["events", "nosuch"]], ids=" ".join)
def test_ctrl_c_at_any_moment_of_the_start_is_no_traceback(args: List[str], cli_env: Dict[str, str]) -> None:
    started = time.monotonic()
    whole = subprocess.run([os.path.join(VENV_BIN, "ma-submit"), *args], env=cli_env, capture_output=True, text=True)
    span = time.monotonic() - started
    tries = 30
    seen: List[Tuple[float, int]] = []
    for step in range(4 * tries):  # the moments spread over the run, again until one was inside ma-submit's start
        if step >= tries and any(code == 130 for _, code in seen):
            break
        delay = span * (step % tries) / tries
        code, _, err = _run(args, cli_env, delay)
        seen.append((round(delay, 3), code))
        if _PYTHONS_OWN.search(err):
            continue
        assert "Traceback" not in err, f"SIGINT {delay:.3f} s after the start:\n{err}"
        if code == 130:  # our one line, after whatever the verb had said by then (as a whole run says it)
            said = err[: -len(_INTERRUPTED)].strip("\n") if err.endswith(_INTERRUPTED) else None
            assert said is not None and whole.stderr.strip("\n").startswith(said), err
        else:  # not started yet (killed by the signal), ended before it came, or in the interpreter's teardown
            assert code in (-signal.SIGINT, whole.returncode), (delay, code, err)
    assert any(code == 130 for _, code in seen), seen  # the start was hit, not only before and after it
