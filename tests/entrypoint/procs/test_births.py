"""Birth records (run/procs/births.py): msrun's ``python`` in the plan's birth folder records the rank of the process
it runs in, keyed by pid and start time, and then runs the real interpreter with the same pid, the same arguments
and the same environment; reading a record never crashes and never waits.

Real processes: the plan's own file, written as the supervisor writes it, run the way msrun runs ``python``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from malaunch.entrypoint.contract.cluster_env import parse_cluster_env
from malaunch.entrypoint.launchers.msrun import MsrunLauncher, birth_wrapper
from malaunch.entrypoint.plan.inputs import LaunchInputs
from malaunch.entrypoint.plan.launch_plan import LaunchPlan
from malaunch.entrypoint.run.output import prepare_folders
from malaunch.entrypoint.run.procs import births, proctree
from test_worker_watch import msrun_plan

pytestmark = pytest.mark.process

# What a worker sees of itself, and what a "python helper.py" it starts sees (as JSON lines on stdout).
PROBE = textwrap.dedent(
    """
    import json, os, subprocess, sys
    def me():
        return {"argv0": open("/proc/self/cmdline", "rb").read().split(b"\\0")[0].decode(), "argv": sys.argv,
                "executable": sys.executable, "prefix": sys.prefix, "base_prefix": sys.base_prefix,
                "site": [p for p in sys.path if p.endswith("site-packages")], "pid": os.getpid(),
                "environ": open("/proc/self/environ", "rb").read().decode("utf-8", "replace")}
    print(json.dumps(me()), flush=True)
    if len(sys.argv) > 1 and sys.argv[1] == "helper":
        subprocess.run(["python", __file__], check=True)
    """
)


def _run(path: str, tmp_path: Path, *args: str) -> List[Dict[str, Any]]:
    """``python probe.py ARGS`` started as msrun starts it (from PATH ``path``, with a rank in its environment)."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    env = {"PATH": path, "RANK_ID": "1", "MS_NODE_ID": "1", "MS_ROLE": "MS_WORKER", "LANG": "C", "HOME": str(tmp_path)}
    out = subprocess.run(["python", str(probe), *args], env=env, cwd=tmp_path, capture_output=True, check=True,
                         text=True).stdout  # fmt: skip
    return [json.loads(line) for line in out.splitlines()]


def test_the_plan_puts_the_birth_folder_first_on_msruns_path_and_its_python_in_the_files(tmp_path: Path) -> None:
    plan = msrun_plan(tmp_path)
    folder = str(tmp_path / "logs" / ".births")
    assert plan.births == folder
    assert plan.processes[0].env["PATH"] == os.pathsep.join([folder, os.path.dirname(sys.executable),
                                                             os.environ.get("PATH", "/usr/bin:/bin")])  # fmt: skip
    assert plan.files == {os.path.join(folder, "python"): birth_wrapper(sys.executable)}
    assert LaunchPlan.from_json(json.loads(plan.render())) == plan


def test_a_worker_sees_exactly_what_it_saw_without_the_birth_folder(tmp_path: Path) -> None:
    """argv[0], sys.executable, the venv's prefix and site-packages, PATH, the whole environment; and a worker's own
    ``python helper.py`` is the real interpreter, with no record of its own."""
    plan = msrun_plan(tmp_path)
    prepare_folders(plan)
    assert plan.births is not None
    with_births = _run(plan.processes[0].env["PATH"], tmp_path, "helper")
    without = _run(plan.processes[0].env["PATH"].split(os.pathsep, 1)[1], tmp_path, "helper")
    for seen in (with_births, without):
        for probe in seen:
            probe.pop("pid")
    assert with_births == without
    worker, helper = with_births
    assert (worker["argv0"], worker["executable"], worker["prefix"]) == ("python", sys.executable, sys.prefix)
    assert worker["site"]
    assert [helper[key] for key in ("argv0", "executable", "prefix", "site")] == [
        worker[key] for key in ("argv0", "executable", "prefix", "site")
    ]
    records = [name for name in os.listdir(plan.births) if name[0].isdigit()]
    assert len(records) == 1  # the worker's: the helper was started with the PATH the worker got


