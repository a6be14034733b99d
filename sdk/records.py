"""``@record``: the immutable records the SDK's statuses are (:class:`~malaunch.sdk.status.JobStatus`, ``HostStatus``).

A record is what ``@dataclass(frozen=True, slots=True)`` makes, and type checkers see exactly that: the annotated
fields in order with their defaults, given by keyword or position; a ``repr`` that names them; equal only to a
record of the same class with equal fields (a named tuple is also equal to a plain tuple); hashed from its fields;
no field can be set or deleted; copied and pickled. It is no tuple, so a field may be called ``index`` or ``count``
without hiding a method, and ``status[0]`` or ``a, b = status`` are errors. A changed copy is
:func:`replace_fields` (a class may offer it as a method, as the statuses offer ``_replace``).

It is built here, not by :mod:`dataclasses`: that module imports :mod:`inspect` (with ``ast``, ``dis`` and
``tokenize``), which the quick verbs of ``ma-submit`` never load (issue 28), and they build statuses.
"""

from __future__ import annotations

__all__ = ["record", "replace_fields"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dataclasses import dataclass as record
    from typing import Any, Mapping, TypeVar

    _R = TypeVar("_R")

    def replace_fields(item: _R, changes: Mapping[str, Any]) -> _R:
        """A copy of ``item`` with ``changes`` (field name -> value)."""
else:

    def _values(self):
        return tuple([getattr(self, name) for name in self.__slots__])

    def _eq(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self is other or _values(self) == _values(other)

    def _hash(self):
        return hash(_values(self))

    def _repr(self):
        shown = ", ".join([f"{name}={getattr(self, name)!r}" for name in self.__slots__])
        return f"{self.__class__.__qualname__}({shown})"

    def _refuse(self, name, value=None):
        raise AttributeError(f"{self.__class__.__name__} is immutable: its field {name!r} cannot change; make a "
                             f"changed copy with _replace({name}=...)")  # fmt: skip

    def _reduce(self):
        return self.__class__, _values(self)

    def replace_fields(item, changes):
        """A copy of ``item`` with ``changes``; a name that is no field is the constructor's TypeError."""
        values = {name: getattr(item, name) for name in item.__slots__}
        values.update(changes)
        return item.__class__(**values)

    def _init(made, names, defaults):
        """``__init__(self, <names>)`` of the class ``made``, compiled from the field names (identifiers, checked by
        the caller) so that positional and keyword arguments and defaults cost what they cost in a plain function;
        each field is set through its slot's own setter, past the refusing ``__setattr__``."""
        params = ", ".join(f"{name}=_d_{name}" if name in defaults else name for name in names)
        body = "".join(f"    _s_{name}(self, {name})\n" for name in names) or "    pass\n"
        scope = {f"_s_{name}": getattr(made, name).__set__ for name in names}
        scope.update({f"_d_{name}": value for name, value in defaults.items()})
        exec(f"def __init__(self, {params}):\n{body}", scope)
        init = scope["__init__"]
        init.__qualname__ = f"{made.__qualname__}.__init__"
        return init

    def _build(cls):
        names = tuple(cls.__annotations__)  # its own: a record derives from object only
        defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
        after_default = False
        for name in names:
            if not name.isidentifier() or name.startswith("_") or name == "self":
                raise TypeError(f"{cls.__name__}: field {name!r} must be an identifier that does not start with _")
            if name in defaults:
                after_default = True
            elif after_default:
                raise TypeError(f"{cls.__name__}: field {name!r} has no default but follows one that has")
        body = {key: value for key, value in cls.__dict__.items()
                if key not in defaults and key not in ("__dict__", "__weakref__")}  # fmt: skip
        body.update({
            "__slots__": names, "__match_args__": names, "__eq__": _eq, "__hash__": _hash, "__repr__": _repr,
            "__setattr__": _refuse, "__delattr__": _refuse, "__reduce__": _reduce,
        })  # fmt: skip
        made = type(cls)(cls.__name__, cls.__bases__, body)
        made.__init__ = _init(made, names, defaults)
        return made

    def record(cls=None, /, *, frozen=True, slots=True):
        """Make ``cls`` a record (see the module docstring); the arguments are the dataclass spelling, and a record
        is always frozen and slotted."""
        if not (frozen and slots):
            raise TypeError("a record is always frozen and slotted")
        return _build if cls is None else _build(cls)
