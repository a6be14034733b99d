"""Following log files woken by the kernel (inotify) instead of a timer, and by a timer where the kernel cannot.

Real writer processes write the files; nothing is timed: each test checks what is read, in which order, and
what woke the reader. Lines must never be lost or reordered whichever way the reader is woken ("lag, not loss").
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import pytest
from malaunch.sdk import Job, JobState
from malaunch.sdk.backends.filewatch import ChangeWatch
from malaunch.sdk.backends.logtail import follow_files
from sdkutil import assert_nothing_running, write_job

pytestmark = pytest.mark.process

#: Writes LINES numbered lines to each file given, in random pieces that split lines, at random short
#: intervals, the files taking turns; then renames a marker into place (the "job ended" a follower waits for).
WRITER = textwrap.dedent(
    """
    import os, random, sys, time
    marker, *paths = sys.argv[1:]
    lines = int(os.environ["LINES"])
    rng = random.Random(7)
    data = {p: b"".join(b"%s line %d\\n" % (os.path.basename(p).encode(), i) for i in range(lines)) for p in paths}
    done = {p: 0 for p in paths}
    handles = {p: open(p, "ab", buffering=0) for p in paths}
    while any(done[p] < len(data[p]) for p in paths):
        p = rng.choice([p for p in paths if done[p] < len(data[p])])
        size = rng.randint(1, 40)
        handles[p].write(data[p][done[p] : done[p] + size])
        done[p] += size
        if rng.random() < 0.3:
            time.sleep(rng.uniform(0, 0.004))
    with open(marker + ".tmp", "w") as out:
        out.write("ended")
    os.replace(marker + ".tmp", marker)
    """
)


def expected(host: int, path: Path, lines: int) -> List[str]:
    return [f"[host {host}] {path.name} line {i}" for i in range(lines)]


@pytest.mark.parametrize("kernel", [True, False], ids=["inotify", "polling"])
def test_follow_keeps_every_line_in_order(tmp_path: Path, kernel: bool) -> None:
    lines = 400
    a, b, marker = tmp_path / "a" / "a.log", tmp_path / "b.log", tmp_path / "state.json"
    a.parent.mkdir()
    sources = [(0, str(a)), (1, str(b))]
    sleeps: List[float] = []
    with ChangeWatch([str(a), str(b), str(marker)], use_kernel=kernel) as watch:
        assert watch.kernel is kernel
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(marker), str(a), str(b)], env={**os.environ, "LINES": str(lines)}
        )
        try:
            got = list(follow_files(sources, marker.exists, watch=watch, sleep=sleeps.append))
        finally:
            assert writer.wait(timeout=60) == 0
    assert [line for line in got if line.startswith("[host 0] ")] == expected(0, a, lines)
    assert [line for line in got if line.startswith("[host 1] ")] == expected(1, b, lines)
    assert len(got) == 2 * lines
    assert sleeps == []  # the watch waits; the poll's sleep is not used even when the watch polls


def test_a_log_whose_changes_are_never_reported_is_still_read_in_full(tmp_path: Path) -> None:
    lines = 100
    log, marker = tmp_path / "a.log", tmp_path / "state.json"
    with ChangeWatch([str(marker)]) as watch:  # the log's own changes never wake the follower
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(marker), str(log)], env={**os.environ, "LINES": str(lines)}
        )
        try:
            got = list(follow_files([(0, str(log))], marker.exists, watch=watch, check_every=0.02))
        finally:
            assert writer.wait(timeout=60) == 0
    assert got == expected(0, log, lines)


def test_a_change_to_a_watched_file_wakes_the_wait(tmp_path: Path) -> None:
    log, other = tmp_path / "console.log", tmp_path / "console.idx"
    with ChangeWatch([str(log)]) as watch:
        assert watch.kernel
        assert watch.wait(0) is None  # the folder was just watched: anything may have changed before
        other.write_text("noise\n")
        assert watch.wait(0.2) == frozenset()  # another file of the folder: read, ignored, no wake-up
        writer = subprocess.Popen([sys.executable, "-c", f"open({str(log)!r}, 'ab').write(b'hello\\n')"])
        try:
            assert watch.wait(120) == frozenset({str(log)})
        finally:
            assert writer.wait(timeout=60) == 0


def test_a_file_replaced_by_a_rename_wakes_the_wait(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with ChangeWatch([str(state)]) as watch:
        assert watch.wait(0) is None
        (tmp_path / "state.json.tmp").write_text("{}")
        os.replace(tmp_path / "state.json.tmp", state)
        assert watch.wait(120) == frozenset({str(state)})


def test_a_folder_made_later_is_watched_once_it_exists(tmp_path: Path) -> None:
    log = tmp_path / "hosts" / "0" / "console.log"
    with ChangeWatch([str(log)], poll=0.01) as watch:
        assert watch.wait(120) == frozenset()  # no folder yet: the wait is cut to the poll and nothing changed
        log.parent.mkdir(parents=True)
        log.write_bytes(b"early\n")  # written before the folder is watched
        assert watch.wait(120) is None  # the folder is watched now: the caller reads everything once
        with log.open("ab") as handle:
            handle.write(b"late\n")
        assert watch.wait(120) == frozenset({str(log)})


def test_lost_events_make_the_caller_read_everything(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    queue = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    with ChangeWatch([str(a), str(b)]) as watch:
        assert watch.wait(0) is None
        with a.open("ab", buffering=0) as one, b.open("ab", buffering=0) as two:
            for _ in range(queue // 2 + 1000):  # alternating files: no two events in a row merge, the queue overflows
                one.write(b".")
                two.write(b".")
        seen: List[object] = []
        while (result := watch.wait(0)) != frozenset():  # everything queued, up to the overflow
            seen.append(result)
        assert None in seen  # the overflow says "anything may have changed"
        with a.open("ab") as handle:
            handle.write(b"after\n")
        assert watch.wait(120) == frozenset({str(a)})  # and the watch goes on
        assert watch.kernel


def test_a_folder_removed_and_made_again_is_watched_again(tmp_path: Path) -> None:
    log = tmp_path / "host" / "console.log"
    log.parent.mkdir()
    with ChangeWatch([str(log)], poll=0.01) as watch:
        assert watch.wait(0) is None
        log.write_bytes(b"one\n")
        log.unlink()
        log.parent.rmdir()
        seen = watch.wait(120)
        while seen:  # the write may come first; the folder's removal then says "anything may have changed"
            seen = watch.wait(120)
        assert seen is None
        log.parent.mkdir()
        assert watch.wait(120) is None  # watched again
        log.write_bytes(b"two\n")
        assert watch.wait(120) == frozenset({str(log)})


def test_without_the_kernel_the_wait_polls(tmp_path: Path) -> None:
    slept: List[float] = []
    with ChangeWatch([str(tmp_path / "x.log")], use_kernel=False, poll=0.25, sleep=slept.append) as watch:
        assert not watch.kernel
        assert watch.wait(5.0) is None and watch.wait(0.1) is None
    assert slept == [0.25, 0.1]


FOLLOWED = """
    import os, random, sys, time
    rank = os.environ["RANK_ID"]
    rng = random.Random(int(rank))
    time.sleep(1.0)
    for i in range(150):
        time.sleep(rng.uniform(0, 0.01))
        sys.stdout.write(f"rank {rank} line {i}\\n")
        sys.stdout.flush()
"""


@pytest.mark.usefixtures("cleanup_jobs")
def test_following_a_running_local_job_loses_no_line(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MALAUNCH_HOME", str(home))
    job = write_job(tmp_path / "f", FOLLOWED, name="follow", resources={"hosts": 2, "devices_per_host": 2})
    handle = Job.from_yaml(str(job)).submit()
    followed = list(handle.logs(follow=True))  # from the start; ends when the job has ended
    assert handle.status().state is JobState.SUCCEEDED
    by_rank: Dict[str, List[str]] = {}
    for line in followed:
        if " line " in line:
            by_rank.setdefault(line.split(" rank ", 1)[0], []).append(line.split("] ", 1)[1])
    ranks = {"[host 0": ("0", "1"), "[host 1": ("2", "3")}
    assert sorted(by_rank) == sorted(ranks)
    for host, numbers in ranks.items():
        for rank in numbers:
            assert [x for x in by_rank[host] if x.startswith(f"rank {rank} ")] == [
                f"rank {rank} line {i}" for i in range(150)
            ]
    assert sorted(followed) == sorted(handle.logs(follow=True))  # following the ended job: the same lines
    assert_nothing_running(handle.id)
