"""Issue 39's last gap: a save completes through the coordinator when each host's checkpoint folder is its own.

Two shims started as pods start them (``hostsutil``), each with a checkpoint folder of its own (ModelArts gives
every node its own output channel), run ``ckpt_train.py`` under torchrun (one rank per host, gloo on CPU): every
rank saves with ``malaunch.entrypoint.checkpoint.save``, so no folder ever holds every rank's part; each host's
shim tells the coordinator the parts it holds, and writes ``.complete`` once the hosts together hold them all.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from hostsutil import Hosts
from shimutil import free_port

pytestmark = [pytest.mark.process, pytest.mark.torch]

TOTAL, EVERY = 12, 3


def _run(made: List[Hosts], tmp: Path, fault: str, pause: str = "0",
         relay: Optional[Callable[[int], int]] = None) -> Tuple[Hosts, Dict[str, str], List[int]]:  # fmt: skip
    """Run the training on two hosts; the job, rank 0's final weights and every step rank 0 trained. ``relay``:
    given the coordinator's port, the port host 1 reaches it through."""
    job, out = _start(made, tmp, fault, pause, relay)
    codes = [job.wait(0, timeout=300), job.wait(1, timeout=300)]
    assert codes == [0, 0], job.console(0)[-3000:] + job.console(1)[-3000:]
    trained = [json.loads(line)["step"] for line in (out / "trained-0.jsonl").read_text().splitlines()]
    final: Dict[str, str] = json.loads((out / "final.json").read_text())
    return job, final, trained


def _start(made: List[Hosts], tmp: Path, fault: str, pause: str,
           relay: Optional[Callable[[int], int]]) -> Tuple[Hosts, Path]:  # fmt: skip
    out = tmp / "out"
    out.mkdir()
    env = {"MA_RUN_METHOD": "torchrun", "MA_NUM_GPUS": "1", "MA_TORCHRUN_MASTER_PORT": str(free_port()),
           "MA_MAX_RESTARTS": "2", "MALAUNCH_RESTART_ON": "always", "MALAUNCH_GRACE_PERIOD": "5",
           "MALAUNCH_CHECKPOINT_KEEP": "2"}  # fmt: skip
    folders = {index: {"MALAUNCH_CHECKPOINT_DIR": str(tmp / f"ckpt-h{index}")} for index in (0, 1)}
    job = Hosts(tmp, 2, env, script="ckpt_train.py", args=(str(out), str(TOTAL), str(EVERY), fault, pause),
                per_host=folders)  # fmt: skip
    made.append(job)
    if relay is not None:
        job.per_host[1]["MALAUNCH_COORDINATOR_PORT"] = str(relay(job.port))
    job.start_all()
    return job, out


def _marker(folder: Path) -> Dict[str, int]:
    value: Dict[str, int] = json.loads((folder / ".complete").read_text())
    return value


def _resumed_from_step_3(job: Hosts, tmp: Path) -> List[Dict[str, int]]:
    """Each host's rank started attempt 1 from its own folder's step 3 (its console says so); their markers."""
    markers = []
    for host in (0, 1):
        resumed = tmp / f"ckpt-h{host}" / "step-00000003"
        console = job.console(host)
        assert f"rank {host} attempt 1 MALAUNCH_RESUME_FROM={resumed}\n" in console, console[-3000:]
        markers.append(_marker(resumed))
    return markers


def _parts(folder: Path) -> List[str]:
    return sorted(path.name for path in (folder / ".parts").iterdir())


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """The weights of a run without a failure; every save completes in both hosts' folders."""
    made: List[Hosts] = []
    tmp = tmp_path_factory.mktemp("clean")
    try:
        job, final, trained = _run(made, tmp, "none")
    finally:
        for each in made:
            each.close()
    assert trained == list(range(1, TOTAL + 1))
    for host in (0, 1):
        folder = tmp / f"ckpt-h{host}" / "step-00000012"
        assert (_marker(folder)["step"], _marker(folder)["ranks"]) == (12, 2)
        assert _parts(folder) == [f"rank-{host}"]  # its own rank's part alone: no rank could complete it
        assert f"checkpoint {folder} complete: every host holds its ranks' parts of step 12 (2 ranks)" in \
            job.console(host)  # fmt: skip
    assert (tmp / "ckpt-h1" / "step-00000003" / ".complete").is_file()  # host 1 keeps what it saved
    return final


def test_a_rank_killed_mid_run_resumes_from_the_newest_complete_one_on_both_hosts(
    hosts: List[Hosts], tmp_path: Path, reference: Dict[str, str]
) -> None:
    job, final, trained = _run(hosts, tmp_path, "run:1:8")
    assert final == reference
    assert 0 < sum(count - 1 for count in Counter(trained).values()) <= EVERY
    for host in (0, 1):
        resumed = tmp_path / f"ckpt-h{host}" / "step-00000006"
        assert f"attempt 1 resumes from {resumed} (step 6" in job.console(host)
        assert _marker(resumed)["ranks"] == 2


