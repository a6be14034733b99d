"""``NamedTuple`` for the modules the shim imports at start-up, without importing :mod:`typing` at run time.

Type checkers see :class:`typing.NamedTuple` itself. At run time ``class Device(NamedTuple): ...`` makes the class
``typing.NamedTuple`` would make: a tuple subclass with the annotated fields in order, their defaults, the class
body's methods, properties and docstring, and the named-tuple API (``_fields``, ``_field_defaults``, ``_make``,
``_replace``, ``_asdict``, the ``repr``, pickling, ``__match_args__``), as :func:`collections.namedtuple` makes it
(``tests/entrypoint/shape/test_record.py`` compares the two). It is built here rather than by :mod:`collections`, whose
import (keyword, operator, reprlib and its own classes) costs a ``--dry-run`` about 2 ms, as importing :mod:`typing`
costs a few more (it also compiles every string annotation of a named tuple's fields); nothing else the shim's
start-up imports needs either. A module that uses this one reads its own ``typing`` names under ``TYPE_CHECKING``
only.
"""

from __future__ import annotations

__all__ = ["NamedTuple"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    #: Kept from the class body by namedtuple itself, or never copied onto the new class.
    _SKIPPED = frozenset({"__module__", "__qualname__", "__annotations__", "__dict__", "__weakref__"})
    #: What a class body may not define, as with typing.NamedTuple.
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults",
                             "_make", "_replace", "_asdict", "_source"})  # fmt: skip

    import sys as _sys

    _UNEXPECTED = TypeError if _sys.version_info >= (3, 13) else ValueError

    try:
        from _collections import _tuplegetter as _field_getter  # the C accessor collections.namedtuple uses
    except ImportError:  # an interpreter without it
        from operator import itemgetter

        def _field_getter(index, doc):
            return property(itemgetter(index), doc=doc)

    def _named_tuple(name, fields, defaults, module):
        """The tuple subclass ``name`` with ``fields`` (the last ``len(defaults)`` of them defaulted)."""
        for field in fields:
            if not field.isidentifier() or field.startswith("_"):
                raise ValueError(f"Field names must be identifiers not starting with an underscore: {field!r}")
        fields = tuple(fields)
        count = len(fields)
        listed = ", ".join(fields)
        # __new__ is compiled from the field names (identifiers only, checked above) so that it takes positional and
        # keyword arguments with their defaults at the speed of a plain function, as namedtuple's does.
        new = eval(f"lambda _cls, {listed}: _tuple_new(_cls, ({listed}{',' if count else ''}))",
                   {"_tuple_new": tuple.__new__, "__builtins__": {}})
        new.__name__ = "__new__"
        new.__qualname__ = f"{name}.__new__"
        new.__doc__ = f"Create new instance of {name}({listed})"
        new.__defaults__ = tuple(defaults) or None

        def _make(cls, iterable):
            made = tuple.__new__(cls, iterable)
            if len(made) != count:
                raise TypeError(f"Expected {count} arguments, got {len(made)}")
            return made

        def _replace(self, /, **changes):
            made = self._make(map(changes.pop, fields, self))
            if changes:  # a ValueError before 3.13, as namedtuple's
                raise _UNEXPECTED(f"Got unexpected field names: {list(changes)!r}")
            return made

        def __repr__(self):
            return f"{self.__class__.__name__}({', '.join(f'{field}={value!r}' for field, value in zip(fields, self))})"

        def _asdict(self):
            return dict(zip(fields, self))

        def __getnewargs__(self):
            return tuple(self)

        _make.__doc__ = f"Make a new {name} object from a sequence or iterable"
        _replace.__doc__ = f"Return a new {name} object replacing specified fields with new values"
        _asdict.__doc__ = "Return a new dict which maps field names to their values."
        __getnewargs__.__doc__ = "Return self as a plain tuple.  Used by copy and pickle."
        for function in (_make, _replace, __repr__, _asdict, __getnewargs__):
            function.__qualname__ = f"{name}.{function.__name__}"
        body = {
            "__doc__": f"{name}({listed})",
            "__slots__": (),
            "_fields": fields,
            "_field_defaults": dict(zip(fields[count - len(defaults):], defaults)) if defaults else {},
            "__new__": new,
            "_make": classmethod(_make),
            "_replace": _replace,
            "__repr__": __repr__,
            "_asdict": _asdict,
            "__getnewargs__": __getnewargs__,
            "__match_args__": fields,
        }
        if _sys.version_info >= (3, 13):  # copy.replace(), which namedtuple supports from 3.13
            body["__replace__"] = _replace
        for index, field in enumerate(fields):
            body[field] = _field_getter(index, f"Alias for field number {index}")
        made = type(name, (tuple,), body)
        made.__module__ = module
        return made

    class _Maker(type):
        def __new__(mcls, name, bases, namespace):
            if not bases:  # NamedTuple itself
                return super().__new__(mcls, name, bases, namespace)
            annotations = namespace.get("__annotations__", {})
            fields = list(annotations)
            defaults = [namespace[field] for field in fields if field in namespace]
            for field in fields[len(fields) - len(defaults):]:
                if field not in namespace:
                    raise TypeError(f"Non-default namedtuple field {field} cannot follow default field")
            made = _named_tuple(name, fields, defaults, namespace.get("__module__"))
            made.__annotations__ = dict(annotations)
            made.__qualname__ = namespace.get("__qualname__", name)
            for key, value in namespace.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"Cannot overwrite NamedTuple attribute {key}")
                if key not in _SKIPPED and key not in fields:
                    setattr(made, key, value)
            return made

    class NamedTuple(metaclass=_Maker):
        """Base of the shim's named tuples (``class Name(NamedTuple): field: type``)."""
