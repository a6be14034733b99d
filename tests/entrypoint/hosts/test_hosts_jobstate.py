"""The coordinator's book (run/hosts/jobstate.py), pure: who is here, the job's attempt, its root cause."""

from __future__ import annotations

from typing import Any, List

import pytest
from malaunch.entrypoint.run.hosts.jobstate import EXIT_HOST_LOST, JobState, Phase, Send
from malaunch.entrypoint.run.hosts.messages import Cause, Parts, Resume, Welcome, Why
from malaunch.entrypoint.run.hosts.saves import SaveBook
from malaunch.entrypoint.run.hosts.wire import Channel, WireError, job_key


def _book(hosts: int = 2, restarts: int = 3, lost_ok: bool = True) -> JobState:
    return JobState(hosts, restarts, lost_ok, lambda n: 1.0, host_wait=10.0, join_wait=30.0, now=0.0)


def _kinds(sends: List[Send]) -> List[Any]:
    return [(s.to, s.message.to_wire()["t"]) for s in sends if not isinstance(s.message, Welcome)]


def _cause(code: int, kind: str = "signal", accept: bool = True, peer: bool = False) -> Cause:
    return Cause(code=code, kind=kind, accept=accept, peer=peer, ended=False, line=f"exit {code}")


class _Conn:
    """A connection as the book sees it: only its identity counts."""

    def __init__(self, name: str) -> None:
        self.name = name


CONN = {name: _Conn(name) for name in ("conn0", "conn1", "conn1b", "conn2")}


def _join_all(book: JobState, hosts: int = 2) -> List[Send]:
    out: List[Send] = []
    for host in range(hosts):
        out += book.join(host, CONN[f"conn{host}"], f"10.0.0.{host + 1}", -1, 0.0)
    return out


def test_attempt_zero_starts_when_every_host_joined() -> None:
    book = _book()
    assert _kinds(book.join(0, "c0", "a", -1, 0.0)) == []
    assert _kinds(book.join(1, "c1", "b", -1, 0.0)) == [(None, "start")]
    assert book.attempt == 0


def test_a_host_missing_at_the_start_ends_the_job_with_3() -> None:
    book = _book()
    book.join(0, "c0", "a", -1, 0.0)
    sends = book.advance(31.0)
    assert _kinds(sends) == [(None, "finish")] and sends[0].message.code == 3
    assert "host(s) 1" in sends[0].message.cause.line


def test_a_failure_ends_the_others_and_restarts_everyone_after_the_backoff() -> None:
    book = _book()
    _join_all(book)
    assert _kinds(book.failing(1, 0, 1.0)) == [(0, "end")]
    assert _kinds(book.over(1, 0, _cause(137), 2.0)) == []
    assert _kinds(book.over(0, 0, _cause(3, "rendezvous_timeout")._replace(ended=True), 3.0)) == []
    assert book.phase is Phase.BACKOFF
    sends = book.advance(4.1)
    assert _kinds(sends) == [(None, "start")] and sends[0].message.attempt == 1
    assert sends[0].message.cause.host == 1 and sends[0].message.cause.code == 137


def test_every_start_names_the_newest_checkpoint_the_hosts_completed_none_before_the_first() -> None:
    book = _book()
    saves = SaveBook(book)  # as the coordinator keeps it
    assert [send.message.resume for send in _join_all(book) if send.to is None] == [None]
    assert saves.parts(0, 0, Parts(0, "step-00000006", 6, 2, (0, 1))) != []
    assert saves.parts(0, 1, Parts(0, "step-00000003", 3, 2, (0, 1))) != []  # an older one later: the newest stays
    book.failing(1, 0, 1.0)
    book.over(1, 0, _cause(137), 2.0)
    book.over(0, 0, _cause(3)._replace(ended=True), 3.0)
    sends = book.advance(4.1)
    assert [send.message.resume for send in sends] == [Resume("step-00000006", 6)]
    elastic = JobState(2, 3, True, lambda n: 1.0, host_wait=10.0, join_wait=30.0, now=0.0, min_hosts=1)
    elastic.resume = Resume("step-00000009", 9)
    assert [send.message.resume for send in _join_all(elastic) if send.to is None] == [Resume("step-00000009", 9)]


