"""The coordinator's messages (run/hosts/messages.py): one record each, read off the wire in one place, a
malformed field refused with a WireError of kind ``malformed`` that names the message, the field and the value."""

from __future__ import annotations

import socket
import time
from typing import Any, Dict, List

import pytest
from malaunch.entrypoint.run.hosts import messages
from malaunch.entrypoint.run.hosts.jobstate import JobState
from malaunch.entrypoint.run.hosts.messages import (
    Cause,
    End,
    Failing,
    Finish,
    Heartbeat,
    Hello,
    Over,
    Parts,
    Resume,
    Saved,
    Silent,
    Start,
    Welcome,
    Why,
    parse,
)
from malaunch.entrypoint.run.hosts.server import Coordinator
from malaunch.entrypoint.run.hosts.wire import Channel, WireError, job_key, read_challenge

CAUSE = Cause(host=1, addr="10.0.0.2", rank=3, name="rank 3", code=7, signal=None, kind="user_error",
              retryable=False, accept=False, peer=False, ended=False, line="boom", tail=("a", "boom"),
              log="/logs/rank-3.log", score=0)  # fmt: skip

EVERY = [
    Hello(1, "10.0.0.2", 0), Hello(1, "10.0.0.2", 3, "/logs", False, Resume("step-00000009", 9)), Welcome(2, -1),
    Heartbeat(), Start(0, None), Start(1, CAUSE),
    Start(2, CAUSE, (0, 2, 3), True), Start(3, CAUSE, resume=Resume("step-00000009", 9)),
    Start(4, None, (0, 1), False, Resume("epoch 1", 0)), Failing(0), Failing(1, 2.5), Silent(0, True),
    End(0, 1, "10.0.0.2", Why.FAILED),
    End(1, None, "", Why.HUNG), Over(0, CAUSE), Over(0, None), Finish(7, CAUSE, 1), Finish(0, None, 0),
    Finish(124, CAUSE._replace(kind="hang", why="the hung hosts' evidence is equal (hosts 0, 1): ..."), 0),
    Parts(2, "step-00000009", 9, 4, (2, 3)), Parts(0, "epoch 1", 0, 3000, tuple(range(0, 3000, 2))),
    Saved(2, "step-00000009", 9, 4),
]  # fmt: skip


@pytest.mark.parametrize("message", EVERY, ids=lambda m: type(m).__name__)
def test_every_message_reads_back_from_the_wire_as_it_was_sent(message: messages.Message) -> None:
    key = job_key("s")
    line = Channel(key, "ab" * 8, "s").seal(message.to_wire())
    assert parse(Channel(key, "ab" * 8, "c").open(line)) == message


def test_a_cause_is_every_field_on_the_wire_and_absent_fields_are_defaults() -> None:
    wire = CAUSE.to_wire()
    assert set(wire) == set(Cause._fields) and wire["tail"] == ["a", "boom"]
    assert Cause.from_wire({"code": 3, "line": "x"}, "a test") == Cause(code=3, line="x")
    assert Cause.from_wire(None, "a test") is None


def test_a_start_names_its_resume_point_only_when_there_is_one_and_an_old_start_has_none() -> None:
    assert "resume" not in Start(1, None).to_wire()
    assert Start(1, None, resume=Resume("step-00000006", 6)).to_wire()["resume"] == {"name": "step-00000006",
                                                                                      "step": 6}  # fmt: skip
    assert parse({"t": "start", "attempt": 1, "cause": None}) == Start(1, None)  # a coordinator of before
    assert parse({"t": "start", "attempt": 1, "cause": None, "resume": None}) == Start(1, None)
    said = {"t": "start", "attempt": 1, "cause": None, "resume": {"name": "s", "step": 2, "time": 5}}
    assert parse(said) == Start(1, None, resume=Resume("s", 2))  # a field this shim does not know: ignored


def test_a_type_this_shim_does_not_know_is_ignored_and_the_hello_carries_no_incarnation() -> None:
    assert parse({"t": "gossip", "attempt": "x"}) is None
    assert "inc" not in Hello(1, "a").to_wire()
    assert parse({"t": "hello", "host": 1, "addr": "a", "last": -1, "inc": "ab12"}) == Hello(1, "a", -1)


