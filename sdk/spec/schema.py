"""The job file's JSON schema, made in one place: the core's and each registered backend's piece.

The core (every key but the backends' own sections, and ``backend`` without its names) is ``core.schema.json``
beside this module; ``backend`` takes the registry's names; each backend that declares a job-file section gives its
piece as ``SCHEMA`` in its ``options.py`` (the value of
``properties.<name>``, whose ``$defs`` go to the schema's root), read through the registry
(:func:`malaunch.sdk.backends.option_sections`). The pieces go after ``launcher``, in the registry's order.

The two copies editors and users read, ``templates/job.schema.json`` (beside the templates, which name it) and
``sdk/job.schema.json`` (package data), are this module's output, written by::

    python -m malaunch.sdk.spec.schema templates/job.schema.json sdk/job.schema.json

and ``tests/sdk/spec/test_schema.py`` fails when either differs from what it makes now.
"""

from __future__ import annotations

import json
import sys
from importlib.resources import files
from typing import Any, Dict, List, Optional

from ..backends.registry import BACKEND_NAMES, option_sections

__all__ = ["job_schema", "main", "schema_text"]

_AFTER = "launcher"  # the backends' sections follow this key of the core's properties


def job_schema() -> Dict[str, Any]:
    """The whole schema: the core's with each registered backend's section put in.

    Raises:
        ValueError: a backend's section or ``$defs`` name is the core's (or another backend's) already.
    """
    core: Dict[str, Any] = json.loads(files(__package__).joinpath("core.schema.json").read_text(encoding="utf-8"))
    properties: Dict[str, Any] = {}
    defs: Dict[str, Any] = dict(core.get("$defs", {}))
    pieces: Dict[str, Any] = {}
    for section in option_sections():
        piece = dict(section.schema)
        for name, definition in piece.pop("$defs", {}).items():
            if name in defs:
                raise ValueError(f"backend {section.name!r}: $defs name {name!r} is taken; rename it")
            defs[name] = definition
        if section.name in core["properties"]:
            raise ValueError(f"backend {section.name!r}: its section's name is a key of the job file already")
        pieces[section.name] = piece
    for key, value in core["properties"].items():
        properties[key] = {**value, "enum": list(BACKEND_NAMES)} if key == "backend" else value
        if key == _AFTER:
            properties.update(pieces)
    return {**core, "properties": properties, "$defs": defs}


def schema_text() -> str:
    """:func:`job_schema` as the copies hold it: JSON indented by 2, ending with a newline."""
    return json.dumps(job_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    """Write the schema to each path given (the two copies); no path: print it."""
    paths = sys.argv[1:] if argv is None else argv
    text = schema_text()
    if not paths:
        sys.stdout.write(text)
    for path in paths:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