def test_a_coordinator_that_replaced_a_lost_one_learns_the_resume_point_from_the_hosts_hellos() -> None:
    """The master host was replaced: its new coordinator saw no save complete, but the hosts heard of some (a
    ``saved``, a ``start``'s ``resume``); the newest any host names is the job's, from the first ``start`` on. A
    save this coordinator completes later is newer still. On the old code the first start named none: each host
    resumed from the newest checkpoint of its own folder, whatever the others resumed from."""
    book = _book(hosts=3, restarts=9)
    saves = SaveBook(book)  # as the coordinator keeps it: it hears each hello's before the book's join
    for host, heard in ((0, None), (1, Resume("step-00000006", 6)), (2, Resume("step-00000003", 3))):  # 2 missed 6
        saves.heard(heard)  # host 0: the new master's shim heard of none
        sends = book.join(host, CONN[f"conn{host}"], f"10.0.0.{host + 1}", 4, 0.0)
    assert [(send.message.attempt, send.message.resume) for send in sends if send.to is None] == \
        [(5, Resume("step-00000006", 6))]  # fmt: skip
    assert saves.parts(5, 0, Parts(5, "step-00000012", 12, 3, (0, 1, 2))) != []
    assert book.resume == Resume("step-00000012", 12)
    saves.heard(Resume("step-00000009", 9))  # a host that joins again: older than the book's
    assert book.resume == Resume("step-00000012", 12)


def test_a_death_that_says_a_peer_failed_never_outranks_one_that_does_not() -> None:
    book = _book(restarts=0)
    _join_all(book)
    book.over(0, 0, _cause(134, peer=True), 1.0)  # gloo: Connection closed by peer, seen first
    sends = book.over(1, 0, _cause(7, "user_error", accept=False), 1.5)
    assert _kinds(sends) == [(None, "finish")]
    assert (sends[0].message.code, sends[0].message.cause.host) == (7, 1)


def test_a_failure_that_says_a_peer_failed_holds_the_others_end_so_the_peer_can_die_by_itself() -> None:
    book = _book(hosts=3, restarts=0)
    _join_all(book, 3)
    assert book.failing(0, 0, 1.0, hold=5.0) == []  # gloo's "Connection closed by peer" on host 0
    assert book.failing(2, 0, 1.5, hold=5.0) == []  # host 2 saw it too: the first hold stands
    assert book.advance(5.9) == [] and book.phase is Phase.RUNNING
    sends = book.failing(1, 0, 2.0)  # the peer that really failed, by itself: everyone else ends now
    assert _kinds(sends) == [(0, "end"), (2, "end")] and sends[0].message.host == 1
    assert book.advance(6.5) == []  # the hold is over: nothing is sent twice
    book.over(0, 0, _cause(134, peer=True), 6.1)
    book.over(2, 0, _cause(134, peer=True), 6.2)
    sends = book.over(1, 0, _cause(7, "user_error", accept=False), 6.3)
    assert (sends[0].message.code, sends[0].message.cause.host) == (7, 1)