def test_a_host_whose_ranks_ended_says_so_apart_from_silent_and_never_both() -> None:
    key = job_key("s")
    ended = Silent(0, False, True)
    assert ended.to_wire() == {"t": "silent", "attempt": 0, "silent": False, "ended": True}
    assert parse(Channel(key, "ab" * 8, "c").open(Channel(key, "ab" * 8, "s").seal(ended.to_wire()))) == ended
    assert "ended" not in Silent(0, True).to_wire()  # silent or speaking: the message as before
    with pytest.raises(WireError, match=r"'silent' and 'ended' are both true"):
        parse({"t": "silent", "attempt": 0, "silent": True, "ended": True})
    with pytest.raises(WireError, match=r"'ended' is not true or false: 1"):
        parse({"t": "silent", "attempt": 0, "silent": False, "ended": 1})


MALFORMED = [
    ({"t": "hello", "host": "1"}, "'hello' message's 'host' is not an integer: '1'"),
    ({"t": "hello", "host": True}, "'host' is not an integer: True"),
    ({"t": "hello", "host": 1, "addr": 5}, "'addr' is not a string: 5"),
    ({"t": "hello", "host": 1, "last": None}, "'last' is not an integer: None"),
    ({"t": "welcome", "hosts": 2}, "'attempt' is not an integer: None"),
    ({"t": "start", "attempt": 1.5, "cause": None}, "'attempt' is not an integer: 1.5"),
    ({"t": "start", "attempt": 1, "cause": "host 1"}, "'start' message's 'cause' is not an object: 'host 1'"),
    ({"t": "start", "attempt": 1, "cause": None, "members": "1-x"}, "'members' is not a list of hosts: '1-x'"),
    ({"t": "start", "attempt": 1, "cause": None, "free": 1}, "'free' is not true or false: 1"),
    ({"t": "start", "attempt": 1, "cause": None, "resume": "step-3"}, "'resume' is not an object: 'step-3'"),
    ({"t": "start", "attempt": 1, "cause": None, "resume": {"name": "s"}},
     "'start' message's 'resume' 'step' is not an integer: None"),
    ({"t": "start", "attempt": 1, "cause": None, "resume": {"name": "s", "step": True}}, "'step' is not an integer"),
    ({"t": "start", "attempt": 1, "cause": None, "resume": {"name": "s", "step": -1}},
     "'resume' 'step' is not a step (a whole number >= 0): -1"),
    ({"t": "start", "attempt": 1, "cause": None, "resume": {"name": "../s", "step": 3}},
     "'resume' 'name' is not a checkpoint's folder: '../s'"),
    ({"t": "start", "attempt": 1, "cause": None, "resume": {"name": 3, "step": 3}}, "'name' is not a string: 3"),
    ({"t": "start", "attempt": 1, "cause": None, "resume": {"step": 3}}, "'name' is not a checkpoint's folder: ''"),
    ({"t": "failing", "attempt": 0, "hold": "5"}, "'hold' is not a number: '5'"),
    ({"t": "silent", "attempt": 0, "silent": "yes"}, "'silent' is not true or false: 'yes'"),
    ({"t": "end", "attempt": 0, "host": 1, "addr": "a", "why": "bored"}, "'why' is not one of failed, lost, hung"),
    ({"t": "end", "attempt": 0, "host": "1", "addr": "a", "why": "lost"}, "'host' is not an integer: '1'"),
    ({"t": "over", "attempt": 0, "cause": {"code": "7"}}, "'over' message's 'cause' 'code' is not an integer: '7'"),
    ({"t": "over", "attempt": 0, "cause": {"tail": "x"}}, "'tail' is not a list of strings: 'x'"),
    ({"t": "over", "attempt": 0, "cause": {"tail": [1]}}, "'tail' is not a list of strings: [1]"),
    ({"t": "over", "attempt": 0, "cause": {"accept": "no"}}, "'accept' is not true or false: 'no'"),
    ({"t": "over", "attempt": 0, "cause": {"score": False}}, "'score' is not an integer: False"),
    ({"t": "finish", "code": 1, "cause": {"why": ["equal"]}, "attempt": 0},
     "'finish' message's 'cause' 'why' is not a string: ['equal']"),
    ({"t": "finish", "code": 0, "cause": None, "attempt": "0"}, "'attempt' is not an integer: '0'"),
    ({"t": "parts", "attempt": 0, "name": "../x", "step": 3, "size": 2, "ranks": "0"},
     "'parts' message's 'name' is not a checkpoint's folder: '../x'"),
    ({"t": "parts", "attempt": 0, "name": ".parts", "step": 3, "size": 2, "ranks": "0"}, "'name' is not a checkpoint"),
    ({"t": "parts", "attempt": 0, "name": "x" * 256, "step": 3, "size": 2, "ranks": "0"}, "'name' is not a checkpo"),
    ({"t": "parts", "attempt": 0, "name": 5, "step": 3, "size": 2, "ranks": "0"}, "'name' is not a string: 5"),
    ({"t": "parts", "attempt": 0, "name": "s", "step": "3", "size": 2, "ranks": "0"}, "'step' is not an integer"),
    ({"t": "parts", "attempt": 0, "name": "s", "step": 3, "size": 0, "ranks": "0"},
     "'size' is not a number of ranks: 0"),
    ({"t": "parts", "attempt": 0, "name": "s", "step": 3, "size": 2, "ranks": "1-2"},
     "'ranks' is not a list of ranks below 2: '1-2'"),
    ({"t": "parts", "attempt": 0, "name": "s", "step": 3, "size": 2, "ranks": [0, 1]}, "'ranks' is not a list of ra"),
    ({"t": "saved", "attempt": None, "name": "s", "step": 3, "size": 2}, "'saved' message's 'attempt' is not an"),
    ({"t": "saved", "attempt": 0, "name": "", "step": 3, "size": 2}, "'name' is not a checkpoint's folder: ''"),
]


