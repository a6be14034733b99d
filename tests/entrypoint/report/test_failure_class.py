"""Exit-code classes: real launcher and library messages map to the right class, retryable or not."""

from __future__ import annotations

import subprocess
import sys

import pytest
from malaunch.entrypoint.report.failure_class import (
    CLASSES,
    COLLECTIVE_TIMEOUT,
    EXIT_HANG,
    HANG,
    HOST_LOST,
    LAUNCHER_MISUSE,
    PREPARE_FAILED,
    RENDEZVOUS_TIMEOUT,
    RETRYABLE,
    SIGNAL,
    STOPPED,
    USER_ERROR,
    Classification,
    classify_exit,
    classify_failure,
)

NCCL = (
    "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600060 "
    "milliseconds before timing out."
)
GLOO = (
    "RuntimeError: [gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to "
    "complete"
)
HCCL = (
    "EI0002: [PID: 13075] 2025-06-25-10:45:23.586.187 The wait execution of the Notify register times out. Reason: "
    "The Notify register has not received the Notify record from remote rank: [unknown]."
)
MS_CPU = (
    "[ERROR] DISTRIBUTED(17281,7f9420ff96c0,python):2026-11-22-20:51:59.620.980 [mindspore/ccsrc/cluster/rpc/core/"
    "collective_ops_impl.cc:284] ReduceBroadcastAllReduce] Broadcast wait sending 4 failed."
)
STORE = "torch.distributed.DistStoreError: Timed out after 11 seconds waiting for clients. 1/2 clients joined."
CLIENT = (
    "torch.distributed.DistNetworkError: The client socket has timed out after 10000ms while trying to connect to "
    "(127.0.0.1, 29612)."
)
PEER = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:5432"
MS_NODE = "The node: 0 is timed out. It may exit with exception, please check this node's log."


@pytest.mark.parametrize(
    ("code", "line", "kind"),
    [
        (1, NCCL, COLLECTIVE_TIMEOUT),
        (134, NCCL, COLLECTIVE_TIMEOUT),  # the NCCL watchdog aborts the process: the log wins over the signal
        (1, GLOO, COLLECTIVE_TIMEOUT),
        (1, HCCL, COLLECTIVE_TIMEOUT),
        (1, MS_CPU, COLLECTIVE_TIMEOUT),
        (1, STORE, RENDEZVOUS_TIMEOUT),
        (1, CLIENT, RENDEZVOUS_TIMEOUT),
        (1, PEER, RENDEZVOUS_TIMEOUT),
        (1, MS_NODE, RENDEZVOUS_TIMEOUT),
        (137, "", SIGNAL),
        (-9, "", SIGNAL),
        (139, "Segmentation fault", SIGNAL),
        (1, "ValueError: boom", USER_ERROR),
        (2, "usage: train.py [-h]\ntrain.py: error: unrecognized arguments: --x", USER_ERROR),
        (127, "", LAUNCHER_MISUSE),
    ],
)
def test_rank_failures(code: int, line: str, kind: str) -> None:
    got = classify_failure(code, ["starting", *line.splitlines(), "exiting"])
    assert got.kind == kind
    assert got.retryable is (kind in RETRYABLE)
    assert got.description


@pytest.mark.parametrize(
    ("code", "sig", "named", "hint"),
    [
        (134, None, "SIGABRT (134)", "aborted by native code"),
        (-6, None, "SIGABRT (134)", "aborted by native code"),
        (139, None, "SIGSEGV (139)", "segmentation fault"),
        (137, 9, "SIGKILL (137)", "likely out of memory"),
        (128 + 40, None, "signal 40 (168)", None),
    ],
)
def test_the_signal_class_names_the_signal_that_was_seen(code: int, sig: object, named: str, hint: object) -> None:
    got = classify_failure(code, ["step 3"], signal=sig)  # type: ignore[arg-type]
    assert got.kind == SIGNAL
    assert got.description.startswith(f"killed by {named}, a signal the shim did not send")
    if hint is not None:
        assert str(hint) in got.description
    if code != 137:
        assert "137" not in got.description and "SIGKILL" not in got.description
    assert got.to_json()["description"] == got.description


def test_the_signal_class_without_a_signal_claims_none() -> None:
    assert Classification(SIGNAL, True, "from a report").description == "killed by a signal the shim did not send"


