"""The shim's run-time ``NamedTuple`` (``contract/_record.py``) behaves as ``typing.NamedTuple`` does.

Each record class is declared twice, once on the shim's base and once on ``typing.NamedTuple``, and every part of
the named-tuple API is compared: construction (positional, keyword, defaults, and the errors of wrong arguments),
the fields, ``repr``, equality and hashing, ``_make``, ``_replace``, ``_asdict``, pickling, ``copy``, pattern
matching, the class body's methods and docstring, and what a class body may not define.
"""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import pytest
from malaunch.entrypoint.contract import _record


def _declare(base: Any) -> Any:
    """The same three-field class with two defaults, a property, a method and a docstring, on ``base``."""

    class Server(base):  # type: ignore[misc, valid-type]
        """One server of a table."""

        server_id: str
        pod: Optional[str] = None
        devices: Tuple[str, ...] = ()

        @property
        def size(self) -> int:
            return len(self.devices)

        def describe(self) -> str:
            return f"{self.server_id} ({self.size})"

    return Server


def _pair() -> Tuple[Any, Any]:
    """The class on the shim's base and on typing's, the second named as the first (so messages compare)."""
    reference = _declare(typing.NamedTuple)
    reference.__name__ = reference.__qualname__ = "Server"
    return _declare(_record.NamedTuple), reference


Server, Reference = _pair()
# Module-level classes of both kinds, so that pickle finds them by name.
Ours, Theirs = Server, Reference
Ours.__qualname__, Theirs.__qualname__ = "Ours", "Theirs"


class Empty(_record.NamedTuple):
    pass


class One(_record.NamedTuple):
    only: int


CALLS: Dict[str, Callable[[type], Any]] = {
    "positional": lambda cls: cls("10.0.0.1", "pod-0", ("0", "1")),
    "keywords": lambda cls: cls(devices=("0",), server_id="a"),
    "defaults": lambda cls: cls("a"),
    "mixed": lambda cls: cls("a", devices=("3",)),
}
BAD_CALLS: Dict[str, Callable[[type], Any]] = {
    "missing": lambda cls: cls(),
    "too many": lambda cls: cls("a", "b", ("c",), "d"),
    "unknown keyword": lambda cls: cls("a", nodes=3),
    "twice": lambda cls: cls("a", server_id="b"),
}


def _outcome(call: Callable[[], Any]) -> Tuple[str, str]:
    try:
        return "ok", repr(call())
    except Exception as exc:  # the error's type and text are what is compared
        return type(exc).__name__, str(exc).replace("Reference", "Server")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_construction_repr_equality_and_hash_match(name: str) -> None:
    ours, theirs = CALLS[name](Server), CALLS[name](Reference)
    assert repr(ours) == repr(theirs)
    assert tuple(ours) == tuple(theirs) and ours == theirs and hash(ours) == hash(theirs)
    assert isinstance(ours, tuple) and len(ours) == 3
    assert ours.describe() == theirs.describe() and ours.size == theirs.size


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_wrong_arguments_fail_alike(name: str) -> None:
    ours = _outcome(lambda: BAD_CALLS[name](Server))
    assert ours[0] == "TypeError"
    assert ours == _outcome(lambda: BAD_CALLS[name](Reference))


def test_class_attributes_match() -> None:
    for attribute in ("_fields", "_field_defaults", "__match_args__", "__doc__", "__slots__"):
        assert getattr(Server, attribute) == getattr(Reference, attribute), attribute
    assert Server.__annotations__.keys() == Reference.__annotations__.keys()
    assert Server.__new__.__defaults__ == Reference.__new__.__defaults__
    assert Server.__module__ == __name__ and Server.__qualname__ == "Ours"
    assert Server.server_id.__doc__ == Reference.server_id.__doc__ == "Alias for field number 0"
    public = {name for name in dir(Reference) if not name.startswith("__") or name == "__replace__"}
    assert public <= set(dir(Server))
    assert Empty() == () and repr(Empty()) == "Empty()" and Empty._fields == ()
    assert One(1) == (1,) and repr(One(only=2)) == "One(only=2)"