def test_the_record_names_the_process_its_parent_and_its_rank(tmp_path: Path) -> None:
    plan = msrun_plan(tmp_path)
    prepare_folders(plan)
    assert plan.births is not None
    probe = tmp_path / "probe.py"
    probe.write_text("import os, sys; print(os.getpid(), os.getppid(), flush=True); sys.exit(7)\n")
    env = {"PATH": plan.processes[0].env["PATH"], "RANK_ID": "5", "MS_NODE_ID": "5", "SECRET_THING": "x"}
    proc = subprocess.Popen(["python", str(probe)], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pid, ppid = (int(word) for word in proc.stdout.readline().split())
    info = proctree.read_info(pid)
    assert info is not None and pid == proc.pid and ppid == os.getpid()
    me = proctree.read_info(os.getpid())
    assert me is not None
    assert proc.wait() == 7  # the interpreter's own code: exec kept the pid msrun waits for
    birth = births.read_birth(plan.births, pid, info.start)
    assert birth == births.Birth(pid, info.start, os.getpid(), me.start, b"RANK_ID=5\0MS_NODE_ID=5\0")
    assert births.births_of(plan.births, pid) == [birth]
    assert births.read_birth(plan.births, pid, info.start + 1) is None  # another process of that number


def test_a_worker_with_a_large_environment_runs_as_without_the_folder(tmp_path: Path) -> None:
    """An environment of 1.5 MiB (twelve variables of 128 KiB, less than the kernel's limit of a quarter of the
    stack) is read back whole and given to the real interpreter; the worker runs and has every variable."""
    plan = msrun_plan(tmp_path)
    prepare_folders(plan)
    assert plan.births is not None
    probe = tmp_path / "probe.py"
    probe.write_text("import os, sys; print(sum(len(v) for k, v in os.environ.items() if k.startswith('BIG_')))\n")
    big = {f"BIG_{index}": "x" * (128 * 1024 - 16) for index in range(12)}
    env = {"PATH": plan.processes[0].env["PATH"], "RANK_ID": "2", "MS_NODE_ID": "2", **big}
    done = subprocess.run(["python", str(probe)], env=env, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert int(done.stdout) == sum(len(value) for value in big.values())
    assert [name for name in os.listdir(plan.births) if name[0].isdigit()]  # and it left its record


def _write(folder: Path, name: str, data: bytes) -> None:
    (folder / name).write_bytes(data)


def _whole(pid: int, start: int, boot: bytes) -> bytes:
    return b"\0".join([births.MAGIC, b"boot=" + boot, b"pid=%d" % pid, b"start=%d" % start, b"ppid=1",
                       b"pstart=2", b"RANK_ID=3"]) + b"\0"  # fmt: skip


def test_a_damaged_record_gives_nothing_and_never_waits(tmp_path: Path) -> None:
    boot = Path("/proc/sys/kernel/random/boot_id").read_bytes().strip()
    good = _whole(10, 20, boot)
    assert births._parse(good) == births.Birth(10, 20, 1, 2, b"RANK_ID=3\0")
    _write(tmp_path, "10-20", good)
    assert births.read_birth(str(tmp_path), 10, 20) is not None
    damaged = {
        "11-20": good[:-1],  # cut short: no final NUL
        "12-20": good[: len(good) // 2],
        "13-20": b"\xff\xfe garbage",
        "14-20": b"",
        "15-20": _whole(15, 20, b"another-boot"),
        "16-20": _whole(99, 20, boot),  # names another process than its file
        "17-20": good.replace(b"start=20", b"start=x"),
        "18-20": good + b"RANK=1\0" * 1000,  # bigger than any record
    }
    for name, data in damaged.items():
        _write(tmp_path, name, data)
    os.mkfifo(tmp_path / "19-20")  # nobody ever writes it: opening it to read would wait forever
    os.symlink(tmp_path / "10-20", tmp_path / "20-20")
    os.mkdir(tmp_path / "21-20")
    result: List[Tuple[int, object]] = []

    def read_all() -> None:
        for pid in range(11, 23):
            result.append((pid, births.read_birth(str(tmp_path), pid, 20)))
            result.append((pid, births.births_of(str(tmp_path), pid) or None))

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    reader.join(30)
    assert not reader.is_alive(), "reading a record waited"
    assert [found for _pid, found in result if found is not None] == []
    assert births.births_of(str(tmp_path / "missing"), 10) == []


def test_a_record_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    """A birth folder gone: no record, no exception, no temporary file left (the process then runs on)."""
    assert births.record_birth(str(tmp_path / "gone"), b"RANK_ID=1\0") is None
    assert births.record_birth(str(tmp_path), b"RANK_ID=1\0") is not None
    assert [name for name in os.listdir(tmp_path) if name.startswith(".")] == []


def test_a_birth_folder_named_otherwise_on_path_is_never_run_again(tmp_path: Path) -> None:
    """PATH reaching the folder by another spelling (a link to it, a trailing slash): the ``python`` found after it
    is still the real one, never the folder's own again (which would run itself forever)."""
    folder = tmp_path / "births"
    folder.mkdir()
    (folder / "python").write_text(birth_wrapper(sys.executable) or "")
    (folder / "python").chmod(0o755)
    (tmp_path / "alias").symlink_to(folder)
    path = os.pathsep.join([f"{folder}/", str(tmp_path / "alias"), str(folder), os.path.dirname(sys.executable)])
    done = subprocess.run(["python", "-c", "import os, sys; print(sys.executable, os.environ['PATH']); sys.exit(4)"],
                          env={"PATH": path}, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout.split(), done.stderr) == (4, [sys.executable, os.path.dirname(sys.executable)],
                                                                   "")  # fmt: skip


def test_without_a_python_after_the_folder_the_process_says_so_and_exits_127(tmp_path: Path) -> None:
    folder = tmp_path / "births"
    folder.mkdir()
    (folder / "python").write_text(birth_wrapper(sys.executable) or "")
    (folder / "python").chmod(0o755)
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run(["python", "-c", "pass"], env={"PATH": f"{folder}:{empty}"}, capture_output=True, text=True)
    assert done.returncode == 127
    assert done.stderr.startswith(f"python: cannot run the python on PATH after {folder}: "), done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("interpreter", ["/opt/my python/bin/python", "/opt/" + "x" * 130 + "/python", "/a\tb"])
def test_an_interpreter_that_cannot_start_a_shebang_line_gets_no_birth_folder(interpreter: str) -> None:
    assert birth_wrapper(interpreter) is None
    env = {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2"}
    inputs = LaunchInputs(boot_file="/code/train.py", boot_args=(), interpreter=interpreter, cwd="/work",
                          hostname="box", path_env="/usr/bin", master_ip="127.0.0.1",
                          python_dir="/opt/py/bin")  # fmt: skip
    plan = MsrunLauncher().plan(parse_cluster_env(env), inputs)
    assert (plan.births, plan.files, plan.processes[0].env["PATH"]) == (None, {}, "/opt/py/bin:/usr/bin")
    assert len(plan.notes) == 1 and "cannot start a #! line" in plan.notes[0] and "pid only" in plan.notes[0]


def test_prune_keeps_the_records_of_the_current_launchers_and_removes_the_rest(tmp_path: Path) -> None:
    """What an ended attempt left (records of another launcher, damaged ones, a temporary file its dead writer
    left) goes; the records of the current launchers, a temporary file a live process is writing, the folder's
    ``python`` and anything not named as a record stay."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_bytes().strip()
    mine = proctree.read_info(os.getpid())
    assert mine is not None
    kept = {"10-20": _whole(10, 20, boot), "python": b"#!/bin/sh\n", "notes.txt": b"x",
            f".{os.getpid()}-{mine.start}.tmp": b"half"}  # fmt: skip
    gone = {"11-20": _whole(11, 20, boot).replace(b"ppid=1", b"ppid=7"),  # an earlier attempt's launcher
            "12-20": _whole(12, 20, boot).replace(b"pstart=2", b"pstart=3"),  # a launcher of that pid, earlier
            "13-20": _whole(13, 20, boot)[:-1],  # damaged: never readable
            "14-20": _whole(14, 20, b"another-boot"),
            ".999999999-20.tmp": b"half"}  # fmt: skip
    for name, data in {**kept, **gone}.items():
        _write(tmp_path, name, data)
    os.mkdir(tmp_path / "15-20")
    assert births.prune(str(tmp_path), {1: 2}) == len(gone)
    assert sorted(os.listdir(tmp_path)) == sorted([*kept, "15-20"])
    assert births.read_birth(str(tmp_path), 10, 20) is not None
    assert births.prune(str(tmp_path / "missing"), {1: 2}) == 0  # no folder: nothing, no error