def test_retryable_is_exactly_signals_timeouts_lost_hosts_and_hangs() -> None:
    assert {SIGNAL, RENDEZVOUS_TIMEOUT, COLLECTIVE_TIMEOUT, HOST_LOST, HANG} == RETRYABLE
    assert set(CLASSES) == RETRYABLE | {USER_ERROR, LAUNCHER_MISUSE, STOPPED, PREPARE_FAILED}


def test_a_failed_prepare_step_has_a_class_of_its_own_whatever_its_output_says() -> None:
    line = 'ma-entrypoint: prepare step 2 of 3 on host 1 (w1) exited with 7: ["curl", "-o", "data.tar"]'
    got = classify_failure(7, ["curl: (56) Connection reset by peer", line])
    assert (got.kind, got.retryable, got.reason) == (PREPARE_FAILED, False, line)
    killed = line.replace("exited with 7", "was killed by SIGKILL")
    assert classify_failure(137, ["x", killed], signal=9).kind == PREPARE_FAILED  # not class signal
    # a rank's own output that quotes such a line (not the shim's last line) is not a prepare step's failure
    assert classify_failure(1, [line, "Traceback (most recent call last):"]).kind == USER_ERROR


def test_a_lost_host_has_a_class_of_its_own() -> None:
    line = "ma-entrypoint: host 2 (10.0.0.3) lost: no heartbeat for 20 s"
    got = classify_failure(3, ["ma-entrypoint: something", line])
    assert (got.kind, got.retryable, got.reason) == (HOST_LOST, True, line)
    assert classify_failure(75, [], origin="shim").kind == HOST_LOST  # a backend sees only the shim's exit 75
    assert classify_failure(75, []).kind == USER_ERROR  # a rank's own 75 is the script's


def test_the_reason_names_the_matching_line() -> None:
    got = classify_failure(1, ["x", NCCL, "y"])
    assert got.reason.startswith("[rank0]") and got.reason.endswith("...")  # shortened to 200 characters
    assert len(got.reason) <= 200


def test_launcher_argparse_error_is_misuse_but_a_ranks_is_the_users() -> None:
    line = "torchrun: error: unrecognized arguments: --bogus"
    assert classify_failure(2, [line], origin="launcher").kind == LAUNCHER_MISUSE
    assert classify_failure(2, [line], origin="rank").kind == USER_ERROR


def test_shim_codes_as_a_backend_sees_them() -> None:
    assert classify_exit(2, ["ma-entrypoint: error: MA_NUM_HOSTS='x' is invalid: expected a whole number"]).kind == (
        LAUNCHER_MISUSE
    )
    assert classify_exit(3, ["ma-entrypoint: error: gave up waiting for the rank table after 600s"]).kind == (
        RENDEZVOUS_TIMEOUT
    )
    assert classify_exit(143).kind == STOPPED  # the shim's own 143: stopped from outside
    assert classify_exit(137).kind == SIGNAL
    assert classify_exit(1).kind == USER_ERROR


def test_stopped_is_never_retryable() -> None:
    got = classify_failure(143, [NCCL], stopped=True)
    assert (got.kind, got.retryable) == (STOPPED, False)
    assert got.to_json()["class"] == STOPPED


def test_a_hang_has_a_class_of_its_own_from_the_shims_line_or_its_exit_code() -> None:
    line = "ma-entrypoint: hung: no rank of this host wrote output or touched MALAUNCH_PROGRESS_FILE for 3 s"
    got = classify_failure(EXIT_HANG, ["step 5", line])
    assert (got.kind, got.retryable, got.reason) == (HANG, True, line)
    assert classify_failure(143, [line]).kind == HANG  # the ranks ended by the teardown do not hide it
    assert classify_exit(EXIT_HANG).kind == HANG  # a backend that sees only the shim's code
    assert classify_failure(EXIT_HANG, ["user code"]).kind == USER_ERROR  # a rank's own 124 is the user's


def test_the_patterns_are_compiled_on_first_use_not_at_import() -> None:
    probe = (
        "import re, sys\n"
        "from malaunch.entrypoint.report import failure_class as fc\n"
        "before = len(fc._COMPILED)\n"
        "kind = fc.classify_exit(1, ['DistStoreError: no peers']).kind\n"
        "print(before, kind, len(fc._COMPILED) > 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", RENDEZVOUS_TIMEOUT, "True"]
