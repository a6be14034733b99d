"""Saves completed through the coordinator (run/hosts/saves.py): what a host reports of its own checkpoint folder,
how the coordinator adds the hosts' reports up, and the marker a host writes, once and whole. The folders are
real (the helper writes the parts); the protocol's messages go over a real coordinator's sockets at the end."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Dict, List

from malaunch.entrypoint import checkpoint
from malaunch.entrypoint.contract.checkpoint_dir import marker_text
from malaunch.entrypoint.run.hosts.jobstate import JobState, Send
from malaunch.entrypoint.run.hosts.messages import Hello, Parts, Resume, Saved, Start, parse
from malaunch.entrypoint.run.hosts.saves import HeldParts, SaveBook, SaveWatch, held_parts, write_marker
from malaunch.entrypoint.run.hosts.server import Coordinator
from malaunch.entrypoint.run.hosts.wire import Channel, job_key, read_challenge

STEP = "step-00000006"


def _part(folder: Path, rank: int, ranks: int = 4, attempt: int = 1, step: int = 6) -> None:
    """Rank ``rank`` of a job of ``ranks`` saves its part of ``step`` in attempt ``attempt``, as a script does."""
    env = {"MALAUNCH_ATTEMPT": str(attempt)}
    with checkpoint.save(step, str(folder), rank=rank, ranks=ranks, environ=env) as where:
        Path(where, f"rank-{rank}.pt").write_bytes(b"weights")


def test_a_host_holds_the_parts_of_the_running_attempt_written_since_it_started(tmp_path: Path) -> None:
    since = time.time() - 1
    _part(tmp_path, 2)
    _part(tmp_path, 3)
    _part(tmp_path, 0, attempt=0)  # an older attempt's part never counts
    assert held_parts(str(tmp_path), 1, since) == [HeldParts(STEP, 6, 4, frozenset({2, 3}))]
    assert held_parts(str(tmp_path), 0, since) == [HeldParts(STEP, 6, 4, frozenset({0}))]
    old = tmp_path / STEP / ".parts" / "rank-3"
    os.utime(old, (since - 60, since - 60))  # left by an earlier run of the job: written before this attempt
    assert held_parts(str(tmp_path), 1, since) == [HeldParts(STEP, 6, 4, frozenset({2}))]
    (tmp_path / STEP / ".parts" / "rank-9").write_text(json.dumps({"step": 6, "attempt": "1.0", "rank": 9,
                                                                   "ranks": 4}))  # fmt: skip
    (tmp_path / STEP / ".parts" / "rank-8").write_text("half a reco")
    assert held_parts(str(tmp_path), 1, since) == [HeldParts(STEP, 6, 4, frozenset({2}))]  # no rank 9 of 4
    write_marker(str(tmp_path / STEP), 6, 4)  # completed in this attempt (a rank of a shared folder): still held
    assert held_parts(str(tmp_path), 1, since) == [HeldParts(STEP, 6, 4, frozenset({2}))]
    os.utime(tmp_path / STEP / ".complete", (since - 60, since - 60))
    assert held_parts(str(tmp_path), 1, since) == []  # complete before the attempt: none of its parts is there


def test_the_marker_is_written_whole_once(tmp_path: Path) -> None:
    assert write_marker(str(tmp_path), 6, 4) is True
    text = (tmp_path / ".complete").read_text()
    assert json.loads(text) == {**json.loads(marker_text(6, 0.0, 4)), "time": json.loads(text)["time"]}
    assert write_marker(str(tmp_path), 6, 4) is False
    assert (tmp_path / ".complete").read_text() == text and sorted(os.listdir(tmp_path)) == [".complete"]


def test_the_coordinator_says_saved_once_the_hosts_hold_every_part_of_the_running_attempt() -> None:
    book = SaveBook()
    assert book.parts(1, 0, Parts(1, STEP, 6, 4, (0, 1))) == []
    assert book.parts(1, 1, Parts(0, STEP, 6, 4, (2, 3))) == []  # a report of an older attempt
    assert book.parts(1, 1, Parts(1, STEP, 6, 4, (2,))) == []
    assert book.parts(1, 1, Parts(1, STEP, 6, 4, (2, 3))) == [Send(None, Saved(1, STEP, 6, 4))]  # to every host
    assert book.parts(1, 0, Parts(1, STEP, 6, 4, (0, 1, 2, 3))) == []  # said once
    assert book.parts(2, 0, Parts(1, "step-00000009", 9, 4, (0, 1, 2, 3))) == []  # attempt 2 runs now
    assert book.parts(2, 0, Parts(2, STEP, 6, 4, (0, 1))) == []  # a new attempt starts from nothing
    assert book.parts(2, 1, Parts(2, STEP, 6, 2, (0, 1))) == [Send(None, Saved(2, STEP, 6, 2))]  # 2 ranks
    assert book.parts(2, 1, Parts(2, STEP, 6, 4, (2, 3))) == [Send(None, Saved(2, STEP, 6, 4))]


def _watch(folder: Path, sent: List[Parts], said: List[str]) -> SaveWatch:
    return SaveWatch(str(folder), sent.append, said.append)


def test_each_host_reports_its_own_folder_and_writes_the_marker_only_where_its_parts_are(tmp_path: Path) -> None:
    """Two hosts, each with its own folder (ModelArts): neither rank can complete; the shims do."""
    folders = {host: tmp_path / f"h{host}" for host in (0, 1)}
    sent: Dict[int, List[Parts]] = {0: [], 1: []}
    said: List[str] = []
    watches = {host: _watch(folders[host], sent[host], said) for host in (0, 1)}
    for watch in watches.values():
        watch.begin(1)
    _part(folders[0], 0, ranks=2)
    _part(folders[1], 1, ranks=2)
    book = SaveBook()
    for host, watch in watches.items():
        watch.flush()
        watch.flush()  # a set said once is not said again
        assert sent[host] == [Parts(1, STEP, 6, 2, (host,))]
    assert not (folders[0] / STEP / ".complete").exists()  # the rank alone could not complete it
    saved = [book.parts(1, host, sent[host][0]) for host in (0, 1)]
    assert saved == [[], [Send(None, Saved(1, STEP, 6, 2))]]
    watches[0].saved(Saved(1, "step-00000009", 9, 2))  # one it holds no part of: nothing
    assert not (folders[0] / "step-00000009").exists()
    for watch in watches.values():
        watch.saved(Saved(1, STEP, 6, 2))
    for host in (0, 1):
        marker = json.loads((folders[host] / STEP / ".complete").read_text())
        assert (marker["step"], marker["ranks"]) == (6, 2)
        assert checkpoint.latest(str(folders[host])) is not None
    assert len(said) == 2 and f"checkpoint {folders[0] / STEP} complete" in said[0]


def test_no_marker_when_the_attempt_moved_on_or_a_reported_part_is_gone(tmp_path: Path) -> None:
    sent: List[Parts] = []
    watch = _watch(tmp_path, sent, [])
    watch.begin(1)
    _part(tmp_path, 0)
    watch.flush()
    (tmp_path / STEP / ".parts" / "rank-0").unlink()
    watch.saved(Saved(1, STEP, 6, 4))
    assert not (tmp_path / STEP / ".complete").exists()
    _part(tmp_path, 0)
    watch.begin(2)  # attempt 2 started here: attempt 1's word comes too late
    watch.saved(Saved(1, STEP, 6, 4))
    assert not (tmp_path / STEP / ".complete").exists()


def test_in_a_shared_folder_the_rank_completes_and_the_shim_writes_nothing(tmp_path: Path) -> None:
    sent: List[Parts] = []
    watch = _watch(tmp_path, sent, [])
    watch.begin(1)
    _part(tmp_path, 0, ranks=2)
    watch.flush()
    _part(tmp_path, 1, ranks=2)  # the rank that finds every part writes .complete
    text = (tmp_path / STEP / ".complete").read_text()
    watch.saved(Saved(1, STEP, 6, 2))
    assert (tmp_path / STEP / ".complete").read_text() == text
    watch.flush()  # reported all the same: the coordinator's resume point is the checkpoint the ranks completed
    assert sent == [Parts(1, STEP, 6, 2, (0,)), Parts(1, STEP, 6, 2, (0, 1))]


def _join(port: int, key: bytes, host: int) -> tuple[socket.socket, Channel]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    channel = Channel(key, read_challenge(sock.recv(4096).partition(b"\n")[0]), "c")
    sock.sendall(channel.seal(Hello(host, f"127.0.0.{host + 1}").to_wire()))
    return sock, channel


class _Reader:
    """One host's side of a coordinator connection: the messages it is sent, in order."""

    def __init__(self, sock: socket.socket, channel: Channel) -> None:
        self.sock, self.channel, self.buffer = sock, channel, b""

    def until(self, kind: type) -> object:
        while True:
            while b"\n" in self.buffer:
                line, _, self.buffer = self.buffer.partition(b"\n")
                message = parse(self.channel.open(line + b"\n"))
                if isinstance(message, kind):
                    return message
            chunk = self.sock.recv(65536)
            assert chunk, "the coordinator closed the connection"
            self.buffer += chunk