def test_a_rank_killed_in_a_save_leaves_it_incomplete_on_both_hosts(
    hosts: List[Hosts], tmp_path: Path, reference: Dict[str, str]
) -> None:
    job, final, trained = _run(hosts, tmp_path, "save:1:9")
    assert final == reference
    assert 0 < sum(count - 1 for count in Counter(trained).values()) <= EVERY
    for host in (0, 1):
        ckpt = tmp_path / f"ckpt-h{host}"
        half = ckpt / "step-00000009"
        console = job.console(host)
        # step 9 was not complete on this host when attempt 1 chose where to resume: it resumed from step 6
        assert f"attempt 1 resumes from {ckpt / 'step-00000006'} (step 6; the ranks had reached step 9" in console
        completed = f"checkpoint {half} complete: every host holds its ranks' parts of step 9 (2 ranks)"
        assert console.index("attempt 1 of at most 3") < console.index(completed)  # saved again in attempt 1
        assert (_marker(half)["step"], _marker(half)["ranks"]) == (9, 2)
        parts = [json.loads((half / ".parts" / name).read_text()) for name in _parts(half)]
        assert [part["attempt"] for part in parts] == ["1.0"]  # attempt 0's part (host 0's) was replaced
    # host 0 held rank 0's part of attempt 0's save of step 9 (its folder says how far it got), host 1 none
    half = tmp_path / "ckpt-h0" / "step-00000009"
    assert f"checkpoint {half} passed over: it has no .complete (a save that did not finish); resuming from " \
           "step-00000006 (step 6)" in job.console(0)  # fmt: skip


class _Drop:
    """A relay between host 1's shim and the job's coordinator that passes every line both ways, except the first
    line of type ``kind`` (``saved``: the coordinator's to host 1; ``parts``: host 1's to the coordinator): instead
    of it, the relay closes that connection on both sides (host 1's link was down when that line was sent). Host 1
    joins again through it, and from then on every line passes."""

    def __init__(self, kind: str) -> None:
        self.kind = f'"t":"{kind}"'.encode()
        self.upstream = kind == "parts"  # the line watched goes from host 1 to the coordinator
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target = 0
        self.dropped = threading.Event()
        self.release = threading.Event()  # cleared: host 1 joins again only once it is set
        self.release.set()
        self.socks: List[socket.socket] = []
        self.threads: List[threading.Thread] = []

    def start(self, target: int) -> int:
        self.target = target
        self._spawn(self._accept)
        return self.port

    def close(self) -> None:
        for sock in [self.listener, *self.socks]:
            _shut(sock)
            sock.close()
        for thread in self.threads:
            thread.join(10)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                host, _ = self.listener.accept()
            except OSError:
                return  # closed
            if self.dropped.is_set():
                self.release.wait()
            try:
                coordinator = socket.create_connection(("127.0.0.1", self.target))
            except OSError:  # host 0's coordinator does not listen yet: host 1 tries again
                host.close()
                continue
            self.socks += [host, coordinator]
            self._spawn(self._pump, host, coordinator, self.upstream)
            self._spawn(self._pump, coordinator, host, not self.upstream)

    def _pump(self, source: socket.socket, sink: socket.socket, watch: bool) -> None:
        buffer = b""
        try:
            while True:
                chunk = source.recv(65536)
                if not chunk:
                    break
                if not watch:
                    sink.sendall(chunk)
                    continue
                buffer += chunk
                while b"\n" in buffer:
                    line, _, buffer = buffer.partition(b"\n")
                    if self.kind in line and not self.dropped.is_set():
                        self.dropped.set()
                        return
                    sink.sendall(line + b"\n")
        except OSError:
            pass
        finally:
            _shut(source)
            _shut(sink)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def drop_saved() -> Iterator[_Drop]:
    relay = _Drop("saved")
    yield relay
    relay.close()


@pytest.fixture
def drop_parts() -> Iterator[_Drop]:
    relay = _Drop("parts")
    yield relay
    relay.close()


