"""A merged output line's one prefix (``malaunch.sdk.backends.lineprefix``): made from a host's console line, read
back, a sweep's trial added; every writer the shim names in its own prefix is known."""

from __future__ import annotations

from malaunch.entrypoint.contract.errors import PROG
from malaunch.entrypoint.launchers import fanout, single
from malaunch.entrypoint.launchers.msrun import METHOD as MSRUN
from malaunch.entrypoint.launchers.msrun.recovery_plan import SCHEDULER_NAME
from malaunch.entrypoint.launchers.torchrun.plan import METHOD as TORCHRUN
from malaunch.entrypoint.run.prepare_steps import PREFIX as PREPARE
from malaunch.sdk.backends import lineprefix
from malaunch.sdk.backends.lineprefix import LinePrefix, host_line, parse_line, prefixed, trial_line
from malaunch.sdk.logview import line_host, line_rank


def test_a_hosts_line_keeps_one_prefix_naming_host_and_writer() -> None:
    assert host_line(1, "[rank 2] all_reduce sum = 10") == "[host 1 rank 2] all_reduce sum = 10"
    assert host_line(0, "[ma-entrypoint] exit code 0; report: r") == "[host 0 ma-entrypoint] exit code 0; report: r"
    assert host_line(3, "[torchrun] W1129 a warning") == "[host 3 torchrun] W1129 a warning"
    assert host_line(0, "[local rank 1] early") == "[host 0 local rank 1] early"
    assert host_line(1, "W1129 no prefix came with it") == "[host 1] W1129 no prefix came with it"
    # only the shim's one prefix is the writer's: a rank's own text that looks like a prefix stays its text
    assert host_line(1, "[rank 2] [rank 5] [INFO] x") == "[host 1 rank 2] [rank 5] [INFO] x"
    assert host_line(0, "[INFO] not a writer") == "[host 0] [INFO] not a writer"
    assert host_line(0, "") == "[host 0] "
    assert prefixed(2, "the console was cut short", "ma-submit") == "[host 2 ma-submit] the console was cut short"


def test_a_merged_line_is_read_back() -> None:
    assert parse_line("[host 1 rank 2] x") == LinePrefix(None, 1, "rank 2", 2, "x")
    assert parse_line("[host 10 ma-entrypoint] y") == LinePrefix(None, 10, "ma-entrypoint", None, "y")
    assert parse_line("[host 0 local rank 1] z") == LinePrefix(None, 0, "local rank 1", None, "z")
    assert parse_line("[host 0] w") == LinePrefix(None, 0, None, None, "w")
    assert parse_line("[rank 3] own") == LinePrefix(None, None, "rank 3", 3, "own")  # a shim's own line
    assert parse_line("plain") == LinePrefix(None, None, None, None, "plain")
    assert parse_line("[trial 4 host 1 rank 2] v") == LinePrefix(4, 1, "rank 2", 2, "v")
    assert parse_line("[trial 4] (its output could not be read: x)").trial == 4
    assert [line_host(x) for x in ("[host 1 rank 2] a", "[host 3] b", "[rank 1] c")] == [1, 3, None]
    assert [line_rank(x) for x in ("[host 1 rank 2] a", "[host 0 torchrun] [rank3]: b", "[host 0 ma-entrypoint] c",
                                   "[host 0 rank 1] [rank 5] d")] == [2, 3, None, 1]  # fmt: skip


def test_a_trial_is_named_in_the_same_prefix() -> None:
    assert trial_line(3, "[host 1 rank 2] loss=1") == "[trial 3 host 1 rank 2] loss=1"
    assert trial_line(3, "[host 0] plain") == "[trial 3 host 0] plain"
    assert trial_line(3, "a backend naming no host") == "[trial 3] a backend naming no host"


def test_every_writer_the_shim_names_is_known() -> None:
    named = {PROG, PREPARE, TORCHRUN, MSRUN, SCHEDULER_NAME, fanout.METHOD, single.METHOD, "boot"}
    assert named <= set(lineprefix.SHIM_WRITERS)
    for writer in named:
        assert parse_line(host_line(2, f"[{writer}] t")) == LinePrefix(None, 2, writer, None, "t")