def test_a_real_coordinator_tells_every_host_once_both_reported() -> None:
    key = job_key("a-secret")
    state = JobState(2, 0, True, lambda n: 0.1, host_wait=5.0, join_wait=10.0, now=time.monotonic())
    server = Coordinator(key, state, 0, 0.2, 5.0, lambda line: None, bind="127.0.0.1").start()
    try:
        joined = [_Reader(*_join(server.port, key, host)) for host in (0, 1)]
        for reader in joined:  # a host reports parts of the attempt it was told to start, never before
            assert isinstance(reader.until(Start), Start)
        for reader, ranks in zip(joined, ((0, 1), (2, 3))):
            reader.sock.sendall(reader.channel.seal(Parts(0, STEP, 6, 4, ranks).to_wire()))
        assert [reader.until(Saved) for reader in joined] == [Saved(0, STEP, 6, 4)] * 2
        assert state.resume == Resume(STEP, 6)  # the next attempt's start names it
        for reader in joined:
            reader.sock.close()
    finally:
        server.close(linger=0.5)


def test_a_part_stamped_a_second_before_the_attempt_counts_one_of_an_earlier_run_does_not(tmp_path: Path) -> None:
    """A file system that keeps whole seconds may stamp a fresh part before the attempt's start; a part left by an
    earlier run of the job with the same attempt number is older than a shim's start."""
    sent: List[Parts] = []
    watch = _watch(tmp_path, sent, [])
    watch.begin(1)
    _part(tmp_path, 0, ranks=2)
    _part(tmp_path, 1, ranks=2, step=9)
    now = time.time()
    os.utime(tmp_path / STEP / ".parts" / "rank-0", (now - 1, now - 1))
    os.utime(tmp_path / "step-00000009" / ".parts" / "rank-1", (now - 60, now - 60))
    watch.flush()
    assert sent == [Parts(1, STEP, 6, 2, (0,))]