@pytest.mark.parametrize(("payload", "said"), MALFORMED, ids=[f"{p['t']}-{i}" for i, (p, _) in enumerate(MALFORMED)])
def test_a_malformed_field_is_refused_naming_the_message_the_field_and_the_value(
    payload: Dict[str, Any], said: str
) -> None:
    with pytest.raises(WireError) as caught:
        parse(payload)
    assert caught.value.kind == "malformed" and said in str(caught.value)


def test_a_long_value_is_shown_shortened() -> None:
    with pytest.raises(WireError) as caught:
        parse({"t": "over", "attempt": 0, "cause": {"line": ["x" * 500]}})
    assert len(str(caught.value)) < 160 and str(caught.value).endswith("...")


def _recv_all(sock: socket.socket) -> bytes:
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except ConnectionResetError:
        return data


def test_a_proved_over_with_a_malformed_cause_is_refused_not_taken_for_success() -> None:
    """Before, a cause that was not an object counted as None: the host's failed attempt read as a success."""
    key, said = job_key("a-secret"), []
    state = JobState(1, 0, True, lambda n: 0.1, host_wait=5.0, join_wait=10.0, now=time.monotonic())
    server = Coordinator(key, state, 0, 0.2, 5.0, said.append, bind="127.0.0.1").start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            channel = Channel(key, read_challenge(sock.recv(4096).partition(b"\n")[0]), "c")
            sock.sendall(channel.seal(Hello(0, "127.0.0.1").to_wire()))
            sock.sendall(channel.seal({"t": "over", "attempt": 0, "cause": "it failed"}))
            received = _recv_all(sock)  # the coordinator closes the connection
        kinds: List[str] = [line.partition(b" ")[2].decode() for line in received.splitlines()]  # the bodies
        assert any('"t":"start"' in kind for kind in kinds)
        assert not any('"t":"finish"' in kind for kind in kinds)  # no success was decided
        assert server.refused == {"malformed": 1} and state.final is None
        assert any("'over' message's 'cause' is not an object: 'it failed'" in line for line in said), said
    finally:
        server.close(linger=0.5)