def test_a_held_end_goes_out_when_the_hold_is_over_or_a_failure_without_peer_evidence_comes() -> None:
    book = _book(hosts=3)
    _join_all(book, 3)
    book.failing(1, 0, 1.0, hold=60.0)  # at most HOLD_MAX seconds, whatever a host asks
    assert book.advance(5.9) == []
    sends = book.advance(6.0)
    assert _kinds(sends) == [(0, "end"), (2, "end")] and sends[0].message.to_wire() == {
        "t": "end", "attempt": 0, "host": 1, "addr": "10.0.0.2", "why": "failed"}  # fmt: skip
    book = _book(hosts=2)
    _join_all(book)
    book.failing(1, 0, 1.0, hold=5.0)
    assert _kinds(book.over(1, 0, _cause(134, peer=True), 1.1)) == []  # its only rank died: the hold stands
    assert _kinds(book.advance(6.0)) == [(0, "end")]
    book = _book(hosts=2)
    _join_all(book)
    book.failing(1, 0, 1.0, hold=5.0)
    assert _kinds(book.over(1, 0, _cause(7), 2.0)) == [(0, "end")]  # a death of its own without peer evidence
    book = _book(hosts=3)
    _join_all(book, 3)
    book.failing(1, 0, 1.0, hold=5.0)
    assert _kinds(book.leave(2, CONN["conn1b"], "x", 1.5)) == []  # not host 2's connection: nothing changes
    assert book.round.held is not None
    assert _kinds(book.failing(1, 0, 1.6)) == [(0, "end"), (2, "end")]  # host 1's hold ended early: now
    assert book.phase is Phase.ENDING and book.round.held is None


def test_a_host_lost_during_a_hold_ends_the_others_at_once() -> None:
    book = _book(hosts=3)
    _join_all(book, 3)
    book.failing(0, 0, 1.0, hold=5.0)
    sends = book.leave(1, CONN["conn1"], "its connection closed", 1.2)
    assert _kinds(sends) == [(0, "end"), (2, "end")] and sends[0].message.why is Why.LOST


def test_a_hold_from_an_old_attempt_is_forgotten() -> None:
    book = _book()
    _join_all(book)
    book.failing(1, 0, 1.0, hold=5.0)
    book.over(1, 0, _cause(137), 1.5)
    book.over(0, 0, _cause(3, "rendezvous_timeout")._replace(ended=True), 1.6)
    book.advance(3.0)
    assert book.attempt == 1 and book.round.held is None
    assert book.failing(1, 0, 3.1, hold=5.0) == [] and book.round.held is None  # attempt 0's word, too late


def test_the_budget_is_the_jobs() -> None:
    book = _book(restarts=1)
    _join_all(book)
    book.over(0, 0, _cause(137), 1.0)
    book.over(1, 0, None, 1.0)
    book.advance(5.0)
    assert book.attempt == 1
    book.over(1, 1, _cause(137), 6.0)
    sends = book.over(0, 1, None, 6.0)
    assert _kinds(sends) == [(None, "finish")] and sends[0].message.code == 137


def test_a_lost_host_is_waited_for_and_joins_the_next_attempt() -> None:
    book = _book()
    _join_all(book)
    sends = book.leave(1, CONN["conn1"], "its connection closed", 1.0)
    assert _kinds(sends) == [(0, "end")]
    book.over(0, 0, _cause(3, "rendezvous_timeout")._replace(ended=True), 2.0)
    assert book.phase is Phase.WAITING
    assert _kinds(book.join(1, CONN["conn1b"], "10.0.0.2", -1, 5.0)) == []
    assert book.phase is Phase.BACKOFF
    sends = book.advance(6.5)
    assert _kinds(sends) == [(None, "start")] and sends[0].message.cause.kind == "host_lost"


def test_a_lost_host_that_does_not_come_back_ends_the_job_with_75() -> None:
    book = _book()
    _join_all(book)
    book.leave(1, CONN["conn1"], "no heartbeat for 20 s", 1.0)
    book.over(0, 0, _cause(3, "rendezvous_timeout")._replace(ended=True), 2.0)
    sends = book.advance(12.5)
    assert _kinds(sends) == [(None, "finish")] and sends[0].message.code == EXIT_HOST_LOST
    assert sends[0].message.cause.line.endswith("did not come back within 10 s")


def test_without_restarts_a_lost_host_ends_the_job_at_once() -> None:
    book = _book(restarts=0, lost_ok=False)
    _join_all(book)
    book.leave(1, CONN["conn1"], "its connection closed", 1.0)
    sends = book.over(0, 0, _cause(3, "rendezvous_timeout")._replace(ended=True), 1.5)
    assert _kinds(sends) == [(None, "finish")] and sends[0].message.code == EXIT_HOST_LOST


