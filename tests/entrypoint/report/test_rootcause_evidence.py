"""Deaths the shim cannot order are ordered by evidence (issue 16.1): pure, no processes, no clock."""

from __future__ import annotations

from typing import Optional

import pytest
from malaunch.entrypoint.report.failure_class import peer_failure
from malaunch.entrypoint.report.rootcause import (
    PEER_WINDOW,
    SAME_LOOK,
    Death,
    RootCause,
    find_root_cause,
    teardown_signals,
)

TERM = teardown_signals(launcher_kills=False, escalated=False)
GLOO = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
    "[127.0.0.1]:41234. This is typically caused by a remote worker crashing"
)


def fact(source: str, rank: Optional[int], code: Optional[int], at: Optional[float], seq: int,
         evidence: Optional[str] = None) -> Death:  # fmt: skip
    return Death(source=source, index=0, rank=rank, pid=100 + (rank or 0), code=code, at=at, seq=seq,
                 evidence=evidence)  # fmt: skip


def decide(*facts: Death) -> RootCause:
    cause = find_root_cause(facts, TERM)
    assert cause is not None
    return cause


@pytest.mark.parametrize("first", [0, 1])
def test_same_look_a_peer_failure_never_outranks_a_plain_failure(first: int) -> None:
    # rank 1 sys.exit(7); rank 0 died of the gloo error and aborted: seen in the same look, in either order
    peer = fact("exit", 0, -6, at=5.0 + (0.0 if first == 0 else 0.004), seq=first,
                evidence="Connection closed by peer")  # fmt: skip
    real = fact("exit", 1, 7, at=5.0 + (0.004 if first == 0 else 0.0), seq=1 - first)
    cause = decide(peer, real)
    assert (cause.death.rank, cause.death.code) == (1, 7)
    assert cause.why == "rank 0 failed after a peer: 'Connection closed by peer'"


def test_deaths_seen_in_order_keep_that_order() -> None:
    plain = fact("watch", 0, 7, at=5.0, seq=0)
    later = fact("watch", 1, 1, at=5.0 + SAME_LOOK + 0.05, seq=1)
    cause = decide(plain, later)
    assert cause.death.rank == 0 and cause.why == "the earliest failure seen"
    peer = fact("watch", 0, 1, at=5.0, seq=0, evidence="Connection closed by peer")
    much_later = fact("watch", 1, 7, at=5.0 + PEER_WINDOW + 0.05, seq=1)
    cause = decide(peer, much_later)
    assert cause.death.rank == 0 and cause.why == "the earliest failure seen"


def test_a_peer_failure_does_not_outrank_the_failure_whose_process_died_after_it() -> None:
    # the real DDP case: rank 1 sys.exit(7)s, its socket closes at once, rank 0 aborts on "Connection closed by
    # peer", and rank 1's own process is still winding down (Python's exit, torch's teardown) for a while
    peer = fact("watch", 0, -6, at=5.0, seq=0, evidence="Connection closed by peer")
    real = fact("watch", 1, 7, at=5.0 + PEER_WINDOW - 0.1, seq=1)
    cause = decide(peer, real)
    assert (cause.death.rank, cause.death.code) == (1, 7)
    assert cause.why == "rank 0 failed after a peer: 'Connection closed by peer'"


def test_evidence_beats_order_for_seconds_until_the_teardown_reaches_the_other_rank() -> None:
    # issue 29.2: on a busy machine rank 3's sys.exit(7) outlived rank 2's gloo abort by more than a second
    peer = fact("watch", 2, -6, at=5.0, seq=0, evidence="terminate called without an active exception")
    real = fact("watch", 3, 7, at=7.5, seq=1)
    assert PEER_WINDOW >= 3.0
    cause = find_root_cause((peer, real), TERM, teardown_at=7.6)
    assert cause is not None and (cause.death.rank, cause.death.code) == (3, 7)
    assert cause.why == "rank 2 failed after a peer: 'terminate called without an active exception'"
    # the stop signal went out before rank 3 died: it did not die by itself, whatever code it exited with
    cause = find_root_cause((peer, real), TERM, teardown_at=6.0)
    assert cause is not None and cause.death.rank == 2 and cause.why == "the earliest failure seen"


