"""Run the real shim over a matrix of inputs and record what it shows the world, as golden files.

``python tests/entrypoint/golden/capture.py --write DIR [CASE ...]`` writes ``DIR/<case>.json`` for every case
(or the cases named); ``--list`` prints the case names. ``tests/entrypoint/test_golden.py`` runs each case and
compares it byte for byte with ``tests/entrypoint/golden/expected/<case>.json``.

A case is the shim (``python -m malaunch.entrypoint``) started in a fresh work folder (the boot file, a copy of
the rank table it needs and ``ready/`` are there) with a clean environment: ``PATH`` (this Python's folder
first), ``LANG=C.UTF-8``, ``HOME`` (in the work folder), ``GOLDEN_READY`` and the case's variables. Recorded:
the arguments, the case's variables, the exit code, stdout and stderr (as lists of lines: joined with ``\\n``
they give the bytes back) and, for real runs, ``report.json``.

Kinds of case:
- ``dry``: ``ma-entrypoint --dry-run``, every method and variant (the plan JSON on stdout);
- ``run``: a real run of ``golden/job.py`` (see its docstring: ranks print in a fixed way, fail only when every
  rank has started, and mark themselves ready); ``sigterm`` runs SIGTERM the shim once every rank is ready;
- ``bad``: input the shim refuses (exit 2 and one message), no rank ever starts.

Normalisation, only where the output is variable by nature (everything else is kept byte for byte):
1. paths: the case's work folder (``/tmp/golden-XXXXXXXX``, see :func:`capture`) -> ``<WORK>``, this Python
   (``sys.executable``) -> ``<PYTHON>``, its folder -> ``<BIN>``; the machine's host name
   (``socket.gethostname()``, as a whole word) -> ``<HOST>``; torchrun's run folder under its ``--log_dir``
   (``<uuid>_<random>``, made by ``tempfile.mkdtemp``) -> ``<RUN>``;
2. ports: real torchrun/msrun runs need a free port, picked at run time -> ``<PORT>`` (dry runs use fixed ports);
3. pids: ``"pid": N`` in report.json, ``pid N``, and torchrun's ``pid: N`` and ``process N`` on the console
   -> ``<PID>``;
4. times: ``"duration"`` in report.json and ``after N.Ns`` on the console -> ``<DURATION>``; the time stamp,
   pid and thread id at the start of torchrun's (glog) and MindSpore's (``ME(pid:tid,...)``) log lines;
5. order across concurrent sources: the shim relays every rank and the launcher concurrently (a log file never
   waits for the console), so within each run of consecutive console lines that carry a source prefix
   (``[rank N] ``, ``[torchrun] ``, ``[msrun] ``) the lines are grouped by prefix, keeping each source's own
   order (a stable sort). The shim's own lines (``[ma-entrypoint] ...``, the failure summary) are never moved:
   they come before the first rank starts or after the last one is relayed;
6. launcher chatter when the launcher is torn down: in runs where a rank fails or the shim is signalled,
   torchrun's and msrun's own console lines (``[torchrun] ``, ``[msrun] ``) are left out: how far the launcher
   gets with its messages (``Sending process N closing signal``, ``Distributed job is spawned``) before it is
   ended is a race by nature. They stay in the successful runs, and in the launcher's log file;
7. known races on today's main: fields named in a case's ``unstable`` become ``<UNSTABLE>`` (see ``_UNSTABLE``
   for each and why; each is a finding to fix, after which its entry goes).
Run the capture twice and diff the folders to check that a change to a case keeps it deterministic.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
TABLES = HERE.parent / "data" / "ranktables"
JOB = HERE / "job.py"
WORLD = 2  # ranks of every real run (two devices, one host)


class Case(NamedTuple):
    """One capture: its kind (``dry``, ``run``, ``sigterm``, ``bad``), the shim's arguments and variables."""

    name: str
    kind: str
    env: Mapping[str, str]
    args: Tuple[str, ...] = ("train.py",)
    table: str = ""  # a rank table of tests/entrypoint/data/ranktables (or GENERATED) copied to <WORK>/table.json
    port: str = ""  # the variable that gets a free port at run time (real torchrun/msrun runs)
    unstable: Tuple[str, ...] = ()  # report.json fields that race on today's main (rule 7), e.g. root_cause.source
    race: str = ""  # why the whole case differs from run to run on today's main (see RACES); "" when it does not