def test_an_old_connection_of_a_host_that_came_back_changes_nothing() -> None:
    book = _book()
    _join_all(book)
    assert _kinds(book.join(1, CONN["conn1b"], "10.0.0.2", 0, 1.0)) == [(0, "end")]  # a new shim: the old one is lost
    assert book.leave(1, CONN["conn1"], "its connection closed", 1.5) == []


def test_a_host_that_succeeded_and_then_vanished_does_not_fail_the_job() -> None:
    book = _book()
    _join_all(book)
    book.over(1, 0, None, 1.0)
    book.leave(1, CONN["conn1"], "its connection closed", 1.1)
    sends = book.over(0, 0, None, 1.2)
    assert _kinds(sends) == [(None, "finish")] and sends[0].message.code == 0


def test_lines_prove_the_secret_and_cannot_be_replayed_reordered_or_reflected() -> None:
    key = job_key("s3cret")
    client, server = Channel(key, "ab" * 8, "c"), Channel(key, "ab" * 8, "s")
    first, second = client.seal({"t": "hb"}), client.seal({"t": "hb"})
    assert server.open(first)["seq"] == 0
    with pytest.raises(WireError) as caught:
        server.open(first)
    assert caught.value.kind == "replay"
    assert server.open(second)["seq"] == 1
    with pytest.raises(WireError) as caught:
        Channel(key, "ab" * 8, "c").open(Channel(key, "ab" * 8, "c").seal({"t": "hb"}))  # reflected
    assert caught.value.kind == "bad_mac"
    with pytest.raises(WireError) as caught:
        Channel(job_key("job-name"), "ab" * 8, "s").open(Channel(key, "ab" * 8, "c").seal({"t": "hb"}))
    assert caught.value.kind == "bad_mac"
    with pytest.raises(WireError):
        Channel(key, "cd" * 8, "s").open(Channel(key, "ab" * 8, "c").seal({"t": "hb"}))  # another connection
    assert b"s3cret" not in first


def test_the_config_never_shows_the_secret() -> None:
    from malaunch.entrypoint.contract.config import parse_coordinator
    from malaunch.entrypoint.run.hosts import hosts_config

    settings = parse_coordinator({"MALAUNCH_JOB_SECRET": "s3cret-value"})
    config = hosts_config(settings, 1, 2, "10.0.0.2", "10.0.0.1", "job", 300.0)
    assert config is not None and config.secret == "s3cret-value" and "s3cret" not in repr(config)
    assert hosts_config(parse_coordinator({}), 0, 1, "a", "a", "job", 1.0) is None  # one host: no coordinator
    fallback = hosts_config(parse_coordinator({}), 0, 2, "a", "a", "my-job", 1.0)
    assert fallback is not None and (fallback.secret, fallback.secret_given) == ("my-job", False)
    assert fallback.interval == 2.0 and fallback.port == 29510



def _hung(score: int) -> Cause:
    return _cause(124, "hang")._replace(score=score)


def test_one_host_silent_while_another_prints_is_not_a_hang() -> None:
    book = _book()
    _join_all(book)
    assert book.silent(0, 0, True, 1.0) == []
    assert book.phase is Phase.RUNNING
    assert book.silent(0, 0, False, 2.0) == []  # host 0 spoke again
    assert book.silent(1, 0, True, 3.0) == []  # now host 1 is silent, host 0 is not
    assert book.phase is Phase.RUNNING


def test_every_host_silent_ends_the_attempt_on_every_host_as_hung() -> None:
    book = _book()
    _join_all(book)
    book.silent(1, 0, True, 1.0)
    sends = book.silent(0, 0, True, 1.5)
    assert sorted(_kinds(sends)) == [(0, "end"), (1, "end")]
    assert {s.message.to_wire()["why"] for s in sends} == {"hung"} and book.phase is Phase.ENDING
    book.over(0, 0, _hung(0), 2.0)  # host 0's rank waits in a collective: no evidence
    book.over(1, 0, _hung(4), 2.5)  # host 1's rank is stopped: it is the root cause, though it spoke later
    assert book.phase is Phase.BACKOFF and book.verdicts[-1] is not None and book.verdicts[-1].host == 1


