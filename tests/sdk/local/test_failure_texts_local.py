"""What the tool says about a multi-host failure (issue 43 item 1), read as a user reads it, for every fault the
recovery tests inject on 2-host torchrun jobs of the local backend: the console of ``ma-submit JOB`` (following
it), ``ma-submit status``, ``ma-submit events`` and the hosts' ``report.json``.

Every line about the failure names the job's root cause as the hosts' coordinator chose it (the host, the rank,
its own exit code or signal, its class, its log); none shows ``None``, an empty field, or a survivor's code as the
cause; ``events`` has each host's every start, loss, return and replacement; while the hosts wait for a lost one,
the console and ``status`` say so with the time left. Real runner, real shims, real torchrun with gloo."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import yaml
from malaunch.entrypoint.public import descendants, env_has, read_environ
from malaunch.sdk.backends.local.backend import LocalBackend
from sdkutil import VENV_BIN, assert_nothing_running, job_ids, ma_submit, wait_for

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("cleanup_jobs")]

SCRIPTS = Path(__file__).resolve().parents[2] / "entrypoint" / "scripts"
#: What no line about a failure may say: a missing fact shown as None, an empty log, a placeholder name.
_WRONG = re.compile(r"\bNone\b|log ;|log $|log file  : $|'another host'|on host None|\(it, |:\s*;")


class Job:
    """A 2-host torchrun job followed by ``ma-submit JOB`` (its console kept), with its faults and its texts."""

    def __init__(self, tmp_path: Path, cli_env: Dict[str, str], home: Path, plan: str = "", **launcher: Any):
        self.marks, self.home, self.env = tmp_path / "marks", home, cli_env
        self.marks.mkdir()
        folder = tmp_path / "job"
        folder.mkdir()
        (folder / "texts_job.py").write_text((SCRIPTS / "texts_job.py").read_text())
        job = folder / "job.yaml"
        job.write_text(yaml.safe_dump({
            "name": "texts", "run_method": "torchrun", "code_dir": str(folder), "boot_file": "texts_job.py",
            "resources": {"hosts": 2, "devices_per_host": 1},
            "env": {"TEXTS_PLAN": plan, "TEXTS_JOB_DIR": str(self.marks), "OMP_NUM_THREADS": "1",
                    "MALAUNCH_RESTART_BACKOFF": "0.5"},
            "launcher": {"grace_period": 3, "heartbeat_timeout": 3, "host_wait": 20, **launcher},
        }))  # fmt: skip
        self.console_path = tmp_path / "console.txt"
        with open(self.console_path, "wb") as out:
            self.proc = subprocess.Popen([os.path.join(VENV_BIN, "ma-submit"), str(job)], env=cli_env, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        wait_for(lambda: bool(job_ids(home)), 60, "the job's folder")
        (self.id,) = job_ids(home)
        self.backend = LocalBackend(home=str(home))

    def started(self, attempt: int, *hosts: int) -> None:
        for host in hosts or (0, 1):
            wait_for((self.marks / f"started-h{host}-a{attempt}").exists, 120, f"host {host} in attempt {attempt}")

    def signal_tree(self, index: int, sig: int) -> None:
        """Signal host ``index``'s shim and every process under it that is the job's (the pod killed, frozen)."""
        root = self.backend.status(self.id).hosts[index].pid
        assert root is not None
        for pid in [root] + [info.pid for info in descendants(root)]:
            environ = read_environ(pid)
            if environ is not None and env_has(environ, "MALAUNCH_JOB_ID", self.id):
                os.kill(pid, sig)

    def end(self) -> Dict[str, Any]:
        """Wait for the job's end; its status as JSON."""
        self.proc.wait(240)
        return self.status_json()

    def status_json(self) -> Dict[str, Any]:
        data: Dict[str, Any] = json.loads(ma_submit(["status", "--output", "json", self.id], self.env).stdout)
        return data

    def status_text(self) -> str:
        return ma_submit(["status", self.id], self.env).stdout

    def events(self) -> List[Dict[str, Any]]:
        data: List[Dict[str, Any]] = json.loads(ma_submit(["events", "--output", "json", self.id], self.env).stdout)
        return data

    def console(self) -> str:
        return self.console_path.read_text(errors="replace")

    def report(self, index: int) -> Dict[str, Any]:
        data: Dict[str, Any] = json.loads((self.home / "jobs" / self.id / "hosts" / str(index) / "report.json")
                                          .read_text())  # fmt: skip
        return data

    def shim_lines(self) -> List[str]:
        """The console's lines of the tool itself: ma-submit's and the shims' (not the ranks')."""
        return [line for line in self.console().splitlines() if line.startswith("ma-submit:") or " ma-entrypoint] "
                in line or re.match(r"\[host \d\]   ", line) or "Root cause" in line]  # fmt: skip

    def check_no_wrong_text(self) -> None:
        texts = self.shim_lines() + self.status_text().splitlines()
        texts += [f"{e['reason']} {e['message']}" for e in self.events()]
        wrong = [text for text in texts if _WRONG.search(text)]
        assert not wrong, wrong