def test_a_native_abort_without_peer_message_stays_the_root_cause() -> None:
    # not "exit codes before signals": rank 0 aborts (terminate called after throwing ...), rank 1 exits 1 with
    # the gloo line 20 ms later; seen in the same look, in either order
    for abort_at, gloo_at in ((5.0, 5.02), (5.02, 5.0), (5.0, 5.0)):
        abort = fact("exit", 0, -6, at=abort_at, seq=0)
        gloo = fact("exit", 1, 1, at=gloo_at, seq=1, evidence="Connection closed by peer")
        cause = decide(abort, gloo)
        assert (cause.death.rank, cause.death.code) == (0, -6)
        assert cause.why == "rank 1 failed after a peer: 'Connection closed by peer'"


def test_untimed_facts_cannot_be_ordered_so_evidence_decides() -> None:
    # torchrun's summary only (equal, unknown times): its own "Root Cause" entry first, the evidence decides
    peer = fact("summary", 0, -6, at=None, seq=0, evidence="terminate called without an active exception")
    real = fact("summary", 1, 5, at=None, seq=1)
    cause = decide(peer, real)
    assert (cause.death.rank, cause.death.code) == (1, 5)
    assert "terminate called without an active exception" in cause.why


def test_every_death_after_a_peer_the_earliest_wins() -> None:
    a = fact("exit", 0, 1, at=5.0, seq=0, evidence="DistNetworkError")
    b = fact("exit", 1, 1, at=5.01, seq=1, evidence="Connection reset by peer")
    cause = decide(a, b)
    assert cause.death.rank == 0 and cause.why == "rank 1 failed after a peer: 'Connection reset by peer'"


def test_teardown_victims_stay_collateral_whatever_their_evidence() -> None:
    victim = fact("exit", 0, -15, at=5.0, seq=0)
    peer = fact("exit", 1, 1, at=5.01, seq=1, evidence="Connection closed by peer")
    cause = decide(victim, peer)
    assert cause.death.rank == 1 and cause.collateral == (victim,)


def test_the_only_failure_says_so() -> None:
    assert decide(fact("exit", 3, 2, at=1.0, seq=0)).why == "the only failure"


def test_evidence_merges_across_the_facts_of_a_rank() -> None:
    cause = decide(
        fact("watch", 0, -6, at=5.0, seq=0),
        fact("error_file", 0, None, at=None, seq=1, evidence="Connection closed by peer"),
        fact("watch", 1, 7, at=5.03, seq=2),
    )
    assert cause.death.rank == 1


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (GLOO, "Connection closed by peer"),
        ("torch.distributed.DistNetworkError: failed to recv, got 0 bytes", "DistNetworkError"),
        ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5)",
         "Watchdog caught collective operation timeout"),
        ("NCCL communicator was aborted on rank 1.", "NCCL communicator was aborted"),
        ("ncclRemoteError: A call failed possibly due to a network error", "ncclRemoteError"),
        ("EI0006: Getting socket times out.", "EI0006"),
        ("EI0002: The wait execution of the Notify register times out.", "EI0002"),
        ("[ERROR] HCCL(1234): wait for link timeout", "HCCL(1234): wait for link timeout"),
        ("The node: 1 is timed out. It may exit with exception", "The node: 1 is timed out"),
        ("AllReduce wait receiving from rank 1 failed", "AllReduce wait receiving"),
        ("terminate called without an active exception", "terminate called without an active exception"),
        ("Timed out waiting 30000ms for recv operation to complete",
         "Timed out waiting 30000ms for recv operation to complete"),
    ],
)
def test_peer_failure_names_the_evidence(line: str, found: str) -> None:
    assert peer_failure(["step 3", line, "Traceback follows"]) == found


@pytest.mark.parametrize(
    "line",
    [
        "terminate called after throwing an instance of 'std::runtime_error'",
        "Segmentation fault (core dumped)",
        "ValueError: bad batch size",
        "Fatal Python error: Aborted",
    ],
)
def test_a_crash_of_its_own_names_no_peer(line: str) -> None:
    assert peer_failure(["step 3", line]) is None