def test_a_host_done_counts_no_more_and_silence_from_an_old_attempt_is_ignored() -> None:
    book = _book()
    _join_all(book)
    book.over(1, 0, None, 1.0)  # host 1's ranks succeeded
    assert book.silent(0, 1, True, 1.5) == []  # not the running attempt
    sends = book.silent(0, 0, True, 2.0)  # host 0 is the only one left, and silent: hung
    assert _kinds(sends) == [(0, "end")] and sends[0].message.why is Why.HUNG


def test_a_host_whose_ranks_ended_does_not_hold_back_a_silent_hosts_hang() -> None:
    """Issue 44 item 1: host 0's ranks all exited and its torchrun waits in its exit barrier (for host 1, whose
    rank hangs): host 1 silent is the job's hang now, not once host 0's launcher ends."""
    book = _book()
    _join_all(book)
    assert book.silent(0, 0, False, 1.0, ended=True) == []  # ended alone: nothing is hung
    sends = book.silent(1, 0, True, 2.0)
    assert sorted(_kinds(sends)) == [(0, "end"), (1, "end")] and book.phase is Phase.ENDING
    assert {s.message.to_wire()["why"] for s in sends} == {"hung"}
    book.over(0, 0, _cause(3, "launch_error")._replace(ended=True), 2.5)  # ended on the coordinator's word
    book.over(1, 0, _hung(0), 3.0)
    assert book.verdicts[-1] is not None and book.verdicts[-1].host == 1  # the hung host is the root cause


def test_every_host_ended_is_no_hang_and_a_host_that_speaks_again_is_not_ended() -> None:
    book = _book()
    _join_all(book)
    assert book.silent(0, 0, False, 1.0, ended=True) == []
    assert book.silent(1, 0, False, 1.5, ended=True) == []  # nobody silent: launchers winding down, no hang
    assert book.silent(0, 0, False, 2.0) == []  # host 0's launcher started new workers, they speak
    assert book.silent(1, 0, True, 2.5) == [] and book.phase is Phase.RUNNING  # host 0 speaks: no hang


def test_a_silent_host_is_hung_when_the_last_other_host_is_over() -> None:
    """The silent host said so before the other's attempt was over: its account is the last one awaited."""
    book = _book()
    _join_all(book)
    assert book.silent(1, 0, True, 1.0) == []  # host 0 still prints
    sends = book.over(0, 0, None, 2.0)  # host 0's ranks succeeded
    assert _kinds(sends) == [(1, "end")] and sends[0].message.why is Why.HUNG


def test_silence_is_forgotten_when_the_next_attempt_starts() -> None:
    book = _book()
    _join_all(book)
    book.silent(0, 0, True, 1.0)
    book.failing(1, 0, 1.1)
    book.over(1, 0, _cause(137), 1.2)
    book.over(0, 0, _cause(3, "rendezvous_timeout")._replace(ended=True), 1.3)
    book.advance(3.0)
    assert book.attempt == 1 and book.round.quiet == set()
    assert book.silent(1, 1, True, 3.5) == []  # host 0 has not said it is silent in attempt 1


def test_a_heartbeat_timeout_below_its_minimum_is_refused() -> None:
    from malaunch.entrypoint.contract.config import parse_coordinator
    from malaunch.entrypoint.contract.errors import ConfigError

    with pytest.raises(ConfigError, match=r"MALAUNCH_HEARTBEAT_TIMEOUT='0'.*between 1"):
        parse_coordinator({"MALAUNCH_HEARTBEAT_TIMEOUT": "0"})  # every host lost at once


