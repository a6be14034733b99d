"""What the registry asks the toy backend without loading it: its ``toy:`` section, and that it runs here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Tuple

from malaunch.sdk.spec.checks import check_int

__all__ = ["KEYS", "OPTIONAL", "OPTIONS", "RUNS_ON_THIS_MACHINE", "SCHEMA", "SHAPE", "ToyOptions", "toy_options"]

#: ``toy.steps``: how many lines each host writes.
STEPS = (1, 100)


@dataclass(frozen=True)
class ToyOptions:
    """The ``toy:`` section: ``steps``, the lines each host of a job writes (default 5)."""

    steps: int = 5

    def __post_init__(self) -> None:
        check_int("toy.steps", self.steps, *STEPS)

    def to_dict(self) -> Dict[str, Any]:
        """YAML-shaped data."""
        return dataclasses.asdict(self)


OPTIONS = ToyOptions
KEYS: Tuple[str, ...] = ("steps",)
#: ``spec.toy`` is None when the job file has no ``toy:`` section.
OPTIONAL = True
SHAPE = "a mapping with steps"
#: The section's piece of the job file's JSON schema.
SCHEMA: Dict[str, Any] = {
    "description": "Options of the toy backend of the tests.",
    "type": ["object", "null"],
    "additionalProperties": False,
    "properties": {
        "steps": {"description": "Lines each host writes. Default: 5.", "type": "integer", "minimum": 1, "maximum": 100}
    },
}
#: Its jobs are recorded under the SDK's home.
RUNS_ON_THIS_MACHINE = True


def toy_options(sections: Mapping[str, Any]) -> ToyOptions:
    """A spec's ``toy:`` section (its ``sections``), or the defaults."""
    found = sections.get("toy")
    return found if isinstance(found, ToyOptions) else ToyOptions()