def test_make_replace_asdict_match() -> None:
    ours, theirs = CALLS["positional"](Server), CALLS["positional"](Reference)
    assert Server._make(["x", None, ()]) == Reference._make(["x", None, ()])
    assert type(Server._make(["x", None, ()])) is Server
    assert _outcome(lambda: Server._make(["x"])) == _outcome(lambda: Reference._make(["x"]))
    assert ours._replace(pod="p") == theirs._replace(pod="p")
    assert type(ours._replace(pod="p")) is Server
    assert _outcome(lambda: ours._replace(nodes=1)) == _outcome(lambda: theirs._replace(nodes=1))
    assert ours._asdict() == theirs._asdict() and list(ours._asdict()) == ["server_id", "pod", "devices"]
    if sys.version_info >= (3, 13):
        assert copy.replace(ours, pod="q") == copy.replace(theirs, pod="q")  # type: ignore[attr-defined]


def test_immutable_pickle_copy_and_match() -> None:
    ours = CALLS["positional"](Server)
    with pytest.raises(AttributeError):
        ours.pod = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ours.extra = 1  # type: ignore[attr-defined]
    again = pickle.loads(pickle.dumps(ours))
    assert again == ours and type(again) is Server
    assert copy.copy(ours) == ours and copy.deepcopy(ours) == ours
    match ours:
        case Server(server_id, pod):
            assert (server_id, pod) == ("10.0.0.1", "pod-0")
        case _:
            pytest.fail("positional pattern did not match")


@pytest.mark.parametrize(
    "body, error",
    [
        ("_hidden: int", ValueError),  # as typing.NamedTuple: no field may start with an underscore
        ("a: int = 1\n    b: int", TypeError),  # a field without a default after one with
        ("a: int\n    def _replace(self): pass", AttributeError),  # the named-tuple API cannot be overwritten
    ],
)
def test_refused_class_bodies(body: str, error: type) -> None:
    for base in ("_record.NamedTuple", "typing.NamedTuple"):
        with pytest.raises(error):
            exec(f"class Bad({base}):\n    {body}\n", {"_record": _record, "typing": typing})


#: Run under each declared Python: the shim's record and typing's give the same answers to the same questions.
PROBE = """
import copy, pickle, sys, typing
from malaunch.entrypoint.contract import _record

def answers(base):
    class Rec(base):
        a: int
        b: str = "x"
        def twice(self):
            return self.a * 2
    Rec.__qualname__ = "Rec"
    globals()["Rec"] = Rec
    out = [repr(Rec(1)), Rec(1, "y") == (1, "y"), hash(Rec(2)) == hash((2, "x")), Rec(3).twice(), Rec._fields,
           Rec._field_defaults, Rec.__match_args__, Rec(4)._replace(b="z"), Rec(5)._asdict(), Rec._make([6, "w"]),
           pickle.loads(pickle.dumps(Rec(7))) == Rec(7), copy.deepcopy(Rec(8)) == Rec(8)]
    if sys.version_info >= (3, 13):
        out.append(copy.replace(Rec(9), b="r"))
    for bad in (lambda: Rec(), lambda: Rec(1, "b", 2), lambda: Rec(1, c=2), lambda: Rec(9)._replace(c=1),
                lambda: Rec._make([1])):
        try:
            bad()
        except (TypeError, ValueError) as exc:
            out.append((type(exc).__name__, str(exc)))
    return [str(item) for item in out]

ours, theirs = answers(_record.NamedTuple), answers(typing.NamedTuple)
print("same" if ours == theirs else f"different: {ours} != {theirs}")
"""


@pytest.mark.process
def test_records_match_typing_under_every_declared_python(tmp_path: Path) -> None:
    from test_python_versions import declared_versions, find_python, shim_tree

    tree = shim_tree(tmp_path)
    for version in declared_versions():
        python = find_python(version)
        assert python is not None, f"Python {version} is declared but not found"
        done = subprocess.run([python, "-c", PROBE], env={"PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"},
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert (done.returncode, done.stdout.strip()) == (0, "same"), (version, done.stdout, done.stderr)