def test_a_report_the_coordinator_would_refuse_is_not_sent(tmp_path: Path) -> None:
    """Ranks past what a message can carry (a host holding every other rank of 40,000): sent, the report would be
    refused as malformed and cost the host its connection; unsent, that save stays incomplete."""
    sent: List[Parts] = []
    watch = _watch(tmp_path, sent, [])
    watch.begin(1)
    for rank in range(0, 40000, 2):  # as the helper's parts, written without a rank's whole save
        (tmp_path / STEP / ".parts").mkdir(parents=True, exist_ok=True)
        (tmp_path / STEP / ".parts" / f"rank-{rank}").write_text(json.dumps({"step": 6, "attempt": "1.0",
                                                                           "rank": rank, "ranks": 40000}))
    watch.flush()
    assert sent == []
    _part(tmp_path, 1, ranks=2, step=9)
    watch.flush()
    assert sent == [Parts(1, "step-00000009", 9, 2, (1,))]


def test_a_host_that_joins_again_reports_what_it_holds_again_and_a_repeat_counts_nothing_new(tmp_path: Path) -> None:
    """A report sent while the link was down is lost with it: each join reports the unfinished checkpoints of the
    attempt again (those reported before too); the coordinator adds a repeat up as nothing new."""
    sent: List[Parts] = []
    watch = _watch(tmp_path, sent, [])
    watch.joined()  # no attempt yet: nothing to report
    watch.begin(1)
    _part(tmp_path, 2)
    watch.flush()
    watch.flush()  # nothing new: not sent again
    assert sent == [Parts(1, STEP, 6, 4, (2,))]
    _part(tmp_path, 3)
    watch.joined()
    assert sent == [Parts(1, STEP, 6, 4, (2,)), Parts(1, STEP, 6, 4, (2, 3))]
    watch.joined()  # every join: all of them again
    assert sent[2:] == [Parts(1, STEP, 6, 4, (2, 3))]
    book = SaveBook()
    assert [book.parts(1, 1, message) for message in sent] == [[], [], []]
    assert book.parts(1, 0, Parts(1, STEP, 6, 4, (0, 1))) == [Send(None, Saved(1, STEP, 6, 4))]
    assert book.parts(1, 1, sent[-1]) == []  # said once, whatever is repeated


