"""``NamedTuple`` for the modules the shim imports at start-up, without importing :mod:`typing` at run time.

Type checkers see :class:`typing.NamedTuple` itself. At run time ``class Device(NamedTuple): ...`` makes the class
``typing.NamedTuple`` would make: a :func:`collections.namedtuple` of the annotated fields in order, with their
defaults, the class body's methods, properties and docstring. Importing :mod:`typing` costs a ``--dry-run`` a few
milliseconds (it also compiles every string annotation of a named tuple's fields); nothing else the shim's
start-up imports needs it. A module that uses this one reads its own ``typing`` names under ``TYPE_CHECKING`` only.
"""

from __future__ import annotations

import collections

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
            made = collections.namedtuple(name, fields, defaults=defaults, module=namespace.get("__module__"))
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
