"""Elastic torchrun in the coordinator's book (run/hosts/jobstate.py rule 5), pure: who an attempt runs with,
what a lost or returning host changes, and that such restarts cost no restart."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest
from malaunch.entrypoint.run.hosts.jobloop import membership_event
from malaunch.entrypoint.run.hosts.jobstate import EXIT_HOST_LOST, JobState, Phase, Send
from malaunch.entrypoint.run.hosts.members import members_text, read_members
from malaunch.entrypoint.run.hosts.messages import Cause, End, Start, Welcome


def _book(hosts: int = 2, min_hosts: Optional[int] = 1, restarts: int = 0, lost_ok: bool = True) -> JobState:
    return JobState(hosts, restarts, lost_ok, lambda n: 1.0, host_wait=10.0, join_wait=30.0, now=0.0,
                    min_hosts=min_hosts)  # fmt: skip


class _Conn:
    pass


def _kinds(sends: List[Send]) -> List[Any]:
    return [(s.to, s.message.to_wire()["t"]) for s in sends if not isinstance(s.message, Welcome)]


def _starts(sends: List[Send]) -> List[Dict[str, Any]]:
    return [s.message.to_wire() for s in sends if isinstance(s.message, Start)]


ENDED = Cause(code=143, kind="signal", accept=True, peer=False, ended=True, line="x")


def _running(book: JobState, hosts: int = 2) -> List[_Conn]:
    conns = [_Conn() for _ in range(hosts)]
    for host, conn in enumerate(conns):
        sends = book.join(host, conn, f"10.0.0.{host + 1}", -1, 0.0)
    assert _starts(sends)[0]["members"] == members_text(tuple(range(hosts)))
    return conns


def test_members_travel_as_short_ranges() -> None:
    assert members_text((0, 1, 2, 3, 5, 7, 8)) == "0-3,5,7-8"
    assert read_members("0-3,5,7-8") == (0, 1, 2, 3, 5, 7, 8)
    assert members_text(tuple(range(16384))) == "0-16383"
    for bad in ("", "a", "3-1", "1,,2", None, 5):
        assert read_members(bad) is None


def test_members_lost_here_and_there_travel_packed_and_come_back_whole() -> None:
    import random

    every_other = tuple(range(0, 16384, 2))
    assert members_text(every_other).startswith("z:") and read_members(members_text(every_other)) == every_other
    chance = random.Random(29)
    for _ in range(5):  # the worst case: half of 16,384 hosts in no order at all
        members = tuple(sorted(chance.sample(range(16384), 8192)))
        assert read_members(members_text(members)) == members and len(members_text(members)) <= 3000
    import base64
    import zlib

    bomb = "z:" + base64.b64encode(zlib.compress(b"\xff" * 100000)).decode()  # more hosts than a job may have
    for bad in ("z:", "z:!!", "z:" + "A" * 12, bomb, "z:" + base64.b64encode(zlib.compress(b"\0" * 8)).decode()):
        assert read_members(bad) is None, bad[:40]


@pytest.mark.slow
def test_a_start_of_thousands_of_hosts_lost_here_and_there_fits_a_wire_line() -> None:
    import random

    hosts = 16384
    book = _book(hosts=hosts, min_hosts=1, restarts=1)
    conns = [_Conn() for _ in range(hosts)]
    for host, conn in enumerate(conns):
        book.join(host, conn, f"10.{host >> 8}.{host & 255}.1", -1, 0.0)
    lost = set(random.Random(7).sample(range(1, hosts), hosts // 2))
    for host in sorted(lost):
        book.leave(host, conns[host], "its connection closed", 1.0)
    tail = ["x" * 160] * 5
    for host in sorted(set(range(hosts)) - lost):
        book.over(host, 0, ENDED._replace(line="y" * 160, tail=tuple(tail)), 2.0)
    sends = book.advance(12.0)
    (start,) = _starts(sends)
    from malaunch.entrypoint.run.hosts.wire import Channel, job_key

    key = job_key("s")
    line = Channel(key, "0" * 32, "s").seal(start)  # raises WireError when over a line
    received = Channel(key, "0" * 32, "c").open(line)
    assert read_members(received["members"]) == tuple(sorted(set(range(hosts)) - lost))
    assert received["cause"]["kind"] == "host_lost"
    # then a rank fails with a long account (a charged restart): its tail gives way to the members, its line stays
    members = read_members(received["members"])
    assert members is not None
    own = Cause(code=7, kind="user_error", accept=True, peer=False, ended=False, line="z" * 160, tail=tuple(tail),
                log="/" + "l" * 199, name="rank-0", addr="10.0.0.1", rank=0, signal=None, retryable=False, score=0)
    book.over(0, 1, own, 13.0)
    for host in members[1:]:
        book.over(host, 1, ENDED, 13.0)
    (start,) = _starts(book.advance(20.0))
    received = Channel(key, "1" * 32, "c").open(Channel(key, "1" * 32, "s").seal(start))
    assert read_members(received["members"]) == members
    assert (received["cause"]["code"], received["cause"]["tail"]) == (7, ["z" * 160])


def test_a_host_lost_for_good_leaves_the_survivors_going_on_without_it_at_no_cost() -> None:
    book = _book(restarts=0)
    conns = _running(book)
    assert _kinds(book.leave(1, conns[1], "its connection closed", 1.0)) == [(0, "end")]
    assert book.over(0, 0, ENDED, 2.0) == [] and book.phase is Phase.WAITING
    assert book.advance(11.9) == []  # the lost host has MALAUNCH_HOST_WAIT to come back
    sends = book.advance(12.0)
    cause = sends[0].message.to_wire()["cause"]
    assert _starts(sends) == [{"t": "start", "attempt": 1, "cause": cause, "members": "0", "free": True}]
    assert sends[0].message.cause.kind == "host_lost" and book.free == 1
    assert _kinds(book.over(0, 1, None, 13.0)) == [(None, "finish")]
    assert book.final is not None and (book.final.code, book.final.cause) == (0, None)


def test_a_host_that_comes_back_ends_the_smaller_attempt_and_the_next_takes_it_in() -> None:
    book = _book(restarts=0)
    conns = _running(book)
    book.leave(1, conns[1], "its connection closed", 1.0)
    book.over(0, 0, ENDED, 2.0)
    book.advance(12.0)
    assert book.round.members == (0,)
    sends = book.join(1, _Conn(), "10.0.0.2", -1, 20.0)
    assert _kinds(sends) == [(0, "end")]
    end = next(s.message.to_wire() for s in sends if isinstance(s.message, End))
    assert (end["why"], end["host"], end["attempt"]) == ("joined", 1, 1)
    sends = book.over(0, 1, ENDED, 21.0)  # no back-off: a change of hosts is no failure
    assert [(p["attempt"], p["members"], p["free"]) for p in _starts(sends)] == [(2, "0-1", True)]
    assert book.free == 2  # attempts 1 and 2 cost nothing: MA_MAX_RESTARTS=0 still has its budget
    book.over(0, 2, None, 22.0)
    assert book.over(1, 2, None, 22.0)[-1].message.to_wire() == {"t": "finish", "code": 0, "cause": None, "attempt": 2}


def test_a_lost_host_back_within_the_wait_restarts_everyone_at_no_cost() -> None:
    book = _book(restarts=0)
    conns = _running(book)
    book.leave(1, conns[1], "no heartbeat for 3 s", 1.0)
    book.over(0, 0, ENDED, 2.0)
    assert book.join(1, _Conn(), "10.0.0.2", 0, 3.0)[-1].message.to_wire()["members"] == "0-1"


def test_fewer_hosts_than_the_minimum_end_the_job_with_75() -> None:
    book = _book(hosts=3, min_hosts=2, restarts=3)
    conns = _running(book, 3)
    book.leave(1, conns[1], "its connection closed", 1.0)
    book.leave(2, conns[2], "its connection closed", 1.0)
    book.over(0, 0, ENDED, 2.0)
    sends = book.advance(12.0)
    assert _kinds(sends) == [(None, "finish")] and sends[0].message.code == EXIT_HOST_LOST
    assert "did not come back within 10 s" in sends[0].message.cause.line


def test_with_enough_hosts_three_become_two() -> None:
    book = _book(hosts=3, min_hosts=2)
    conns = _running(book, 3)
    book.leave(2, conns[2], "its connection closed", 1.0)
    book.over(0, 0, ENDED, 2.0)
    book.over(1, 0, ENDED, 2.0)
    assert [(p["attempt"], p["members"]) for p in _starts(book.advance(12.0))] == [(1, "0-1")]


def test_a_failure_of_a_rank_is_still_charged() -> None:
    book = _book(restarts=0)
    _running(book)
    own = Cause(code=7, kind="user_error", accept=True, peer=False, ended=False, line="exit 7")
    book.over(1, 0, own, 1.0)
    sends = book.over(0, 0, ENDED, 1.5)
    assert _kinds(sends) == [(None, "finish")] and sends[0].message.code == 7


def test_a_failure_of_a_smaller_world_restarts_it_without_waiting_for_the_host_gone_before() -> None:
    book = _book(restarts=1)
    conns = _running(book)
    book.leave(1, conns[1], "its connection closed", 1.0)
    book.over(0, 0, ENDED, 2.0)
    book.advance(12.0)
    own = Cause(code=137, kind="signal", accept=True, peer=False, ended=False, line="killed")
    assert book.over(0, 1, own, 13.0) == [] and book.phase is Phase.BACKOFF
    sends = book.advance(14.0)  # the back-off (1 s), not MALAUNCH_HOST_WAIT for host 1 again
    assert [(p["attempt"], p["members"], p["free"]) for p in _starts(sends)] == [(2, "0", False)]
    sends = book.over(0, 2, own, 15.0)  # the one charged restart is spent
    assert _kinds(sends) == [(None, "finish")] and sends[0].message.code == 137


def test_a_restart_on_that_refuses_host_lost_does_not_stop_a_membership_restart() -> None:
    book = _book(restarts=0, lost_ok=False)
    conns = _running(book)
    book.leave(1, conns[1], "its connection closed", 1.0)
    book.over(0, 0, ENDED, 2.0)
    assert [p["members"] for p in _starts(book.advance(12.0))] == ["0"]


def test_with_enough_hosts_the_first_attempt_starts_after_the_join_wait() -> None:
    book = _book(hosts=3, min_hosts=2)
    book.join(0, _Conn(), "a", -1, 0.0)
    book.join(1, _Conn(), "b", -1, 0.0)
    assert [p["members"] for p in _starts(book.advance(30.0))] == ["0-1"]


def test_not_elastic_nothing_changes() -> None:
    book = _book(min_hosts=None, restarts=0, lost_ok=False)
    conns = [_Conn(), _Conn()]
    book.join(0, conns[0], "a", -1, 0.0)
    start = _starts(book.join(1, conns[1], "b", -1, 0.0))[0]
    assert start == {"t": "start", "attempt": 0, "cause": None}
    book.leave(1, conns[1], "its connection closed", 1.0)
    sends = book.over(0, 0, ENDED, 1.5)
    assert _kinds(sends) == [(None, "finish")] and sends[0].message.code == EXIT_HOST_LOST


@pytest.mark.parametrize(("before", "after", "left", "joined"), [([0, 1], (0,), [1], []), ([0], (0, 1), [], [1])])
def test_a_membership_event_says_who_left_or_joined_and_the_world_size(
    before: List[int], after: tuple[int, ...], left: List[int], joined: List[int]
) -> None:
    event = membership_event(3, before, after, 2, True)
    assert event is not None
    assert (event["attempt"], event["members"], event["world_size"]) == (3, list(after), 2 * len(after))
    assert (event["left"], event["joined"], event["charged"]) == (left, joined, False)
    assert "not charged to MA_MAX_RESTARTS" in event["line"]
    assert membership_event(3, [0, 1], (0, 1), 2, True) is None
