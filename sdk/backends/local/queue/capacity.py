"""How many devices this machine has for local jobs, and how many a job takes.

The capacity is, first to last: ``MALAUNCH_LOCAL_CAPACITY``, the profile's ``local.capacity`` (the backend's
``capacity`` argument), the accelerators this machine shows (``/dev/davinci<N>``: Ascend NPUs,
``/dev/nvidia<N>``: NVIDIA GPUs), else its CPUs. A job takes its hosts times its devices per host (a host with
no device takes one).
"""

from __future__ import annotations

import os
import re
from typing import Mapping, NamedTuple, Optional

from ....errors import ConfigError

__all__ = ["CAPACITY_VARIABLE", "Capacity", "job_need", "machine_capacity"]

CAPACITY_VARIABLE = "MALAUNCH_LOCAL_CAPACITY"
_DEVICE = re.compile(r"(davinci|nvidia)\d+\Z")


class Capacity(NamedTuple):
    """The devices local jobs may take at once, and where that number came from. ``soft``: counted from the
    CPUs (no accelerator, nothing set), which a CPU job may share: a larger job is not refused, it waits until the
    machine is free and runs alone (:meth:`need_of`)."""

    devices: int
    source: str
    soft: bool = False

    def need_of(self, hosts: int, devices_per_host: int) -> int:
        """What a job takes of this capacity: :func:`job_need`, at most the whole machine when it is soft."""
        need = job_need(hosts, devices_per_host)
        return min(need, self.devices) if self.soft else need


def _parse(text: str, where: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{where}: the local capacity must be a whole number of devices >= 1", text,
                          f"set {CAPACITY_VARIABLE} (or local.capacity) to e.g. 8")  # fmt: skip
    return value


def machine_capacity(environ: Mapping[str, str], given: Optional[str] = None, dev: str = "/dev") -> Capacity:
    """This machine's capacity (see the module's docstring). Raises ConfigError for a bad setting."""
    text = environ.get(CAPACITY_VARIABLE)
    if text:
        return Capacity(_parse(text, CAPACITY_VARIABLE), CAPACITY_VARIABLE)
    if given is not None and str(given).strip():
        return Capacity(_parse(str(given), "local.capacity"), "local.capacity")
    try:
        found = [name for name in os.listdir(dev) if _DEVICE.match(name)]
    except OSError:
        found = []
    if found:
        return Capacity(len(found), f"{len(found)} accelerator(s) in {dev}")
    cpus = os.cpu_count() or 1
    return Capacity(cpus, f"{cpus} CPU(s), no accelerator found", soft=True)


def job_need(hosts: int, devices_per_host: int) -> int:
    """The devices a job takes: hosts times devices per host (a host without devices takes one)."""
    return max(hosts, 1) * max(devices_per_host, 1)