def _by(events: List[Dict[str, Any]], source: str, reason: str) -> List[str]:
    return [event["message"] for event in events if (event["source"], event["reason"]) == (source, reason)]


def _pids(started: List[str]) -> List[int]:
    return [int(re.search(r"shim pid (\d+)", text).group(1)) for text in started]  # type: ignore[union-attr]


def _restart_lines(console: str) -> Iterator[str]:
    return (line for line in console.splitlines() if "of the job ended" in line or "of the job failed" in line)


def test_the_master_killed_and_recovered_names_host_0_lost(tmp_path: Path, cli_env: Dict[str, str],
                                                           home: Path) -> None:  # fmt: skip
    job = Job(tmp_path, cli_env, home, max_restarts=2, restart_on="always")
    job.started(0)
    job.signal_tree(0, signal.SIGKILL)  # the coordinator goes with it
    status = job.end()
    assert status["state"] == "SUCCEEDED", (job.console()[-3000:], status)
    restart = list(_restart_lines(job.console()))
    assert restart and all("host 0 (127.0.0.1) lost" in line and "class host_lost" in line for line in restart), restart
    events = job.events()
    started = _by(events, "host 0", "Started")
    assert len(started) == 2 and len(set(_pids(started))) == 2, started
    (killed,) = _by(events, "host 0", "Killed")
    assert "killed by SIGKILL (exit 137)" in killed and "replacement 1 of 2" in killed
    restarted = _by(events, "host 1", "Restarted")
    assert restarted and "root cause host 0 (127.0.0.1) lost" in restarted[0], restarted
    job.check_no_wrong_text()
    assert_nothing_running(job.id)


def test_host_1_killed_without_restarts_names_host_1_and_its_signal(tmp_path: Path, cli_env: Dict[str, str],
                                                                    home: Path) -> None:  # fmt: skip
    job = Job(tmp_path, cli_env, home, max_restarts=0)
    job.started(0)
    job.signal_tree(1, signal.SIGKILL)
    status = job.end()
    assert status["state"] == "FAILED", status
    message = status["message"]
    # whichever shim the runner reaped first (host 1's, or host 0's saying its coordinator found host 1 lost), host
    # 1 is named by its own end, never by the survivor's code
    assert status["exit_code"] == 137 and message.startswith("host 1 (127.0.0.2) exited with code 137"), status
    assert "killed by SIGKILL" in message and "class " in message, message
    assert "exited with 75" not in message and "code 75" not in message
    end = [line for line in job.console().splitlines() if "FAILED after" in line]
    assert end and "host 1 (127.0.0.2)" in end[0], end
    job.check_no_wrong_text()
    assert_nothing_running(job.id)