HOST = "host 1 (10.0.0.2)"


def test_a_host_remembers_the_newest_checkpoint_it_heard_complete_for_its_hellos(tmp_path: Path) -> None:
    """What a coordinator said complete (``saved``) or named to resume from (``start``), the newest step: a new
    coordinator learns it from the hello (whether this host could write the marker or not)."""
    watch = _watch(tmp_path, [], [])
    assert watch.heard() is None
    watch.begin(1)
    watch.saved(Saved(1, "step-00000009", 9, 4))  # this host holds no part of it: no marker, but the job has it
    assert watch.heard() == Resume("step-00000009", 9) and not (tmp_path / "step-00000009").exists()
    watch.agree(Resume(STEP, 6), HOST)  # an older one named later (it refuses): the newest heard stays
    assert watch.heard() == Resume("step-00000009", 9)
    watch.agree(Resume("step-00000012", 12), HOST)
    assert watch.heard() == Resume("step-00000012", 12)


def test_a_host_that_missed_saved_writes_the_marker_before_the_next_attempt(tmp_path: Path) -> None:
    """Its link was down when the coordinator said ``saved``: the next ``start`` names the checkpoint, and the host
    still holds every part it reported of it (those of an attempt before the one that starts now)."""
    said: List[str] = []
    watch = _watch(tmp_path, [], said)
    watch.begin(1)
    _part(tmp_path, 2)
    _part(tmp_path, 3)
    watch.flush()  # reported: ranks 2 and 3 of 4
    assert watch.agree(Resume(STEP, 6), HOST) is None
    marker = json.loads((tmp_path / STEP / ".complete").read_text())
    assert (marker["step"], marker["ranks"]) == (6, 4)
    assert said == [f"checkpoint {tmp_path / STEP} complete: this host holds its ranks' parts of step 6 (4 ranks), "
                    "which the job's coordinator found complete while this host did not hear it"]  # fmt: skip
    watch.begin(2)  # its record outlives the attempt: an attempt that starts again from it finds it complete
    assert watch.agree(Resume(STEP, 6), HOST) is None and len(said) == 1


def test_a_host_that_cannot_hold_the_agreed_checkpoint_says_why_and_what_to_do(tmp_path: Path) -> None:
    watch = _watch(tmp_path, [], [])
    watch.begin(1)
    _part(tmp_path, 2)
    _part(tmp_path, 3)
    watch.flush()
    (tmp_path / STEP / ".parts" / "rank-3").unlink()  # one of the parts it reported is gone
    line = watch.agree(Resume(STEP, 6), HOST)
    assert line is not None and not (tmp_path / STEP / ".complete").exists()
    assert line.startswith(f"{HOST} cannot resume from checkpoint {tmp_path / STEP} (step 6), the newest the job's "
                           "hosts completed together: it has no .complete, and the parts this host reported of it "
                           "are gone; its ranks would start from another step than the other hosts' ranks, so none "
                           "starts: restore that folder on this host")  # fmt: skip
    line = watch.agree(Resume("step-00000009", 9), HOST)  # a replaced host: it never reported that one
    assert line is not None and "this host's shim reported none of its parts" in line
    write_marker(str(tmp_path / STEP), 5, 4)
    line = watch.agree(Resume(STEP, 6), HOST)
    assert line is not None and "its .complete records step 5" in line
    assert _watch(tmp_path, [], []).agree(Resume(STEP, 5), HOST) is None  # complete here: nothing to write
    assert SaveWatch(None, lambda parts: None, lambda line: None).agree(Resume(STEP, 6), HOST) is None