def test_a_host_that_missed_saved_resumes_from_the_checkpoint_the_others_resume_from(
    hosts: List[Hosts], tmp_path: Path, reference: Dict[str, str], drop_saved: _Drop
) -> None:
    """Host 1's connection to the coordinator drops just before the ``saved`` of step 3 reaches it: its folder holds
    its rank's part of step 3 but no ``.complete``, host 0's is complete. The loss restarts the job; attempt 1's
    ``start`` names step 3, host 1 writes its marker first, and both ranks resume from step 3 (on the old code
    rank 1 started from the beginning and rank 0 from step 3: the job's final weights were not the reference's)."""
    job, final, trained = _run(hosts, tmp_path, "none", pause="0.3", relay=drop_saved.start)
    assert drop_saved.dropped.is_set()
    assert final == reference
    assert all(marker["step"] == 3 for marker in _resumed_from_step_3(job, tmp_path))
    missed = tmp_path / "ckpt-h1" / "step-00000003"
    assert f"checkpoint {missed} complete: this host holds its ranks' parts of step 3 (2 ranks), which the job's " \
           "coordinator found complete while this host did not hear it" in job.console(1)  # fmt: skip
    assert sorted(set(trained)) == list(range(1, TOTAL + 1))


def test_a_host_that_missed_saved_and_lost_its_parts_starts_no_rank_and_the_job_ends_with_2(
    hosts: List[Hosts], tmp_path: Path, drop_saved: _Drop
) -> None:
    """As above, but host 1's part of step 3 is gone before it joins again: it cannot resume from step 3, and it
    does not start from an older one: one line naming the host, the checkpoint, its step and what to do; the job
    ends with exit 2 (class launcher_misuse) on both hosts, naming that line."""
    drop_saved.release.clear()
    job, _ = _start(hosts, tmp_path, "none", "0.3", drop_saved.start)
    assert drop_saved.dropped.wait(120), job.console(1)[-3000:]
    (tmp_path / "ckpt-h1" / "step-00000003" / ".parts" / "rank-1").unlink()
    drop_saved.release.set()
    assert [job.wait(0, timeout=120), job.wait(1, timeout=120)] == [2, 2], job.console(0)[-3000:]
    folder = tmp_path / "ckpt-h1" / "step-00000003"
    line = (f"host 1 (127.0.0.2) cannot resume from checkpoint {folder} (step 3), the newest the job's hosts "
            "completed together: it has no .complete, and the parts this host reported of it are gone")  # fmt: skip
    assert f"[ma-entrypoint] attempt 1 of at most 3: {line}" in job.console(1)
    assert "rank 1 attempt 1" not in job.console(1)  # no rank started on host 1
    for host in (0, 1):  # the summary names the shim's refusal as such, not as a script's usage error
        assert "  exit code : 2 (the shim refused its input" in job.console(host), job.console(host)[-2000:]
    for host in (0, 1):
        report = job.report(host)
        assert report["failure_class"]["class"] == "launcher_misuse", report["failure_class"]
        assert line in json.dumps(report), host
        # the refused attempt is one of the report's, failed like any other (on the old code host 1's list ended
        # with attempt 0, whose cause, host 1 lost, was all the job's status said of it)
        assert [attempt["attempt"] for attempt in report["attempts"]] == [0, 1], report["attempts"]
        refused = report["attempts"][1]
        assert refused["job_cause"]["line"].startswith(f"ma-entrypoint: error: {line}"), refused
        assert (refused["job_cause"]["kind"], refused["restarted"]) == ("launcher_misuse", False)
    refused = job.report(1)["attempts"][1]
    assert (refused["exit_code"], refused["failure_class"], refused["retryable"]) == (2, "launcher_misuse", False)
    assert refused["root_cause"]["name"] == "ma-entrypoint" and line in refused["root_cause"]["tail"][-1]
    for host in (0, 1):  # the console's summary: the job's class and the refusal's line
        console = job.console(host)
        assert "failure class: launcher_misuse (not retryable)" in console
        assert f"    | ma-entrypoint: error: {line}" in console


def test_a_report_lost_with_the_connection_is_sent_again_once_the_host_joins_again(
    hosts: List[Hosts], tmp_path: Path, reference: Dict[str, str], drop_parts: _Drop
) -> None:
    """Host 1's connection to the coordinator drops across its first ``parts`` report (its rank's part of step 3):
    the coordinator never got it. The loss restarts the job; once host 1 has joined again it reports the parts it
    holds once more, the coordinator finds step 3 complete (host 0 had reported its own), and attempt 1 resumes from
    step 3 on both hosts. On the old code the report was never sent again: no host heard ``saved`` for step 3, and
    both ranks started attempt 1 from the beginning (safe, but the save was lost)."""
    job, final, trained = _run(hosts, tmp_path, "none", pause="0.3", relay=drop_parts.start)
    assert drop_parts.dropped.is_set()
    assert final == reference
    assert all(marker == {**marker, "step": 3, "ranks": 2} for marker in _resumed_from_step_3(job, tmp_path))
    assert sorted(set(trained)) == list(range(1, TOTAL + 1))
