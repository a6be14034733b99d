"""Names a module exports but imports from their homes only on first use (PEP 562).

The package's root (:mod:`malaunch.entrypoint`) and the SDK's seam (:mod:`malaunch.entrypoint.public`) both
export names whose modules the shim's start-up, or a quick ``ma-submit`` verb, may never need.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Tuple

__all__ = ["lazy_names"]


def lazy_names(
    module: str, package: str, homes: Mapping[str, str], namespace: Dict[str, Any]
) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``module``: a name of ``homes`` (name -> module, relative to
    ``package``) is imported on first use and kept in ``namespace`` (the module's globals)."""

    def get(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        import importlib  # on first use only: importlib (and the warnings it imports) cost start-up time

        value = getattr(importlib.import_module(f".{home}", package), name)
        namespace[name] = value
        return value

    def names() -> List[str]:
        return sorted(set(namespace) | set(homes))

    return get, names