#: A v1.0 table with one server, 127.0.0.1, and two devices (the real fan-out runs)...
LOCAL_TABLE = {
    "version": "1.0",
    "server_count": "1",
    "server_list": [
        {
            "server_id": "127.0.0.1",
            "device": [{"device_id": str(i), "device_ip": f"192.0.2.{i}", "rank_id": str(i)} for i in range(2)],
        }
    ],
    "status": "completed",
}
#: ...and one whose second server holds only devices 4-7 of its eight (a device subset).
SUBSET_TABLE = {
    "version": "1.0",
    "server_count": "2",
    "server_list": [
        {
            "server_id": "10.0.0.1",
            "device": [{"device_id": str(i), "device_ip": f"192.0.2.{i}", "rank_id": str(i)} for i in range(4)],
        },
        {
            "server_id": "10.0.0.2",
            "device": [
                {"device_id": str(4 + i), "device_ip": f"192.0.3.{i}", "rank_id": str(4 + i)} for i in range(4)
            ],
        },
    ],
    "status": "completed",
}
GENERATED: Dict[str, Any] = {"local.json": LOCAL_TABLE, "subset.json": SUBSET_TABLE}
RT = "<WORK>/table.json"  # RANK_TABLE_FILE of the cases with a table ("<WORK>" is replaced when run)
HOSTS2 = "host-a,host-b"


def _dry(name: str, env: Mapping[str, str], table: str = "", args: Tuple[str, ...] = ("train.py",)) -> Case:
    return Case(name, "dry", env, ("--dry-run", *args), table)


def _fanout_dry() -> List[Case]:
    two = {"MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": RT, "MA_NUM_HOSTS": "2", "MA_NUM_GPUS": "4"}
    return [
        _dry("dry-ranktable-v1_0-by-ip", {**two, "MA_CURRENT_HOST_IP": "10.155.111.141", "VC_TASK_INDEX": "1",
                                          "VC_WORKER_HOSTS": HOSTS2}, "v1_0_2x4.json"),
        _dry("dry-ranktable-v1_0-by-index-no-master", {**two, "VC_TASK_INDEX": "1"}, "v1_0_2x4.json"),
        _dry("dry-ranktable-v1_0-vj-master-restarts",
             {**two, "MA_VJ_NAME": "job7", "MA_TASK_NAME": "worker", "MA_MAX_RESTARTS": "2",
              "MALAUNCH_RESTART_ON": "3,7", "MALAUNCH_RESTART_BACKOFF": "0.5"}, "v1_0_2x4.json"),
        _dry("dry-ranktable-v1_2-superpod", {"RANK_TABLE_FILE": RT, "MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "0",
                                             "VC_WORKER_HOSTS": HOSTS2}, "v1_2_superpod.json"),
        _dry("dry-ranktable-legacy-group-list", {"RANK_TABLE_FILE": RT, "MA_NUM_HOSTS": "2",
                                                "MA_CURRENT_HOST_IP": "10.0.0.2"}, "legacy_group_list.json"),
        _dry("dry-ranktable-v0-converted", {"RANK_TABLE_FILE": RT, "MA_NUM_HOSTS": "3", "VC_TASK_INDEX": "1",
                                            "MA_CURRENT_INSTANCE_NAME": "job-pod-2",
                                            "VC_WORKER_HOSTS": "host-a,host-b,host-c"}, "v0_jobstart_hccl.json"),
        _dry("dry-ranktable-hccl-template1", {"RANK_TABLE_FILE": RT, "MA_NUM_HOSTS": "2",
                                              "MA_CURRENT_HOST_IP": "192.168.1.2"}, "hccl_doc_template1_2x2.json"),
        _dry("dry-ranktable-template2-file-order", {"RANK_TABLE_FILE": RT, "MA_NUM_HOSTS": "2",
                                                    "MA_CURRENT_INSTANCE_NAME": "tf-tbdf1"},
             "hccl_doc_template2_tf_pods.json"),
        _dry("dry-ranktable-template2-one-server", {"RANK_TABLE_FILE": RT, "MA_CURRENT_INSTANCE_NAME": "tf-bae41"},
             "tf_guide_template2_one_server.json"),
        _dry("dry-ranktable-modelzoo-8p-workdir", {"RANK_TABLE_FILE": RT, "MALAUNCH_DEVICE_WORKDIR": "dev",
                                                   "MALAUNCH_MASTER_PORT": "29601"}, "modelzoo_npu8p.json"),
        _dry("dry-ranktable-device-subset", {"MA_RUN_METHOD": "RankTable", "RANK_TABLE_FILE": RT,
                                             "MA_NUM_HOSTS": "2", "MA_CURRENT_HOST_IP": "10.0.0.2"}, "subset.json"),
        _dry("dry-ranktable-directory-and-options", {"RANK_TABLE_FILE": "<WORK>", "MA_LOG_DIR": "platform-logs"},
             "local.json", ("--dry-run", "--grace-period", "7.5", "--report-file", "r/out.json", "train.py", "-x")),
    ]


