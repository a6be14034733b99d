"""The entry script begins the job's guards (the watchdog, the cgroup entry) before it imports the run phase, for a
command line that asks for a run, and for no other: a refused command line, a help and a dry run start nothing.

What the shim process starts, and what it had imported by then, is recorded by a ``sitecustomize`` probe on
``PYTHONPATH`` that wraps ``subprocess.Popen`` in the shim's real process.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import pytest
from malaunch.entrypoint.start import asks_to_run
from shimutil import MARK, SCRIPTS, assert_nothing_left, marked_env, write_v10_table

JOB = str(SCRIPTS / "rank_job.py")
WATCHDOG = "malaunch.entrypoint.run.procs.watchdog"  # the module the watchdog's command line imports

_PROBE = '''
import json, os, sys
if os.environ.get("ENTRY_PROBE_OUT"):
    import subprocess
    _execute_child = subprocess.Popen._execute_child
    def _recorded(self, args, *rest, **options):
        record = {"pid": os.getpid(), "argv": [str(arg) for arg in args],
                  "run_phase_imported": "malaunch.entrypoint.runphase" in sys.modules}
        with open(os.environ["ENTRY_PROBE_OUT"], "a") as out:
            out.write(json.dumps(record) + "\\n")
        return _execute_child(self, args, *rest, **options)
    subprocess.Popen._execute_child = _recorded
if os.environ.get("ENTRY_PROBE_HOLD"):  # the run phase's import waits here (for a Ctrl-C) once it has begun
    import time
    class _Hold:
        def find_spec(self, name, path=None, target=None):
            if name == "malaunch.entrypoint.runphase":
                open(os.environ["ENTRY_PROBE_HOLD"], "w").close()
                time.sleep(120)
            return None
    sys.meta_path.insert(0, _Hold())
'''


Started = Tuple["subprocess.CompletedProcess[bytes]", List[Dict[str, Any]], str]


def _probed_env(tmp_path: Path, extra: Dict[str, str]) -> Dict[str, str]:
    """A marked environment for a one-server, one-device table, with the probe first on ``PYTHONPATH``."""
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(_PROBE)
    write_v10_table(tmp_path / "table.json", servers=1, devices=1)
    env = marked_env({"RANK_TABLE_FILE": str(tmp_path / "table.json"), "MALAUNCH_LOG_DIR": str(tmp_path / "logs"),
                      "ENTRY_PROBE_OUT": str(tmp_path / "started.jsonl"), **extra})  # fmt: skip
    env["PYTHONPATH"] = str(probe) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _started(tmp_path: Path) -> List[Dict[str, Any]]:
    out = tmp_path / "started.jsonl"
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def _shim(tmp_path: Path, args: Sequence[str]) -> Started:
    """Run ``python -m malaunch.entrypoint ARGS`` with the probe; what the shim process itself started, in order."""
    env = _probed_env(tmp_path, {})
    done = subprocess.run([sys.executable, "-m", "malaunch.entrypoint", *args], env=env, cwd=tmp_path,
                          capture_output=True, timeout=120, check=False)  # fmt: skip
    return done, _started(tmp_path), env[MARK]


@pytest.mark.process
def test_a_run_starts_its_watchdog_before_the_run_phase_is_imported(tmp_path: Path) -> None:
    done, records, mark = _shim(tmp_path, [JOB, "--lines", "1"])
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert_nothing_left(mark)
    shims = [record for record in records if WATCHDOG in " ".join(record["argv"])]
    assert len(shims) == 1, records
    shim_pid = shims[0]["pid"]
    own = [record for record in records if record["pid"] == shim_pid]
    assert WATCHDOG in " ".join(own[0]["argv"])  # the first process the shim starts
    assert own[0]["run_phase_imported"] is False  # begun before the run phase's imports
    ranks = [record for record in own if JOB in record["argv"]]
    assert len(ranks) == 1 and ranks[0]["run_phase_imported"] is True, own


@pytest.mark.process
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--no-such-option", JOB], id="an unknown option"),
        pytest.param([], id="no BOOT_FILE"),
        pytest.param(["--help"], id="help"),
        pytest.param(["--dry-run", JOB], id="a dry run"),
    ],
)
def test_a_command_line_that_asks_for_no_run_starts_no_process(tmp_path: Path, args: List[str]) -> None:
    done, records, mark = _shim(tmp_path, args)
    assert done.returncode in (0, 2), (done.returncode, done.stderr.decode(errors="replace"))
    assert records == []  # no watchdog, so no cgroup told to anyone either
    assert_nothing_left(mark)
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    ("args", "runs"),
    [
        (["job.py"], True),
        (["--grace-period", "3", "job.py", "--dry-run"], True),  # after BOOT_FILE it is the script's argument
        (["--dry-run", "job.py"], False),
        ([], False),
        (["--no-such-option", "job.py"], False),
        # a value is read with the environment, once the guards are up (a bad one ends them: nothing is left)
        (["--grace-period", "soon", "job.py"], True),
    ],
)
def test_asks_to_run_is_what_main_would_do_with_the_command_line(args: List[str], runs: bool) -> None:
    assert asks_to_run(args) is runs


@pytest.mark.process
def test_a_ctrl_c_while_the_run_phase_imports_ends_the_guards_in_one_line(tmp_path: Path) -> None:
    held = tmp_path / "held"
    env = _probed_env(tmp_path, {"ENTRY_PROBE_HOLD": str(held)})
    shim = subprocess.Popen([sys.executable, "-m", "malaunch.entrypoint", JOB, "--lines", "1"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not held.exists():  # the guards are begun and the run phase's import is held
            assert shim.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        assert [WATCHDOG in " ".join(record["argv"]) for record in _started(tmp_path)] == [True]
        shim.send_signal(signal.SIGINT)
        out, err = shim.communicate(timeout=60)
    finally:
        if shim.poll() is None:
            shim.kill()
            shim.wait()
    assert shim.returncode == 128 + signal.SIGINT
    assert err.decode().splitlines() == ["ma-entrypoint: error: stopped by SIGINT; nothing was started"], err
    assert out == b""
    assert_nothing_left(env[MARK])  # the watchdog was told done
    assert not (tmp_path / "logs").exists()
