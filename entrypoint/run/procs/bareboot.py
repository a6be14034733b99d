"""How the shim starts a program of its own (the watchdog, the webhook sender): a bare interpreter that mounts this
package's folder as ``malaunch.entrypoint`` and runs one module's ``main``. Standard library only: ``os`` and ``sys``
(the watchdog's first stage imports it).

``python -I -S [-B] -c BOOT PACKAGE_DIR ARGS...``: ``-S`` loads no ``site`` (no ``.pth`` hooks such as an editable
install's finder), ``-I`` no user site and no ``PYTHON*`` variables, ``-B`` only when this shim writes no bytecode
either. The packages ``malaunch`` and ``malaunch.entrypoint`` are made empty (their ``__init__`` never runs), so
the program imports only its module and what that needs; it is ready in a fraction of a ``python -m`` start.
"""

from __future__ import annotations

import os
import sys

__all__ = ["bare_argv", "boot_text"]

#: The folder mounted as ``malaunch.entrypoint`` (``entrypoint/``).
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def boot_text(module: str) -> str:
    """The ``-c`` text that mounts the package (its folder is ``sys.argv[1]``) and exits with ``module``'s
    ``main(sys.argv[2:])`` (``module`` relative to ``malaunch.entrypoint``: ``run.procs.watchdog``)."""
    return (
        "import sys\n"
        "for name, path in (('malaunch', []), ('malaunch.entrypoint', [sys.argv[1]])):\n"
        "    package = type(sys)(name)\n"
        "    package.__path__ = path\n"
        "    sys.modules[name] = package\n"
        f"from malaunch.entrypoint.{module} import main\n"
        "sys.exit(main(sys.argv[2:]))\n"
    )


def bare_argv(module: str, args: list[str]) -> list[str]:
    """The command line that runs ``module``'s ``main`` with ``args`` in a bare interpreter (see the module's
    docstring)."""
    flags = ["-I", "-S", *(["-B"] if sys.dont_write_bytecode else [])]
    return [sys.executable, *flags, "-c", boot_text(module), _PACKAGE_DIR, *args]
