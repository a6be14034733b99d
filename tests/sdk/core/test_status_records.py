"""Job and host statuses are records, not named tuples (issue 43, item 7): equal to an equal status of their own
kind only, never to a plain tuple; ``HostStatus.index`` is a field that hides no method; immutable, hashable,
copied and pickled; ``_replace`` and ``to_json`` as before. On the named tuples every test here fails."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from malaunch.sdk import HostState, HostStatus, JobState, JobStatus

HOST = HostStatus(1, "127.0.0.2", HostState.RUNNING, pid=42)
JOB = JobStatus("j-1", "local", JobState.RUNNING, hosts=(HOST,))
HOST_FIELDS = (1, "127.0.0.2", HostState.RUNNING, 42, None, None, None, None, "")


def test_a_status_equals_an_equal_status_and_never_a_tuple() -> None:
    assert HostStatus(1, "127.0.0.2", HostState.RUNNING, 42) == HOST
    assert HOST != HOST_FIELDS and HOST_FIELDS != HOST
    assert JOB != ("j-1", "local", JobState.RUNNING, None, "", "", "", None, None, None, (HOST,))
    assert HOST._replace(pid=43) != HOST and hash(HOST) == hash(HostStatus(1, "127.0.0.2", HostState.RUNNING, 42))
    assert JobStatus("j-1", "local", JobState.RUNNING) != JobStatus("j-2", "local", JobState.RUNNING)


def test_index_is_a_field_and_no_tuple_method_is_left() -> None:
    assert HOST.index == 1 and JOB.hosts[0].index == 1
    for name in ("count", "__getitem__", "__iter__", "__len__", "_fields", "_asdict", "_make"):
        assert not hasattr(HOST, name), name
        assert not hasattr(JOB, name), name
    with pytest.raises(TypeError):
        HOST[0]  # type: ignore[index]
    with pytest.raises(TypeError):
        sorted([HOST, HOST._replace(index=0)])  # type: ignore[type-var]


def test_immutable_changed_by_replace_copied_and_pickled() -> None:
    with pytest.raises(AttributeError, match=r"cannot assign to field 'pid'"):
        HOST.pid = 7  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot delete field 'name'"):
        del JOB.name  # type: ignore[misc]
    with pytest.raises(TypeError, match="nope"):
        HOST._replace(nope=1)
    changed = JOB._replace(state=JobState.FAILED, exit_code=3)
    assert (changed.state, changed.exit_code, changed.hosts) == (JobState.FAILED, 3, (HOST,)) and JOB.exit_code is None
    for made in (pickle.loads(pickle.dumps(JOB)), copy.deepcopy(JOB), copy.copy(JOB)):
        assert made == JOB and type(made) is JobStatus


def test_shown_and_written_by_field_as_before() -> None:
    assert repr(HOST) == (
        "HostStatus(index=1, address='127.0.0.2', state=<HostState.RUNNING: 'RUNNING'>, pid=42, exit_code=None, "
        "started_at=None, ended_at=None, log_file=None, detail='')"
    )
    assert JOB.to_json()["hosts"] == [HOST.to_json()] and HOST.to_json()["index"] == 1
    assert json.loads(json.dumps(JOB.to_json()))["state"] == "RUNNING" and JOB.is_terminal is False
    with pytest.raises(TypeError):  # a named tuple was written as a list, silently
        json.dumps(JOB)
