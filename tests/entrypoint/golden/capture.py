"""Run the real shim over a matrix of inputs and record what it shows the world, as golden files.

``python tests/entrypoint/golden/capture.py --write DIR [CASE ...]`` writes ``DIR/<case>.json`` for every case
(or the cases named); ``--list`` prints the case names. ``tests/entrypoint/e2e/test_golden.py`` runs each case and
compares it byte for byte with ``tests/entrypoint/golden/expected/<case>.json``.

A case is the shim (``python -m malaunch.entrypoint``) started in a fresh work folder (the boot file, a copy of
the rank table it needs and ``ready/`` are there) with a clean environment: ``PATH`` (this Python's folder
first), ``LANG=C.UTF-8``, ``HOME`` (in the work folder), ``GOLDEN_READY`` and the case's variables. Recorded:
the arguments, the case's variables, the exit code, stdout and stderr (as lists of lines: joined with ``\\n``
they give the bytes back) and, for real runs, ``report.json``.

The matrix of cases (their kinds: ``dry``, ``run``, ``sigterm``, ``bad``) is :mod:`cases`.

Normalisation, only where the output is variable by nature (everything else is kept byte for byte):
1. paths: the case's work folder (``/tmp/golden-XXXXXXXX``, see :func:`capture`) -> ``<WORK>``, this Python
   (``sys.executable``) -> ``<PYTHON>``, its folder -> ``<BIN>``, the shim's package folder (``entrypoint/``, named
   in msrun's birth-folder ``python``) -> ``<SHIM>``; the machine's host name
   (``socket.gethostname()``, as a whole word) -> ``<HOST>``; torchrun's run folder under its ``--log_dir``
   (``<uuid>_<random>``, made by ``tempfile.mkdtemp``) -> ``<RUN>``;
2. ports: real torchrun/msrun runs need a free port, picked at run time -> ``<PORT>`` (dry runs use fixed ports);
3. pids: ``"pid": N`` in report.json, ``pid N``, and torchrun's ``pid: N`` and ``process N`` on the console
   -> ``<PID>``;
4. times: ``"duration"`` in report.json and ``after N.Ns`` on the console -> ``<DURATION>``; the time stamp,
   pid and thread id at the start of torchrun's (glog) and MindSpore's (``ME(pid:tid,...)``) log lines; the
   moments in the shim's progress and recovery lines (``[ma-entrypoint] recovery/v1 ...``) -> ``<TIME>``;
5. order across concurrent sources: the shim relays every rank and the launcher concurrently (a log file never
   waits for the console), so within each run of consecutive console lines that carry a source prefix
   (``[rank N] ``, ``[torchrun] ``, ``[msrun] ``) the lines are grouped by prefix, keeping each source's own
   order (a stable sort). The shim's own lines (``[ma-entrypoint] ...``, the failure summary) are never moved:
   they come before the first rank starts or after the last one is relayed;
6. launcher chatter: torchrun's and msrun's own console lines (``[torchrun] ``, ``[msrun] ``) are left out of
   every run: the shim ends the launcher as soon as it knows every worker's status, success included, so how far
   the launcher gets with its messages (``Sending process N closing signal``, ``Distributed job is spawned``)
   before it is ended is a race by nature. They stay in the launcher's log file;
7. known races on today's main: fields named in a case's ``unstable`` become ``<UNSTABLE>`` (see ``cases._UNSTABLE``
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
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

if __package__ in (None, ""):  # run as a script: make ``golden`` importable, as pytest's pythonpath does
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import malaunch.entrypoint

from golden.cases import CASES, GENERATED, JOB, TABLES, WORLD, Case, by_name

#: The shim's package folder (rule 1): msrun's birth-folder ``python`` names the program it runs there.
SHIM_DIR = os.path.dirname(os.path.abspath(malaunch.entrypoint.__file__))


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
#: The shim's progress and recovery lines (run/statuslines.py): their moments (every number with a fraction).
_STATUS_LINE = re.compile(r"^(\[ma-entrypoint\] (?:progress|recovery)/v\d+ )(.*)$", re.MULTILINE)
_MOMENT = re.compile(r"\b\d+\.\d+\b")


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


def _console(text: str) -> List[str]:
    for pattern, replacement in _TEXT_RULES:
        text = pattern.sub(replacement, text)
    text = _STATUS_LINE.sub(lambda m: m.group(1) + _MOMENT.sub("<TIME>", m.group(2)), text)
    lines = [line for line in text.split("\n") if not _LAUNCHER.match(line)]
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


_RECOVERY_TIMES = ("failure_seen", "last_rank_gone", "next_started", "first_progress", "next_ended")
_CLOCK = re.compile(r"\d\d:\d\d:\d\d\.\d{3} UTC( \(\+\d+\.\d+ s\))?")


def _recovery(record: Any) -> Any:
    """Rule 4 in a recovery record (the time to recover): its moments and the seconds since the failure."""
    if not isinstance(record, dict):
        return record
    scrubbed = {key: "<TIME>" if key in _RECOVERY_TIMES and isinstance(item, (int, float)) else
                "<DURATION>" if key.endswith("_after") and isinstance(item, (int, float)) else item
                for key, item in record.items()}  # fmt: skip
    if isinstance(scrubbed.get("line"), str):
        scrubbed["line"] = _CLOCK.sub(lambda m: "<TIME> UTC" + (" (+<DURATION>)" if m.group(1) else ""),
                                      scrubbed["line"])  # fmt: skip
    return scrubbed


def _scrub(value: Any) -> Any:
    """Rules 3 and 4 in report.json: pids and durations (and the moments of a recovery record)."""
    if isinstance(value, dict) and isinstance(value.get("recovery"), list):
        value = {**value, "recovery": [_recovery(item) for item in value["recovery"]]}
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
             (os.path.dirname(sys.executable), "<BIN>"), (SHIM_DIR, "<SHIM>")]
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
        "stdout": _console(stdout),
        "stderr": _console(stderr),
        "report": _unstable(_report(work, stdout, stderr), case.unstable) if case.kind in RUNS else None,
    }
    return _paths(json.dumps(record, indent=1, ensure_ascii=False), work, port) + "\n"


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