def test_a_lost_hosts_cause_names_the_log_folder_its_hello_gave_and_never_a_survivors_code() -> None:
    """Issue 43: the job's root cause for a lost host carries its own log folder; what is said of it never shows
    the 75 the others exit with as its code."""
    from malaunch.entrypoint.public import describe_cause

    book = _book(restarts=0)
    book.join(0, CONN["conn0"], "10.0.0.1", -1, 0.0, "/logs/h0")
    book.join(1, CONN["conn1"], "10.0.0.2", -1, 0.0, "/logs/h1")
    book.leave(1, CONN["conn1"], "no heartbeat for 3 s", 1.0)
    sends = book.over(0, 0, _cause(3, kind="rendezvous_timeout")._replace(ended=True), 2.0)
    (finish,) = [s.message for s in sends if s.message.to_wire()["t"] == "finish"]
    assert finish.cause.host == 1 and finish.cause.log == "/logs/h1"
    said = describe_cause(finish.cause.to_wire())
    assert said == "host 1 (10.0.0.2) lost: no heartbeat for 3 s; class host_lost; log /logs/h1"



@pytest.mark.parametrize("first", [0, 1])
def test_hung_hosts_with_equal_evidence_give_the_lowest_rank_whoever_reported_first(first: int) -> None:
    """Multi-host hang: a rank of host 1 exited 0 early and every other rank waits; each host names a waiting rank
    with no evidence (score 0). The root cause is the lowest rank named (host 0's rank 0) whichever host's account
    came first, and its ``why`` says the evidence was equal: the coordinator's own words, never a line among the
    rank's output (``tail``), which is the host's account as it was (the old book put the note into the tail)."""
    book = _book()
    _join_all(book)
    book.silent(0, 0, True, 1.0)
    book.silent(1, 0, True, 1.5)
    tail = ("start", "rank {}: no rank stands out", "ma-entrypoint: hung: no running rank wrote output")
    accounts = {host: _hung(0)._replace(rank=rank, tail=(tail[0], tail[1].format(rank), tail[2]))
                for host, rank in ((0, 0), (1, 2))}  # fmt: skip
    book.over(first, 0, accounts[first], 2.0)
    book.over(1 - first, 0, accounts[1 - first], 2.5)
    verdict = book.verdicts[-1]
    assert verdict is not None and (verdict.host, verdict.rank) == (0, 0)
    assert verdict.tail == accounts[0].tail
    assert verdict.why == ("the hung hosts' evidence is equal (hosts 0, 1): the lowest rank they name is the job's "
                           "root cause, not the one of the host that reported first")  # fmt: skip


def test_a_thousand_hung_hosts_with_equal_evidence_end_the_job_in_one_wire_line() -> None:
    """Every host of 1,000 hung with no evidence: the finish that names the lowest rank and says the evidence was
    equal fits a wire line (the old note listed every host, 4,890 characters: the finish could not be sent)."""
    book = JobState(1000, 0, True, lambda n: 1.0, host_wait=10.0, join_wait=30.0, now=0.0)
    for host in range(1000):
        book.join(host, CONN["conn0"] if host == 0 else _Conn(str(host)), f"10.0.{host // 250}.{host % 250}", -1, 0.0)
    for host in range(1000):
        book.silent(host, 0, True, 1.0)
    sends: List[Send] = []
    for host in range(1000):
        sends += book.over(host, 0, _hung(0)._replace(rank=2 * host, tail=("start", "ma-entrypoint: hung")), 2.0)
    (finish,) = [s.message for s in sends if s.message.to_wire()["t"] == "finish"]
    assert finish.cause.rank == 0 and "evidence is equal (1000 hosts: 0-999)" in finish.cause.why, finish.cause.why
    Channel(job_key("s"), "ab" * 8, "s").seal(finish.to_wire())  # fits: WireError (oversized) otherwise


def test_hung_hosts_with_unequal_evidence_keep_the_strongest_and_no_note() -> None:
    book = _book()
    _join_all(book)
    book.silent(0, 0, True, 1.0)
    book.silent(1, 0, True, 1.5)
    book.over(0, 0, _hung(0)._replace(rank=0, tail=("a",)), 2.0)
    book.over(1, 0, _hung(4)._replace(rank=3, tail=("b",)), 2.5)
    verdict = book.verdicts[-1]
    assert verdict is not None and (verdict.host, verdict.rank, verdict.tail, verdict.why) == (1, 3, ("b",), "")