def test_a_frozen_host_killed_after_the_survivor_gave_up_is_named_by_its_own_death(
    tmp_path: Path, cli_env: Dict[str, str], home: Path
) -> None:
    """The unlucky order of a host killed without restarts: host 1 frozen, host 0's shim gives it up and exits 75
    (a death that says a peer failed), reaped first; only then is host 1's shim killed (the pod died). The job ends
    with host 1's own death (137, SIGKILL), the survivor's 75 never outranking it; on the old code the job took
    the code and text of whichever shim the runner reaped first: 75 here."""
    job = Job(tmp_path, cli_env, home, max_restarts=0)
    job.started(0)
    job.signal_tree(1, signal.SIGSTOP)
    try:
        wait_for(lambda: job.backend.status(job.id).hosts[0].state.value == "EXITED", 60, "host 0 giving up")
        assert job.backend.status(job.id).hosts[0].exit_code == 75
    finally:
        job.signal_tree(1, signal.SIGKILL)
    status = job.end()
    assert (status["state"], status["exit_code"]) == ("FAILED", 137), status
    message = status["message"]
    assert re.match(r"host 1 \(127\.0\.0\.2\) exited with code 137 \(its shim \(pid \d+\) was killed by SIGKILL\); "
                    r"class \w+; console: ", message), message  # fmt: skip
    assert not re.search(r"\b75\b|host_lost", message), message
    end = [line for line in job.console().splitlines() if "FAILED after" in line]
    assert end and "host 1 (127.0.0.2) exited with code 137" in end[0], end
    job.check_no_wrong_text()
    assert_nothing_running(job.id)


def test_host_1_killed_and_replaced_says_the_kill_the_loss_and_the_return(tmp_path: Path, cli_env: Dict[str, str],
                                                                          home: Path) -> None:  # fmt: skip
    job = Job(tmp_path, cli_env, home, max_restarts=2, restart_on="always")
    job.started(0)
    job.signal_tree(1, signal.SIGKILL)
    status = job.end()
    assert status["state"] == "SUCCEEDED", (job.console()[-3000:], status)
    restart = list(_restart_lines(job.console()))
    assert restart and all("host 1 (127.0.0.2) lost" in line and "class host_lost" in line for line in restart)
    assert not any("exit 75" in line for line in restart), restart
    events = job.events()
    started = _by(events, "host 1", "Started")
    assert len(started) == 2 and len(set(_pids(started))) == 2, started
    (killed,) = _by(events, "host 1", "Killed")
    assert "killed by SIGKILL (exit 137)" in killed
    assert _by(events, "host 1", "HostLost") and _by(events, "host 1", "HostBack"), events
    for restarted in _by(events, "host 0", "Restarted"):
        assert "root cause host 1 (127.0.0.2) lost" in restarted, restarted
    times = {(e["source"], e["reason"]): e["time"] for e in events}
    assert times[("host 1", "Killed")] <= times[("host 1", "HostBack")]
    report = job.report(0)
    assert report["attempts"][0]["job_cause"]["host"] == 1
    job.check_no_wrong_text()
    assert_nothing_running(job.id)


def test_a_hang_names_the_hung_rank_on_its_host(tmp_path: Path, cli_env: Dict[str, str], home: Path) -> None:
    # hang_timeout above torchrun's 5 s monitor interval: attempt 1's ranks exit at once, and their end must not
    # look like silence before torchrun has seen it
    job = Job(tmp_path, cli_env, home, plan="0:1=stop", max_restarts=1, hang_timeout=8)
    status = job.end()
    assert status["state"] == "SUCCEEDED", (job.console()[-3000:], status)
    restart = list(_restart_lines(job.console()))
    assert restart and all("rank 1 on host 1 (127.0.0.2) hung" in line and "class hang" in line for line in restart)
    restarted = [e["message"] for e in job.events() if e["reason"] == "Restarted"]
    assert len(restarted) == 2, restarted  # each host restarted once, both naming the same hung rank
    assert all("root cause rank 1 on host 1 (127.0.0.2) hung" in text for text in restarted), restarted
    assert not any("rank 0" in text for text in restarted), restarted
    job.check_no_wrong_text()
    assert_nothing_running(job.id)


