"""``ma-submit notify test JOB_FILE_OR_PROFILE``: a sample event to every target, and how each went.

A path to a file is a job file (with the profile in use filling a ``notify:`` it leaves out); anything else names
a profile whose ``notify`` key holds the targets. The sample is a ``failed`` event marked ``"test": true``,
sent to every target whatever its ``events:`` (the point is to see each one take it).
"""

from __future__ import annotations

import os
from typing import List, Mapping, NamedTuple, Optional, Tuple

from ..errors import ConfigError
from ..profiles.apply import load_job
from ..profiles.store import select
from ..spec.loader import load_job_file
from .delivery import Delivery, deliver
from .fromdata import targets_from_data
from .payload import sample_payload, timeout_of
from .targets import NotifyTarget

__all__ = ["TestSource", "notify_test", "targets_of"]

_DEFAULT_TIMEOUT = 10.0


class TestSource(NamedTuple):
    """Where the targets came from: the job's name (or the profile's), its targets and timeout."""

    name: str
    targets: Tuple[NotifyTarget, ...]
    timeout: float


def targets_of(source: str, environ: Mapping[str, str], profile: Optional[str] = None) -> TestSource:
    """The targets of a job file (``source`` is a file) or of the profile ``source`` names.

    Raises:
        SpecError / ConfigError: the job file or the profile cannot be read, or it has no targets.
    """
    if os.path.isfile(source):
        chosen = select(environ, profile)
        spec = load_job(source, chosen, None, environ)[0] if chosen is not None else load_job_file(source)
        found = TestSource(spec.name, spec.notify, timeout_of(spec))
    else:
        chosen = select(environ, source)
        if chosen is None:
            raise ConfigError("no job file or profile of this name", source,
                              "give a job file's path or a profile's name ('ma-submit configure --list')")  # fmt: skip
        found = TestSource(f"profile-{chosen.name}", targets_from_data(chosen.get("notify")), _DEFAULT_TIMEOUT)
    if not found.targets:
        raise ConfigError("has no notify targets", source, "add a notify: list (url: or command:) and try again")
    return found


def notify_test(source: TestSource, environ: Mapping[str, str]) -> List[Delivery]:
    """Send the sample event to each target of ``source``, one after the other; every result."""
    job = {"id": f"{source.name}-test", "name": source.name, "backend": "test"}
    data = sample_payload(job)
    return [deliver(target, data, environ, source.timeout) for target in source.targets]