def _launcher_dry() -> List[Case]:
    tr = {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "2"}
    ms = {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": "2"}
    multi = {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1", "VC_WORKER_HOSTS": HOSTS2, "MA_VJ_NAME": "job7"}
    rec = {**ms, "MS_ENABLE_RECOVERY": "1"}
    return [
        _dry("dry-single-no-method", {}, args=("train.py", "--lr", "0.1")),
        _dry("dry-single-shell-script", {"MALAUNCH_LOG_DIR": "logs"}, args=("run.sh", "a b")),
        _dry("dry-single-dash-script", {}, args=("--log-dir", "L", "--", "-x.py")),
        _dry("dry-torchrun-standalone", tr),
        _dry("dry-torchrun-no-devices", {"MA_RUN_METHOD": "TORCHRUN"}),
        _dry("dry-torchrun-static-multi-host", {**tr, **multi, "MA_TORCHRUN_MASTER_PORT": "23456"}),
        _dry("dry-torchrun-vj-master", {**tr, "MA_NUM_HOSTS": "3", "VC_TASK_INDEX": "2", "MA_VJ_NAME": "job7",
                                        "MA_TASK_NAME": "worker"}),
        _dry("dry-torchrun-extra-params", {**tr, "MA_EXTRA_TORCHRUN_PARAMS":
                                           "--redirects 1 --log-dir=tl --monitor_interval 0.5 --tee=3"}),
        _dry("dry-torchrun-restarts", {**tr, "MA_MAX_RESTARTS": "3", "MALAUNCH_RESTART_ON": "always",
                                       "MALAUNCH_GRACE_PERIOD": "4", "MA_SCRIPT_INTERPRETER": "/usr/bin/python3"}),
        _dry("dry-msrun-single-host", ms),
        _dry("dry-msrun-multi-host", {**ms, **multi, "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.2",
                                      "MA_MSRUN_MASTER_PORT": "9001", "MSRUN_CLUSTER_TIME_OUT": "-1"}),
        _dry("dry-msrun-rank-table-extra", {**ms, "RANK_TABLE_FILE": RT, "MS_RANKTABLE_ENABLE": "True",
                                            "MA_EXTRA_MSRUN_PARAMS": "--cluster_time_out=50 --bind_core=True"},
             "local.json"),
        _dry("dry-msrun-restarts", {**ms, "MA_MAX_RESTARTS": "2", "MALAUNCH_RESTART_ON": "never"}),
        _dry("dry-msrun-recovery-single-host", rec),
        _dry("dry-msrun-recovery-multi-host-worker", {**rec, **multi, "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.2",
                                                      "MS_RECOVERY_PATH": "/data/rec",
                                                      "MALAUNCH_MS_RECOVERY_DELAY": "5", "MA_MAX_RESTARTS": "4"}),
        _dry("dry-msrun-recovery-multi-host-master", {**rec, "MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "0",
                                                      "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.2",
                                                      "MS_ENABLE_RECOVERY": "true", "MSRUN_CLUSTER_TIME_OUT": "90"}),
    ]


#: Rule 7: report.json fields that differ from run to run on main as it is today (races in the shim, not
#: inherent variability): replaced by "<UNSTABLE>". Each entry is a finding for issue 16 / the redesign; drop it
#: once the race is gone.
_UNSTABLE: Dict[Tuple[str, str], Tuple[str, ...]] = {
    # torchrun's failure summary and the shim's own watch both see the SIGKILLed worker; which one is recorded
    # as the root cause's source depends on which is read first.
    ("torchrun", "kill"): ("root_cause.source",),
}


_MSRUN_ROOT_CAUSE_RACE = (
    "msrun kills the other workers with SIGKILL when one fails; on a loaded machine the shim sometimes names a "
    "worker msrun killed (rank 0, 137/SIGKILL) as the root cause instead of the one that failed first (rank 1): "
    "root cause ordering by evidence, issue 16"
)
#: Cases whose whole outcome (root cause, exit code) differs from run to run on main as it is today. They are
#: captured and compared like the others; the test marks a mismatch as an expected failure naming the race,
#: and passes when the output matches. Drop an entry once its race is fixed.
RACES: Dict[Tuple[str, str], str] = {
    ("msrun", "exit"): _MSRUN_ROOT_CAUSE_RACE,
    ("msrun", "kill"): _MSRUN_ROOT_CAUSE_RACE,
    ("msrun", "flaky"): _MSRUN_ROOT_CAUSE_RACE + " (attempt 0 is then not restarted: 137 is not restart_on)",
}


def _runs() -> List[Case]:
    fan = {"MA_RUN_METHOD": "ranktable", "RANK_TABLE_FILE": RT, "MA_CURRENT_HOST_IP": "127.0.0.1",
           "MALAUNCH_GRACE_PERIOD": "5"}
    tr = {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": str(WORLD), "MALAUNCH_GRACE_PERIOD": "5"}
    ms = {"MA_RUN_METHOD": "msrun", "MA_NUM_GPUS": str(WORLD), "MALAUNCH_GRACE_PERIOD": "5"}
    restart = {"MA_MAX_RESTARTS": "1", "MALAUNCH_RESTART_ON": "3", "MALAUNCH_RESTART_BACKOFF": "0"}
    cases: List[Case] = []
    for method, env, table, port in (
        ("ranktable", fan, "local.json", ""),
        ("torchrun", tr, "", "MA_TORCHRUN_MASTER_PORT"),
        ("msrun", ms, "", "MA_MSRUN_MASTER_PORT"),
    ):
        for mode, extra in (("ok", {}), ("exit", {}), ("kill", {}), ("flaky", restart)):
            args = ("job.py", mode, str(WORLD))
            unstable, race = _UNSTABLE.get((method, mode), ()), RACES.get((method, mode), "")
            cases.append(Case(f"run-{method}-{mode}", "run", {**env, **extra}, args, table, port, unstable, race))
        cases.append(Case(f"run-{method}-sigterm", "sigterm", env, ("job.py", "hang", str(WORLD)), table, port))
    return cases


def _bad() -> List[Case]:
    return [
        Case("bad-method", "bad", {"MA_RUN_METHOD": "horovod"}),
        Case("bad-num-hosts-full-width", "bad", {"MA_NUM_HOSTS": "\uff12"}),
        Case("bad-task-index-out-of-range", "bad", {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "2"}),
        Case("bad-task-index-alias-differs", "bad", {"VC_TASK_INDEX": "0", "MA_TASK_INDEX": "1"}),
        Case("bad-worker-hosts-count", "bad", {"MA_NUM_HOSTS": "3", "VC_WORKER_HOSTS": "a,b"}),
        Case("bad-torchrun-no-master", "bad", {"MA_RUN_METHOD": "torchrun", "MA_NUM_HOSTS": "2"}),
        Case("bad-extra-params-quotes", "bad", {"MA_RUN_METHOD": "msrun", "MA_EXTRA_MSRUN_PARAMS": "--x 'y"}),
        Case("bad-max-restarts-full-width", "bad", {"MA_MAX_RESTARTS": "\uff11"}),
        Case("bad-max-restarts-too-many", "bad", {"MA_MAX_RESTARTS": "1001"}),
        Case("bad-restart-on", "bad", {"MALAUNCH_RESTART_ON": "0,300"}),
        Case("bad-ms-enable-recovery", "bad", {"MA_RUN_METHOD": "msrun", "MS_ENABLE_RECOVERY": "maybe"}),
        Case("bad-cluster-time-out", "bad", {"MA_RUN_METHOD": "msrun", "MSRUN_CLUSTER_TIME_OUT": "-2"}),
        Case("bad-grace-period", "bad", {"MALAUNCH_GRACE_PERIOD": "nan"}),
        Case("bad-missing-boot-file", "bad", {}, ("missing.py",)),
        Case("bad-no-boot-file", "bad", {}, ()),
        Case("bad-unknown-option", "bad", {}, ("--verbose", "train.py")),
        Case("bad-rank-table-not-completed", "bad", {"RANK_TABLE_FILE": RT}, ("--dry-run", "train.py"),
             "initializing.json"),
        Case("bad-rank-table-no-such-server", "bad", {"RANK_TABLE_FILE": RT, "MA_CURRENT_HOST_IP": "10.9.9.9"},
             ("--dry-run", "train.py"), "v1_0_2x4.json"),
    ]


CASES: Tuple[Case, ...] = tuple(_fanout_dry() + _launcher_dry() + _runs() + _bad())
GENERATED["initializing.json"] = {**LOCAL_TABLE, "status": "initializing"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _prepare(case: Case, work: Path) -> None:
    (work / "home").mkdir()
    (work / "ready").mkdir()
    (work / "train.py").write_text("print('train')\n")
    (work / "run.sh").write_text("echo run\n")
    (work / "-x.py").write_text("print('x')\n")
    shutil.copy(JOB, work / "job.py")
    if case.table in GENERATED:
        (work / "table.json").write_text(json.dumps(GENERATED[case.table], indent=1))
    elif case.table:
        shutil.copy(TABLES / case.table, work / "table.json")
    if case.env.get("RANK_TABLE_FILE") == "<WORK>":  # a directory holding jobstart_hccl.json
        shutil.copy(work / "table.json", work / "jobstart_hccl.json")


def _environment(case: Case, work: Path) -> Tuple[Dict[str, str], Optional[str]]:
    env = {
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8",
        "HOME": str(work / "home"),
        "GOLDEN_READY": str(work / "ready"),
    }
    env.update({key: value.replace("<WORK>", str(work)) for key, value in case.env.items()})
    port = None
    if case.port:
        port = str(_free_port())
        env[case.port] = port
    return env, port


def _wait_ready(work: Path, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while len(os.listdir(work / "ready")) < WORLD:
        if proc.poll() is not None or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _execute(case: Case, env: Mapping[str, str], work: Path) -> Tuple[int, str, str]:
    argv = [sys.executable, "-m", "malaunch.entrypoint", *case.args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, env=dict(env), cwd=str(work), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True)
        try:
            if case.kind == "sigterm":
                _wait_ready(work, proc, time.monotonic() + 120)
                proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out.seek(0)
        err.seek(0)
        return code, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")


RUNS = ("run", "sigterm")
_SOURCE = re.compile(r"^\[(rank \d+|torchrun|msrun)\] ")
_LAUNCHER = re.compile(r"^\[(torchrun|msrun)\] ")
_TORCHRUN_RUN_DIR = re.compile(r"/torchrun/[0-9a-f-]{36}_[a-z0-9_]{8}/")
_TEXT_RULES = (
    (re.compile(r"(\[torchrun\] [IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ "), r"\1<GLOG> "),
    (re.compile(r"ME\(\d+:\d+,(\w+)\):[\d:.-]+ "), r"ME(<PID>:<TID>,\1):<TIME> "),
    (re.compile(r"\b(pid:?|process) \d+\b"), r"\1 <PID>"),
    (re.compile(r"\bafter \d+\.\ds\b"), "after <DURATION>"),
)


def _group_sources(lines: List[str]) -> List[str]:
    """Rule 5: within each run of prefixed lines, group by prefix, keeping each source's order."""
    result: List[str] = []
    run: List[str] = []
    for line in [*lines, ""]:
        match = _SOURCE.match(line)
        if match:
            run.append(line)
            continue
        result.extend(sorted(run, key=lambda item: _prefix_rank(_source_key(item))))
        run = []
        result.append(line)
    return result[:-1]


def _source_key(line: str) -> str:
    match = _SOURCE.match(line)
    return match.group(1) if match else ""


def _prefix_rank(source: str) -> Tuple[int, int]:
    """Launchers first, then ranks by number: a fixed order that does not depend on who spoke first."""
    if source.startswith("rank "):
        return (1, int(source[5:]))
    return (0, 0)


def _torn_down(case: Case) -> bool:
    """Rule 6 applies: a rank fails or the shim is signalled, so the launcher is ended mid-way."""
    return case.kind == "sigterm" or (case.kind == "run" and case.args[1] in ("exit", "kill", "flaky"))


def _console(text: str, torn_down: bool) -> List[str]:
    for pattern, replacement in _TEXT_RULES:
        text = pattern.sub(replacement, text)
    lines = text.split("\n")
    if torn_down:
        lines = [line for line in lines if not _LAUNCHER.match(line)]
    return _group_sources(lines)


def _unstable(report: Any, fields: Sequence[str]) -> Any:
    """Rule 7: the named dotted fields of report.json become "<UNSTABLE>" (races on today's main)."""
    for field in fields:
        *parents, last = field.split(".")
        node = report
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node:
            node[last] = "<UNSTABLE>"
    return report


def _report(work: Path, stdout: str, stderr: str) -> Any:
    match = re.search(r"report: (\S+)\n", stderr)
    if match is None:
        return None
    try:
        data = json.loads(Path(match.group(1)).read_text())
    except (OSError, ValueError) as exc:
        return f"unreadable report: {type(exc).__name__}"
    return _scrub(data)


def _scrub(value: Any) -> Any:
    """Rules 3 and 4 in report.json: pids and durations."""
    if isinstance(value, dict):
        return {key: ("<PID>" if key == "pid" and isinstance(item, int) else
                      "<DURATION>" if key == "duration" and isinstance(item, (int, float)) else _scrub(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub(item) for item in value]
    return value


def _paths(text: str, work: Path, port: Optional[str]) -> str:
    """Rules 1 and 2 on the whole record: longest first, so that a path inside another is never half replaced."""
    pairs = [(str(work.resolve()), "<WORK>"), (str(work), "<WORK>"), (sys.executable, "<PYTHON>"),
             (os.path.dirname(sys.executable), "<BIN>")]
    for old, new in sorted(set(pairs), key=lambda pair: -len(pair[0])):
        text = text.replace(old, new)
    text = _TORCHRUN_RUN_DIR.sub("/torchrun/<RUN>/", text)
    text = re.sub(rf"(?<![\w.-]){re.escape(socket.gethostname())}(?![\w.-])", "<HOST>", text)
    if port is not None:
        text = re.sub(rf"\b{port}\b", "<PORT>", text)
    return text


def capture(case: Case) -> str:
    """Run ``case`` in a new work folder and return its normalised record (JSON text).

    The folder is ``/tmp/golden-XXXXXXXX``, always as long: the shim shortens long values in its messages, so a
    longer path would change what is shown, not only where.
    """
    work = Path(tempfile.mkdtemp(prefix="golden-", dir="/tmp"))
    try:
        return _capture_in(case, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _capture_in(case: Case, work: Path) -> str:
    _prepare(case, work)
    env, port = _environment(case, work)
    code, stdout, stderr = _execute(case, env, work)
    record = {
        "case": case.name,
        "kind": case.kind,
        "args": list(case.args),
        "env": dict(case.env),
        "exit_code": code,
        "stdout": _console(stdout, _torn_down(case)),
        "stderr": _console(stderr, _torn_down(case)),
        "report": _unstable(_report(work, stdout, stderr), case.unstable) if case.kind in RUNS else None,
    }
    return _paths(json.dumps(record, indent=1, ensure_ascii=False), work, port) + "\n"


def by_name(names: Sequence[str]) -> List[Case]:
    """The cases named (all when none), in matrix order; an unknown name raises ``KeyError``."""
    known = {case.name: case for case in CASES}
    return [known[name] for name in names] if names else list(CASES)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Capture the shim's golden outputs (see the module docstring).")
    parser.add_argument("--write", metavar="DIR", help="write DIR/<case>.json for each case")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("cases", nargs="*", help="only these cases (default: all)")
    options = parser.parse_args(argv)
    if options.list:
        print("\n".join(case.name for case in CASES))
        return 0
    if not options.write:
        parser.error("give --write DIR (or --list)")
    target = Path(options.write)
    target.mkdir(parents=True, exist_ok=True)
    for case in by_name(options.cases):
        started = time.monotonic()
        (target / f"{case.name}.json").write_text(capture(case))
        print(f"{case.name}: {time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