def test_a_frozen_host_is_waited_for_with_the_time_left_then_named(tmp_path: Path, cli_env: Dict[str, str],
                                                                   home: Path) -> None:  # fmt: skip
    job = Job(tmp_path, cli_env, home, max_restarts=1, host_wait=12)
    job.started(0)
    job.signal_tree(1, signal.SIGSTOP)
    try:
        seen: List[str] = []

        def waiting() -> bool:
            text = job.status_text()
            seen.append(text)
            return "wait for host 1 (127.0.0.2) to come back" in text

        wait_for(waiting, 60, "status saying the hosts wait for host 1")
        line = next(text for text in seen[-1].splitlines() if text.startswith("waiting:"))
        assert re.search(r"\(lost: no heartbeat for 3 s\): \d+ s left$", line), line
        status = job.end()
    finally:
        with contextlib.suppress(AssertionError, ProcessLookupError):  # gone once the job ended
            job.signal_tree(1, signal.SIGCONT)
    assert (status["state"], status["exit_code"]) == ("FAILED", 75), status
    assert status["failure_class"]["class"] == "host_lost"
    message = status["message"]
    assert message.startswith("root cause host 1 (127.0.0.2) lost: no heartbeat for 3 s; it did not come back "
                              "within 12 s; class host_lost"), message  # fmt: skip
    console = job.console()
    assert re.search(r"wait up to 12 s for host 1 \(127\.0\.0\.2\)", console), console[-3000:]
    beats = [line for line in console.splitlines() if "no output for" in line and "wait for host 1" in line]
    assert beats and all(re.search(r"\d+ s left", line) for line in beats), console[-3000:]
    report = job.report(0)
    assert "75" not in report["root_cause"]["hint"] and report["root_cause"]["log_file"], report["root_cause"]
    summary = [line for line in console.splitlines() if line.startswith("[host 0] ") and "Root cause" in line]
    assert summary and "host 1 (127.0.0.2) lost" in summary[0], summary
    (lost,) = _by(job.events(), "host 1", "HostLost")
    assert "no heartbeat for 3 s" in lost
    job.check_no_wrong_text()
    assert_nothing_running(job.id)


def test_an_elastic_job_says_its_change_of_hosts_when_it_happens(tmp_path: Path, cli_env: Dict[str, str],
                                                                 home: Path) -> None:  # fmt: skip
    job = Job(tmp_path, cli_env, home, plan="1:0=linger", min_hosts=1, host_wait=3)
    job.started(0)
    job.signal_tree(1, signal.SIGKILL)
    job.started(1, 0)
    try:
        wait_for(lambda: any(e["reason"] == "HostsChanged" for e in job.events()), 60, "HostsChanged while it runs")
        assert job.backend.status(job.id).state.value == "RUNNING"
    finally:
        (job.marks / "release").touch()
    status = job.end()
    assert status["state"] == "SUCCEEDED", (job.console()[-3000:], status)
    events = job.events()
    (started,) = _by(events, "host 1", "Started")
    assert re.fullmatch(r"127\.0\.0\.2, shim pid \d+", started), started
    (lost,) = _by(events, "host 1", "HostLost")  # one loss: as the job's coordinator and the platform saw it
    assert lost.startswith("host 1 (127.0.0.2) lost: its connection closed; class host_lost"), lost
    assert "; as the platform saw it: lost: its shim" in lost and "killed by SIGKILL (exit 137)" in lost, lost
    assert "host 1 (127.0.0.2) lost: its shim" in job.console()
    (changed,) = [e["message"] for e in events if e["reason"] == "HostsChanged"]
    assert "host(s) 1 left" in changed and "world size 1" in changed
    job.check_no_wrong_text()
    assert_nothing_running(job.id)


